# One instance per rank.  Its user-data is module.nodes' rendering for that rank,
# passed through unchanged (base64 only because that attribute keeps the bytes in
# state, which the offline test compares).

# Why count and not a for_each per group: a rank is an index everywhere -- the node
# module renders user-data, env and groups as lists by rank, and node_ips/node_ids are
# read by rank -- so instance N is rank N, and its group (hence its type) is looked up
# from module.nodes.groups[N].  Instances keyed by group would give the same machines
# under other addresses, with the rank -> index mapping to redo in every output.
locals {
  group_of_name = { for g in var.groups : g.name => g }
  # Per rank: its group's instance_type, else the top-level instance_type.
  instance_types = [for name in module.nodes.groups :
    name == null ? var.instance_type : coalesce(local.group_of_name[name].instance_type, var.instance_type)
  ]
}

resource "aws_instance" "node" {
  count                       = var.node_count
  ami                         = var.image
  instance_type               = local.instance_types[count.index]
  subnet_id                   = aws_subnet.nodes.id
  vpc_security_group_ids      = [aws_security_group.nodes.id]
  iam_instance_profile        = aws_iam_instance_profile.nodes.name
  associate_public_ip_address = false
  ebs_optimized               = true
  user_data_base64            = base64encode(module.nodes.user_data[count.index])
  user_data_replace_on_change = true

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

  tags = {
    Name        = "${local.name}-${count.index}"
    syndeo-rank = tostring(count.index)
  }
  volume_tags = merge(local.tags, { Name = "${local.name}-${count.index}" })

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
