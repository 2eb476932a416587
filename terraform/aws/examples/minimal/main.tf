# Minimal use of terraform/aws: a 4-node on-demand cluster serving until destroyed.
#   terraform init && terraform apply -var image=ami-... -var bucket_name=...
# `invoke deploy --target aws ...` writes the same inputs as tfvars for you.

variable "image" {
  type        = string
  description = "AMI id baked from packer/cloud."
}

variable "bucket_name" {
  type        = string
  description = "Globally unique name for the rendezvous bucket."
}

# The module has no provider block: its caller configures the provider.
provider "aws" {
  region = "us-east-1"
}

module "syndeo" {
  source = "../.."
  # The node settings (terraform/modules/node/README.md lists them).
  node = { cluster_id = "demo", node_count = 4, cpus_per_node = 8 }

  instance_type = "c7i.2xlarge"
  image         = var.image
  region        = "us-east-1"
  bucket_name   = var.bucket_name
}

output "head_ip" {
  value = module.syndeo.head_ip
}

output "rendezvous_uri" {
  value = module.syndeo.rendezvous_uri
}
