# Names shared with terraform/aws|gcp|azure where the concept is the same
# (cluster_name, node_count, rendezvous, image, the node pass-through settings).

variable "cluster_name" {
  description = "Cluster id: 1-40 of a-z, 0-9 and '-', starting with a letter or digit."
  type        = string
  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9-]{0,39}$", var.cluster_name))
    error_message = "cluster_name: use 1-40 of a-z, 0-9 and '-', starting with a letter or digit."
  }
}

variable "hosts" {
  description = "Machines to run the nodes on, one node each, in rank order (the first is the Ray head): names or IPv4 addresses reachable over SSH."
  type        = list(string)
  validation {
    condition     = length(var.hosts) >= 1 && length(distinct(var.hosts)) == length(var.hosts)
    error_message = "hosts: at least one host, no host twice."
  }
  validation {
    condition     = alltrue([for h in var.hosts : can(regex("^[A-Za-z0-9][A-Za-z0-9.-]*$", h))])
    error_message = "hosts: host names or IPv4 addresses (letters, digits, '.', '-')."
  }
}

variable "node_count" {
  description = "Number of nodes; must equal the number of hosts."
  type        = number
  validation {
    condition     = var.node_count == length(var.hosts)
    error_message = "node_count: must equal the number of hosts."
  }
}

variable "host_keys" {
  description = "Per host (same order), its SSH host public key (\"ssh-ed25519 AAAA…\"), so that every connection verifies the host."
  type        = list(string)
  validation {
    condition     = length(var.host_keys) == length(var.hosts)
    error_message = "host_keys: one host key per host."
  }
  validation {
    condition     = alltrue([for k in var.host_keys : can(regex("^(ssh|ecdsa)-[A-Za-z0-9-]+ [A-Za-z0-9+/=]+$", k))])
    error_message = "host_keys: each \"<type> <base64>\" as in known_hosts."
  }
}

variable "known_hosts_file" {
  description = "A known_hosts file holding the same host keys (the image upload uses the ssh client)."
  type        = string
}

variable "ssh_user" {
  description = "Login on every host; an unprivileged user (nodes run as this user)."
  type        = string
  validation {
    condition     = can(regex("^[a-z_][a-z0-9_-]*$", var.ssh_user)) && var.ssh_user != "root"
    error_message = "ssh_user: a user name, and not root (nodes run unprivileged)."
  }
}

variable "ssh_private_key_file" {
  description = "Private key file for the login; null: use the ssh agent (SSH_AUTH_SOCK)."
  type        = string
  default     = null
}

variable "ssh_port" {
  description = "SSH port of every host."
  type        = number
  default     = 22
  validation {
    condition     = var.ssh_port >= 1 && var.ssh_port <= 65535
    error_message = "ssh_port: 1 to 65535."
  }
}

variable "connect_timeout" {
  description = "How long to keep trying to reach a host before failing (Terraform duration)."
  type        = string
  default     = "60s"
  validation {
    condition     = can(regex("^[0-9]+[sm]$", var.connect_timeout))
    error_message = "connect_timeout: a duration like 30s or 2m."
  }
}

variable "rendezvous" {
  description = "Where nodes meet: file:///dir every host sees, or s3://, gs://, az://."
  type        = string
}

variable "image" {
  description = "Local path of the Apptainer image (SIF) to run every node in; null: run bare with var.python on the hosts."
  type        = string
  default     = null
}

variable "image_digest" {
  description = "sha256 of the image; the host copy is uploaded only when its digest differs."
  type        = string
  default     = null
  validation {
    condition     = var.image_digest == null || can(regex("^(sha256:)?[0-9a-f]{64}$", var.image_digest))
    error_message = "image_digest: 64 lowercase hex digits, optionally prefixed sha256:."
  }
  validation {
    condition     = (var.image == null) == (var.image_digest == null)
    error_message = "image_digest: set exactly when image is set."
  }
}

variable "remote_image_dir" {
  description = "Directory on the hosts for uploaded images (relative: to the login's home); one copy per digest."
  type        = string
  default     = ".syndeo/images"
  validation {
    condition     = can(regex("^[A-Za-z0-9._/-]+$", var.remote_image_dir))
    error_message = "remote_image_dir: a path (letters, digits, . _ - /)."
  }
}

variable "host_dir" {
  description = "Base dir of the per-node files on the hosts (environment, log, pid)."
  type        = string
  default     = "$HOME/.syndeo"
}

variable "python" {
  description = "Interpreter with syndeo installed on the hosts, for bare nodes (image = null)."
  type        = string
  default     = "python3"
}

# ---- node settings, passed through to ../modules/node (validated there)
variable "cpus_per_node" {
  description = "CPUs each node offers to Ray."
  type        = number
  default     = 1
}

variable "gpus_per_node" {
  description = "GPUs each node offers to Ray."
  type        = number
  default     = 0
}

variable "memory_mb_per_node" {
  description = "Memory each node offers to Ray, MiB (null: Ray's estimate)."
  type        = number
  default     = null
}

variable "object_store_mb_per_node" {
  description = "Object store per node, MiB (null: Ray's default)."
  type        = number
  default     = null
}

variable "groups" {
  description = "Node groups in rank order (hosts are listed group by group): per group its node count, CPUs, GPUs, memory (null: memory_mb_per_node) and min_nodes the head waits for (null: all). Empty: no groups. Validated in ../modules/node."
  type = list(object({
    name      = string
    nodes     = number
    cpus      = number
    gpus      = number
    memory_mb = optional(number)
    min_nodes = optional(number)
  }))
  default = []
}

variable "grown" {
  description = "Nodes `grow` added to the running cluster: rank (past node_count, never reused), group, host, its SSH host key and optionally the address Ray binds. Removing an entry stops that node."
  type = list(object({
    rank     = number
    group    = string
    host     = string
    host_key = string
    node_ip  = optional(string)
  }))
  default = []
  validation {
    condition     = length(distinct(concat(var.hosts, [for g in var.grown : g.host]))) == length(var.hosts) + length(var.grown)
    error_message = "grown: one node per host; a host already in use cannot take another node."
  }
  validation {
    condition     = alltrue([for g in var.grown : can(regex("^[A-Za-z0-9][A-Za-z0-9.-]*$", g.host)) && can(regex("^(ssh|ecdsa)-[A-Za-z0-9-]+ [A-Za-z0-9+/=]+$", g.host_key))])
    error_message = "grown: each host a host name or IPv4 address, each host_key \"<type> <base64>\" as in known_hosts."
  }
}

variable "dashboard" {
  description = "Ray's dashboard on the head (bound to 127.0.0.1 there: reach it with ssh -L)."
  type        = bool
  default     = false
}

variable "join_timeout_s" {
  description = "Deadline for all nodes to join, seconds."
  type        = number
  default     = 300
}

variable "run" {
  description = "Workload command of the head (\"\" = serve until stopped)."
  type        = string
  default     = ""
}

variable "workdir" {
  description = "Working directory of the workload on the head host (null: its default)."
  type        = string
  default     = null
}

variable "not_before" {
  description = "Launch time, epoch seconds (workers ignore older head records)."
  type        = number
  default     = null
}

variable "scratch_dir" {
  description = "Per-node scratch base on the hosts (null: /var/tmp/sy-<hash>)."
  type        = string
  default     = null
}

variable "node_ips" {
  description = "Per host, the address Ray binds (empty: Ray detects it)."
  type        = list(string)
  default     = []
}

variable "extra_env" {
  description = "More variables for every node (object-store endpoints and, on hosts without an instance identity, credentials: written 0600)."
  type        = map(string)
  default     = {}
  sensitive   = true
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
