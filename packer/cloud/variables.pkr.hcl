# Inputs of the cloud VM-image builds.  Cloud-specific variables default to "" so one
# cloud can be validated/built with only its own *.pkrvars.hcl (see examples/).

variable "sif_path" {
  type        = string
  default     = ""
  description = "The Syndeo SIF (its <sif>.manifest.json next to it); empty: the one `invoke build` writes, .syndeo/image/syndeo-debootstrap.sif of this checkout (found from the template, whatever the current directory)."
}

variable "image_name" {
  type        = string
  default     = "syndeo"
  description = "Prefix of the VM image name; a timestamp is appended."
}

variable "apptainer_deb_url" {
  type        = string
  default     = ""
  description = "URL of an apptainer .deb to install instead of Debian sid's (keeps the image's libc on bookworm); needs apptainer_deb_sha256."
}

variable "apptainer_deb_sha256" {
  type        = string
  default     = ""
  description = "sha256 of the .deb at apptainer_deb_url: provision.sh refuses a URL without it and a file that does not match."
}

variable "debian_sid_snapshot" {
  type        = string
  default     = "20261122T000000Z"
  description = "snapshot.debian.org timestamp of the sid apptainer (1.4.5-2) and the packages it pulls come from, when no apptainer_deb_url is given; a newer one updates them."
}

variable "disk_size_gb" {
  type        = number
  default     = 30
  description = "Root disk of the build VM and resulting image, GiB (Debian's Azure image is 30 GiB and Azure refuses a smaller OS disk; terraform/<cloud> defaults to 30 too)."
}

# --- AWS (amazon-ebs) ---
variable "aws_region" {
  type        = string
  default     = ""
  description = "AWS region the AMI is built in, e.g. us-east-1 (an AMI is regional: copy it to deploy elsewhere, see packer/README.md)."
}

variable "aws_instance_type" {
  type        = string
  default     = "t3.medium"
  description = "Instance type of the temporary build instance."
}

variable "aws_subnet_id" {
  type        = string
  default     = ""
  description = "Subnet for the build instance; empty uses the default VPC."
}

# --- Google Cloud (googlecompute) ---
variable "gcp_project_id" {
  type        = string
  default     = ""
  description = "Project the image is created in."
}

variable "gcp_zone" {
  type        = string
  default     = "europe-west4-a"
  description = "Zone of the temporary build VM."
}

variable "gcp_machine_type" {
  type        = string
  default     = "e2-standard-2"
  description = "Machine type of the temporary build VM."
}

variable "gcp_account_file" {
  type        = string
  default     = ""
  description = "Service-account key JSON; empty uses application-default credentials."
}

# --- Azure (azure-arm) ---
variable "azure_subscription_id" {
  type        = string
  default     = ""
  description = "Subscription the managed image is created in."
}

variable "azure_resource_group" {
  type        = string
  default     = ""
  description = "Existing resource group that receives the managed image."
}

variable "azure_location" {
  type        = string
  default     = "westeurope"
  description = "Azure region of the build VM."
}

variable "azure_vm_size" {
  type        = string
  default     = "Standard_D2s_v5"
  description = "Size of the temporary build VM."
}

variable "azure_client_id" {
  type        = string
  default     = ""
  description = "Service principal app id; empty: the Azure CLI login (`az login`) is used."
}

variable "azure_client_secret" {
  type        = string
  default     = ""
  sensitive   = true
  description = "Service principal secret (pass via PKR_VAR_azure_client_secret, never a file)."
}

# --- Alibaba Cloud (alicloud-ecs) ---
variable "alibaba_region" {
  type        = string
  default     = "cn-hangzhou"
  description = "Region of the build instance and of the custom image (images are regional: copy it to others)."
}

variable "alibaba_instance_type" {
  type        = string
  default     = "ecs.g7.large"
  description = "Instance type of the temporary build instance."
}

variable "alibaba_source_image" {
  type        = string
  default     = ""
  description = "Id of the Debian 12 public image to start from (aliyun ecs DescribeImages --ImageOwnerAlias system --OSType linux; ids carry a date and change)."
}

variable "alibaba_access_key" {
  type        = string
  default     = env("ALIBABA_CLOUD_ACCESS_KEY_ID")
  description = "AccessKey id; default: ALIBABA_CLOUD_ACCESS_KEY_ID (Packer 1.6.6's builder itself reads only ALICLOUD_ACCESS_KEY)."
}

variable "alibaba_secret_key" {
  type        = string
  default     = env("ALIBABA_CLOUD_ACCESS_KEY_SECRET")
  sensitive   = true
  description = "AccessKey secret; default: ALIBABA_CLOUD_ACCESS_KEY_SECRET (never a file)."
}
