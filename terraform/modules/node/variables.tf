# The node settings, declared once: terraform/aws|gcp|azure and terraform/ssh take the
# same object (as `any`) and pass it on here, adding what only they know (rendezvous,
# target, image_path, spot_notices); this type gives every attribute its default and
# these validations check it, with the same rules as syndeo/launcher/config.py and
# syndeo/core/nodeconfig.py (tests/iac/test_node_module.py checks that both sides accept
# and refuse the same values).  scripts/tf_docs.py lists the attributes in README.md
# from the comment above each.

variable "node" {
  description = "The node settings: one object, its attributes below (README.md lists them). An attribute left out or null takes its default."
  nullable    = false
  type = object({
    # Cluster id: 1-40 of a-z, 0-9 and '-', starting with a letter or digit. Scopes every rendezvous record (and names the cloud resources).
    cluster_id = string
    # Number of nodes; rank 0 is the Ray head.
    node_count = number
    # Where nodes meet: file:///shared/dir, s3://bucket/prefix, gs://bucket/prefix, az://container/prefix or oss://bucket/prefix (the cloud modules set it from their bucket).
    rendezvous = string
    # Name of the target that starts these nodes, recorded in results (the cloud and ssh modules set it).
    target = string
    # CPUs each node offers to Ray (--num-cpus).
    cpus_per_node = optional(number, 1)
    # GPUs each node offers to Ray (--num-gpus); on a cloud, pick a GPU instance type.
    gpus_per_node = optional(number, 0)
    # Memory each node offers to Ray, MiB (null: Ray's own estimate).
    memory_mb_per_node = optional(number)
    # Node groups in rank order (syndeo/core/groups.py): rank 0, the head, is the first rank of the first group; each group's nodes get its own CPUs/GPUs/memory (null memory_mb: memory_mb_per_node) and the Ray label syndeo-group; min_nodes (null: all) is how many the head waits for. Empty: one group-less cluster shaped by cpus_per_node etc. (A cloud module's group_instance_types gives a group its own instance type.)
    groups = optional(list(object({
      name      = string
      nodes     = number
      cpus      = number
      gpus      = number
      memory_mb = optional(number)
      min_nodes = optional(number)
      # A group that follows demand (max_nodes): its least and most nodes (it has
      # nodes = 0 of its own; every node of it is added by `grow`). Null: a fixed size.
      autoscale = optional(object({ min = number, max = number }))
    })), [])
    # Nodes added to the running cluster by `grow`: each a rank past node_count (never reused), its group and optionally its --node-ip-address. Rendered like the cluster's own ranks (each gets a machine of its own, keyed by rank); the cluster's own renderings do not change. The ssh module also takes each one's host and host_key.
    grown = optional(list(object({
      rank    = number
      group   = string
      node_ip = optional(string)
    })), [])
    # Ray object store per node, MiB (null: Ray's default).
    object_store_mb_per_node = optional(number)
    # Deadline for all nodes to join, seconds (the head fails naming the missing ranks).
    join_timeout_s = optional(number, 300)
    # The workload command rank 0 runs once all nodes joined ("" = serve until stopped).
    run = optional(string, "")
    # Working directory of the workload on the head (null: the node's default).
    workdir = optional(string)
    # sha256 of the workload's work dir, packed by the launcher into the rendezvous (null: none): the head runs the workload in its unpacked copy, which Ray ships to every node as the job's working dir.
    workdir_digest = optional(string)
    # sha256 of the wheels the launcher resolved for the workload (--requirements) and put in the rendezvous (null: none): every node installs them before it starts Ray.
    wheelhouse_digest = optional(string)
    # Launch time, epoch seconds: workers ignore head records older than this (a reused prefix cannot mislead the nodes).
    not_before = optional(number)
    # Per-node scratch base (Ray's temp dir, the token); a node uses <scratch_dir>/<rank>. Null: /var/tmp/sy-<hash of cluster>. Kept short: Ray's Unix socket paths must fit in 107 bytes.
    scratch_dir = optional(string)
    # Per-rank address Ray should bind (--node-ip-address); empty: Ray detects it. Needed on multi-homed hosts and hosts without a default route.
    node_ips = optional(list(string), [])
    # Path of the Apptainer image (SIF) on each machine (relative: to the node user's home); null: run bare with python. The cloud modules set it (their image_path), the ssh module to its upload.
    image_path = optional(string)
    # sha256 of the image (recorded in every result manifest); null if unknown. The ssh module uploads the image when the host's copy has another.
    image_digest = optional(string)
    # The cloud (one of the cloud targets) whose spot/preemption notice each node watches (it drains itself in Ray and records the interruption); null: not spot VMs. The cloud modules set it from spot.
    spot_notices = optional(string)
    # Interpreter with syndeo installed, used when image_path is null (bare nodes).
    python = optional(string, "python3")
    # More variables for every node, e.g. an object-store emulator endpoint (they win over the calling module's target_env). Credentials belong in the instance identity where there is one.
    extra_env = optional(map(string), {})
    # Where cloud-init writes the node environment (the packer/cloud image's unit reads it from here).
    env_file_path = optional(string, "/etc/syndeo/node.env")
    # The systemd unit the image bakes (packer/cloud/files/syndeo-node.service).
    service_name = optional(string, "syndeo-node")
    # Hosts without cloud-init (the ssh target): base dir of the per-node files, expanded by the host's shell (default under the login's home).
    host_dir = optional(string, "$HOME/.syndeo")
    # On stop, how long a node may take to tear Ray down after TERM before it is killed.
    stop_grace_s = optional(number, 60)
    # BEGIN settings: generated by scripts/tf_generate.py from syndeo/core/nodeconfig.py and clouds.py
    # The settings every node shares, each set on every node as SYNDEO_<NAME> (null
    # and false: left out). Attributes:
    # dashboard (bool, default false): Ray's dashboard on the head's 127.0.0.1 (default: off for deploy, on for up).
    # idle_timeout_s (number, default null): a node above its group's min_nodes idle this long is released (default 5m).
    # autostop_s (number, default null): up: take the cluster down after it has been idle this long, e.g. 30m (default: never).
    # autostop_grace_s (number, default null): up, aws/gcp/azure: when the watcher is gone, the VMs power themselves off this long after autostop (default 10m).
    # autostop_wait_for (string, default null): up: what holds off autostop besides tasks, pending demand and starting nodes: drivers (a connected ray.init too; default), jobs (submitted jobs only) or none (autostop counts from the start).
    # gpu_vendor (string, default null): GPU vendor: nvidia (--nv, CUDA_VISIBLE_DEVICES) or amd (--rocm, ROCR_VISIBLE_DEVICES and HIP_VISIBLE_DEVICES); default nvidia.
    settings = optional(object({
      dashboard         = optional(bool, false)
      idle_timeout_s    = optional(number)
      autostop_s        = optional(number)
      autostop_grace_s  = optional(number)
      autostop_wait_for = optional(string)
      gpu_vendor        = optional(string)
    }), {})
    # END settings
  })

  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9-]{0,39}$", var.node.cluster_id))
    error_message = "cluster_id: use 1-40 of a-z, 0-9 and '-', starting with a letter or digit."
  }
  validation {
    condition     = var.node.node_count >= 1 && var.node.node_count <= 4096 && floor(var.node.node_count) == var.node.node_count
    error_message = "node_count: a whole number from 1 to 4096."
  }
  validation {
    condition     = can(regex("^(file|s3|gs|az|oss)://[^\\r\\n]+$", var.node.rendezvous))
    error_message = "rendezvous: use file:///dir, s3://bucket/prefix, gs://bucket/prefix, az://container/prefix or oss://bucket/prefix (one line)."
  }
  validation {
    condition     = var.node.cpus_per_node >= 1 && var.node.cpus_per_node <= 1024 && floor(var.node.cpus_per_node) == var.node.cpus_per_node
    error_message = "cpus_per_node: a whole number from 1 to 1024."
  }
  validation {
    condition     = var.node.gpus_per_node >= 0 && var.node.gpus_per_node <= 64 && floor(var.node.gpus_per_node) == var.node.gpus_per_node
    error_message = "gpus_per_node: a whole number from 0 to 64."
  }
  validation {
    condition     = var.node.memory_mb_per_node == null || try(var.node.memory_mb_per_node >= 256 && floor(var.node.memory_mb_per_node) == var.node.memory_mb_per_node, false)
    error_message = "memory_mb_per_node: null or a whole number >= 256."
  }
  validation {
    condition     = alltrue([for g in var.node.groups : can(regex("^[a-z][a-z0-9-]{0,30}$", g.name))])
    error_message = "groups: names are 1-31 of a-z, 0-9 and '-', starting with a letter."
  }
  validation {
    condition     = length(distinct([for g in var.node.groups : g.name])) == length(var.node.groups)
    error_message = "groups: a name is used twice."
  }
  validation {
    condition = alltrue([for g in var.node.groups : g.nodes >= 0 && floor(g.nodes) == g.nodes
      && g.cpus >= 1 && g.cpus <= 1024 && floor(g.cpus) == g.cpus
      && g.gpus >= 0 && g.gpus <= 64 && floor(g.gpus) == g.gpus
      && (g.memory_mb == null || try(g.memory_mb >= 256 && floor(g.memory_mb) == g.memory_mb, false))
    && (g.min_nodes == null || try(g.min_nodes >= 0 && g.min_nodes <= g.nodes && floor(g.min_nodes) == g.min_nodes, false))])
    error_message = "groups: nodes >= 0, cpus 1-1024, gpus 0-64, memory_mb null or >= 256, min_nodes null or 0..nodes (whole numbers)."
  }
  validation {
    condition = alltrue([for g in var.node.groups : g.autoscale == null || try(
    g.autoscale.min >= 0 && g.autoscale.min <= g.autoscale.max && g.autoscale.max <= 4096 && g.nodes == 0, false)])
    error_message = "groups: autoscale needs 0 <= min <= max <= 4096 and nodes = 0 (its nodes are all added by grow)."
  }
  validation {
    condition     = length(var.node.groups) == 0 || try(var.node.groups[0].nodes >= 1 && sum([for g in var.node.groups : g.nodes]) == var.node.node_count, false)
    error_message = "groups: the first group holds the head (nodes >= 1) and the groups' nodes add up to node_count."
  }
  validation {
    condition     = alltrue([for g in var.node.grown : g.rank >= var.node.node_count && floor(g.rank) == g.rank && contains([for x in var.node.groups : x.name], g.group)])
    error_message = "grown: each rank a whole number >= node_count, in one of the groups."
  }
  validation {
    condition     = length(distinct([for g in var.node.grown : g.rank])) == length(var.node.grown)
    error_message = "grown: a rank is used twice."
  }
  validation {
    condition     = alltrue([for g in var.node.grown : g.node_ip == null || can(cidrhost("${coalesce(g.node_ip, "x")}/32", 0))])
    error_message = "grown: node_ip null or an IPv4 address."
  }
  validation {
    condition     = var.node.object_store_mb_per_node == null || try(var.node.object_store_mb_per_node >= 80 && floor(var.node.object_store_mb_per_node) == var.node.object_store_mb_per_node, false)
    error_message = "object_store_mb_per_node: null or a whole number >= 80."
  }
  validation {
    condition     = var.node.join_timeout_s > 0 && var.node.join_timeout_s <= 86400
    error_message = "join_timeout_s: more than 0 and at most 86400."
  }
  validation {
    condition     = !can(regex("[\\r\\n]", var.node.run))
    error_message = "run: one line; newlines are not allowed."
  }
  validation {
    condition     = var.node.workdir == null || can(regex("^/[^\\r\\n]*$", var.node.workdir))
    error_message = "workdir: null or an absolute path on one line."
  }
  validation {
    condition     = var.node.workdir_digest == null || can(regex("^[0-9a-f]{64}$", var.node.workdir_digest))
    error_message = "workdir_digest: null or a sha256: 64 lower-case hex digits."
  }
  validation {
    condition     = var.node.wheelhouse_digest == null || can(regex("^[0-9a-f]{64}$", var.node.wheelhouse_digest))
    error_message = "wheelhouse_digest: null or a sha256: 64 lower-case hex digits."
  }
  validation {
    condition     = var.node.not_before == null || try(var.node.not_before >= 0, false)
    error_message = "not_before: null or epoch seconds >= 0."
  }
  validation {
    condition     = var.node.scratch_dir == null || try(can(regex("^/[A-Za-z0-9._/-]+$", var.node.scratch_dir)) && length(var.node.scratch_dir) <= 35, false)
    error_message = "scratch_dir: null or an absolute path of at most 35 characters (letters, digits, . _ - /)."
  }
  validation {
    condition     = length(var.node.node_ips) == 0 || length(var.node.node_ips) == var.node.node_count
    error_message = "node_ips: empty, or one address per node (node_count)."
  }
  validation {
    condition     = alltrue([for ip in var.node.node_ips : can(cidrhost("${ip}/32", 0))])
    error_message = "node_ips: IPv4 addresses only."
  }
  validation {
    condition     = var.node.image_path == null || can(regex("^[A-Za-z0-9._/+-]+$", var.node.image_path))
    error_message = "image_path: null or a path (letters, digits, . _ - + /)."
  }
  validation {
    condition     = var.node.image_digest == null || can(regex("^(sha256:)?[0-9a-f]{64}$", var.node.image_digest))
    error_message = "image_digest: null or a sha256: 64 lowercase hex digits, optionally prefixed sha256:."
  }
  validation {
    condition     = can(regex("^[A-Za-z0-9._/+-]+$", var.node.python))
    error_message = "python: a command name or path (letters, digits, . _ - + /)."
  }
  validation {
    condition     = alltrue([for k in keys(var.node.extra_env) : can(regex("^[A-Z_][A-Z0-9_]*$", k))])
    error_message = "extra_env: names are upper-case shell names ([A-Z_][A-Z0-9_]*)."
  }
  validation {
    # What this module sets itself (tests/iac/test_node_module.py keeps the list, with
    # the settings', equal to syndeo/core/nodeconfig.py's fields); other SYNDEO_* names, such as a backend's
    # SYNDEO_AZURE_ACCOUNT_URL or SYNDEO_S3_ENDPOINT_URL, may pass through.
    condition = length(setintersection(keys(var.node.extra_env), concat([
      "SYNDEO_CLUSTER_ID", "SYNDEO_RANK", "SYNDEO_NODES", "SYNDEO_RENDEZVOUS", "SYNDEO_SCRATCH", "SYNDEO_SCRATCH_BASE",
      "SYNDEO_CPUS", "SYNDEO_GPUS", "SYNDEO_MEMORY_MB", "SYNDEO_OBJECT_STORE_MB", "SYNDEO_NODE_IP",
      "SYNDEO_ATTEMPT", "SYNDEO_JOIN_TIMEOUT", "SYNDEO_RUN", "SYNDEO_WORKDIR", "SYNDEO_WORKDIR_DIGEST", "SYNDEO_WHEELHOUSE_DIGEST", "SYNDEO_TARGET",
      "SYNDEO_NOT_BEFORE", "SYNDEO_IMAGE_DIGEST", "SYNDEO_GROUP", "SYNDEO_GROUPS", "SYNDEO_AUTOSCALE",
      "SYNDEO_SPOT_NOTICES", "SYNDEO_METADATA_URL", "SYNDEO_LAUNCH_KEY",
      "SYNDEO_IMAGE", "SYNDEO_PYTHON", "SYNDEO_FORWARD_ENV",
    ], [for k, v in var.node.settings : "SYNDEO_${upper(k)}"]))) == 0
    error_message = "extra_env: may not set a node setting (SYNDEO_RANK, SYNDEO_RUN, …): those come from the other variables."
  }
  validation {
    condition     = alltrue([for v in values(var.node.extra_env) : !can(regex("[\\r\\n]", v))])
    error_message = "extra_env: values must be one line; newlines are not allowed."
  }
  validation {
    condition     = can(regex("^/[A-Za-z0-9._/-]+$", var.node.env_file_path))
    error_message = "env_file_path: an absolute path (letters, digits, . _ - /)."
  }
  validation {
    condition     = can(regex("^[A-Za-z0-9@._-]+$", var.node.service_name))
    error_message = "service_name: a systemd unit name."
  }
  validation {
    condition     = can(regex("^(\\$HOME|/)[A-Za-z0-9._/-]*$", var.node.host_dir))
    error_message = "host_dir: an absolute path, or one starting with $HOME (letters, digits, . _ - /)."
  }
  validation {
    condition     = var.node.stop_grace_s >= 1 && var.node.stop_grace_s <= 600
    error_message = "stop_grace_s: from 1 to 600 seconds."
  }
  # BEGIN rules: generated by scripts/tf_generate.py from syndeo/core/nodeconfig.py and clouds.py
  validation {
    condition     = contains(["local", "slurm", "ssh", "aws", "gcp", "azure", "alibaba"], var.node.target)
    error_message = "target: one of local, slurm, ssh, aws, gcp, azure, alibaba."
  }
  validation {
    condition     = var.node.spot_notices == null || contains(["aws", "gcp", "azure", "alibaba"], coalesce(var.node.spot_notices, "-"))
    error_message = "spot_notices: null or one of aws, gcp, azure, alibaba."
  }
  validation {
    condition     = var.node.settings.idle_timeout_s == null || try(var.node.settings.idle_timeout_s > 0 && var.node.settings.idle_timeout_s <= 604800, false)
    error_message = "settings.idle_timeout_s: null or a number > 0, <= 604800."
  }
  validation {
    condition     = var.node.settings.autostop_s == null || try(var.node.settings.autostop_s > 0 && var.node.settings.autostop_s <= 2592000, false)
    error_message = "settings.autostop_s: null or a number > 0, <= 2592000."
  }
  validation {
    condition     = var.node.settings.autostop_grace_s == null || try(var.node.settings.autostop_grace_s >= 0 && var.node.settings.autostop_grace_s <= 604800, false)
    error_message = "settings.autostop_grace_s: null or a number >= 0, <= 604800."
  }
  validation {
    condition     = var.node.settings.autostop_wait_for == null || try(contains(["drivers", "jobs", "none"], var.node.settings.autostop_wait_for), false)
    error_message = "settings.autostop_wait_for: null or one of drivers, jobs, none."
  }
  validation {
    condition     = var.node.settings.gpu_vendor == null || try(contains(["nvidia", "amd"], var.node.settings.gpu_vendor), false)
    error_message = "settings.gpu_vendor: null or one of nvidia, amd."
  }
  # END rules
}

variable "target_env" {
  description = "Variables the calling module sets for every node (a cloud's region, account or project); node.extra_env wins over them. Not checked against the node settings: only modules pass it."
  type        = map(string)
  default     = {}
  nullable    = false
}

variable "launch_key" {
  description = "This launch's key (syndeo/core/launchkey.py): the head signs its rendezvous record with it and workers join only a head whose record verifies. 64 hex digits, made by the launcher per launch; null: nodes trust any head record of their cluster id. A variable of its own, not a node attribute: a secret (sensitive here and in every module that passes it)."
  type        = string
  default     = null
  sensitive   = true
  validation {
    condition     = var.launch_key == null || can(regex("^[0-9a-f]{64}$", var.launch_key))
    error_message = "launch_key: null or 64 lower-case hex digits."
  }
}
