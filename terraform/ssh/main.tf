# Nodes on machines the user already has: per host, upload the image if the host's
# copy differs, write the node environment and start `syndeo node` over SSH; on
# destroy, stop exactly that node.  Everything a node needs is rendered by
# ../modules/node, the same module the cloud targets use.

locals {
  # The caller's node settings: sensitive as a whole (extra_env may hold credentials),
  # never shown by this module, which only passes them on (as it did extra_env alone).
  node         = nonsensitive(var.node)
  image_digest = try(local.node.image_digest, null)
  grown        = try(local.node.grown, [])
  digest_hex   = local.image_digest == null ? null : trimprefix(local.image_digest, "sha256:")
  image_remote = var.image == null ? null : "${var.remote_image_dir}/${local.digest_hex}.sif"
  # connect_timeout ("30s", "2m") in seconds, as ssh's ConnectTimeout takes it.
  connect_s = endswith(var.connect_timeout, "m") ? tonumber(trimsuffix(var.connect_timeout, "m")) * 60 : tonumber(trimsuffix(var.connect_timeout, "s"))
  ssh_env = {
    SSH_USER         = var.ssh_user
    SSH_PORT         = tostring(var.ssh_port)
    SSH_KEY          = coalesce(var.ssh_private_key_file, "")
    SSH_KNOWN_HOSTS  = var.known_hosts_file
    SSH_CONNECT_TIME = tostring(local.connect_s)
  }
  # Run on a host ahead of anything that writes to or reads from its node dir or image
  # dir: each is refused (one line) unless no other user of the host can replace a
  # level of it (securedir.sh).  Both are validated to plain path characters.
  secure_sh       = file("${path.module}/securedir.sh")
  check_image_dir = var.image == null ? "" : "syndeo_secure_dir \"${var.remote_image_dir}\" \"[ssh] remote_image_dir\" || exit 1\n"
  check_dirs = { for k, m in module.nodes.machines : k => join("\n", [
    local.secure_sh,
    "syndeo_secure_dir \"${nonsensitive(m.host_dir)}\" \"[ssh] host_dir\" || exit 1",
    local.check_image_dir,
  ]) }
}

# Every node keyed by its rank (the module's rendering plus where it runs): the
# cluster's hosts (rank = index), then the nodes `grow` added.  Keys, not list
# positions, so that growing or shrinking never moves a running node to another
# resource address.
locals {
  grown_hosts = { for g in local.grown : tostring(g.rank) => g }
  machines = { for k, m in module.nodes.machines : k => merge(m, tonumber(k) < local.node.node_count
    ? { host = var.hosts[tonumber(k)], host_key = var.host_keys[tonumber(k)] }
  : { host = local.grown_hosts[k].host, host_key = local.grown_hosts[k].host_key }) }
}

module "nodes" {
  source = "../modules/node"
  # The caller's node settings, with what only this module knows: the image's path
  # on the hosts (its upload, below) and each grown node without its host.
  node = merge(local.node, {
    target     = "ssh"
    image_path = local.image_remote
    grown      = [for g in local.grown : { rank = g.rank, group = g.group, node_ip = try(g.node_ip, null) }]
  })
  # Sensitive: plans and logs show it as (sensitive value).
  launch_key = var.launch_key
}

# Every host must answer before any node starts: a host that refuses SSH then
# leaves nothing running on the others.  Every command reaches a host through
# on-host.sh, never Terraform's remote-exec (why: on-host.sh's header).
resource "terraform_data" "reach" {
  for_each = local.machines

  input = each.value.host

  provisioner "local-exec" {
    command = "${path.module}/on-host.sh"
    environment = merge(local.ssh_env, {
      HOST     = each.value.host
      HOST_KEY = each.value.host_key
      # Every host's dirs, before any upload or start on any host.
      SCRIPT  = local.check_dirs[each.key]
      RETRY_S = tostring(local.connect_s)
    })
  }
}

# One copy per digest on each host, replaced only when the digest differs.
resource "terraform_data" "image" {
  for_each   = var.image == null ? {} : local.machines
  depends_on = [terraform_data.reach]

  triggers_replace = [each.value.host, local.image_digest]

  provisioner "local-exec" {
    command = "${path.module}/upload-image.sh"
    environment = merge(local.ssh_env, {
      HOST = each.value.host
      SRC  = var.image
      DEST = local.image_remote
      # Checked (securedir.sh) before the upload writes there.
      IMAGE_DIR = var.remote_image_dir
      CHECK_SH  = "${path.module}/securedir.sh"
      DIGEST    = local.digest_hex
    })
  }
}

resource "terraform_data" "node" {
  for_each   = local.machines
  depends_on = [terraform_data.reach, terraform_data.image]

  # Destroy-time provisioners may only read self: keep what stopping needs here.
  input = {
    host     = each.value.host
    port     = var.ssh_port
    user     = var.ssh_user
    key_file = var.ssh_private_key_file
    host_key = each.value.host_key
    timeout  = tostring(local.connect_s)
    stop     = each.value.stop_command
    dir      = each.value.host_dir
  }
  triggers_replace = [sha256(each.value.start_command)]

  # The start script holds the node's environment (credentials included): it goes
  # over ssh's stdin (on-host.sh), never into a file on the host.
  provisioner "local-exec" {
    command = "${path.module}/on-host.sh"
    environment = merge(local.ssh_env, {
      HOST     = each.value.host
      HOST_KEY = each.value.host_key
      # nonsensitive: the script holds the launch key, and a sensitive value here would
      # make Terraform suppress on-host.sh's output (the host's error messages).  The
      # script itself is never printed: local-exec shows the command, not its environment.
      # The dirs checked again in the same session that writes and starts there.
      SCRIPT = "${local.check_dirs[each.key]}\n${nonsensitive(each.value.start_command)}"
    })
  }

  provisioner "local-exec" {
    when    = destroy
    command = "${path.module}/on-host.sh"
    environment = {
      HOST             = self.input.host
      HOST_KEY         = self.input.host_key
      SSH_USER         = self.input.user
      SSH_PORT         = tostring(self.input.port)
      SSH_KEY          = coalesce(self.input.key_file, "")
      SSH_CONNECT_TIME = self.input.timeout
      SCRIPT           = self.input.stop
    }
  }
}
