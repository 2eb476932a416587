# Minimal use of terraform/gcp: a 4-node on-demand cluster serving until destroyed.
#   terraform init && terraform apply -var project=... -var image=projects/.../global/images/... -var bucket_name=...
# `invoke deploy --target gcp ...` writes the same inputs as tfvars for you.

variable "project" {
  type        = string
  description = "Project to create the cluster in."
}

variable "image" {
  type        = string
  description = "Image baked from packer/cloud: projects/PROJECT/global/images/NAME."
}

variable "bucket_name" {
  type        = string
  description = "Globally unique name for the rendezvous bucket."
}

# The module has no provider block: its caller configures the provider.
provider "google" {
  project = var.project
  region  = "us-central1"
}

module "syndeo" {
  source  = "../.."
  project = var.project
  # The node settings (terraform/modules/node/README.md lists them).
  node = { cluster_id = "demo", node_count = 4, cpus_per_node = 8 }

  instance_type = "c3-standard-8"
  image         = var.image
  region        = "us-central1"
  bucket_name   = var.bucket_name
}

output "head_ip" {
  value = module.syndeo.head_ip
}

output "rendezvous_uri" {
  value = module.syndeo.rendezvous_uri
}
