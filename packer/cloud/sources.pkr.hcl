# The three cloud VM images start from Debian 12 (the OS the Syndeo recipes are
# verified on) and get the same provisioning (build.pkr.hcl).

locals {
  stamp = formatdate("YYYYMMDD-hhmmss", timestamp())
  name  = "${var.image_name}-${local.stamp}"
  labels = {
    project = "syndeo"
    built   = local.stamp
  }
  # The sha256 of the SIF this image carries (its manifest, written by `invoke build`):
  # an AMI tag the aws target reads, records in deploy.json and hands to the nodes.
  sif_digest = lookup(jsondecode(file("${var.sif_path}.manifest.json")), "sha256", "")
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
  disk_size               = var.disk_size_gb
  ssh_username            = "packer"
}

source "azure-arm" "syndeo" {
  subscription_id                   = var.azure_subscription_id
  client_id                         = var.azure_client_id
  client_secret                     = var.azure_client_secret
  location                          = var.azure_location
  vm_size                           = var.azure_vm_size
  os_type                           = "Linux"
  image_publisher                   = "Debian"
  image_offer                       = "debian-12"
  image_sku                         = "12-gen2"
  os_disk_size_gb                   = var.disk_size_gb
  managed_image_name                = local.name
  managed_image_resource_group_name = var.azure_resource_group
  azure_tags                        = local.labels
}
