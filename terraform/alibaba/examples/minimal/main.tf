# Minimal use of terraform/alibaba: a 4-node on-demand cluster serving until destroyed.
#   terraform init && terraform apply -var image=m-... -var bucket_name=...
# `invoke deploy --target alibaba ...` writes the same inputs as tfvars for you.

variable "image" {
  type        = string
  description = "Custom image baked from packer/cloud in cn-hangzhou (m-...)."
}

variable "bucket_name" {
  type        = string
  description = "Globally unique name for the rendezvous bucket."
}

# The module has no provider block: its caller configures the provider.
provider "alicloud" {
  region = "cn-hangzhou"
}

module "syndeo" {
  source = "../.."
  # The node settings (terraform/modules/node/README.md lists them).
  node = { cluster_id = "demo", node_count = 4, cpus_per_node = 8 }

  instance_type = "ecs.g7.2xlarge"
  image         = var.image
  region        = "cn-hangzhou"
  bucket_name   = var.bucket_name
}

output "head_ip" {
  value = module.syndeo.head_ip
}

output "rendezvous_uri" {
  value = module.syndeo.rendezvous_uri
}
