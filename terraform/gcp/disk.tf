# The boot disk type of each machine type the cluster uses.  Provider-free on purpose
# (variables only): tests/iac/test_disk_types.py evaluates it with `terraform test`
# offline, where the google provider cannot be downloaded.
locals {
  # Machine series that attach Hyperdisk only, no Persistent Disk (Compute Engine docs,
  # "About Hyperdisk", supported machine series; checked 2026-11): a pd-balanced boot
  # disk fails the instance's creation there.  Everything else takes pd-balanced.
  hyperdisk_only = "^(c4|c4a|c4d|n4|n4a|n4d|h4d|x4|m4|a4|a4x|g4)-|^a3-ultragpu-"
  cluster_machine_types = distinct(concat([var.instance_type],
  values(var.group_instance_types)))
  # disk_type set: that type for every node (you know your machine types better).
  boot_disk_type = { for t in local.cluster_machine_types :
    t => coalesce(var.disk_type, can(regex(local.hyperdisk_only, t)) ? "hyperdisk-balanced" : "pd-balanced")
  }
}
