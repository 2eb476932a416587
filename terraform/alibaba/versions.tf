terraform {
  # 1.9: validation of var.group_instance_types refers to var.node (and modules/node needs 1.9).
  required_version = ">= 1.9"
  required_providers {
    alicloud = {
      source = "aliyun/alicloud"
      # Every argument used was checked against the provider's own source at v1.289.0
      # (resource schemas under alicloud/; see terraform/README.md): role_name and
      # policy_name need >= 1.252.0.  The provider is not downloadable here.
      version = ">= 1.252.0, < 2.0"
    }
  }
}

# No provider block: the caller configures the provider, so that a caller may use this
# module with count, for_each or depends_on.  deploy/ is the root `invoke deploy
# --target alibaba` applies.
