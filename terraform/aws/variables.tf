# Inputs.  The shared ones (everything above "AWS only") have the same names, types
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
  description = "EC2 instance type of every node, e.g. c7i.2xlarge."
  validation {
    condition     = can(regex("^[a-z0-9-]+\\.[a-z0-9-]+$", var.instance_type))
    error_message = "instance_type must look like c7i.2xlarge."
  }
}

variable "image" {
  type        = string
  description = "AMI id of the Syndeo image baked by packer/cloud (ami-...). No default: the image is yours."
  validation {
    condition     = can(regex("^ami-[0-9a-f]{8,17}$", var.image))
    error_message = "image must be an AMI id (ami-0123456789abcdef0) built from packer/cloud."
  }
}

variable "region" {
  type        = string
  description = "AWS region, e.g. us-east-1."
  validation {
    condition     = can(regex("^[a-z]{2}(-[a-z]+)+-[0-9]+$", var.region))
    error_message = "region must be an AWS region name such as us-east-1."
  }
}

variable "zone" {
  type        = string
  default     = null
  description = "Availability zone of the subnet (e.g. us-east-1a); null: the first zone by name that offers every instance type of the cluster. Kept once the subnet exists (changing it later moves nothing)."
  validation {
    condition     = var.zone == null || can(regex("^[a-z]{2}(-[a-z]+)+-[0-9]+[a-z]$", var.zone))
    error_message = "zone must be an availability zone such as us-east-1a (or null)."
  }
}

variable "spot" {
  type        = bool
  default     = false
  description = "Run the nodes as one-time Spot Instances (terminated on interruption)."
  nullable    = false
}

variable "disk_size_gb" {
  type        = number
  default     = 30
  description = "Root volume per node, GiB: at least the baked image's 30 (packer/cloud disk_size_gb; Azure refuses an OS disk smaller than its image, and so do EC2 and GCE)."
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
  description = "Objects under <rendezvous_prefix>/ of a created bucket expire after this many days."
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
  description = "Private ranges (VPN, peered network, bastion) allowed to SSH (tcp/22) to the nodes. Default none: use SSM Session Manager."
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
  description = "Node groups in rank order (syndeo/core/groups.py): rank 0, the head, is the first rank of the first group; a group's nodes get its CPUs/GPUs/memory (null memory_mb: memory_mb_per_node), the Ray label syndeo-group and its instance_type (null: instance_type); min_nodes (null: all) is how many the head waits for. Empty: every node is instance_type, shaped by cpus_per_node etc. GPUs come with the instance type (g5.xlarge: 1 NVIDIA A10G); the image must carry the NVIDIA driver."
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
    condition     = alltrue([for g in var.groups : g.instance_type == null || can(regex("^[a-z0-9-]+\\.[a-z0-9-]+$", g.instance_type))])
    error_message = "groups: an instance_type must look like c7i.2xlarge (or be null: instance_type)."
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

# --- AWS only ---

variable "permissions_boundary" {
  type        = string
  default     = null
  description = "ARN of the managed policy set as the nodes' role's permissions boundary (deployer-policy.json lets a deployer create roles only with arn:aws:iam::<account>:policy/syndeo-node-boundary, made once from node-boundary-policy.json). null: no boundary (needs IAM rights beyond the deployer policy)."
  validation {
    condition     = var.permissions_boundary == null || can(regex("^arn:aws[a-z-]*:iam::[0-9]{12}:policy/[A-Za-z0-9+=,.@_/-]+$", var.permissions_boundary))
    error_message = "permissions_boundary: the ARN of a managed IAM policy (arn:aws:iam::<account>:policy/<name>)."
  }
}

variable "ssm_endpoints" {
  type        = bool
  default     = false
  description = "Create the VPC interface endpoints (ssm, ssmmessages, ec2messages) and grant the nodes AmazonSSMManagedInstanceCore, for SSM Session Manager without internet egress (about 22 USD/month; the image needs the SSM agent)."
  nullable    = false
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
