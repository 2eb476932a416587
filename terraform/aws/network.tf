# A VPC of its own with one private subnet.  No internet gateway and no NAT: the image
# is baked, and the only service the nodes use is S3, reached through a gateway
# endpoint (free).  Instance metadata, the Amazon DNS resolver and NTP are link-local
# and need no route.

data "aws_region" "current" {}

resource "aws_vpc" "this" {
  cidr_block           = var.network_cidr
  enable_dns_support   = true
  enable_dns_hostnames = true
  tags                 = merge(local.tags, { Name = local.name })

  lifecycle {
    # The provider is the caller's: its region must be the one the nodes are told
    # (AWS_REGION in their environment) and the zones are looked up in.
    precondition {
      condition     = data.aws_region.current.name == var.region
      error_message = "region: the aws provider is configured for another region than var.region; configure it with region = var.region."
    }
  }
  #checkov:skip=CKV2_AWS_11:VPC flow logs cost money per GB and need a log destination; the VPC has no internet path and only cluster-internal traffic. Enable them in your account baseline if required.
}

# Take over the VPC's default security group and leave it without rules, so nothing
# attached to it by accident can talk to anything.
resource "aws_default_security_group" "this" {
  vpc_id = aws_vpc.this.id
  tags   = merge(local.tags, { Name = "${local.name}-default-unused" })
}

# zone = null: not whatever zone AWS would pick for the subnet (it may not offer the
# instance type, and one "Unsupported" error ends the whole apply) but the first zone,
# by name, that offers every instance type the cluster uses (DescribeInstanceTypeOfferings).
data "aws_ec2_instance_type_offerings" "zones" {
  count         = var.zone == null ? 1 : 0
  location_type = "availability-zone"
  filter {
    name   = "instance-type"
    values = local.cluster_instance_types
  }
}

locals {
  # Every type a node may get: each group's (else instance_type), or instance_type.
  cluster_instance_types = distinct(length(try(var.node.groups, [])) == 0 ? [var.instance_type] :
  [for g in var.node.groups : lookup(var.group_instance_types, g.name, var.instance_type)])
  # The reply is one (location, type) pair per offering, as parallel lists.
  offerings = var.zone != null ? [] : [for i, z in data.aws_ec2_instance_type_offerings.zones[0].locations :
  { zone = z, type = data.aws_ec2_instance_type_offerings.zones[0].instance_types[i] }]
  zones_offering_all = sort([for z in distinct([for o in local.offerings : o.zone]) : z
    if length(setsubtract(local.cluster_instance_types, [for o in local.offerings : o.type if o.zone == z])) == 0
  ])
  zone = var.zone != null ? var.zone : try(local.zones_offering_all[0], null)
}

resource "aws_subnet" "nodes" {
  vpc_id                  = aws_vpc.this.id
  cidr_block              = cidrsubnet(var.network_cidr, 20 - tonumber(split("/", var.network_cidr)[1]), 0)
  availability_zone       = local.zone
  map_public_ip_on_launch = false
  tags                    = merge(local.tags, { Name = "${local.name}-nodes" })

  lifecycle {
    precondition {
      condition     = local.zone != null
      error_message = "No availability zone of ${var.region} offers all of ${join(", ", local.cluster_instance_types)}: pick other instance types or another region (aws ec2 describe-instance-type-offerings --location-type availability-zone)."
    }
    # A zone chosen at creation stays: offerings that change later (a grow, a new
    # type in a group) must not move the subnet, which would replace every node.
    ignore_changes = [availability_zone]
  }
}

resource "aws_route_table" "nodes" {
  vpc_id = aws_vpc.this.id
  tags   = merge(local.tags, { Name = "${local.name}-nodes" })
}

resource "aws_route_table_association" "nodes" {
  subnet_id      = aws_subnet.nodes.id
  route_table_id = aws_route_table.nodes.id
}

resource "aws_vpc_endpoint" "s3" {
  vpc_id            = aws_vpc.this.id
  service_name      = "com.amazonaws.${var.region}.s3"
  vpc_endpoint_type = "Gateway"
  route_table_ids   = [aws_route_table.nodes.id]
  # Through this endpoint only the rendezvous bucket is reachable.
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Sid       = "RendezvousBucketOnly"
      Effect    = "Allow"
      Principal = "*"
      Action    = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:ListBucket"]
      Resource  = ["arn:aws:s3:::${local.bucket}", "arn:aws:s3:::${local.bucket}/*"]
    }]
  })
  tags = merge(local.tags, { Name = "${local.name}-s3" })
}

