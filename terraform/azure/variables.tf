# Inputs: the node settings as one object (node, passed on to terraform/modules/node,
# which declares and validates them once), this launch's key, and the machines':
# instance types, image, region, spot, disk, network, bucket.  The machine variables
# shared with the other clouds have the same names, types and defaults there
# (tests/iac/test_interface.py).  Every variable with a default is nullable = false:
# null means the default, so a root that passes every variable on (deploy/) leaves
# unset ones at their defaults.

variable "node" {
  type        = any
  description = "The node settings, one object passed on to terraform/modules/node, which types, defaults and validates it (its README lists the attributes: cluster_id and node_count are required; cluster_id also names every resource here). rendezvous, target, image_path and spot_notices are this module's to set."
}

variable "launch_key" {
  description = "This launch's key (syndeo/core/launchkey.py), passed to every node: workers join only a head that signs its record with it. Made by the launcher; null: none."
  type        = string
  default     = null
  sensitive   = true
  validation {
    condition     = var.launch_key == null || can(regex("^[0-9a-f]{64}$", var.launch_key))
    error_message = "launch_key: null or 64 lower-case hex digits."
  }
}

variable "instance_type" {
  type        = string
  description = "Azure VM size of every node, e.g. Standard_D8s_v5."
  validation {
    condition     = can(regex("^Standard_[A-Za-z0-9_-]+$", var.instance_type))
    error_message = "instance_type must be a VM size such as Standard_D8s_v5."
  }
}

variable "group_instance_types" {
  type        = map(string)
  default     = {}
  description = "A node group's own instance type, by group name (node.groups); a group not named here, and every node without groups, gets instance_type. GPUs come with the VM size (Standard_NC4as_T4_v3: 1 NVIDIA T4); extensions are off, so the image must carry the NVIDIA driver."
  validation {
    condition     = alltrue([for t in values(var.group_instance_types) : can(regex("^Standard_[A-Za-z0-9_-]+$", t))])
    error_message = "group_instance_types: each must look like Standard_D8s_v5."
  }
  validation {
    condition     = alltrue([for k in keys(var.group_instance_types) : contains([for g in try(var.node.groups, []) : g.name], k)])
    error_message = "group_instance_types: each key must be the name of one of node.groups."
  }
  nullable = false
}

variable "image" {
  type        = string
  description = "Resource id of the Syndeo managed image (or gallery image version) baked by packer/cloud. No default: the image is yours."
  validation {
    condition     = can(regex("(?i)^/subscriptions/[0-9a-f-]{36}/resourceGroups/[^/]+/providers/Microsoft\\.Compute/(images/[^/]+|galleries/[^/]+/images/[^/]+(/versions/[^/]+)?)$", var.image))
    error_message = "image must be a resource id: /subscriptions/.../resourceGroups/.../providers/Microsoft.Compute/images/NAME (or a gallery image/version)."
  }
}

variable "region" {
  type        = string
  description = "Azure location (region) of every resource, e.g. westeurope; named region like on the other clouds."
  validation {
    condition     = can(regex("^[a-z]+[a-z0-9]*$", var.region))
    error_message = "region must be an Azure location name such as westeurope (lowercase, no spaces)."
  }
}

variable "zone" {
  type        = string
  default     = null
  description = "Availability zone of the nodes (1, 2 or 3); null = no zone pinning."
  validation {
    condition     = var.zone == null || can(regex("^[1-3]$", var.zone))
    error_message = "zone must be 1, 2 or 3 (or null)."
  }
}

variable "spot" {
  type        = bool
  default     = false
  description = "Run the nodes as Spot VMs (evicted VMs are deleted; price capped at the on-demand price)."
  nullable    = false
}

variable "disk_size_gb" {
  type        = number
  default     = 30
  description = "OS disk per node, GiB: at least the baked image's 30 (packer/cloud disk_size_gb; Azure refuses an OS disk smaller than its image, and so do EC2 and GCE)."
  validation {
    condition     = var.disk_size_gb >= 30 && var.disk_size_gb <= 16384 && floor(var.disk_size_gb) == var.disk_size_gb
    error_message = "disk_size_gb must be a whole number from 30 to 16384 (the baked image is 30 GiB)."
  }
  nullable = false
}

variable "network_cidr" {
  type        = string
  default     = "10.42.0.0/16"
  description = "Address range of the cluster's own network; the node subnet is its first /20."
  validation {
    condition     = can(cidrnetmask(var.network_cidr)) && try(tonumber(split("/", var.network_cidr)[1]) <= 20, false)
    error_message = "network_cidr must be an IPv4 CIDR of /20 or larger, e.g. 10.42.0.0/16."
  }
  nullable = false
}

variable "create_bucket" {
  type        = bool
  default     = true
  description = "Create the rendezvous bucket (destroyed with the cluster); false uses the existing bucket_name."
  nullable    = false
}

variable "bucket_name" {
  type        = string
  description = "Rendezvous blob container to create (create_bucket = true) or to use (in storage_account)."
  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$", var.bucket_name))
    error_message = "bucket_name: 3-63 of a-z, 0-9 and '-', starting and ending with a letter or digit."
  }
}

