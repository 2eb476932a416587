# The root `invoke deploy --target alibaba` applies (its state and tfvars live in the
# cluster's own directory): the provider configured here, the cluster in ../ (a module
# without a provider block, usable with count/for_each by callers of their own, as in
# ../examples).
terraform {
  required_version = ">= 1.9"
  required_providers {
    alicloud = {
      source  = "aliyun/alicloud"
      version = ">= 1.252.0, < 2.0"
    }
  }
}

# Credentials from the standard chain the provider reads: ALIBABA_CLOUD_ACCESS_KEY_ID /
# ALIBABA_CLOUD_ACCESS_KEY_SECRET (/ ALIBABA_CLOUD_SECURITY_TOKEN), or a profile of
# ~/.aliyun/config.json (ALIBABA_CLOUD_PROFILE), or an ECS instance's RAM role.
provider "alicloud" {
  region = var.region
}
