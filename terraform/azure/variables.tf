# Inputs.  The shared ones (everything above "Azure only") have the same names, types
# and defaults in terraform/gcp and terraform/azure; tests/iac/test_interface.py
# fails on drift.  Rules match syndeo/launcher/config.py and syndeo/core/nodeconfig.py.
# Every variable with a default is nullable = false: null means the default, so a root
# that passes every variable on (deploy/) leaves unset ones at their defaults.

variable "cluster_name" {
  type        = string
  description = "Cluster id: names every resource and the rendezvous records (<prefix>/<cluster_name>/...)."
  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9-]{0,39}$", var.cluster_name))
    error_message = "cluster_name: use 1-40 of a-z, 0-9 and '-', starting with a letter or digit."
  }
}

variable "node_count" {
  type        = number
  description = "Number of VMs; rank 0 is the head."
  validation {
    condition     = var.node_count >= 1 && var.node_count <= 4096 && floor(var.node_count) == var.node_count
    error_message = "node_count must be a whole number from 1 to 4096."
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
  description = "Key prefix in the bucket; the cluster's records live under <prefix>/<cluster_name>/. Empty = bucket root."
  validation {
    condition     = can(regex("^([A-Za-z0-9_-][A-Za-z0-9._-]*(/[A-Za-z0-9_-][A-Za-z0-9._-]*)*)?$", var.rendezvous_prefix))
    error_message = "rendezvous_prefix: '/'-separated segments of A-Z a-z 0-9 . _ - (no leading '.', no empty segment, no leading or trailing '/')."
  }
  nullable = false
}

variable "record_expiry_days" {
  type        = number
  default     = 7
  description = "Blobs under <rendezvous_prefix>/ in a created storage account expire after this many days."
  validation {
    condition     = var.record_expiry_days >= 1 && var.record_expiry_days <= 3650 && floor(var.record_expiry_days) == var.record_expiry_days
    error_message = "record_expiry_days must be a whole number from 1 to 3650."
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

# --- passed to terraform/modules/node (same rules as syndeo/launcher/config.py) ---

variable "cpus_per_node" {
  type        = number
  default     = 1
  description = "CPUs Ray may use per node (SYNDEO_CPUS)."
  validation {
    condition     = var.cpus_per_node >= 1 && var.cpus_per_node <= 1024 && floor(var.cpus_per_node) == var.cpus_per_node
    error_message = "cpus_per_node must be a whole number from 1 to 1024."
  }
  nullable = false
}

variable "gpus_per_node" {
  type        = number
  default     = 0
  description = "GPUs Ray may use per node (SYNDEO_GPUS); pick a GPU instance type."
  validation {
    condition     = var.gpus_per_node >= 0 && var.gpus_per_node <= 64 && floor(var.gpus_per_node) == var.gpus_per_node
    error_message = "gpus_per_node must be a whole number from 0 to 64."
  }
  nullable = false
}

variable "memory_mb_per_node" {
  type        = number
  default     = null
  description = "Memory Ray may use per node, MB; null = Ray's own estimate."
  validation {
    condition     = var.memory_mb_per_node == null || try(var.memory_mb_per_node >= 256, false)
    error_message = "memory_mb_per_node must be >= 256 (or null)."
  }
}

variable "object_store_mb_per_node" {
  type        = number
  default     = null
  description = "Ray object store per node, MB; null = Ray's default."
  validation {
    condition     = var.object_store_mb_per_node == null || try(var.object_store_mb_per_node >= 80, false)
    error_message = "object_store_mb_per_node must be >= 80 (or null)."
  }
}

variable "join_timeout_s" {
  type        = number
  default     = 300
  description = "Seconds a node waits for the cluster to form before it gives up."
  validation {
    condition     = var.join_timeout_s > 0 && var.join_timeout_s <= 86400
    error_message = "join_timeout_s must be > 0 and <= 86400."
  }
  nullable = false
}

variable "run" {
  type        = string
  default     = ""
  description = "Workload command rank 0 runs once the cluster has formed; empty = serve until destroyed."
  validation {
    condition     = !strcontains(var.run, "\n") && !strcontains(var.run, "\r")
    error_message = "run must be a single line."
  }
  nullable = false
}

variable "not_before" {
  type        = number
  default     = null
  description = "Epoch seconds; records older than this are ignored (a reused prefix cannot mislead the nodes)."
  validation {
    condition     = var.not_before == null || try(var.not_before >= 0, false)
    error_message = "not_before must be epoch seconds >= 0 (or null)."
  }
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

variable "image_digest" {
  type        = string
  default     = null
  description = "sha256 digest of the SIF, recorded in results (SYNDEO_IMAGE_DIGEST); null = not recorded."
  validation {
    condition     = var.image_digest == null || can(regex("^(sha256:)?[0-9a-f]{64}$", var.image_digest))
    error_message = "image_digest must be a sha256 hex digest (optionally prefixed sha256:)."
  }
}

variable "extra_env" {
  type        = map(string)
  default     = {}
  description = "Extra entries of every node's /etc/syndeo/node.env (e.g. an emulator endpoint)."
  # A node setting (SYNDEO_RANK, SYNDEO_RUN, ...) is refused by modules/node, which gets
  # this map and keeps the one list of them; other SYNDEO_* names pass (SYNDEO_TLS, a
  # backend's endpoint).
  validation {
    condition     = alltrue([for k, v in var.extra_env : can(regex("^[A-Z_][A-Z0-9_]*$", k)) && !strcontains(v, "\n")])
    error_message = "extra_env: names ^[A-Z_][A-Z0-9_]*$, single-line values."
  }
  nullable = false
}

variable "groups" {
  type = list(object({
    name          = string
    nodes         = number
    cpus          = number
    gpus          = number
    memory_mb     = optional(number)
    min_nodes     = optional(number)
    instance_type = optional(string)
  }))
  default     = []
  description = "Node groups in rank order (syndeo/core/groups.py): rank 0, the head, is the first rank of the first group; a group's nodes get its CPUs/GPUs/memory (null memory_mb: memory_mb_per_node), the Ray label syndeo-group and its instance_type (null: instance_type); min_nodes (null: all) is how many the head waits for. Empty: every node is instance_type, shaped by cpus_per_node etc. GPUs come with the VM size (Standard_NC4as_T4_v3: 1 NVIDIA T4); extensions are off, so the image must carry the NVIDIA driver."
  validation {
    condition     = alltrue([for g in var.groups : can(regex("^[a-z][a-z0-9-]{0,30}$", g.name))])
    error_message = "groups: names are 1-31 of a-z, 0-9 and '-', starting with a letter."
  }
  validation {
    condition     = length(distinct([for g in var.groups : g.name])) == length(var.groups)
    error_message = "groups: a name is used twice."
  }
  validation {
    condition = alltrue([for g in var.groups : g.nodes >= 0 && floor(g.nodes) == g.nodes
      && g.cpus >= 1 && g.cpus <= 1024 && floor(g.cpus) == g.cpus
      && g.gpus >= 0 && g.gpus <= 64 && floor(g.gpus) == g.gpus
      && (g.memory_mb == null || try(g.memory_mb >= 256 && floor(g.memory_mb) == g.memory_mb, false))
    && (g.min_nodes == null || try(g.min_nodes >= 0 && g.min_nodes <= g.nodes && floor(g.min_nodes) == g.min_nodes, false))])
    error_message = "groups: nodes >= 0, cpus 1-1024, gpus 0-64, memory_mb null or >= 256, min_nodes null or 0..nodes (whole numbers)."
  }
  validation {
    condition     = length(var.groups) == 0 || try(var.groups[0].nodes >= 1 && sum([for g in var.groups : g.nodes]) == var.node_count, false)
    error_message = "groups: the first group holds the head (nodes >= 1) and the groups' nodes add up to node_count."
  }
  # The same pattern as instance_type's (the cloud's own format).
  validation {
    condition     = alltrue([for g in var.groups : g.instance_type == null || can(regex("^Standard_[A-Za-z0-9_-]+$", g.instance_type))])
    error_message = "groups: an instance_type must look like Standard_D8s_v5 (or be null: instance_type)."
  }
  nullable = false
}

variable "dashboard" {
  type        = bool
  default     = false
  description = "Run Ray's dashboard on the head, bound to 127.0.0.1 there (reach it through the admin path: port forwarding over SSM/IAP/Bastion)."
  nullable    = false
}

variable "grown" {
  type = list(object({
    rank  = number
    group = string
  }))
  default     = []
  description = "Nodes `grow` added to the running cluster: each a rank past node_count (never reused) and one of the groups. Each gets a VM of its own, keyed by rank, of its group's instance_type (null: instance_type); adding or removing an entry creates or destroys only that VM."
  validation {
    condition     = alltrue([for g in var.grown : g.rank >= var.node_count && floor(g.rank) == g.rank && contains([for x in var.groups : x.name], g.group)])
    error_message = "grown: each rank a whole number >= node_count, in one of the groups."
  }
  validation {
    condition     = length(distinct([for g in var.grown : g.rank])) == length(var.grown)
    error_message = "grown: a rank is used twice."
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
