# Local build of the Syndeo SIF: Packer orchestrates, `python -m syndeo.image sif` does
# the unprivileged `apptainer build` and writes the manifest (sha256, versions, time).
# Normally started by `invoke build` (syndeo.image.build), which stages the build context.

variable "sif_command" {
  type        = list(string)
  description = "argv of the build step (python -m syndeo.image sif ...), set by syndeo.image.build."
}

source "null" "sif" {
  communicator = "none"
}

build {
  sources = ["source.null.sif"]

  provisioner "shell-local" {
    # Each argument single-quoted for the shell; the command is built by syndeo.image.
    inline = [join(" ", [for arg in var.sif_command : "'${replace(arg, "'", "'\\''")}'"])]
  }
}
