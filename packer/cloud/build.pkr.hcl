# Bakes Apptainer, squashfuse, the SIF and the (disabled) per-node service into a VM
# image.  At boot, cloud-init writes /etc/syndeo/node.env and starts syndeo-node.

build {
  sources = [
    "source.amazon-ebs.syndeo",
    "source.googlecompute.syndeo",
    "source.azure-arm.syndeo",
  ]

  provisioner "shell" {
    inline = ["mkdir -p /tmp/syndeo-bake"]
  }

  provisioner "file" {
    sources = [
      var.sif_path,
      "${var.sif_path}.manifest.json",
      "${path.root}/../../terraform/modules/node/files/syndeo-node",
      "${path.root}/files/syndeo-node.service",
      "${path.root}/files/provision.sh",
    ]
    destination = "/tmp/syndeo-bake/"
  }

  provisioner "shell" {
    environment_vars = [
      "SIF_NAME=${basename(var.sif_path)}",
      "APPTAINER_DEB_URL=${var.apptainer_deb_url}",
    ]
    execute_command = "chmod +x {{ .Path }}; sudo -E sh -c '{{ .Vars }} {{ .Path }}'"
    inline          = ["sh /tmp/syndeo-bake/provision.sh"]
  }

  post-processor "manifest" {
    output     = "${path.root}/../../.syndeo/packer-cloud-manifest.json" # gitignored
    strip_path = true
  }
}
