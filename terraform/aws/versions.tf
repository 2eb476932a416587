terraform {
  # 1.9: validation of var.group_instance_types refers to var.node (and modules/node needs 1.9).
  required_version = ">= 1.9"
  required_providers {
    aws = {
      source = "hashicorp/aws"
      # The version this module is checked against (validate + mocked apply in
      # tests/iac, with the provider binary in /opt/tf-plugins): the last 5.x.
      version = ">= 5.100, < 6.0"
    }
  }
}

# No provider block: the caller configures the provider (region, retries, credentials),
# as terraform-aws-modules do, so that a caller may use this module with count,
# for_each or depends_on.  deploy/ is the root `invoke deploy --target aws` applies.
