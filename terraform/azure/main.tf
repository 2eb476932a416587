# Syndeo cluster on Azure: its own resource group and VNet, one blob container prefix as
# the rendezvous, N VMs from the packer/cloud image, each started by its own custom data
# (cloud-init) from the shared node module (rank 0 = head).

data "azurerm_client_config" "current" {}

locals {
  # Names every resource and scopes the rendezvous records (node.cluster_id).
  cluster_id     = var.node.cluster_id
  name           = "syndeo-${local.cluster_id}"
  prefix         = var.rendezvous_prefix
  rendezvous_uri = "az://${var.bucket_name}/${local.prefix}"
  # A created account gets a name unique per subscription and container (3-24 a-z0-9).
  storage_account = coalesce(var.storage_account, "sy${substr(sha256("${data.azurerm_client_config.current.subscription_id}/${var.bucket_name}"), 0, 22)}")
  storage_account_id = (var.create_bucket ? azurerm_storage_account.rendezvous[0].id :
  data.azurerm_storage_account.existing[0].id)
  container_scope = "${local.storage_account_id}/blobServices/default/containers/${var.bucket_name}"
  # The same id spelled out, not read from the account: the account's network rules
  # name the subnet, and the subnet's endpoint policy names the account (a cycle).
  storage_account_arm_id = (var.create_bucket
    ? "/subscriptions/${data.azurerm_client_config.current.subscription_id}/resourceGroups/${local.rg_name}/providers/Microsoft.Storage/storageAccounts/${local.storage_account}"
  : data.azurerm_storage_account.existing[0].id)
  tags = merge(var.labels, {
    syndeo-cluster = local.cluster_id
  })
}

# The cluster's own resource group, unless resource_group names an existing one: a
# deployer with deployer-role.json holds its rights (role assignments included) on that
# group only, so it cannot create one.
resource "azurerm_resource_group" "this" {
  count    = var.resource_group == null ? 1 : 0
  name     = local.name
  location = var.region
  tags     = local.tags
}

data "azurerm_resource_group" "given" {
  count = var.resource_group == null ? 0 : 1
  name  = var.resource_group
}

locals {
  rg_name     = var.resource_group == null ? azurerm_resource_group.this[0].name : data.azurerm_resource_group.given[0].name
  rg_location = var.resource_group == null ? azurerm_resource_group.this[0].location : data.azurerm_resource_group.given[0].location
}

moved {
  from = azurerm_resource_group.this
  to   = azurerm_resource_group.this[0]
}

module "nodes" {
  source = "../modules/node"
  # The caller's node settings, with what only this module knows.
  node = merge(var.node, {
    rendezvous = local.rendezvous_uri
    target     = "azure"
    image_path = var.image_path
    # Spot VMs' nodes watch their cloud's interruption notice (syndeo/node/preemption.py).
    spot_notices = var.spot ? "azure" : null
  })
  # The az:// backend finds the account by name and signs in with the VM's
  # user-assigned identity (DefaultAzureCredential -> managed identity by client id).
  target_env = {
    AZURE_STORAGE_ACCOUNT = local.storage_account
    AZURE_CLIENT_ID       = azurerm_user_assigned_identity.nodes.client_id
  }
  # Sensitive: plans and logs show it as (sensitive value).
  launch_key = var.launch_key
}
