# The nodes' identity: an instance profile whose role may list, read, write and delete
# objects under <prefix>/<cluster_id>/ of the rendezvous bucket, and nothing else.

resource "aws_iam_role" "nodes" {
  name_prefix = "syndeo-${substr(local.cluster_id, 0, 24)}-"
  description = "Syndeo ${local.cluster_id} nodes: rendezvous prefix only"
  # Caps whatever the role is ever given (deployer-policy.json creates roles only with it).
  # Created with the syndeo-cluster tag (local.tags) as well: deployer-policy.json passes
  # (iam:PassRole) only roles so tagged and lets a deployer tag no existing role so.
  permissions_boundary = var.permissions_boundary
  tags                 = local.tags
  assume_role_policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Action    = "sts:AssumeRole"
      Principal = { Service = "ec2.amazonaws.com" }
    }]
  })
}

# Plain jsonencode (not a data source) so that the offline test reads the real document.
locals {
  rendezvous_policy = {
    Version = "2012-10-17"
    Statement = [
      {
        Sid       = "ListClusterPrefix"
        Effect    = "Allow"
        Action    = "s3:ListBucket"
        Resource  = "arn:aws:s3:::${local.bucket}"
        Condition = { StringLike = { "s3:prefix" = ["${local.cluster_prefix}*"] } }
      },
      {
        Sid      = "ClusterRecords"
        Effect   = "Allow"
        Action   = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"]
        Resource = "arn:aws:s3:::${local.bucket}/${local.cluster_prefix}*"
      },
    ]
  }
}

resource "aws_iam_role_policy" "rendezvous" {
  name   = "syndeo-rendezvous"
  role   = aws_iam_role.nodes.id
  policy = jsonencode(local.rendezvous_policy)
}

resource "aws_iam_role_policy_attachment" "ssm" {
  count      = var.ssm_endpoints ? 1 : 0
  role       = aws_iam_role.nodes.name
  policy_arn = "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"
}

resource "aws_iam_instance_profile" "nodes" {
  name_prefix = "syndeo-${substr(local.cluster_id, 0, 24)}-"
  role        = aws_iam_role.nodes.name
  tags        = local.tags
}
