# A VPC of its own with one vSwitch.  No NAT gateway, no EIP and no public IP: the
# image is baked, and the only service the nodes use is OSS, reached at its internal
# endpoint in the region.  The ECS metadata service (100.100.100.200, identity and
# STS credentials) needs no route.

resource "alicloud_vpc" "this" {
  vpc_name    = local.name
  cidr_block  = var.network_cidr
  description = "Syndeo ${local.cluster_id}"
  tags        = local.tags
}

# zone = null: the first zone, by id, that offers every instance type the cluster uses
# for creation now (DescribeAvailableResource through the zones data source, spot or
# on-demand as asked): a vSwitch in a zone without the type fails the whole apply.
data "alicloud_zones" "offering" {
  for_each                    = var.zone == null ? toset(local.cluster_instance_types) : toset([])
  available_instance_type     = each.key
  available_resource_creation = "Instance"
  instance_charge_type        = "PostPaid"
  spot_strategy               = var.spot ? "SpotAsPriceGo" : "NoSpot"
  network_type                = "Vpc"
}

locals {
  # Every type a node may get: each group's (else instance_type), or instance_type.
  cluster_instance_types = distinct(length(try(var.node.groups, [])) == 0 ? [var.instance_type] :
  [for g in var.node.groups : lookup(var.group_instance_types, g.name, var.instance_type)])
  zones_offering_all = var.zone != null ? [] : sort(setintersection(
  [for t in local.cluster_instance_types : data.alicloud_zones.offering[t].ids]...))
  zone = var.zone != null ? var.zone : try(local.zones_offering_all[0], null)
}

resource "alicloud_vswitch" "nodes" {
  vswitch_name = "${local.name}-nodes"
  vpc_id       = alicloud_vpc.this.id
  cidr_block   = cidrsubnet(var.network_cidr, 20 - tonumber(split("/", var.network_cidr)[1]), 0)
  zone_id      = local.zone
  description  = "Syndeo ${local.cluster_id}: the nodes"
  tags         = local.tags

  lifecycle {
    precondition {
      condition     = local.zone != null
      error_message = "No zone of ${var.region} offers all of ${join(", ", local.cluster_instance_types)}${var.spot ? " as spot" : ""}: pick other instance types or another region (aliyun ecs DescribeAvailableResource)."
    }
    # A zone chosen at creation stays: offerings that change later (a grow, a new
    # type in a group) must not move the vSwitch, which would replace every node.
    ignore_changes = [zone_id]
  }
}

# --- the nodes' security group: Ray between members only ---

resource "alicloud_security_group" "nodes" {
  security_group_name = "${local.name}-nodes"
  description         = "Syndeo ${local.cluster_id}: Ray between the cluster's own nodes only"
  vpc_id              = alicloud_vpc.this.id
  security_group_type = "normal"
  # Members do not reach each other unless a rule below says so.
  inner_access_policy = "Drop"
  tags                = local.tags
}

# Ray binds OS-chosen ports (and the client server a derived port in 20000-29999):
# every unprivileged TCP port, from members of this group only.
resource "alicloud_security_group_rule" "ray" {
  #checkov:skip=CKV_ALI_3:The range includes 3389 but the only source is this security group itself (no CIDR); tests/iac/test_world_open.py checks that.
  security_group_id        = alicloud_security_group.nodes.id
  description              = "Ray from the cluster's own nodes"
  type                     = "ingress"
  ip_protocol              = "tcp"
  nic_type                 = "intranet"
  policy                   = "accept"
  port_range               = "1024/65535"
  priority                 = 1
  source_security_group_id = alicloud_security_group.nodes.id
}

resource "alicloud_security_group_rule" "admin_ssh" {
  for_each          = toset(var.admin_cidrs)
  security_group_id = alicloud_security_group.nodes.id
  description       = "SSH from an admin range (admin_cidrs)"
  type              = "ingress"
  ip_protocol       = "tcp"
  nic_type          = "intranet"
  policy            = "accept"
  port_range        = "22/22"
  priority          = 1
  cidr_ip           = strcontains(each.value, ":") ? null : each.value
  ipv6_cidr_ip      = strcontains(each.value, ":") ? each.value : null
}
