output "head_ip" {
  description = "Private IP of rank 0 (the Ray head)."
  value       = alicloud_instance.node["0"].private_ip
}

output "node_ips" {
  description = "Private IPs by rank."
  value       = [for i, _ in module.nodes.groups : alicloud_instance.node[tostring(i)].private_ip]
}

output "node_ids" {
  description = "Instance ids by rank."
  value       = [for i, _ in module.nodes.groups : alicloud_instance.node[tostring(i)].id]
}

output "rendezvous_uri" {
  description = "Rendezvous URI the nodes use; records are under <uri>/<node.cluster_id>/."
  value       = local.rendezvous_uri
}

output "bucket_name" {
  description = "The rendezvous bucket (created or existing)."
  value       = local.bucket
}

output "instance_types" {
  description = "Instance type by rank (its group's instance_type, else instance_type)."
  value       = local.instance_types
}

output "node_groups" {
  description = "Group name by rank (null without groups)."
  value       = module.nodes.groups
  # Terraform drops an object's unknown attributes when it converts it to the node
  # module's type: a misspelt setting would be ignored without this.
  precondition {
    condition     = length(setsubtract(keys(var.node), module.nodes.setting_names)) == 0
    error_message = "node: no such setting: ${join(", ", setsubtract(keys(var.node), module.nodes.setting_names))} (terraform/modules/node/README.md lists them)."
  }
}
