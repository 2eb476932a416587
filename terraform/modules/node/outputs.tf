output "env" {
  description = "Per rank (index = rank), the node's environment as a map."
  value       = slice(local.env, 0, var.node.node_count)
  # Holds the launch key (var.launch_key).
  sensitive = true
}

output "env_files" {
  description = "Per rank, the node environment file (double-quoted values with POSIX-shell escapes, which systemd's EnvironmentFile= reads the same way)."
  value       = slice(local.env_files, 0, var.node.node_count)
  # Holds the launch key (var.launch_key).
  sensitive = true
}

output "user_data" {
  description = "Per rank, a #cloud-config document: writes the environment file 0600 and starts the image's syndeo-node unit."
  value       = slice(local.user_data, 0, var.node.node_count)
  # Holds the launch key (var.launch_key).
  sensitive = true
}

output "host_dirs" {
  description = "Per rank, the node's directory on hosts without cloud-init (environment, log, pid)."
  value       = slice(local.host_dirs, 0, var.node.node_count)
}

output "start_commands" {
  description = "Per rank, a POSIX shell script that writes the node's files and starts it detached (hosts without cloud-init)."
  value       = slice(local.start_commands, 0, var.node.node_count)
  # Holds the launch key (var.launch_key).
  sensitive = true
}

output "stop_commands" {
  description = "Per rank, a POSIX shell script that stops exactly that node (TERM, bounded grace, KILL) and removes its files."
  value       = slice(local.stop_commands, 0, var.node.node_count)
}

output "scratch_dirs" {
  description = "Per rank, the node's scratch dir."
  value       = [for e in slice(local.env, 0, var.node.node_count) : e.SYNDEO_SCRATCH]
}

output "groups" {
  description = "Per rank, the name of its group (null without groups): the cloud modules pick each group's instance type by it."
  value       = [for g in slice(local.rank_group, 0, var.node.node_count) : g == null ? null : g.name]
}

output "machines" {
  description = "Every node, the cluster's ranks and those `grow` added (node.grown), keyed by tostring(rank): group (name or null), gpus, env, env_file, user_data, host_dir, start_command, stop_command. VM modules create one machine per key (for_each), so growing or shrinking never moves a running node to another address."
  value = {
    for i, n in local.nodes : tostring(n.rank) => {
      group         = n.group == null ? null : n.group.name
      gpus          = tonumber(local.rank_shape[i].SYNDEO_GPUS)
      env           = local.env[i]
      env_file      = local.env_files[i]
      user_data     = local.user_data[i]
      host_dir      = local.host_dirs[i]
      start_command = local.start_commands[i]
      stop_command  = local.stop_commands[i]
    }
  }
  # Holds the launch key (var.launch_key).
  sensitive = true
}

output "setting_names" {
  description = "The attributes var.node takes: a module that passes node on as `any` checks its caller's names against these (Terraform drops unknown attributes of an object silently)."
  value       = keys(var.node)
}
