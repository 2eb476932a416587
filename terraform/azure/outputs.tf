output "head_ip" {
  description = "Private IP of rank 0 (the Ray head)."
  value       = azurerm_linux_virtual_machine.node["0"].private_ip_address
}

output "node_ips" {
  description = "Private IPs by rank."
  value       = [for i, _ in module.nodes.groups : azurerm_linux_virtual_machine.node[tostring(i)].private_ip_address]
}

output "node_ids" {
  description = "VM resource ids by rank."
  value       = [for i, _ in module.nodes.groups : azurerm_linux_virtual_machine.node[tostring(i)].id]
}

output "rendezvous_uri" {
  description = "Rendezvous URI the nodes use (with AZURE_STORAGE_ACCOUNT = storage_account); records are under <uri>/<cluster_name>/."
  value       = local.rendezvous_uri
}

output "bucket_name" {
  description = "The rendezvous container (created or existing)."
  value       = var.bucket_name
}

output "storage_account" {
  description = "Storage account holding the rendezvous container (set AZURE_STORAGE_ACCOUNT to it to read results)."
  value       = local.storage_account
}

output "instance_types" {
  description = "Instance type by rank (its group's instance_type, else instance_type)."
  value       = local.instance_types
}

output "node_groups" {
  description = "Group name by rank (null without groups)."
  value       = module.nodes.groups
}
