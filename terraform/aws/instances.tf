# One instance per rank.  Its user-data is module.nodes' rendering for that rank,
# passed through unchanged (base64 only because that attribute keeps the bytes in
# state, which the offline test compares).

# Why for_each keyed by rank and not count: `grow` adds nodes (node.grown, ranks past
# node_count) and `shrink` removes any of them, so instances are addressed by their
# rank ("0", "1", ..., "12"): removing rank 12 never shifts rank 13 to another
# address, as count would (replacing a running node).  Not keyed by group either: a
# rank is an index everywhere (the node module renders user-data, env and groups as
# lists by rank; node_ips/node_ids are read by rank), so the outputs stay lists by rank.
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

resource "aws_instance" "node" {
  for_each                    = local.machines
  ami                         = var.image
  instance_type               = local.machine_types[each.key]
  subnet_id                   = aws_subnet.nodes.id
  vpc_security_group_ids      = [aws_security_group.nodes.id]
  iam_instance_profile        = aws_iam_instance_profile.nodes.name
  associate_public_ip_address = false
  ebs_optimized               = true
  user_data_base64            = base64encode(each.value.user_data)
  user_data_replace_on_change = true
  # A node that powers its VM off (autostop with no watcher: syndeo/node/poweroff.py)
  # leaves it stopped, billing no compute, for `down` to remove; not terminated, so
  # that Terraform's state and the VM agree until then.  EC2's default for EBS-backed
  # instances, written here because the power-off relies on it.
  instance_initiated_shutdown_behavior = "stop"

  metadata_options {
    http_endpoint = "enabled"
    http_tokens   = "required" # IMDSv2 only
    # The node runs in Apptainer in the host's network namespace, so IMDS replies need
    # no extra hop: 1 keeps the credentials away from anything behind a bridge.
    http_put_response_hop_limit = 1
    instance_metadata_tags      = "disabled"
  }

  root_block_device {
    volume_type           = "gp3"
    volume_size           = var.disk_size_gb
    encrypted             = true
    delete_on_termination = true
  }

  dynamic "instance_market_options" {
    for_each = var.spot ? [1] : []
    content {
      market_type = "spot"
      spot_options {
        spot_instance_type             = "one-time"
        instance_interruption_behavior = "terminate"
      }
    }
  }

  tags = merge(local.tags, {
    Name        = "${local.name}-${each.key}"
    syndeo-rank = each.key
  })
  volume_tags = merge(local.tags, { Name = "${local.name}-${each.key}" })

  # Recovery re-creates one rank's instance (`terraform apply -replace`): after a spot
  # notice the new instance exists before the drained one is terminated, so the rank's
  # successor boots while the old node still serves what it has (the notice gives about
  # 2 minutes).  Nothing names an instance uniquely, so the two may coexist.
  lifecycle {
    create_before_destroy = true
    # The market (spot or on-demand) is one setting per cluster, never a reason to
    # replace running nodes: a provider read that omits it (moto does for spot
    # instances) must not make every apply -- a grow, a recovery -- replace them all.
    ignore_changes = [instance_market_options]
  }

  #checkov:skip=CKV_AWS_126:Detailed (1-minute) monitoring is billed per instance; Syndeo reports node health through the rendezvous.
  depends_on = [
    # Nodes read and write the bucket from their first boot.
    aws_iam_role_policy.rendezvous,
    aws_s3_bucket_policy.rendezvous,
    aws_s3_bucket_public_access_block.rendezvous,
    aws_vpc_endpoint.s3,
    aws_route_table_association.nodes,
  ]
}
