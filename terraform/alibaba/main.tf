# Syndeo cluster on Alibaba Cloud: a private VPC, one OSS bucket prefix as the
# rendezvous, N ECS instances from the packer/cloud image, each started by its own
# user-data from the shared node module (rank 0 = head).

locals {
  # Names every resource and scopes the rendezvous records (node.cluster_id).
  cluster_id     = var.node.cluster_id
  name           = "syndeo-${local.cluster_id}"
  bucket         = var.create_bucket ? alicloud_oss_bucket.rendezvous[0].bucket : var.bucket_name
  prefix         = var.rendezvous_prefix
  rendezvous_uri = "oss://${var.bucket_name}/${local.prefix}"
  # Everything this cluster may touch in the bucket (the node appends <cluster_id>/
  # to the URI's prefix; the trailing "/" keeps cluster "a" out of "ab").
  cluster_prefix = local.prefix == "" ? "${local.cluster_id}/" : "${local.prefix}/${local.cluster_id}/"
  # The bucket's S3-compatible endpoint inside the region's network (OSS docs, "Use
  # AWS SDKs to access OSS": s3.oss-<region>-internal.aliyuncs.com): reached from a VPC
  # with no NAT and no public address (virtual-hosted addressing only).
  oss_endpoint = "https://s3.oss-${var.region}-internal.aliyuncs.com"
  # The nodes' RAM role (iam.tf: made per cluster unless var.node_role names one),
  # named here so that the node environment needs no provider.
  node_role = var.node_role != null ? var.node_role : "syndeo-${local.cluster_id}-nodes"
  tags = merge(var.labels, {
    syndeo-cluster = local.cluster_id
  })
}

module "nodes" {
  source = "../modules/node"
  # The caller's node settings, with what only this module knows.
  node = merge(var.node, {
    rendezvous = local.rendezvous_uri
    target     = "alibaba"
    image_path = var.image_path
    # Spot VMs' nodes watch their cloud's interruption notice (syndeo/node/preemption.py).
    spot_notices = var.spot ? "alibaba" : null
  })
  # The node signs in to OSS with the RAM role's STS credentials from the ECS metadata
  # service (syndeo/rendezvous/oss.py); the endpoint and region are named here so that
  # no metadata answer can point it elsewhere.  (node.extra_env wins: a local fake.)
  target_env = {
    ALIBABA_CLOUD_REGION       = var.region
    SYNDEO_OSS_ENDPOINT        = local.oss_endpoint
    ALIBABA_CLOUD_ECS_METADATA = local.node_role
  }
  # Sensitive: plans and logs show it as (sensitive value).
  launch_key = var.launch_key
}
