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

  # Short, per cluster: Ray nests ~60 bytes of socket names below the scratch dir.
  scratch_base = coalesce(var.scratch_dir, "/var/tmp/sy-${substr(sha1("${var.rendezvous}|${var.cluster_id}"), 0, 8)}")

  common = merge(
    {
      SYNDEO_CLUSTER_ID   = var.cluster_id
      SYNDEO_NODES        = tostring(var.node_count)
      SYNDEO_RENDEZVOUS   = var.rendezvous
      SYNDEO_CPUS         = tostring(var.cpus_per_node)
      SYNDEO_GPUS         = tostring(var.gpus_per_node)
      SYNDEO_JOIN_TIMEOUT = tostring(var.join_timeout_s)
      SYNDEO_TARGET       = var.target
    },
    var.memory_mb_per_node == null ? {} : { SYNDEO_MEMORY_MB = tostring(var.memory_mb_per_node) },
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
