# Offline checks of the AWS module: a mocked apply (no AWS call, fake ids) against the
# real provider schema.  Run by tests/iac/test_aws.py with the provider from
# /opt/tf-plugins.

mock_provider "aws" {
  # The caller's provider region (the module checks it against var.region).
  mock_data "aws_region" {
    defaults = {
      name = "eu-central-1"
    }
  }
  # DescribeInstanceTypeOfferings by zone, one (location, type) pair per offering:
  # c7i.2xlarge everywhere, m7i.large in a and c, g5.xlarge in c only, so a cluster of
  # all three fits in eu-central-1c alone.  (A mock ignores the request's filter, so
  # the module must not rely on it.)
  mock_data "aws_ec2_instance_type_offerings" {
    defaults = {
      locations      = ["eu-central-1b", "eu-central-1a", "eu-central-1c", "eu-central-1a", "eu-central-1c", "eu-central-1c"]
      instance_types = ["c7i.2xlarge", "c7i.2xlarge", "c7i.2xlarge", "m7i.large", "m7i.large", "g5.xlarge"]
    }
  }
}

variables {
  node = {
    cluster_id    = "c1"
    node_count    = 3
    cpus_per_node = 8
    run           = "python -m syndeo.bench --quick"
  }
  instance_type = "c7i.2xlarge"
  image         = "ami-0123456789abcdef0"
  region        = "eu-central-1"
  bucket_name   = "syndeo-c1-test"
}

# What the node module renders for these inputs, rendered on its own.
run "node_module" {
  command = plan
  module {
    source = "../modules/node"
  }
  variables {
    node = {
      cluster_id    = "c1"
      node_count    = 3
      rendezvous    = "s3://syndeo-c1-test/syndeo"
      target        = "aws"
      cpus_per_node = 8
      run           = "python -m syndeo.bench --quick"
      image_path    = "/opt/syndeo/syndeo.sif"
    }
    target_env = { AWS_REGION = "eu-central-1", AWS_DEFAULT_REGION = "eu-central-1", AWS_METADATA_SERVICE_TIMEOUT = "5", AWS_METADATA_SERVICE_NUM_ATTEMPTS = "3" }
  }
}

# zone = null: the subnet goes to the first zone (by name) that offers every type.
# These plan on an empty state, before the first apply below: once the subnet exists,
# its zone is kept (run "zone_kept_once_created").
run "zone_offering_the_type" {
  command = plan
  assert {
    condition     = aws_subnet.nodes.availability_zone == "eu-central-1a"
    error_message = "c7i.2xlarge alone: the first zone by name offering it"
  }
}

run "zone_offering_every_group_type" {
  command = plan
  variables {
    node = merge(var.node, {
      node_count = 4
      groups = [
        { name = "head", nodes = 1, cpus = 2, gpus = 0 },
        { name = "gpu", nodes = 3, cpus = 4, gpus = 1 },
      ]
    })
    instance_type        = "m7i.large"
    group_instance_types = { gpu = "g5.xlarge" }
  }
  assert {
    condition     = aws_subnet.nodes.availability_zone == "eu-central-1c"
    error_message = "m7i.large and g5.xlarge: only eu-central-1c offers both"
  }
}

run "zone_given" {
  command = plan
  variables {
    zone = "eu-central-1b"
  }
  assert {
    condition     = aws_subnet.nodes.availability_zone == "eu-central-1b" && length(data.aws_ec2_instance_type_offerings.zones) == 0
    error_message = "a given zone is used as is, without asking for offerings"
  }
}

run "refuses_type_no_zone_offers" {
  command = plan
  variables {
    instance_type = "x2iedn.32xlarge"
  }
  expect_failures = [aws_subnet.nodes]
}

