# Syndeo cluster on AWS: private VPC, one S3 bucket prefix as the rendezvous, N EC2
# instances from the packer/cloud image, each started by its own user-data from the
# shared node module (rank 0 = head).

locals {
  name           = "syndeo-${var.cluster_name}"
  bucket         = var.bucket_name
  prefix         = var.rendezvous_prefix
  rendezvous_uri = "s3://${local.bucket}/${local.prefix}"
  # Everything this cluster may touch in the bucket (the node appends
  # <cluster_name>/ to the URI's prefix; the trailing "/" keeps cluster "a" out of "ab").
  cluster_prefix = local.prefix == "" ? "${var.cluster_name}/" : "${local.prefix}/${var.cluster_name}/"
  tags = merge(var.labels, {
    syndeo-cluster = var.cluster_name
  })
}

module "nodes" {
  source                   = "../modules/node"
  cluster_id               = var.cluster_name
  node_count               = var.node_count
  rendezvous               = local.rendezvous_uri
  target                   = "aws"
  cpus_per_node            = var.cpus_per_node
  gpus_per_node            = var.gpus_per_node
  memory_mb_per_node       = var.memory_mb_per_node
  object_store_mb_per_node = var.object_store_mb_per_node
  join_timeout_s           = var.join_timeout_s
  run                      = var.run
  not_before               = var.not_before
  image_path               = var.image_path
  image_digest             = var.image_digest
  spot_notices             = var.spot ? "aws" : null
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
  # boto3 does not read the region from the instance metadata; without it, S3 calls
  # go to the global endpoint, which the gateway endpoint below does not route.
  # Its metadata client waits 1 s, once, by default: at first boot, with Ray
  # starting, that is too short to be sure of the instance credentials.
  extra_env = merge({
    AWS_REGION                        = var.region
    AWS_DEFAULT_REGION                = var.region
    AWS_METADATA_SERVICE_TIMEOUT      = "5"
    AWS_METADATA_SERVICE_NUM_ATTEMPTS = "3"
  }, var.extra_env)
  # Sensitive: plans and logs show it as (sensitive value).
  launch_key = var.launch_key
}
