output "head_ip" {
  description = "The head's host (rank 0)."
  value       = var.hosts[0]
}

output "node_ips" {
  description = "Hosts in rank order."
  value       = var.hosts
}

output "node_ids" {
  description = "Per rank, host and node directory: what exactly runs where."
  value       = [for i, h in var.hosts : "${h}:${module.nodes.host_dirs[i]}"]
}

output "rendezvous_uri" {
  description = "Where the nodes meet."
  value       = local.node.rendezvous
}

output "host_dirs" {
  description = "Per rank, the node's directory on its host (environment, node.log, node.pid)."
  value       = module.nodes.host_dirs
}

output "grown_hosts" {
  description = "The nodes grow added, rank => host."
  value       = { for g in local.grown : tostring(g.rank) => g.host }
}

output "node_groups" {
  description = "Per rank, its group (null without groups)."
  value       = module.nodes.groups
  # Terraform drops an object's unknown attributes when it converts it to the node
  # module's type: a misspelt setting would be ignored without this.
  precondition {
    condition     = length(setsubtract(keys(local.node), module.nodes.setting_names)) == 0
    error_message = "node: no such setting: ${join(", ", setsubtract(keys(local.node), module.nodes.setting_names))} (terraform/modules/node/README.md lists them)."
  }
}
