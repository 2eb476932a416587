terraform {
  # 1.9: validation of var.groups refers to var.node_count (and modules/node needs 1.9).
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

provider "aws" {
  region      = var.region
  max_retries = var.api_max_retries
  default_tags {
    tags = local.tags
  }
}
