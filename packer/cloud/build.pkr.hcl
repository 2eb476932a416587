# Bakes Apptainer, squashfuse, the SIF and the (disabled) per-node service into a VM
# image.  At boot, cloud-init writes /etc/syndeo/node.env and starts syndeo-node.

build {
  sources = [
    "source.amazon-ebs.syndeo",
    "source.googlecompute.syndeo",
    "source.azure-arm.syndeo",
    "source.alicloud-ecs.syndeo",
  ]

  provisioner "shell" {
    inline = ["mkdir -p /tmp/syndeo-bake"]
  }

  provisioner "file" {
    sources = [
      local.sif,
      "${local.sif}.manifest.json",
      "${path.root}/../../terraform/modules/node/files/syndeo-node",
      "${path.root}/../../terraform/modules/node/files/syndeo-node-stopped",
      "${path.root}/files/syndeo-node.service",
      "${path.root}/files/provision.sh",
    ]
    destination = "/tmp/syndeo-bake/"
  }

  provisioner "shell" {
    environment_vars = [
      "SIF_NAME=${basename(local.sif)}",
      "APPTAINER_DEB_URL=${var.apptainer_deb_url}",
      "APPTAINER_DEB_SHA256=${var.apptainer_deb_sha256}",
      "DEBIAN_SID_SNAPSHOT=${var.debian_sid_snapshot}",
    ]
    execute_command = "chmod +x {{ .Path }}; sudo -E sh -c '{{ .Vars }} {{ .Path }}'"
    inline          = ["sh /tmp/syndeo-bake/provision.sh"]
  }

  # Azure captures a generalized VM only: the agent removes the build user, host keys
  # and its own state first (Azure's documented step for Linux images).
  provisioner "shell" {
    only            = ["azure-arm.syndeo"]
    execute_command = "chmod +x {{ .Path }}; {{ .Vars }} sudo -E sh '{{ .Path }}'"
    inline          = ["/usr/sbin/waagent -force -deprovision+user", "export HISTSIZE=0", "sync"]
    skip_clean      = true
  }

  post-processor "manifest" {
    output     = "${path.root}/../../.syndeo/packer-cloud-manifest.json" # gitignored
    strip_path = true
  }
}