run "cluster" {
  command = apply # mocked: nothing is created

  assert {
    condition     = length(aws_instance.node) == 3
    error_message = "one instance per rank"
  }
  assert {
    condition = alltrue([for i, n in aws_instance.node :
    base64decode(n.user_data_base64) == run.node_module.user_data[tonumber(i)]])
    error_message = "each instance's user-data must be the node module's rendering for its rank"
  }
  assert {
    condition     = startswith(base64decode(aws_instance.node["0"].user_data_base64), "#cloud-config")
    error_message = "user-data is a cloud-config document"
  }
  assert {
    condition     = alltrue([for n in aws_instance.node : n.associate_public_ip_address == false])
    error_message = "no public IPs"
  }
  assert {
    condition     = aws_subnet.nodes.map_public_ip_on_launch == false
    error_message = "the subnet must not hand out public IPs"
  }
  assert {
    condition = alltrue([for n in aws_instance.node :
    n.metadata_options[0].http_tokens == "required" && n.metadata_options[0].http_put_response_hop_limit == 1])
    error_message = "IMDSv2 required, hop limit 1"
  }
  assert {
    condition     = alltrue([for n in aws_instance.node : n.root_block_device[0].encrypted == true])
    error_message = "encrypted root volumes"
  }
  assert {
    condition     = alltrue([for n in aws_instance.node : length(n.instance_market_options) == 0])
    error_message = "on-demand unless spot = true"
  }
  assert {
    condition     = alltrue([for n in aws_instance.node : n.instance_initiated_shutdown_behavior == "stop"])
    error_message = "a VM that powers itself off (autostop, no watcher) is stopped, not terminated"
  }
  assert {
    condition     = aws_vpc_security_group_ingress_rule.ray.referenced_security_group_id == aws_security_group.nodes.id
    error_message = "Ray ingress only from the nodes' own group"
  }
  assert {
    condition     = aws_vpc_security_group_ingress_rule.ray.cidr_ipv4 == null && aws_vpc_security_group_ingress_rule.ray.cidr_ipv6 == null
    error_message = "Ray ingress has no CIDR source"
  }
  assert {
    condition     = aws_vpc_security_group_egress_rule.ray.referenced_security_group_id == aws_security_group.nodes.id
    error_message = "Ray egress only to the nodes' own group"
  }
  assert {
    condition     = length(aws_vpc_security_group_ingress_rule.admin_ssh) == 0
    error_message = "no SSH rule unless admin_cidrs is set"
  }
  assert {
    condition     = length(aws_s3_bucket.rendezvous) == 1 && aws_s3_bucket.rendezvous[0].force_destroy
    error_message = "a created bucket is destroyed with the cluster"
  }
  assert {
    condition = (aws_s3_bucket_public_access_block.rendezvous[0].block_public_acls &&
      aws_s3_bucket_public_access_block.rendezvous[0].block_public_policy &&
      aws_s3_bucket_public_access_block.rendezvous[0].ignore_public_acls &&
    aws_s3_bucket_public_access_block.rendezvous[0].restrict_public_buckets)
    error_message = "public access blocked"
  }
  assert {
    # Nothing to expire without versions, and none of the provider's 55 s wait.
    condition     = length(aws_s3_bucket_lifecycle_configuration.rendezvous) == 0
    error_message = "no lifecycle configuration on an unversioned bucket"
  }
  assert {
    condition     = output.rendezvous_uri == "s3://syndeo-c1-test/syndeo"
    error_message = "rendezvous URI"
  }
  assert {
    condition     = output.head_ip == aws_instance.node["0"].private_ip && length(output.node_ids) == 3
    error_message = "outputs by rank"
  }
}

# Node groups: a small head (the top-level type), two CPU nodes and a GPU node of
# their own types.  The node module renders each rank's shape and group; the cloud
# module only picks each rank's instance type.
run "grouped_node_module" {
  command = plan
  module {
    source = "../modules/node"
  }
  variables {
    node = {
      cluster_id    = "c1"
      node_count    = 4
      rendezvous    = "s3://syndeo-c1-test/syndeo"
      target        = "aws"
      cpus_per_node = 8
      run           = "python -m syndeo.bench --quick"
      image_path    = "/opt/syndeo/syndeo.sif"
      groups = [
        { name = "head", nodes = 1, cpus = 2, gpus = 0 },
        { name = "cpu", nodes = 2, cpus = 8, gpus = 0 },
        { name = "gpu", nodes = 1, cpus = 4, gpus = 1, memory_mb = 16000, min_nodes = 0 },
      ]
    }
    target_env = { AWS_REGION = "eu-central-1", AWS_DEFAULT_REGION = "eu-central-1", AWS_METADATA_SERVICE_TIMEOUT = "5", AWS_METADATA_SERVICE_NUM_ATTEMPTS = "3" }
  }
}

