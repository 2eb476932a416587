terraform {
  # 1.9: cross-variable validation.  Only Terraform's built-ins (terraform_data,
  # local-exec provisioners): no provider to download.
  required_version = ">= 1.9"
}
