terraform {
  # 1.9: validation of var.group_instance_types refers to var.node (and modules/node needs 1.9).
  required_version = ">= 1.9"
  required_providers {
    google = {
      source = "hashicorp/google"
      # Every argument used was checked against the provider's own docs at v6.0.0 and
      # v7.45.0 (see terraform/README.md); the provider is not downloadable here.
      version = ">= 6.0, < 8.0"
    }
  }
}

# No provider block: the caller configures the provider, so that a caller may use this
# module with count, for_each or depends_on.  deploy/ is the root `invoke deploy
# --target gcp` applies.
