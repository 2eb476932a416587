# The nodes' identity: a RAM role that ECS may assume for them (its STS credentials come
# from the metadata service), which may list, read, write and delete objects under
# <prefix>/<cluster_id>/ of the rendezvous bucket, and nothing else.

# One per cluster, unless node_role names an existing one: a deployer with
# deployer-policy.json may pass (ram:PassRole) that one role only and create none, so a
# deployer cannot make a role with more rights and run code as it.
resource "alicloud_ram_role" "nodes" {
  count = var.node_role == null ? 1 : 0
  # 1-64 of letters, digits, '.' and '-': the cluster id fits (syndeo/core/nodeconfig.py).
  role_name   = local.node_role
  description = "Syndeo ${local.cluster_id} nodes: rendezvous prefix only"
  force       = true
  assume_role_policy_document = jsonencode({
    Version = "1"
    Statement = [{
      Effect    = "Allow"
      Action    = "sts:AssumeRole"
      Principal = { Service = ["ecs.aliyuncs.com"] }
    }]
  })
  tags = local.tags
}

# Plain jsonencode (not a data source) so that the offline test reads the real document.
locals {
  rendezvous_policy = {
    Version = "1"
    Statement = [
      {
        Effect    = "Allow"
        Action    = ["oss:ListObjects"]
        Resource  = ["acs:oss:*:*:${local.bucket}"]
        Condition = { StringLike = { "oss:Prefix" = ["${local.cluster_prefix}*"] } }
      },
      {
        Effect   = "Allow"
        Action   = ["oss:GetObject", "oss:PutObject", "oss:DeleteObject"]
        Resource = ["acs:oss:*:*:${local.bucket}/${local.cluster_prefix}*"]
      },
    ]
  }
}

resource "alicloud_ram_policy" "rendezvous" {
  count           = var.node_role == null ? 1 : 0
  policy_name     = "syndeo-${local.cluster_id}-rendezvous"
  description     = "Syndeo ${local.cluster_id}: the cluster's rendezvous prefix only"
  policy_document = jsonencode(local.rendezvous_policy)
  force           = true
}

resource "alicloud_ram_role_policy_attachment" "rendezvous" {
  count       = var.node_role == null ? 1 : 0
  role_name   = alicloud_ram_role.nodes[0].role_name
  policy_name = alicloud_ram_policy.rendezvous[0].policy_name
  policy_type = "Custom"
}
