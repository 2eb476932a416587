# ../variables.tf types, validates and documents each of these; null (not set in the
# tfvars) means its default there, where every defaulted variable is nullable = false.

variable "cluster_name" { default = null }
variable "node_count" { default = null }
variable "instance_type" { default = null }
variable "image" { default = null }
variable "region" { default = null }
variable "zone" { default = null }
variable "spot" { default = null }
variable "disk_size_gb" { default = null }
variable "network_cidr" { default = null }
variable "create_bucket" { default = null }
variable "bucket_name" { default = null }
variable "bucket_versioning" { default = null }
variable "rendezvous_prefix" { default = null }
variable "record_expiry_days" { default = null }
variable "labels" { default = null }
variable "admin_cidrs" { default = null }
variable "cpus_per_node" { default = null }
variable "gpus_per_node" { default = null }
variable "memory_mb_per_node" { default = null }
variable "object_store_mb_per_node" { default = null }
variable "join_timeout_s" { default = null }
variable "run" { default = null }
variable "not_before" { default = null }
variable "image_path" { default = null }
variable "image_digest" { default = null }
variable "extra_env" { default = null }
variable "groups" { default = null }
variable "dashboard" { default = null }
variable "grown" { default = null }
variable "permissions_boundary" { default = null }
variable "ssm_endpoints" { default = null }

variable "launch_key" {
  default   = null
  sensitive = true
}


# The provider's own setting (not a module input).
variable "api_max_retries" {
  type        = number
  default     = null
  description = "How often the AWS provider retries a failed API call (provider max_retries; null: its default, 25). It retries InsufficientInstanceCapacity on RunInstances too, for minutes at 25, before the launcher can try the next zone."
  validation {
    condition     = var.api_max_retries == null || try(var.api_max_retries >= 0 && var.api_max_retries <= 100 && floor(var.api_max_retries) == var.api_max_retries, false)
    error_message = "api_max_retries: a whole number from 0 to 100 (or null)."
  }
}
