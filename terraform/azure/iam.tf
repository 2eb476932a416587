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

# Only this cluster's prefix of the container, as on AWS and GCP: without the condition
# a node (or anyone who holds its identity) could write another cluster's head record
# in a shared container.  The path is what syndeo/rendezvous/_cloud.py keys every record
# under (<prefix>/<cluster>/, or <cluster>/ at the container's root).
locals {
  node_blob_prefix = local.prefix == "" ? "${local.cluster_id}/" : "${local.prefix}/${local.cluster_id}/"
  # An Azure ABAC role-assignment condition (version 2.0).  Its syntax is from Microsoft's
  # docs: "Azure role assignment condition format and syntax" (conditions-format.md) and
  # "Example Azure role assignment conditions for Blob Storage" (storage-auth-abac-examples.md:
  # read and list "in named containers with a path", write "with a path"), which give the
  # blob path attribute (@Resource ...blobs:path, no container name, no leading '/'), the
  # list prefix attribute (@Request ...blobs:prefix) and the Blob.List suboperation.  Each
  # clause: an action it does not name passes; one it names must be inside the prefix.
  # Not checked against Azure itself here (no account; azurerm cannot be downloaded).
  node_blob_condition = <<-EOT
    (
     (
      !(ActionMatches{'Microsoft.Storage/storageAccounts/blobServices/containers/blobs/read'} AND NOT SubOperationMatches{'Blob.List'})
      AND
      !(ActionMatches{'Microsoft.Storage/storageAccounts/blobServices/containers/blobs/write'})
      AND
      !(ActionMatches{'Microsoft.Storage/storageAccounts/blobServices/containers/blobs/add/action'})
      AND
      !(ActionMatches{'Microsoft.Storage/storageAccounts/blobServices/containers/blobs/delete'})
      AND
      !(ActionMatches{'Microsoft.Storage/storageAccounts/blobServices/containers/blobs/move/action'})
     )
     OR
     (
      @Resource[Microsoft.Storage/storageAccounts/blobServices/containers/blobs:path] StringStartsWith '${local.node_blob_prefix}'
     )
    )
    AND
    (
     (
      !(ActionMatches{'Microsoft.Storage/storageAccounts/blobServices/containers/blobs/read'} AND SubOperationMatches{'Blob.List'})
     )
     OR
     (
      @Request[Microsoft.Storage/storageAccounts/blobServices/containers/blobs:prefix] StringStartsWith '${local.node_blob_prefix}'
     )
    )
  EOT
}

resource "azurerm_role_assignment" "nodes_container" {
  scope                = local.container_scope
  role_definition_name = "Storage Blob Data Contributor"
  principal_id         = azurerm_user_assigned_identity.nodes.principal_id
  principal_type       = "ServicePrincipal"
  description          = "Syndeo ${local.cluster_id} nodes: this cluster's prefix of the rendezvous container only"
  # azurerm_role_assignment's own arguments for it (condition, condition_version: the
  # provider docs; "2.0" is the version of the syntax above).
  condition         = local.node_blob_condition
  condition_version = "2.0"
  depends_on        = [azurerm_storage_container.rendezvous]
}

resource "azurerm_role_assignment" "deployer_container" {
  count                = var.create_bucket ? 1 : 0
  scope                = local.container_scope
  role_definition_name = "Storage Blob Data Contributor"
  principal_id         = data.azurerm_client_config.current.object_id
  description          = "Syndeo ${local.cluster_id}: the deploying principal collects results"
  depends_on           = [azurerm_storage_container.rendezvous]
}
