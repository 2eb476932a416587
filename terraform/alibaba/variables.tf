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
  description = "ECS instance type of every node, e.g. ecs.g7.2xlarge."
  validation {
    condition     = can(regex("^ecs\\.[a-z0-9]+(-[a-z0-9]+)*\\.[a-z0-9]+(-[a-z0-9]+)*$", var.instance_type))
    error_message = "instance_type must be an ECS instance type such as ecs.g7.2xlarge."
  }
}

variable "group_instance_types" {
  type        = map(string)
  default     = {}
  description = "A node group's own instance type, by group name (node.groups); a group not named here, and every node without groups, gets instance_type. GPUs come with GPU instance families (ecs.gn7i-*, ecs.gn8is-*, ...); the image must carry the NVIDIA driver."
  validation {
    condition     = alltrue([for t in values(var.group_instance_types) : can(regex("^ecs\\.[a-z0-9]+(-[a-z0-9]+)*\\.[a-z0-9]+(-[a-z0-9]+)*$", t))])
    error_message = "group_instance_types: each must look like ecs.g7.2xlarge."
  }
  validation {
    condition     = alltrue([for k in keys(var.group_instance_types) : contains([for g in try(var.node.groups, []) : g.name], k)])
    error_message = "group_instance_types: each key must be the name of one of node.groups."
  }
  nullable = false
}

variable "image" {
  type        = string
  description = "Id of the custom image baked by packer/cloud (m-...), in the cluster's region. No default: the image is yours."
  validation {
    condition     = can(regex("^m-[a-z0-9]{8,30}$", var.image))
    error_message = "image must be an ECS custom image id (m-bp1...) built from packer/cloud."
  }
}

variable "region" {
  type        = string
  description = "Alibaba Cloud region id, e.g. cn-hangzhou or eu-central-1."
  validation {
    condition     = can(regex("^[a-z]{2}-[a-z]+(-[0-9]+)?$", var.region))
    error_message = "region must be an Alibaba Cloud region id such as cn-hangzhou or ap-southeast-1."
  }
}

variable "zone" {
  type        = string
  default     = null
  description = "Zone of the vSwitch (e.g. cn-hangzhou-h, ap-southeast-1a); null: the first zone by id that offers every instance type of the cluster (spot or on-demand, as asked). Kept once the vSwitch exists (changing it later moves nothing)."
  validation {
    condition     = var.zone == null || can(regex("^[a-z]{2}-[a-z]+(-[0-9]+[a-z]|-[a-z])$", var.zone))
    error_message = "zone must be a zone id such as cn-hangzhou-h or ap-southeast-1a (or null)."
  }
}

variable "spot" {
  type        = bool
  default     = false
  description = "Run the nodes as preemptible (spot) instances, SpotAsPriceGo: released when reclaimed, after the metadata service's termination-time notice."
  nullable    = false
}

variable "disk_size_gb" {
  type        = number
  default     = 30
  description = "Boot disk per node, GiB: at least the baked image's 30 (packer/cloud disk_size_gb; Azure refuses an OS disk smaller than its image, and so do EC2 and GCE)."
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
  description = "Rendezvous bucket to create (create_bucket = true) or to use."
  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$", var.bucket_name))
    error_message = "bucket_name: 3-63 of a-z, 0-9 and '-', starting and ending with a letter or digit."
  }
}

variable "bucket_versioning" {
  type        = bool
  default     = false
  description = "Keep object versions in a bucket this module creates (records are short-lived; off by default)."
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
  description = "Extra labels on every resource that takes labels (the same rules on every cloud, so one map works everywhere)."
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
  description = "Private ranges (VPN, peered VPC, bastion) allowed to SSH (tcp/22) to the nodes. Default none (Cloud Assistant needs no inbound rule)."
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

# --- Alibaba Cloud only ---

variable "disk_category" {
  type        = string
  default     = "cloud_essd"
  description = "System disk category of every node: cloud_essd (default), cloud_auto, cloud_essd_entry or cloud_efficiency; the instance family must take it (a few older families only take cloud_efficiency or cloud_ssd)."
  validation {
    condition     = contains(["cloud_essd", "cloud_auto", "cloud_essd_entry", "cloud_efficiency", "cloud_ssd"], var.disk_category)
    error_message = "disk_category must be cloud_essd, cloud_auto, cloud_essd_entry, cloud_efficiency or cloud_ssd."
  }
  nullable = false
}

variable "node_role" {
  type        = string
  default     = null
  description = "Name of an existing RAM role for the nodes (trusted by ecs.aliyuncs.com, granted OSS access to the rendezvous prefix by an admin: deployer-policy.json lets a deployer pass that one role and create none). null: create a role and its prefix-scoped policy per cluster (needs ram:CreateRole, CreatePolicy and AttachPolicyToRole beyond the deployer policy)."
  validation {
    condition     = var.node_role == null || can(regex("^[A-Za-z0-9][A-Za-z0-9.-]{0,63}$", coalesce(var.node_role, "-")))
    error_message = "node_role: a RAM role name (1-64 of letters, digits, '.' and '-')."
  }
}
