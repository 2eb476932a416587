# The root `invoke deploy --target gcp` applies (its state and tfvars live in the
# cluster's own directory): the provider configured here, the cluster in ../ (a module
# without a provider block, usable with count/for_each by callers of their own, as in
# ../examples).
terraform {
  required_version = ">= 1.9"
  required_providers {
    google = {
      source  = "hashicorp/google"
      version = ">= 6.0, < 8.0"
    }
  }
}


provider "google" {
  project = var.project
  region  = var.region
}
