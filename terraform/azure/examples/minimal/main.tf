# Minimal use of terraform/azure: a 4-node on-demand cluster serving until destroyed.
#   export ARM_SUBSCRIPTION_ID=...   # or `az login` with a default subscription
#   terraform init && terraform apply -var image=/subscriptions/.../images/... -var bucket_name=... -var admin_ssh_public_key="$(cat ~/.ssh/id_ed25519.pub)"
# `invoke deploy --target azure ...` writes the same inputs as tfvars for you.

variable "image" {
  type        = string
  description = "Managed image id baked from packer/cloud."
}

variable "bucket_name" {
  type        = string
  description = "Name of the rendezvous blob container."
}

variable "admin_ssh_public_key" {
  type        = string
  description = "OpenSSH public key of the VMs' admin user (e.g. the .pub of `ssh-keygen -t ed25519`; keep or discard the private half)."
}

# The module has no provider block: its caller configures the provider (the settings
# terraform/azure needs are explained in ../../deploy/versions.tf).
provider "azurerm" {
  features {
    storage {
      data_plane_available = false
    }
  }
  storage_use_azuread             = true
  resource_provider_registrations = "none"
}

module "syndeo" {
  source = "../.."
  # The node settings (terraform/modules/node/README.md lists them).
  node = { cluster_id = "demo", node_count = 4, cpus_per_node = 8 }

  instance_type = "Standard_D8s_v5"
  image         = var.image
  region        = "westeurope"
  bucket_name   = var.bucket_name

  admin_ssh_public_key = var.admin_ssh_public_key
}

output "head_ip" {
  value = module.syndeo.head_ip
}

output "rendezvous_uri" {
  value = module.syndeo.rendezvous_uri
}

output "storage_account" {
  value = module.syndeo.storage_account
}
