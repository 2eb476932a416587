# Renders, once for every target, what each node needs: its environment (the
# SYNDEO_* contract of syndeo/core/nodeconfig.py), a cloud-init document for images that
# bake the syndeo-node unit (packer/cloud), and start/stop commands for hosts that
# have no cloud-init (the ssh target).  Nothing here talks to a provider.

locals {
  # Every node's extra variables: the calling module's own (a cloud's region, account),
  # then the caller's node.extra_env, which wins (an emulator's endpoint).
  extra_env = merge(var.target_env, var.node.extra_env)

  # 0 .. node_count-1.  range() stops at 1024 elements; clusters go to 4096 nodes.
  ranks = flatten([
    for hi in range(ceil(var.node.node_count / 1024)) : [
      for lo in range(min(1024, var.node.node_count - hi * 1024)) : hi * 1024 + lo
    ]
  ])

  # Groups: the group of every rank (the last group starting at or below it, so
  # that empty groups, declared for later, own no rank).  No groups: every rank has
  # the top-level shape and no group settings.
  group_starts  = [for i in range(length(var.node.groups)) : sum(concat([0], [for g in slice(var.node.groups, 0, i) : g.nodes]))]
  group_by_name = { for g in var.node.groups : g.name => g }

  # Every node this module renders: the cluster's ranks, then the nodes `grow` added
  # (ranks past node_count, each naming its group).  One list so that grown nodes
  # are rendered by exactly the same code.
  nodes = concat(
    [for rank in local.ranks : {
      rank    = rank
      group   = length(var.node.groups) == 0 ? null : var.node.groups[length([for s in local.group_starts : s if s <= rank]) - 1]
      node_ip = length(var.node.node_ips) == 0 ? null : var.node.node_ips[rank]
    }],
    [for g in var.node.grown : { rank = g.rank, group = local.group_by_name[g.group], node_ip = g.node_ip }],
  )
  rank_group = [for n in local.nodes : n.group]
  rank_shape = [
    for g in local.rank_group : g == null ? {
      SYNDEO_CPUS = tostring(var.node.cpus_per_node)
      SYNDEO_GPUS = tostring(var.node.gpus_per_node)
      memory      = var.node.memory_mb_per_node
      } : {
      SYNDEO_CPUS = tostring(g.cpus)
      SYNDEO_GPUS = tostring(g.gpus)
      memory      = g.memory_mb != null ? g.memory_mb : var.node.memory_mb_per_node
    }
  ]
  # What the head waits for (syndeo.core.groups.Layout.expected): name:nodes:min_nodes.
  groups_expected = join(",", [for g in var.node.groups : "${g.name}:${g.nodes}:${g.min_nodes != null ? g.min_nodes : g.nodes}"])
  # The groups that follow demand (syndeo.core.groups.Layout.autoscaled): the head runs
  # Ray's autoscaler for them. name:min:max:cpus:gpus:memory_mb ("" memory: Ray's).
  autoscaled = join(",", [for g in var.node.groups : join(":", [
    g.name, g.autoscale.min, g.autoscale.max, g.cpus, g.gpus,
    try(tostring(coalesce(g.memory_mb, var.node.memory_mb_per_node)), ""),
  ]) if g.autoscale != null])

  # Short, per cluster: Ray nests ~60 bytes of socket names below the scratch dir.
  scratch_base = coalesce(var.node.scratch_dir, "/var/tmp/sy-${substr(sha1("${var.node.rendezvous}|${var.node.cluster_id}"), 0, 8)}")
  # What the node trusts as it is (SYNDEO_SCRATCH_BASE): a scratch_dir the user named,
  # or /var/tmp -- not the predictable sy-<hash> below it, which another user of the
  # host could make first; the node checks it is ours and private (syndeo.core.securedir).
  scratch_trusted = coalesce(var.node.scratch_dir, "/var/tmp")

  common = merge(
    {
      SYNDEO_CLUSTER_ID   = var.node.cluster_id
      SYNDEO_NODES        = tostring(var.node.node_count)
      SYNDEO_RENDEZVOUS   = var.node.rendezvous
      SYNDEO_JOIN_TIMEOUT = tostring(var.node.join_timeout_s)
      SYNDEO_TARGET       = var.node.target
      SYNDEO_SCRATCH_BASE = local.scratch_trusted
    },
    length(var.node.groups) == 0 ? {} : { SYNDEO_GROUPS = local.groups_expected },
    local.autoscaled == "" ? {} : { SYNDEO_AUTOSCALE = local.autoscaled },
    var.node.object_store_mb_per_node == null ? {} : { SYNDEO_OBJECT_STORE_MB = tostring(var.node.object_store_mb_per_node) },
    var.node.workdir == null ? {} : { SYNDEO_WORKDIR = var.node.workdir },
    var.node.not_before == null ? {} : { SYNDEO_NOT_BEFORE = tostring(var.node.not_before) },
    var.node.image_digest == null ? {} : { SYNDEO_IMAGE_DIGEST = var.node.image_digest },
    var.node.wheelhouse_digest == null ? {} : { SYNDEO_WHEELHOUSE_DIGEST = var.node.wheelhouse_digest },
    # The settings every node shares (ClusterOptions), written as NodeSettings writes
    # them: null and false left out, true as "True".
    { for k, v in var.node.settings : "SYNDEO_${upper(k)}" => v == true ? "True" : tostring(v) if v != null && v != false },
    # Spot/preemptible VMs: the node watches its cloud's interruption notice.
    var.node.spot_notices == null ? {} : { SYNDEO_SPOT_NOTICES = var.node.spot_notices },
    # Read by the start script only (bare or container), not by `syndeo node`.
    var.node.image_path == null ? { SYNDEO_PYTHON = var.node.python } : { SYNDEO_IMAGE = var.node.image_path },
    # `apptainer --cleanenv` drops everything but what the script forwards by name.
    length(local.extra_env) == 0 ? {} : { SYNDEO_FORWARD_ENV = join(" ", sort(keys(local.extra_env))) },
    # The launch key (a secret): whether there is one is not, and a condition on a
    # sensitive value would mark the whole map -- every rank's scratch dir with it.
    nonsensitive(var.launch_key == null) ? {} : { SYNDEO_LAUNCH_KEY = var.launch_key },
  )

  # Per node (index i into local.nodes; i = rank for the cluster's own ranks).
  env = [
    for i, n in local.nodes : merge(
      local.extra_env,
      local.common,
      {
        SYNDEO_RANK    = tostring(n.rank)
        SYNDEO_SCRATCH = "${local.scratch_base}/${n.rank}"
        # Only the head runs the workload.
        SYNDEO_RUN = n.rank == 0 ? var.node.run : ""
      },
      var.node.workdir_digest != null && n.rank == 0 ? { SYNDEO_WORKDIR_DIGEST = var.node.workdir_digest } : {},
      n.node_ip == null ? {} : { SYNDEO_NODE_IP = n.node_ip },
      { SYNDEO_CPUS = local.rank_shape[i].SYNDEO_CPUS, SYNDEO_GPUS = local.rank_shape[i].SYNDEO_GPUS },
      local.rank_shape[i].memory == null ? {} : { SYNDEO_MEMORY_MB = tostring(local.rank_shape[i].memory) },
      n.group == null ? {} : { SYNDEO_GROUP = n.group.name },
    )
  ]

  env_files = [for e in local.env : templatefile("${path.module}/templates/node.env.tftpl", { env = e })]

  user_data = [
    for f in local.env_files : templatefile("${path.module}/templates/user-data.yaml.tftpl", {
      env_file = f
      path     = var.node.env_file_path
      service  = var.node.service_name
    })
  ]

  host_dirs = [for n in local.nodes : "${var.node.host_dir}/clusters/${var.node.cluster_id}/${n.rank}"]

  start_commands = [
    for i, n in local.nodes : templatefile("${path.module}/templates/start.sh.tftpl", {
      dir      = local.host_dirs[i]
      env_file = local.env_files[i]
      script   = file("${path.module}/files/syndeo-node")
    })
  ]

  stop_commands = [
    for i, n in local.nodes : templatefile("${path.module}/templates/stop.sh.tftpl", {
      dir     = local.host_dirs[i]
      grace_s = var.node.stop_grace_s
      scratch = local.env[i].SYNDEO_SCRATCH
      # The per-cluster dir the module made up (removed once empty); never a
      # scratch_dir the user named, which other clusters share.
      cluster_dir = var.node.scratch_dir == null ? local.scratch_base : ""
    })
  ]
}
