terraform {
  required_version = ">= 1.5"
  required_providers {
    aws = {
      source = "hashicorp/aws"
      # Checked against 5.100.0 (validate + mocked plan in tests/iac); every argument
      # used exists since 5.60.
      version = ">= 5.60, < 6.0"
    }
  }
}

provider "aws" {
  region = var.region
  default_tags {
    tags = local.tags
  }
}
