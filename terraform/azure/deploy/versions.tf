# The root `invoke deploy --target azure` applies (its state and tfvars live in the
# cluster's own directory): the provider configured here, the cluster in ../ (a module
# without a provider block, usable with count/for_each by callers of their own, as in
# ../examples).
terraform {
  required_version = ">= 1.9"
  required_providers {
    azurerm = {
      source  = "hashicorp/azurerm"
      version = ">= 4.9, < 5.0"
    }
  }
}

# The subscription comes from ARM_SUBSCRIPTION_ID or the Azure CLI login, like every
# other Azure tool.  Shared keys are disabled on the storage account, so the provider
# must use Entra ID for storage too.
provider "azurerm" {
  features {
    # Without this the provider reads the account's queue and static-website
    # properties from the storage data plane on create and on every read: with
    # Entra-only storage (below) that is 403 for a deployer holding Owner or
    # deployer-role.json but no data role, and the apply fails.  Off, it manages the
    # account, container and lifecycle policy through ARM only (the module sets no
    # queue_properties/static_website, which this setting forbids).  In the schema
    # (internal/provider/features.go) since v4.9.0; 5.0 drops those data-plane calls
    # altogether (the provider's own comment: the flag becomes redundant).
    storage {
      data_plane_available = false
    }
  }
  storage_use_azuread = true
  # Registering resource providers is a subscription-wide right a deployer holding
  # deployer-role.json on one resource group does not have: an admin registers
  # Microsoft.Compute, .Network, .Storage and .ManagedIdentity once (terraform/azure/README.md).
  resource_provider_registrations = "none"
}
