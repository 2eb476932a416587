# The nodes' identity: a user-assigned managed identity with Storage Blob Data
# Contributor on the rendezvous container only (not the account, not the resource
# group).  The deploying principal gets the same role on the same container, so that
# the launcher can read the result with its own Entra ID login (shared keys are off).

resource "azurerm_user_assigned_identity" "nodes" {
  name                = "${local.name}-nodes"
  resource_group_name = local.rg_name
  location            = local.rg_location
  tags                = local.tags
}

resource "azurerm_role_assignment" "nodes_container" {
  scope                = local.container_scope
  role_definition_name = "Storage Blob Data Contributor"
  principal_id         = azurerm_user_assigned_identity.nodes.principal_id
  principal_type       = "ServicePrincipal"
  description          = "Syndeo ${var.cluster_name} nodes: rendezvous container only"
  depends_on           = [azurerm_storage_container.rendezvous]
}

resource "azurerm_role_assignment" "deployer_container" {
  count                = var.create_bucket ? 1 : 0
  scope                = local.container_scope
  role_definition_name = "Storage Blob Data Contributor"
  principal_id         = data.azurerm_client_config.current.object_id
  description          = "Syndeo ${var.cluster_name}: the deploying principal collects results"
  depends_on           = [azurerm_storage_container.rendezvous]
}
