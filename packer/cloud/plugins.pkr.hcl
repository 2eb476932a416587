# Packer >= 1.7 no longer bundles the cloud builders: `packer init packer/cloud` installs
# these before the first build.  Kept in a file of its own because Debian's Packer
# 1.6.6, the one the offline check (tests/apptainer/test_packer.py) runs, rejects this
# block; that check validates every other file of this folder.
packer {
  required_version = ">= 1.10.0"
  required_plugins {
    amazon = {
      source  = "github.com/hashicorp/amazon"
      version = "~> 1"
    }
    googlecompute = {
      source  = "github.com/hashicorp/googlecompute"
      version = "~> 1"
    }
    azure = {
      source  = "github.com/hashicorp/azure"
      version = "~> 2"
    }
    alicloud = {
      source  = "github.com/hashicorp/alicloud"
      version = "~> 1"
    }
  }
}
