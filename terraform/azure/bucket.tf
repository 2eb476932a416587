# The rendezvous container, and the storage account holding it, when this module creates
# them (create_bucket = true): Entra ID only (no shared keys, no SAS), no anonymous
# access, HTTPS/TLS 1.2, infrastructure encryption on top of the default encryption at
# rest, records kept while the cluster runs; both go with `terraform destroy`.  An existing container
# (create_bucket = false) is only granted to the nodes' identity.

resource "azurerm_storage_account" "rendezvous" {
  count                             = var.create_bucket ? 1 : 0
  name                              = local.storage_account
  resource_group_name               = local.rg_name
  location                          = local.rg_location
  account_kind                      = "StorageV2"
  account_tier                      = "Standard"
  account_replication_type          = "LRS"
  https_traffic_only_enabled        = true
  min_tls_version                   = "TLS1_2"
  allow_nested_items_to_be_public   = false
  shared_access_key_enabled         = false
  default_to_oauth_authentication   = true
  local_user_enabled                = false
  infrastructure_encryption_enabled = true
  tags                              = local.tags

  blob_properties {
    versioning_enabled = var.bucket_versioning
    delete_retention_policy {
      days = 1
    }
    container_delete_retention_policy {
      days = 1
    }
  }

  sas_policy {
    expiration_period = "00.01:00:00"
  }

  network_rules {
    # Allow, not Deny: the launcher outside the VNet reads the result.  Every request
    # still needs an Entra ID identity holding a data role on the container.
    default_action             = "Allow"
    virtual_network_subnet_ids = [azurerm_subnet.nodes.id]
    bypass                     = ["AzureServices"]
  }

  #checkov:skip=CKV_AZURE_35:Default action Allow so that the launcher outside the VNet can collect results; access needs Entra ID (shared keys and SAS are disabled) and a role on the container.
  #checkov:skip=CKV_AZURE_59:Public network access stays on for the same reason (Entra ID only).
  #checkov:skip=CKV2_AZURE_33:A private endpoint (plus private DNS zone) costs per hour and would lock the launcher out; the nodes reach the account over the subnet's service endpoint.
  #checkov:skip=CKV2_AZURE_1:Encrypted with Microsoft-managed keys plus infrastructure encryption; a customer-managed key needs a Key Vault that outlives the cluster.
  #checkov:skip=CKV_AZURE_206:Rendezvous records live minutes to days; LRS is enough.
  #checkov:skip=CKV_AZURE_33:Queue service logging: the account has no queues.
}

resource "azurerm_storage_container" "rendezvous" {
  count                 = var.create_bucket ? 1 : 0
  name                  = var.bucket_name
  storage_account_id    = azurerm_storage_account.rendezvous[0].id
  container_access_type = "private"
  #checkov:skip=CKV2_AZURE_21:Blob read logging needs diagnostic settings and a Log Analytics workspace (billed); records are read only by the cluster's identity and the deployer.
}

resource "azurerm_storage_management_policy" "rendezvous" {
  count              = var.create_bucket ? 1 : 0
  storage_account_id = azurerm_storage_account.rendezvous[0].id
  # No action deletes a live record (base blob): a cluster reads its head record, token,
  # sealed CA and job packages for as long as it runs, and destroy removes the account
  # with them.  Only rewritten records' old versions (bucket_versioning) go.
  rule {
    name    = "expire-old-versions"
    enabled = true
    filters {
      blob_types   = ["blockBlob"]
      prefix_match = [local.prefix == "" ? var.bucket_name : "${var.bucket_name}/${local.prefix}/"]
    }
    actions {
      version {
        delete_after_days_since_creation = 1
      }
    }
  }
}

data "azurerm_storage_account" "existing" {
  count               = var.create_bucket ? 0 : 1
  name                = var.storage_account
  resource_group_name = var.storage_account_resource_group
  lifecycle {
    precondition {
      condition     = var.storage_account != null && var.storage_account_resource_group != null
      error_message = "create_bucket = false needs storage_account and storage_account_resource_group (where bucket_name lives)."
    }
  }
}
