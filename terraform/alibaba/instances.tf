# One ECS instance per rank.  Its user-data is module.nodes' rendering for that rank,
# passed through unchanged (base64: the API's form, which the provider passes on as is).

# Why for_each keyed by rank and not count: `grow` adds nodes (node.grown, ranks past
# node_count) and `shrink` removes any of them, so instances are addressed by their
# rank ("0", "1", ..., "12"): removing rank 12 never shifts rank 13 to another
# address, as count would (replacing a running node).  The outputs stay lists by rank.
locals {
  # Every node keyed by its rank: the cluster's own ranks, then the nodes `grow` added.
  machines = module.nodes.machines
  # Per node: its group's instance_type, else the top-level instance_type.
  machine_types = { for k, m in local.machines :
    k => m.group == null ? var.instance_type : lookup(var.group_instance_types, m.group, var.instance_type)
  }
  # The cluster's own ranks in rank order (output instance_types).
  instance_types = [for i, _ in module.nodes.groups : local.machine_types[tostring(i)]]
}

resource "alicloud_instance" "node" {
  for_each        = local.machines
  instance_name   = "${local.name}-${each.key}"
  host_name       = "${local.name}-${each.key}"
  description     = "Syndeo ${local.cluster_id} rank ${each.key}"
  image_id        = var.image
  instance_type   = local.machine_types[each.key]
  vswitch_id      = alicloud_vswitch.nodes.id
  security_groups = [alicloud_security_group.nodes.id]
  # No public IP (0 Mbit/s out allocates none): nodes reach OSS on its internal endpoint.
  internet_max_bandwidth_out = 0
  instance_charge_type       = "PostPaid"
  # Spot: pay the market price up to the on-demand one; released (not stopped) when
  # reclaimed, after the ECS metadata service's termination-time notice.  Release is
  # the API's default interruption behaviour (spot_interruption_behavior, "Terminate",
  # exists only from provider 1.275.0 on, so it is left unset here).
  spot_strategy         = var.spot ? "SpotAsPriceGo" : "NoSpot"
  system_disk_category  = var.disk_category
  system_disk_size      = var.disk_size_gb
  system_disk_encrypted = true
  user_data             = base64encode(each.value.user_data)
  # The RAM role whose STS credentials the metadata service hands the node, attached
  # at creation (RunInstances RamRoleName) so that it is there at first boot; the
  # provider marks the argument deprecated from 1.275.0 in favour of a separate
  # alicloud_ecs_ram_role_attachment, which attaches only after the instance runs.
  role_name = var.node_role != null ? var.node_role : alicloud_ram_role.nodes[0].role_name
  # Metadata in hardened mode only: every read needs a token from a PUT.
  http_endpoint       = "enabled"
  http_tokens         = "required"
  deletion_protection = false
  tags                = merge(local.tags, { syndeo-rank = each.key })
  volume_tags         = local.tags

  # Recovery re-creates one rank's instance (`terraform apply -replace`): the new one
  # exists before the drained one is released (names need not be unique on ECS).
  lifecycle {
    create_before_destroy = true
  }

  depends_on = [
    # Nodes read and write the bucket from their first boot (with a role of its own or
    # the given node_role).
    alicloud_oss_bucket.rendezvous,
    alicloud_oss_bucket_acl.rendezvous,
    alicloud_oss_bucket_public_access_block.rendezvous,
    alicloud_ram_role_policy_attachment.rendezvous,
    alicloud_security_group_rule.ray,
  ]
}
