# The root `invoke deploy --target aws` applies (its state and tfvars live in the
# cluster's own directory): the provider configured here, the cluster in ../ (a module
# without a provider block, usable with count/for_each by callers of their own, as in
# ../examples).
terraform {
  required_version = ">= 1.9"
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.100, < 6.0"
    }
  }
}

# The region the module's nodes are told (it checks that they agree); credentials from
# the standard chain (AWS_PROFILE, SSO, environment, instance role) and endpoints from
# AWS_ENDPOINT_URL_* (the emulated AWS in CI), as every AWS tool reads them.
provider "aws" {
  region      = var.region
  max_retries = var.api_max_retries
}
