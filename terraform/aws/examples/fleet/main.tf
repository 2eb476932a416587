# Several clusters from one configuration: one module call with for_each, which
# Terraform allows only because terraform/aws configures no provider of its own.
#   terraform init && terraform apply -var image=ami-... -var bucket_prefix=syndeo-1234
# Each cluster gets its own VPC, bucket and role; destroy removes them all.

provider "aws" {
  region = "us-east-1"
}

variable "image" {
  type        = string
  description = "AMI id baked from packer/cloud."
}

variable "bucket_prefix" {
  type        = string
  description = "Globally unique prefix for the clusters' rendezvous buckets (syndeo-...)."
}

variable "clusters" {
  type        = map(number)
  default     = { train = 4, eval = 2 }
  description = "Cluster name => node count."
}

module "syndeo" {
  source   = "../.."
  for_each = var.clusters

  # The node settings (terraform/modules/node/README.md lists them).
  node = { cluster_id = each.key, node_count = each.value, cpus_per_node = 8 }

  instance_type = "c7i.2xlarge"
  image         = var.image
  region        = "us-east-1"
  bucket_name   = "${var.bucket_prefix}-${each.key}"
}

output "head_ips" {
  value = { for name, c in module.syndeo : name => c.head_ip }
}