run "grouped_cluster" {
  command = apply # mocked: nothing is created
  variables {
    node = merge(var.node, {
      node_count = 4
      groups = [
        { name = "head", nodes = 1, cpus = 2, gpus = 0 },
        { name = "cpu", nodes = 2, cpus = 8, gpus = 0 },
        { name = "gpu", nodes = 1, cpus = 4, gpus = 1, memory_mb = 16000, min_nodes = 0 },
      ]
    })
    instance_type        = "m7i.large"
    group_instance_types = { cpu = "c7i.2xlarge", gpu = "g5.xlarge" }
  }
  assert {
    condition     = [for n in aws_instance.node : n.instance_type] == ["m7i.large", "c7i.2xlarge", "c7i.2xlarge", "g5.xlarge"]
    error_message = "each rank's instance type is its group's (the head's group names none: instance_type)"
  }
  assert {
    condition     = output.instance_types == ["m7i.large", "c7i.2xlarge", "c7i.2xlarge", "g5.xlarge"] && output.node_groups == ["head", "cpu", "cpu", "gpu"]
    error_message = "instance_types and node_groups outputs by rank"
  }
  assert {
    condition = alltrue([for i, n in aws_instance.node :
    base64decode(n.user_data_base64) == run.grouped_node_module.user_data[tonumber(i)]])
    error_message = "each instance's user-data must be the node module's rendering for its rank (instance_type is not passed to it)"
  }
  assert {
    condition = (strcontains(yamldecode(base64decode(aws_instance.node["3"].user_data_base64)).write_files[0].content, "SYNDEO_GROUP=\"gpu\"\n")
      && strcontains(yamldecode(base64decode(aws_instance.node["3"].user_data_base64)).write_files[0].content, "SYNDEO_GPUS=\"1\"\n")
    && strcontains(yamldecode(base64decode(aws_instance.node["0"].user_data_base64)).write_files[0].content, "SYNDEO_GROUP=\"head\"\n"))
    error_message = "the GPU rank's user-data names its group and GPUs; the head's names the head group"
  }
  assert {
    condition     = length(aws_instance.node) == 4 && output.head_ip == aws_instance.node["0"].private_ip
    error_message = "one instance per rank, rank 0 the head"
  }
}

# Growing: `grow` adds a GPU node at rank 4 and a CPU node at rank 5 to the running
# grouped cluster (state carries over from grouped_cluster).  Instances are keyed by
# rank, so the cluster's own four keep their addresses, ids and user-data.
run "grown_node_module" {
  command = plan
  module {
    source = "../modules/node"
  }
  variables {
    node = {
      cluster_id    = "c1"
      node_count    = 4
      rendezvous    = "s3://syndeo-c1-test/syndeo"
      target        = "aws"
      cpus_per_node = 8
      run           = "python -m syndeo.bench --quick"
      image_path    = "/opt/syndeo/syndeo.sif"
      groups = [
        { name = "head", nodes = 1, cpus = 2, gpus = 0 },
        { name = "cpu", nodes = 2, cpus = 8, gpus = 0 },
        { name = "gpu", nodes = 1, cpus = 4, gpus = 1, memory_mb = 16000, min_nodes = 0 },
      ]
      grown = [{ rank = 4, group = "gpu" }, { rank = 5, group = "cpu" }]
    }
    target_env = { AWS_REGION = "eu-central-1", AWS_DEFAULT_REGION = "eu-central-1", AWS_METADATA_SERVICE_TIMEOUT = "5", AWS_METADATA_SERVICE_NUM_ATTEMPTS = "3" }
  }
}

