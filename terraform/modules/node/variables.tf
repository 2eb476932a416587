# The same rules as syndeo/launcher/config.py and syndeo/core/nodeconfig.py (tests/iac/test_node_module.py
# checks that both sides accept and refuse the same values).

variable "cluster_id" {
  description = "Cluster id: 1-40 of a-z, 0-9 and '-', starting with a letter or digit. Scopes every rendezvous record."
  type        = string
  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9-]{0,39}$", var.cluster_id))
    error_message = "cluster_id: use 1-40 of a-z, 0-9 and '-', starting with a letter or digit."
  }
}

variable "node_count" {
  description = "Number of nodes; rank 0 is the Ray head."
  type        = number
  validation {
    condition     = var.node_count >= 1 && var.node_count <= 4096 && floor(var.node_count) == var.node_count
    error_message = "node_count: a whole number from 1 to 4096."
  }
}

variable "rendezvous" {
  description = "Where nodes meet: file:///shared/dir, s3://bucket/prefix, gs://bucket/prefix or az://container/prefix."
  type        = string
  validation {
    condition     = can(regex("^(file|s3|gs|az)://[^\\r\\n]+$", var.rendezvous))
    error_message = "rendezvous: use file:///dir, s3://bucket/prefix, gs://bucket/prefix or az://container/prefix (one line)."
  }
}

variable "target" {
  description = "Name of the target that starts these nodes (recorded in results)."
  type        = string
  validation {
    condition     = contains(["local", "slurm", "ssh", "aws", "gcp", "azure"], var.target)
    error_message = "target: one of local, slurm, ssh, aws, gcp, azure."
  }
}

variable "cpus_per_node" {
  description = "CPUs each node offers to Ray (--num-cpus)."
  type        = number
  default     = 1
  validation {
    condition     = var.cpus_per_node >= 1 && var.cpus_per_node <= 1024 && floor(var.cpus_per_node) == var.cpus_per_node
    error_message = "cpus_per_node: a whole number from 1 to 1024."
  }
}

variable "gpus_per_node" {
  description = "GPUs each node offers to Ray (--num-gpus)."
  type        = number
  default     = 0
  validation {
    condition     = var.gpus_per_node >= 0 && var.gpus_per_node <= 64 && floor(var.gpus_per_node) == var.gpus_per_node
    error_message = "gpus_per_node: a whole number from 0 to 64."
  }
}

variable "memory_mb_per_node" {
  description = "Memory each node offers to Ray, MiB (null: Ray's own estimate)."
  type        = number
  default     = null
  validation {
    condition     = var.memory_mb_per_node == null || try(var.memory_mb_per_node >= 256 && floor(var.memory_mb_per_node) == var.memory_mb_per_node, false)
    error_message = "memory_mb_per_node: null or a whole number >= 256."
  }
}

variable "groups" {
  description = "Node groups in rank order (syndeo/core/groups.py): rank 0, the head, is the first rank of the first group; each group's nodes get its own CPUs/GPUs/memory (null memory_mb: memory_mb_per_node) and the Ray label syndeo-group; min_nodes (null: all) is how many the head waits for. Empty: one group-less cluster shaped by cpus_per_node etc."
  type = list(object({
    name      = string
    nodes     = number
    cpus      = number
    gpus      = number
    memory_mb = optional(number)
    min_nodes = optional(number)
  }))
  default = []
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
}

variable "grown" {
  description = "Nodes added to the running cluster by `grow`: each a rank past node_count (never reused), its group and optionally its --node-ip-address. Rendered like the cluster's own ranks (output grown); the cluster's own renderings do not change."
  type = list(object({
    rank    = number
    group   = string
    node_ip = optional(string)
  }))
  default = []
  validation {
    condition     = alltrue([for g in var.grown : g.rank >= var.node_count && floor(g.rank) == g.rank && contains([for x in var.groups : x.name], g.group)])
    error_message = "grown: each rank a whole number >= node_count, in one of the groups."
  }
  validation {
    condition     = length(distinct([for g in var.grown : g.rank])) == length(var.grown)
    error_message = "grown: a rank is used twice."
  }
  validation {
    condition     = alltrue([for g in var.grown : g.node_ip == null || can(cidrhost("${coalesce(g.node_ip, "x")}/32", 0))])
    error_message = "grown: node_ip null or an IPv4 address."
  }
}

