# Syndeo cluster on Google Cloud: private VPC, one GCS bucket prefix as the rendezvous,
# N Compute Engine VMs from the packer/cloud image, each started by its own user-data
# from the shared node module (rank 0 = head).

locals {
  name           = "syndeo-${var.cluster_name}"
  network_tag    = "syndeo-${var.cluster_name}"
  bucket         = var.create_bucket ? google_storage_bucket.rendezvous[0].name : var.bucket_name
  prefix         = var.rendezvous_prefix
  rendezvous_uri = "gs://${var.bucket_name}/${local.prefix}"
  # Everything this cluster may touch in the bucket (the node appends <cluster_name>/
  # to the URI's prefix; the trailing "/" keeps cluster "a" out of "ab").
  cluster_prefix = local.prefix == "" ? "${var.cluster_name}/" : "${local.prefix}/${var.cluster_name}/"
  zone           = var.zone != null ? var.zone : data.google_compute_zones.up[0].names[0]
  labels = merge(var.labels, {
    syndeo-cluster = var.cluster_name
  })
}

data "google_compute_zones" "up" {
  count   = var.zone == null ? 1 : 0
  project = var.project
  region  = var.region
  status  = "UP"
}

module "nodes" {
  source                   = "../modules/node"
  cluster_id               = var.cluster_name
  node_count               = var.node_count
  rendezvous               = local.rendezvous_uri
  target                   = "gcp"
  cpus_per_node            = var.cpus_per_node
  gpus_per_node            = var.gpus_per_node
  memory_mb_per_node       = var.memory_mb_per_node
  object_store_mb_per_node = var.object_store_mb_per_node
  join_timeout_s           = var.join_timeout_s
  run                      = var.run
  not_before               = var.not_before
  image_path               = var.image_path
  image_digest             = var.image_digest
  spot_notices             = var.spot ? "gcp" : null
  dashboard                = var.dashboard
  # The node module shapes each rank from its group; the instance type is this
  # module's business (instances.tf), so it is left out here.
  groups = [for g in var.groups : {
    name      = g.name
    nodes     = g.nodes
    cpus      = g.cpus
    gpus      = g.gpus
    memory_mb = g.memory_mb
    min_nodes = g.min_nodes
  }]
  # Nodes `grow` added (ranks past node_count): rendered like the cluster's own
  # (output grown); each gets its VM in instances.tf.
  grown = [for g in var.grown : { rank = g.rank, group = g.group }]
  # The VM's service account and project come from the metadata server; the project
  # is named anyway so that a missing metadata answer cannot pick another project.
  extra_env = merge({ GOOGLE_CLOUD_PROJECT = var.project }, var.extra_env)
  # Sensitive: plans and logs show it as (sensitive value).
  launch_key = var.launch_key
}
