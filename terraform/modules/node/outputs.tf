output "env" {
  description = "Per rank (index = rank), the node's environment as a map."
  value       = local.env
}

output "env_files" {
  description = "Per rank, the node environment file (double-quoted values with POSIX-shell escapes, which systemd's EnvironmentFile= reads the same way)."
  value       = local.env_files
}

output "user_data" {
  description = "Per rank, a #cloud-config document: writes the environment file 0600 and starts the image's syndeo-node unit."
  value       = local.user_data
}

output "host_dirs" {
  description = "Per rank, the node's directory on hosts without cloud-init (environment, log, pid)."
  value       = local.host_dirs
}

output "start_commands" {
  description = "Per rank, a POSIX shell script that writes the node's files and starts it detached (hosts without cloud-init)."
  value       = local.start_commands
}

output "stop_commands" {
  description = "Per rank, a POSIX shell script that stops exactly that node (TERM, bounded grace, KILL) and removes its files."
  value       = local.stop_commands
}

output "scratch_dirs" {
  description = "Per rank, the node's scratch dir."
  value       = [for e in local.env : e.SYNDEO_SCRATCH]
}

output "groups" {
  description = "Per rank, the name of its group (null without groups): the cloud modules pick each group's instance type by it."
  value       = [for g in local.rank_group : g == null ? null : g.name]
}