variable "dashboard" {
  description = "Run Ray's dashboard on the head (bound to 127.0.0.1; reach it through an SSH tunnel)."
  type        = bool
  default     = false
}

variable "object_store_mb_per_node" {
  description = "Ray object store per node, MiB (null: Ray's default)."
  type        = number
  default     = null
  validation {
    condition     = var.object_store_mb_per_node == null || try(var.object_store_mb_per_node >= 80 && floor(var.object_store_mb_per_node) == var.object_store_mb_per_node, false)
    error_message = "object_store_mb_per_node: null or a whole number >= 80."
  }
}

variable "join_timeout_s" {
  description = "Deadline for all nodes to join, seconds (the head fails naming the missing ranks)."
  type        = number
  default     = 300
  validation {
    condition     = var.join_timeout_s > 0 && var.join_timeout_s <= 86400
    error_message = "join_timeout_s: more than 0 and at most 86400."
  }
}

variable "run" {
  description = "The workload command rank 0 runs once all nodes joined (\"\" = serve until stopped)."
  type        = string
  default     = ""
  validation {
    condition     = !can(regex("[\\r\\n]", var.run))
    error_message = "run: one line; newlines are not allowed."
  }
}

variable "workdir" {
  description = "Working directory of the workload on the head (null: the node's default)."
  type        = string
  default     = null
  validation {
    condition     = var.workdir == null || can(regex("^/[^\\r\\n]*$", var.workdir))
    error_message = "workdir: null or an absolute path on one line."
  }
}

variable "not_before" {
  description = "Launch time, epoch seconds: workers ignore head records older than this (stale clusters)."
  type        = number
  default     = null
}

variable "scratch_dir" {
  description = "Per-node scratch base (Ray's temp dir, the token); a node uses <scratch_dir>/<rank>. Null: /var/tmp/sy-<hash of cluster>. Kept short: Ray's Unix socket paths must fit in 107 bytes."
  type        = string
  default     = null
  validation {
    condition     = var.scratch_dir == null || try(can(regex("^/[A-Za-z0-9._/-]+$", var.scratch_dir)) && length(var.scratch_dir) <= 35, false)
    error_message = "scratch_dir: null or an absolute path of at most 35 characters (letters, digits, . _ - /)."
  }
}

variable "node_ips" {
  description = "Per-rank address Ray should bind (--node-ip-address); empty: Ray detects it. Needed on multi-homed hosts and hosts without a default route."
  type        = list(string)
  default     = []
  validation {
    condition     = length(var.node_ips) == 0 || length(var.node_ips) == var.node_count
    error_message = "node_ips: empty, or one address per node (node_count)."
  }
  validation {
    condition     = alltrue([for ip in var.node_ips : can(cidrhost("${ip}/32", 0))])
    error_message = "node_ips: IPv4 addresses only."
  }
}

variable "image_path" {
  description = "Path of the Apptainer image (SIF) on each machine (relative: to the node user's home); null: run bare with var.python."
  type        = string
  default     = "/opt/syndeo/syndeo.sif"
  validation {
    condition     = var.image_path == null || can(regex("^[A-Za-z0-9._/+-]+$", var.image_path))
    error_message = "image_path: null or a path (letters, digits, . _ - + /)."
  }
}

variable "image_digest" {
  description = "sha256 of the image (recorded in every result manifest); null if unknown."
  type        = string
  default     = null
  validation {
    condition     = var.image_digest == null || can(regex("^(sha256:)?[0-9a-f]{64}$", var.image_digest))
    error_message = "image_digest: null or a sha256: 64 lowercase hex digits, optionally prefixed sha256:."
  }
}

variable "spot_notices" {
  description = "The cloud (aws, gcp, azure) whose spot/preemption notice each node watches (it drains itself in Ray and records the interruption); null: not spot VMs."
  type        = string
  default     = null
  validation {
    condition     = var.spot_notices == null || contains(["aws", "gcp", "azure"], coalesce(var.spot_notices, "-"))
    error_message = "spot_notices: null, aws, gcp or azure."
  }
}

variable "python" {
  description = "Interpreter with syndeo installed, used when image_path is null (bare nodes)."
  type        = string
  default     = "python3"
  validation {
    condition     = can(regex("^[A-Za-z0-9._/+-]+$", var.python))
    error_message = "python: a command name or path (letters, digits, . _ - + /)."
  }
}