run "grown_cluster" {
  command = apply # mocked: nothing is created
  variables {
    node = merge(var.node, {
      node_count = 4
      groups = [
        { name = "head", nodes = 1, cpus = 2, gpus = 0 },
        { name = "cpu", nodes = 2, cpus = 8, gpus = 0 },
        { name = "gpu", nodes = 1, cpus = 4, gpus = 1, memory_mb = 16000, min_nodes = 0 },
      ]
      grown = [{ rank = 4, group = "gpu" }, { rank = 5, group = "cpu" }]
    })
    instance_type        = "m7i.large"
    group_instance_types = { cpu = "c7i.2xlarge", gpu = "g5.xlarge" }
  }
  assert {
    condition     = join(",", sort(keys(aws_instance.node))) == "0,1,2,3,4,5"
    error_message = "one instance per rank, the grown ones keyed by their ranks"
  }
  assert {
    condition     = aws_instance.node["4"].instance_type == "g5.xlarge" && aws_instance.node["5"].instance_type == "c7i.2xlarge"
    error_message = "a grown node's instance type is its group's"
  }
  assert {
    condition = (base64decode(aws_instance.node["4"].user_data_base64) == run.grown_node_module.machines["4"].user_data
    && base64decode(aws_instance.node["5"].user_data_base64) == run.grown_node_module.machines["5"].user_data)
    error_message = "a grown node's user-data is the node module's rendering for it (output machines)"
  }
  assert {
    condition = (strcontains(yamldecode(base64decode(aws_instance.node["4"].user_data_base64)).write_files[0].content, "SYNDEO_RANK=\"4\"\n")
    && strcontains(yamldecode(base64decode(aws_instance.node["4"].user_data_base64)).write_files[0].content, "SYNDEO_GROUP=\"gpu\"\n"))
    error_message = "the grown GPU node is rank 4 of group gpu"
  }
  assert {
    condition     = aws_instance.node["4"].tags["syndeo-rank"] == "4" && aws_instance.node["4"].tags.Name == "syndeo-c1-4"
    error_message = "a grown node's name and tags use its rank"
  }
  assert {
    condition = alltrue([for i in range(4) :
    base64decode(aws_instance.node[tostring(i)].user_data_base64) == run.grouped_node_module.user_data[i]])
    error_message = "the cluster's own instances keep their user-data (growing renders nothing new for them)"
  }
  assert {
    condition     = output.node_ids == run.grouped_cluster.node_ids && output.node_ips == run.grouped_cluster.node_ips
    error_message = "the cluster's own instances are not replaced by growing (same ids; outputs stay the cluster's ranks)"
  }
  assert {
    condition     = output.instance_types == ["m7i.large", "c7i.2xlarge", "c7i.2xlarge", "g5.xlarge"] && length(output.node_groups) == 4
    error_message = "outputs by rank stay the cluster's own ranks"
  }
}

run "shrunk_cluster" {
  command = apply # mocked: shrink removes rank 4 only
  variables {
    node = merge(var.node, {
      node_count = 4
      groups = [
        { name = "head", nodes = 1, cpus = 2, gpus = 0 },
        { name = "cpu", nodes = 2, cpus = 8, gpus = 0 },
        { name = "gpu", nodes = 1, cpus = 4, gpus = 1, memory_mb = 16000, min_nodes = 0 },
      ]
      grown = [{ rank = 5, group = "cpu" }]
    })
    instance_type        = "m7i.large"
    group_instance_types = { cpu = "c7i.2xlarge", gpu = "g5.xlarge" }
  }
  assert {
    condition     = join(",", sort(keys(aws_instance.node))) == "0,1,2,3,5"
    error_message = "shrink destroys exactly the removed rank; rank 5 keeps its address"
  }
  assert {
    condition     = output.node_ids == run.grouped_cluster.node_ids
    error_message = "the cluster's own instances are not replaced by shrinking"
  }
  assert {
    condition     = base64decode(aws_instance.node["5"].user_data_base64) == run.grown_node_module.machines["5"].user_data
    error_message = "rank 5 keeps its user-data"
  }
}

run "refuses_group_instance_type_of_another_cloud" {
  command = plan
  variables {
    node = merge(var.node, {
      node_count = 2
      groups = [
        { name = "head", nodes = 1, cpus = 2, gpus = 0 },
        { name = "gpu", nodes = 1, cpus = 4, gpus = 1 },
      ]
    })
    group_instance_types = { gpu = "Standard_NC4as_T4_v3" }
  }
  expect_failures = [var.group_instance_types]
}

run "refuses_group_instance_type_of_no_group" {
  command = plan
  variables {
    group_instance_types = { gpu = "g5.xlarge" }
  }
  expect_failures = [var.group_instance_types]
}

# A misspelt node setting is refused, not dropped (Terraform's object conversion would).
run "refuses_an_unknown_node_setting" {
  command = plan
  variables {
    node = merge(var.node, { join_timeout = 60 })
  }
  expect_failures = [output.node_groups]
}

