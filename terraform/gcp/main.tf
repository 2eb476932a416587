# Syndeo cluster on Google Cloud: private VPC, one GCS bucket prefix as the rendezvous,
# N Compute Engine VMs from the packer/cloud image, each started by its own user-data
# from the shared node module (rank 0 = head).

locals {
  # Names every resource and scopes the rendezvous records (node.cluster_id).
  cluster_id     = var.node.cluster_id
  name           = "syndeo-${local.cluster_id}"
  network_tag    = "syndeo-${local.cluster_id}"
  bucket         = var.create_bucket ? google_storage_bucket.rendezvous[0].name : var.bucket_name
  prefix         = var.rendezvous_prefix
  rendezvous_uri = "gs://${var.bucket_name}/${local.prefix}"
  # Everything this cluster may touch in the bucket (the node appends <cluster_id>/
  # to the URI's prefix; the trailing "/" keeps cluster "a" out of "ab").
  cluster_prefix = local.prefix == "" ? "${local.cluster_id}/" : "${local.prefix}/${local.cluster_id}/"
  zone           = var.zone != null ? var.zone : data.google_compute_zones.up[0].names[0]
  labels = merge(var.labels, {
    syndeo-cluster = local.cluster_id
  })
}

data "google_compute_zones" "up" {
  count   = var.zone == null ? 1 : 0
  project = var.project
  region  = var.region
  status  = "UP"
}

module "nodes" {
  source = "../modules/node"
  # The caller's node settings, with what only this module knows.
  node = merge(var.node, {
    rendezvous = local.rendezvous_uri
    target     = "gcp"
    image_path = var.image_path
    # Spot VMs' nodes watch their cloud's interruption notice (syndeo/node/preemption.py).
    spot_notices = var.spot ? "gcp" : null
  })
  # The VM's service account and project come from the metadata server; the project
  # is named anyway so that a missing metadata answer cannot pick another project.
  target_env = { GOOGLE_CLOUD_PROJECT = var.project }
  # Sensitive: plans and logs show it as (sensitive value).
  launch_key = var.launch_key
}
