# Syndeo cluster on Azure: its own resource group and VNet, one blob container prefix as
# the rendezvous, N VMs from the packer/cloud image, each started by its own custom data
# (cloud-init) from the shared node module (rank 0 = head).

data "azurerm_client_config" "current" {}

locals {
  name           = "syndeo-${var.cluster_name}"
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
    syndeo-cluster = var.cluster_name
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
  source                   = "../modules/node"
  cluster_id               = var.cluster_name
  node_count               = var.node_count
  rendezvous               = local.rendezvous_uri
  target                   = "azure"
  cpus_per_node            = var.cpus_per_node
  gpus_per_node            = var.gpus_per_node
  memory_mb_per_node       = var.memory_mb_per_node
  object_store_mb_per_node = var.object_store_mb_per_node
  join_timeout_s           = var.join_timeout_s
  run                      = var.run
  not_before               = var.not_before
  image_path               = var.image_path
  image_digest             = var.image_digest
  spot_notices             = var.spot ? "azure" : null
  dashboard                = var.dashboard
  # The node module shapes each rank from its group; the instance type is this
  # module's business (instances.tf), so it is left out here.
  groups = [for g in var.groups : {
    name      = g.name
    nodes     = g.nodes
    cpus      = g.cpus
    gpus      = g.gpus
    memory_mb = g.memory_mb
    min_nodes = g.min_nodes
  }]
  # Nodes `grow` added (ranks past node_count): rendered like the cluster's own
  # (output grown); each gets its VM in instances.tf.
  grown = [for g in var.grown : { rank = g.rank, group = g.group }]
  # The az:// backend finds the account by name and signs in with the VM's
  # user-assigned identity (DefaultAzureCredential -> managed identity by client id).
  extra_env = merge({
    AZURE_STORAGE_ACCOUNT = local.storage_account
    AZURE_CLIENT_ID       = azurerm_user_assigned_identity.nodes.client_id
  }, var.extra_env)
  # Sensitive: plans and logs show it as (sensitive value).
  launch_key = var.launch_key
}
