terraform {
  # 1.9: validation of var.group_instance_types refers to var.node (and modules/node needs 1.9).
  required_version = ">= 1.9"
  required_providers {
    azurerm = {
      source = "hashicorp/azurerm"
      # Every argument used was checked against the provider's own docs at v4.9.0
      # (first with azurerm_storage_container.storage_account_id) and v4.81.0; see
      # terraform/README.md.  The provider is not downloadable here.
      version = ">= 4.9, < 5.0"
    }
  }
}

# No provider block: the caller configures the provider, so that a caller may use this
# module with count, for_each or depends_on.  deploy/ is the root `invoke deploy
# --target azure` applies.
