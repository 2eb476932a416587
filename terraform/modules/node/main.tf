# Renders, once for every target, what each node needs: its environment (the
# SYNDEO_* contract of syndeo/nodeconfig.py), a cloud-init document for images that
# bake the syndeo-node unit (packer/cloud), and start/stop commands for hosts that
# have no cloud-init (the ssh target).  Nothing here talks to a provider.

locals {
  # 0 .. node_count-1.  range() stops at 1024 elements; clusters go to 4096 nodes.
  ranks = flatten([
    for hi in range(ceil(var.node_count / 1024)) : [
      for lo in range(min(1024, var.node_count - hi * 1024)) : hi * 1024 + lo
    ]
  ])

  # Groups: the group index of every rank (the last group starting at or below it, so
  # that empty groups, declared for later, own no rank).  No groups: every rank has
  # the top-level shape and no group settings.
  group_starts = [for i in range(length(var.groups)) : sum(concat([0], [for g in slice(var.groups, 0, i) : g.nodes]))]
  rank_group   = [for rank in local.ranks : length(var.groups) == 0 ? null : var.groups[length([for s in local.group_starts : s if s <= rank]) - 1]]
  rank_shape = [
    for g in local.rank_group : g == null ? {
      SYNDEO_CPUS = tostring(var.cpus_per_node)
      SYNDEO_GPUS = tostring(var.gpus_per_node)
      memory      = var.memory_mb_per_node
      } : {
      SYNDEO_CPUS = tostring(g.cpus)
      SYNDEO_GPUS = tostring(g.gpus)
      memory      = g.memory_mb != null ? g.memory_mb : var.memory_mb_per_node
    }
  ]
  # What the head waits for (syndeo.groups.Layout.expected): name:nodes:min_nodes.
  groups_expected = join(",", [for g in var.groups : "${g.name}:${g.nodes}:${g.min_nodes != null ? g.min_nodes : g.nodes}"])

  # Short, per cluster: Ray nests ~60 bytes of socket names below the scratch dir.
  scratch_base = coalesce(var.scratch_dir, "/var/tmp/sy-${substr(sha1("${var.rendezvous}|${var.cluster_id}"), 0, 8)}")

  common = merge(
    {
      SYNDEO_CLUSTER_ID   = var.cluster_id
      SYNDEO_NODES        = tostring(var.node_count)
      SYNDEO_RENDEZVOUS   = var.rendezvous
      SYNDEO_JOIN_TIMEOUT = tostring(var.join_timeout_s)
      SYNDEO_TARGET       = var.target
    },
    length(var.groups) == 0 ? {} : { SYNDEO_GROUPS = local.groups_expected },
    var.object_store_mb_per_node == null ? {} : { SYNDEO_OBJECT_STORE_MB = tostring(var.object_store_mb_per_node) },
    var.workdir == null ? {} : { SYNDEO_WORKDIR = var.workdir },
    var.not_before == null ? {} : { SYNDEO_NOT_BEFORE = tostring(var.not_before) },
    var.image_digest == null ? {} : { SYNDEO_IMAGE_DIGEST = var.image_digest },
    # Read by the start script only (bare or container), not by `syndeo node`.
    var.image_path == null ? { SYNDEO_PYTHON = var.python } : { SYNDEO_IMAGE = var.image_path },
    # `apptainer --cleanenv` drops everything but what the script forwards by name.
    length(var.extra_env) == 0 ? {} : { SYNDEO_FORWARD_ENV = join(" ", sort(keys(var.extra_env))) },
  )

  env = [
    for rank in local.ranks : merge(
      var.extra_env,
      local.common,
      {
        SYNDEO_RANK    = tostring(rank)
        SYNDEO_SCRATCH = "${local.scratch_base}/${rank}"
        # Only the head runs the workload.
        SYNDEO_RUN = rank == 0 ? var.run : ""
      },
      length(var.node_ips) == 0 ? {} : { SYNDEO_NODE_IP = var.node_ips[rank] },
      { SYNDEO_CPUS = local.rank_shape[rank].SYNDEO_CPUS, SYNDEO_GPUS = local.rank_shape[rank].SYNDEO_GPUS },
      local.rank_shape[rank].memory == null ? {} : { SYNDEO_MEMORY_MB = tostring(local.rank_shape[rank].memory) },
      local.rank_group[rank] == null ? {} : { SYNDEO_GROUP = local.rank_group[rank].name },
      # The dashboard runs on the head only (as NodeSettings writes it: "True" or absent).
      var.dashboard && rank == 0 ? { SYNDEO_DASHBOARD = "True" } : {},
    )
  ]

  env_files = [for e in local.env : templatefile("${path.module}/templates/node.env.tftpl", { env = e })]

  user_data = [
    for f in local.env_files : templatefile("${path.module}/templates/user-data.yaml.tftpl", {
      env_file = f
      path     = var.env_file_path
      service  = var.service_name
    })
  ]

  host_dirs = [for rank in local.ranks : "${var.host_dir}/clusters/${var.cluster_id}/${rank}"]

  start_commands = [
    for rank in local.ranks : templatefile("${path.module}/templates/start.sh.tftpl", {
      dir      = local.host_dirs[rank]
      env_file = local.env_files[rank]
      script   = file("${path.module}/files/syndeo-node")
    })
  ]

  stop_commands = [
    for rank in local.ranks : templatefile("${path.module}/templates/stop.sh.tftpl", {
      dir     = local.host_dirs[rank]
      grace_s = var.stop_grace_s
      scratch = local.env[rank].SYNDEO_SCRATCH
    })
  ]
}