variable "bucket_versioning" {
  type        = bool
  default     = false
  description = "Keep blob versions in a storage account this module creates (records are short-lived; off by default)."
  nullable    = false
}

variable "rendezvous_prefix" {
  type        = string
  default     = "syndeo"
  description = "Key prefix in the bucket; the cluster's records live under <prefix>/<cluster_id>/. Empty = bucket root."
  validation {
    condition     = can(regex("^([A-Za-z0-9_-][A-Za-z0-9._-]*(/[A-Za-z0-9_-][A-Za-z0-9._-]*)*)?$", var.rendezvous_prefix))
    error_message = "rendezvous_prefix: '/'-separated segments of A-Z a-z 0-9 . _ - (no leading '.', no empty segment, no leading or trailing '/')."
  }
  nullable = false
}


variable "labels" {
  type        = map(string)
  default     = {}
  description = "Extra tags on every resource (GCP's label rules apply on every cloud, so one map works everywhere)."
  validation {
    condition = alltrue([for k, v in var.labels :
    can(regex("^[a-z][a-z0-9_-]{0,62}$", k)) && can(regex("^[a-z0-9_-]{0,63}$", v))])
    error_message = "labels: keys ^[a-z][a-z0-9_-]{0,62}$, values ^[a-z0-9_-]{0,63}$."
  }
  nullable = false
}

variable "admin_cidrs" {
  type        = list(string)
  default     = []
  description = "Private ranges (VPN, peered network, bastion) allowed to SSH (tcp/22) to the nodes. Default none. For Azure Bastion put the AzureBastionSubnet range here."
  validation {
    condition     = alltrue([for c in var.admin_cidrs : can(cidrhost(c, 0)) && try(tonumber(split("/", c)[1]) > 0, false)])
    error_message = "admin_cidrs: CIDRs only, and never the whole internet (0.0.0.0/0, ::/0)."
  }
  nullable = false
}

variable "image_path" {
  type        = string
  default     = "/opt/syndeo/syndeo.sif"
  description = "Path of the SIF inside the VM image (where packer/cloud installs it)."
  validation {
    condition     = can(regex("^/[A-Za-z0-9._/+-]+$", var.image_path))
    error_message = "image_path must be an absolute path of A-Z a-z 0-9 . _ / + - characters."
  }
  nullable = false
}

# --- Azure only ---

variable "storage_account" {
  type        = string
  default     = null
  description = "Storage account of the rendezvous container. create_bucket = true: the account to create (null derives a unique name); false: the existing account that holds bucket_name."
  validation {
    condition     = var.storage_account == null || can(regex("^[a-z0-9]{3,24}$", var.storage_account))
    error_message = "storage_account: 3-24 lowercase letters and digits."
  }
}

variable "storage_account_resource_group" {
  type        = string
  default     = null
  description = "Resource group of the existing storage_account (create_bucket = false)."
  validation {
    condition     = var.storage_account_resource_group == null || can(regex("^[-\\w._()]{1,89}[-\\w_()]$", var.storage_account_resource_group))
    error_message = "storage_account_resource_group must be a resource group name (1-90 of letters, digits, - _ . ( ), not ending in '.')."
  }
}

variable "admin_ssh_public_key" {
  type        = string
  description = "OpenSSH public key of the VMs' admin user (password login is disabled; Azure requires a key). Only the public half enters Terraform: pass yours, or one whose private half was thrown away (`invoke deploy` does that) when nobody needs to log in."
  validation {
    condition     = can(regex("^(ssh-rsa|ssh-ed25519) [A-Za-z0-9+/=]+", var.admin_ssh_public_key))
    error_message = "admin_ssh_public_key must be an OpenSSH ssh-rsa or ssh-ed25519 public key."
  }
}

variable "encryption_at_host" {
  type        = bool
  default     = false
  description = "Also encrypt temp disks and caches on the host (needs the EncryptionAtHost feature registered in the subscription). Managed disks are always encrypted at rest."
  nullable    = false
}

variable "resource_group" {
  type        = string
  default     = null
  description = "An existing resource group to create the cluster in (its region must be `region`); what a deployer with deployer-role.json, assigned on that group only, needs. null: create a group of the cluster's own (needs subscription-wide rights)."
  validation {
    condition     = var.resource_group == null || can(regex("^[-\\w._()]{1,90}$", var.resource_group))
    error_message = "resource_group: 1-90 letters, digits, '-', '_', '.', '(', ')'."
  }
}

variable "disk_type" {
  type        = string
  default     = null
  description = "OS disk storage type of every node; null chooses from the VM size: Premium_LRS on premium-storage-capable sizes (an s among the feature letters, e.g. Standard_D8s_v5), StandardSSD_LRS elsewhere (disk.tf)."
  validation {
    # azurerm_linux_virtual_machine os_disk.storage_account_type's values.
    condition     = var.disk_type == null || contains(["Standard_LRS", "StandardSSD_LRS", "Premium_LRS", "StandardSSD_ZRS", "Premium_ZRS"], coalesce(var.disk_type, "-"))
    error_message = "disk_type must be Standard_LRS, StandardSSD_LRS, Premium_LRS, StandardSSD_ZRS or Premium_ZRS (or null: chosen from the VM size)."
  }
}
