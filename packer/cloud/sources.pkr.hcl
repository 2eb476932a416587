# The four cloud VM images start from Debian 12 (the OS the Syndeo recipes are
# verified on) and get the same provisioning (build.pkr.hcl).

locals {
  stamp = formatdate("YYYYMMDD-hhmmss", timestamp())
  name  = "${var.image_name}-${local.stamp}"
  labels = {
    project = "syndeo"
    built   = local.stamp
  }
  # The SIF: given, or the one `invoke build` writes in this checkout.  Found from the
  # template (path.root), not the current directory: the documented command line runs
  # from the repository root, examples/ from anywhere.
  sif = var.sif_path != "" ? abspath(var.sif_path) : "${abspath(path.root)}/../../.syndeo/image/syndeo-debootstrap.sif"
  # The sha256 of the SIF this image carries (its manifest, written by `invoke build`):
  # an image tag/label the cloud targets read, record in deploy.json and hand to the nodes.
  sif_digest = lookup(jsondecode(file("${local.sif}.manifest.json")), "sha256", "")
}

source "amazon-ebs" "syndeo" {
  region        = var.aws_region
  instance_type = var.aws_instance_type
  subnet_id     = var.aws_subnet_id
  ami_name      = local.name
  ssh_username  = "admin"
  encrypt_boot  = true

  source_ami_filter {
    filters = {
      name                = "debian-12-amd64-*"
      architecture        = "x86_64"
      virtualization-type = "hvm"
      root-device-type    = "ebs"
    }
    owners      = ["136693071363"] # Debian's official AWS account
    most_recent = true
  }

  launch_block_device_mappings {
    device_name           = "/dev/xvda"
    volume_size           = var.disk_size_gb
    volume_type           = "gp3"
    throughput            = 125
    iops                  = 3000
    delete_on_termination = true
    encrypted             = true
  }

  tags     = merge(local.labels, { "syndeo-image-digest" = local.sif_digest })
  run_tags = local.labels
}

source "googlecompute" "syndeo" {
  project_id              = var.gcp_project_id
  zone                    = var.gcp_zone
  machine_type            = var.gcp_machine_type
  account_file            = var.gcp_account_file
  source_image_family     = "debian-12"
  source_image_project_id = ["debian-cloud"]
  image_name              = local.name
  image_family            = var.image_name
  image_labels            = local.labels
  # A label value holds at most 63 characters (a sha256 in hex is 64): the digest goes
  # into the description, where the gcp target reads it.
  image_description = "syndeo SIF sha256:${local.sif_digest}"
  disk_size         = var.disk_size_gb
  ssh_username      = "packer"
}

source "azure-arm" "syndeo" {
  subscription_id = var.azure_subscription_id
  client_id       = var.azure_client_id
  client_secret   = var.azure_client_secret
  # No service principal given: sign in as `az login` did (the builder does not do
  # this by itself for empty credentials).
  use_azure_cli_auth                = var.azure_client_id == ""
  location                          = var.azure_location
  vm_size                           = var.azure_vm_size
  os_type                           = "Linux"
  image_publisher                   = "Debian"
  image_offer                       = "debian-12"
  image_sku                         = "12-gen2"
  os_disk_size_gb                   = var.disk_size_gb
  managed_image_name                = local.name
  managed_image_resource_group_name = var.azure_resource_group
  azure_tags                        = merge(local.labels, { "syndeo-image-digest" = local.sif_digest })
}

source "alicloud-ecs" "syndeo" {
  access_key    = var.alibaba_access_key
  secret_key    = var.alibaba_secret_key
  region        = var.alibaba_region
  instance_type = var.alibaba_instance_type
  source_image  = var.alibaba_source_image
  image_name    = local.name
  # The tag the alibaba target reads (DescribeImages): the SIF this image carries.
  image_description = "syndeo SIF sha256:${local.sif_digest}"
  tags              = merge(local.labels, { "syndeo-image-digest" = local.sif_digest })
  image_encrypted   = true
  ssh_username      = "root"
  # The build instance is reached over SSH from where Packer runs (the cluster's
  # nodes have no public IP; this temporary one does, and is deleted after).
  associate_public_ip_address = true
  internet_charge_type        = "PayByTraffic"

  system_disk_mapping {
    disk_size     = var.disk_size_gb
    disk_category = "cloud_essd"
  }
}