run "policy_is_cluster_prefix_only" {
  command = plan
  assert {
    condition = jsondecode(aws_iam_role_policy.rendezvous.policy).Statement == [
      {
        Sid       = "ListClusterPrefix"
        Effect    = "Allow"
        Action    = "s3:ListBucket"
        Resource  = "arn:aws:s3:::syndeo-c1-test"
        Condition = { StringLike = { "s3:prefix" = ["syndeo/c1/*"] } }
      },
      {
        Sid      = "ClusterRecords"
        Effect   = "Allow"
        Action   = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"]
        Resource = "arn:aws:s3:::syndeo-c1-test/syndeo/c1/*"
      },
    ]
    error_message = "the node role may list, read, write and delete under <prefix>/<cluster>/ only"
  }
  assert {
    condition     = length(aws_iam_role_policy_attachment.ssm) == 0
    error_message = "no SSM policy unless ssm_endpoints = true"
  }
}

run "empty_prefix" {
  command = plan
  variables {
    rendezvous_prefix = ""
  }
  assert {
    condition     = jsondecode(aws_iam_role_policy.rendezvous.policy).Statement[1].Resource == "arn:aws:s3:::syndeo-c1-test/c1/*"
    error_message = "an empty prefix keeps the cluster in <bucket>/<cluster>/"
  }
}

run "versioned_bucket" {
  command   = apply
  state_key = "versioned"
  variables {
    bucket_versioning = true
  }
  assert {
    # A node that joins on day 8 still reads the head record, token and sealed CA.
    condition = alltrue([
      for r in aws_s3_bucket_lifecycle_configuration.rendezvous[0].rule : length(r.expiration) == 0
    ])
    error_message = "no rule expires a live record of a running cluster"
  }
  assert {
    condition = toset([for r in aws_s3_bucket_lifecycle_configuration.rendezvous[0].rule : r.id]) == toset(
    ["expire-old-versions", "abort-incomplete-uploads"])
    error_message = "only old versions and incomplete uploads are removed"
  }
}

run "spot_and_existing_bucket" {
  command = apply
  # Fresh instances: the market is ignore_changes (one per cluster), so switching the
  # earlier runs' instances to spot would (rightly) leave them as they are.
  state_key = "spot"
  variables {
    spot          = true
    create_bucket = false
    bucket_name   = "team-shared-bucket"
    admin_cidrs   = ["10.8.0.0/16"]
  }
  assert {
    condition = alltrue([for n in aws_instance.node :
      n.instance_market_options[0].market_type == "spot" &&
    n.instance_market_options[0].spot_options[0].instance_interruption_behavior == "terminate"])
    error_message = "spot = true makes one-time Spot Instances"
  }
  assert {
    condition     = length(aws_s3_bucket.rendezvous) == 0 && length(aws_s3_bucket_lifecycle_configuration.rendezvous) == 0
    error_message = "an existing bucket is not managed (nor destroyed)"
  }
  assert {
    condition     = output.rendezvous_uri == "s3://team-shared-bucket/syndeo"
    error_message = "rendezvous in the existing bucket"
  }
  assert {
    condition     = aws_vpc_security_group_ingress_rule.admin_ssh["10.8.0.0/16"].cidr_ipv4 == "10.8.0.0/16" && aws_vpc_security_group_ingress_rule.admin_ssh["10.8.0.0/16"].from_port == 22
    error_message = "admin_cidrs open SSH from exactly those ranges"
  }
}

run "refuses_world_admin_cidr" {
  command = plan
  variables {
    admin_cidrs = ["0.0.0.0/0"]
  }
  expect_failures = [var.admin_cidrs]
}

run "refuses_world_admin_cidr_v6" {
  command = plan
  variables {
    admin_cidrs = ["::/0"]
  }
  expect_failures = [var.admin_cidrs]
}

run "refuses_no_image" {
  command = plan
  variables {
    image = "ubuntu-22.04"
  }
  expect_failures = [var.image]
}


# After the applies above the subnet exists in eu-central-1a: a later zone (given, or a
# changed offering) does not move it, which would replace every node.
run "zone_kept_once_created" {
  command = plan
  variables {
    zone = "eu-central-1b"
  }
  assert {
    condition     = aws_subnet.nodes.availability_zone == "eu-central-1a"
    error_message = "the subnet keeps the zone it was created in"
  }
}

# The provider is the caller's: one configured for another region than var.region is
# refused before anything is created (the nodes would be told the wrong region).
run "refuses_a_provider_in_another_region" {
  command = plan
  override_data {
    target = data.aws_region.current
    values = {
      name = "us-east-1"
    }
  }
  expect_failures = [aws_vpc.this]
}
