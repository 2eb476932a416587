terraform {
  # 1.9: validation of var.group_instance_types refers to var.node (and modules/node needs 1.9).
  required_version = ">= 1.9"
  required_providers {
    alicloud = {
      source = "aliyun/alicloud"
      # Every argument used is documented at v1.252.0 and v1.289.0
      # (scripts/check-provider-docs.py against the provider's repository: 86 arguments
      # of 12 types) and was read in its resource schemas (alicloud/resource_alicloud_*.go):
      # ram_role's role_name needs >= 1.252.0; alicloud_instance's role_name is deprecated
      # from 1.275.0 (kept: it attaches the role at creation).  Not downloadable here.
      version = ">= 1.252.0, < 2.0"
    }
  }
}

# No provider block: the caller configures the provider, so that a caller may use this
# module with count, for_each or depends_on.  deploy/ is the root `invoke deploy
# --target alibaba` applies.