variable "launch_key" {
  description = "This launch's key (syndeo/core/launchkey.py): the head signs its rendezvous record with it and workers join only a head whose record verifies. 64 hex digits, made by the launcher per launch; null: nodes trust any head record of their cluster id."
  type        = string
  default     = null
  sensitive   = true
  validation {
    condition     = var.launch_key == null || can(regex("^[0-9a-f]{64}$", var.launch_key))
    error_message = "launch_key: null or 64 lower-case hex digits."
  }
}

variable "extra_env" {
  description = "More variables for every node, e.g. an object-store emulator endpoint. Credentials belong in the instance identity, not here."
  type        = map(string)
  default     = {}
  validation {
    condition     = alltrue([for k in keys(var.extra_env) : can(regex("^[A-Z_][A-Z0-9_]*$", k))])
    error_message = "extra_env: names are upper-case shell names ([A-Z_][A-Z0-9_]*)."
  }
  validation {
    # What this module sets itself (tests/iac/test_node_module.py keeps the list equal
    # to syndeo/core/nodeconfig.py's fields); other SYNDEO_* names, such as a backend's
    # SYNDEO_AZURE_ACCOUNT_URL or SYNDEO_S3_ENDPOINT_URL, may pass through.
    condition = length(setintersection(keys(var.extra_env), [
      "SYNDEO_CLUSTER_ID", "SYNDEO_RANK", "SYNDEO_NODES", "SYNDEO_RENDEZVOUS", "SYNDEO_SCRATCH", "SYNDEO_SCRATCH_BASE",
      "SYNDEO_CPUS", "SYNDEO_GPUS", "SYNDEO_MEMORY_MB", "SYNDEO_OBJECT_STORE_MB", "SYNDEO_NODE_IP",
      "SYNDEO_ATTEMPT", "SYNDEO_JOIN_TIMEOUT", "SYNDEO_RUN", "SYNDEO_WORKDIR", "SYNDEO_TARGET",
      "SYNDEO_NOT_BEFORE", "SYNDEO_IMAGE_DIGEST", "SYNDEO_DASHBOARD", "SYNDEO_GROUP", "SYNDEO_GROUPS",
      "SYNDEO_SPOT_NOTICES", "SYNDEO_METADATA_URL", "SYNDEO_LAUNCH_KEY",
      "SYNDEO_IMAGE", "SYNDEO_PYTHON", "SYNDEO_FORWARD_ENV",
    ])) == 0
    error_message = "extra_env: may not set a node setting (SYNDEO_RANK, SYNDEO_RUN, …): those come from the other variables."
  }
  validation {
    condition     = alltrue([for v in values(var.extra_env) : !can(regex("[\\r\\n]", v))])
    error_message = "extra_env: values must be one line; newlines are not allowed."
  }
}

variable "env_file_path" {
  description = "Where cloud-init writes the node environment (the packer/cloud image's unit reads it from here)."
  type        = string
  default     = "/etc/syndeo/node.env"
  validation {
    condition     = can(regex("^/[A-Za-z0-9._/-]+$", var.env_file_path))
    error_message = "env_file_path: an absolute path (letters, digits, . _ - /)."
  }
}

variable "service_name" {
  description = "The systemd unit the image bakes (packer/cloud/files/syndeo-node.service)."
  type        = string
  default     = "syndeo-node"
  validation {
    condition     = can(regex("^[A-Za-z0-9@._-]+$", var.service_name))
    error_message = "service_name: a systemd unit name."
  }
}

variable "host_dir" {
  description = "Hosts without cloud-init (the ssh target): base dir of the per-node files, expanded by the host's shell (default under the login's home)."
  type        = string
  default     = "$HOME/.syndeo"
  validation {
    condition     = can(regex("^(\\$HOME|/)[A-Za-z0-9._/-]*$", var.host_dir))
    error_message = "host_dir: an absolute path, or one starting with $HOME (letters, digits, . _ - /)."
  }
}

variable "stop_grace_s" {
  description = "On stop, how long a node may take to tear Ray down after TERM before it is killed."
  type        = number
  default     = 60
  validation {
    condition     = var.stop_grace_s >= 1 && var.stop_grace_s <= 600
    error_message = "stop_grace_s: from 1 to 600 seconds."
  }
}