# --- the nodes' security group: Ray between members only ---

resource "aws_security_group" "nodes" {
  name        = "${local.name}-nodes"
  description = "Syndeo ${local.cluster_id}: Ray between the cluster's own nodes only"
  vpc_id      = aws_vpc.this.id
  tags        = merge(local.tags, { Name = "${local.name}-nodes" })
  # Rules are separate resources below (inline rules hide world-open entries from scanners).
}

# Ray binds OS-chosen ports (and the client server a derived port in 20000-29999):
# every unprivileged TCP port, from members of this group only.
resource "aws_vpc_security_group_ingress_rule" "ray" {
  #checkov:skip=CKV_AWS_25:The range includes 3389 but the only source is this security group itself (no CIDR); tests/iac/test_world_open.py checks that.
  security_group_id            = aws_security_group.nodes.id
  description                  = "Ray from the cluster's own nodes"
  ip_protocol                  = "tcp"
  from_port                    = 1024
  to_port                      = 65535
  referenced_security_group_id = aws_security_group.nodes.id
  tags                         = local.tags
}

resource "aws_vpc_security_group_egress_rule" "ray" {
  security_group_id            = aws_security_group.nodes.id
  description                  = "Ray to the cluster's own nodes"
  ip_protocol                  = "tcp"
  from_port                    = 1024
  to_port                      = 65535
  referenced_security_group_id = aws_security_group.nodes.id
  tags                         = local.tags
}

resource "aws_vpc_security_group_egress_rule" "s3" {
  security_group_id = aws_security_group.nodes.id
  description       = "HTTPS to S3 through the gateway endpoint (rendezvous)"
  ip_protocol       = "tcp"
  from_port         = 443
  to_port           = 443
  prefix_list_id    = aws_vpc_endpoint.s3.prefix_list_id
  tags              = local.tags
}

resource "aws_vpc_security_group_ingress_rule" "admin_ssh" {
  for_each          = toset(var.admin_cidrs)
  security_group_id = aws_security_group.nodes.id
  description       = "SSH from an admin range (admin_cidrs)"
  ip_protocol       = "tcp"
  from_port         = 22
  to_port           = 22
  cidr_ipv4         = strcontains(each.value, ":") ? null : each.value
  cidr_ipv6         = strcontains(each.value, ":") ? each.value : null
  tags              = local.tags
}

# --- optional: SSM Session Manager without internet egress ---

resource "aws_security_group" "endpoints" {
  count       = var.ssm_endpoints ? 1 : 0
  name        = "${local.name}-endpoints"
  description = "Syndeo ${local.cluster_id}: SSM interface endpoints, HTTPS from the nodes"
  vpc_id      = aws_vpc.this.id
  tags        = merge(local.tags, { Name = "${local.name}-endpoints" })
}

resource "aws_vpc_security_group_ingress_rule" "endpoints" {
  count                        = var.ssm_endpoints ? 1 : 0
  security_group_id            = aws_security_group.endpoints[0].id
  description                  = "HTTPS from the cluster's nodes"
  ip_protocol                  = "tcp"
  from_port                    = 443
  to_port                      = 443
  referenced_security_group_id = aws_security_group.nodes.id
  tags                         = local.tags
}

resource "aws_vpc_security_group_egress_rule" "to_endpoints" {
  count                        = var.ssm_endpoints ? 1 : 0
  security_group_id            = aws_security_group.nodes.id
  description                  = "HTTPS to the SSM interface endpoints"
  ip_protocol                  = "tcp"
  from_port                    = 443
  to_port                      = 443
  referenced_security_group_id = aws_security_group.endpoints[0].id
  tags                         = local.tags
}

resource "aws_vpc_endpoint" "ssm" {
  for_each            = var.ssm_endpoints ? toset(["ssm", "ssmmessages", "ec2messages"]) : toset([])
  vpc_id              = aws_vpc.this.id
  service_name        = "com.amazonaws.${var.region}.${each.key}"
  vpc_endpoint_type   = "Interface"
  subnet_ids          = [aws_subnet.nodes.id]
  security_group_ids  = [aws_security_group.endpoints[0].id]
  private_dns_enabled = true
  tags                = merge(local.tags, { Name = "${local.name}-${each.key}" })
}
