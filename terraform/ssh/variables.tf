# The node settings as one object (node, passed on to ../modules/node, which declares
# and validates them once), this launch's key, and the machines: the hosts and how to
# reach them, and the image to upload.

variable "node" {
  type        = any
  sensitive   = true
  description = "The node settings, one object passed on to ../modules/node, which types, defaults and validates it (its README lists the attributes: cluster_id, node_count and rendezvous are required here). Each grown entry also names its host and host_key. Sensitive: node.extra_env may carry the launcher's store credentials (hosts have no instance identity)."
  validation {
    condition     = nonsensitive(var.node.node_count) == length(var.hosts)
    error_message = "node_count: must equal the number of hosts."
  }
  validation {
    condition     = (var.image == null) == (try(nonsensitive(var.node.image_digest), null) == null)
    error_message = "image_digest: set exactly when image is set."
  }
  validation {
    condition = alltrue([for g in try(nonsensitive(var.node.grown), []) :
    can(regex("^[A-Za-z0-9][A-Za-z0-9.-]*$", g.host)) && can(regex("^(ssh|ecdsa)-[A-Za-z0-9-]+ [A-Za-z0-9+/=]+$", g.host_key))])
    error_message = "grown: each host a host name or IPv4 address, each host_key \"<type> <base64>\" as in known_hosts."
  }
  validation {
    condition     = length(distinct(concat(var.hosts, [for g in try(nonsensitive(var.node.grown), []) : g.host]))) == length(var.hosts) + length(try(nonsensitive(var.node.grown), []))
    error_message = "grown: one node per host; a host already in use cannot take another node."
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

variable "image" {
  description = "Local path of the Apptainer image (SIF) to run every node in, uploaded where node.image_digest differs; null: run bare with node.python on the hosts."
  type        = string
  default     = null
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
