output "head_ip" {
  description = "Private IP of rank 0 (the Ray head)."
  value       = aws_instance.node["0"].private_ip
}

output "node_ips" {
  description = "Private IPs by rank."
  value       = [for i, _ in module.nodes.groups : aws_instance.node[tostring(i)].private_ip]
}

output "node_ids" {
  description = "Instance ids by rank."
  value       = [for i, _ in module.nodes.groups : aws_instance.node[tostring(i)].id]
}

output "rendezvous_uri" {
  description = "Rendezvous URI the nodes use; records are under <uri>/<cluster_name>/."
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
}
