# ../outputs.tf describes each.

output "head_ip" { value = module.cluster.head_ip }
output "node_ips" { value = module.cluster.node_ips }
output "node_ids" { value = module.cluster.node_ids }
output "rendezvous_uri" { value = module.cluster.rendezvous_uri }
output "bucket_name" { value = module.cluster.bucket_name }
output "storage_account" { value = module.cluster.storage_account }
output "instance_types" { value = module.cluster.instance_types }
output "node_groups" { value = module.cluster.node_groups }
