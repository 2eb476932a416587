# Syndeo cluster on AWS: private VPC, one S3 bucket prefix as the rendezvous, N EC2
# instances from the packer/cloud image, each started by its own user-data from the
# shared node module (rank 0 = head).

locals {
  # Names every resource and scopes the rendezvous records (node.cluster_id).
  cluster_id     = var.node.cluster_id
  name           = "syndeo-${local.cluster_id}"
  bucket         = var.bucket_name
  prefix         = var.rendezvous_prefix
  rendezvous_uri = "s3://${local.bucket}/${local.prefix}"
  # Everything this cluster may touch in the bucket (the node appends
  # <cluster_id>/ to the URI's prefix; the trailing "/" keeps cluster "a" out of "ab").
  cluster_prefix = local.prefix == "" ? "${local.cluster_id}/" : "${local.prefix}/${local.cluster_id}/"
  tags = merge(var.labels, {
    syndeo-cluster = local.cluster_id
  })
}

module "nodes" {
  source = "../modules/node"
  # The caller's node settings, with what only this module knows.
  node = merge(var.node, {
    rendezvous = local.rendezvous_uri
    target     = "aws"
    image_path = var.image_path
    # Spot VMs' nodes watch their cloud's interruption notice (syndeo/node/preemption.py).
    spot_notices = var.spot ? "aws" : null
  })
  # boto3 does not read the region from the instance metadata; without it, S3 calls
  # go to the global endpoint, which the gateway endpoint below does not route.
  # Its metadata client waits 1 s, once, by default: at first boot, with Ray
  # starting, that is too short to be sure of the instance credentials.
  # (node.extra_env wins over these: an emulator's endpoints.)
  target_env = {
    AWS_REGION                        = var.region
    AWS_DEFAULT_REGION                = var.region
    AWS_METADATA_SERVICE_TIMEOUT      = "5"
    AWS_METADATA_SERVICE_NUM_ATTEMPTS = "3"
  }
  # Sensitive: plans and logs show it as (sensitive value).
  launch_key = var.launch_key
}
