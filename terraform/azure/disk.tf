# The OS disk type of each VM size the cluster uses.  Provider-free on purpose
# (variables only): tests/iac/test_disk_types.py evaluates it with `terraform test`
# offline, where the azurerm provider cannot be downloaded.
locals {
  # A size takes Premium SSD when its name says "premium storage capable": an `s` among
  # the lower-case feature letters after the vCPU count (Standard_D8s_v5,
  # Standard_NC4as_T4_v3, Standard_M128-64ms) or the older DS/GS series
  # (Standard_DS2_v2); Azure's VM size naming conventions.  A Premium_LRS disk on any
  # other size (Standard_D8_v5, Standard_A2_v2) fails the VM's creation: those get
  # Standard SSD.
  premium_capable = "^Standard_[A-Z]+[0-9]+(-[0-9]+)?[a-z]*s[a-z]*(_|$)|^Standard_(DS|GS)[0-9]"
  cluster_machine_types = distinct(concat([var.instance_type],
  values(var.group_instance_types)))
  # disk_type set: that type for every node (you know your sizes better).
  os_disk_type = { for t in local.cluster_machine_types :
    t => coalesce(var.disk_type, can(regex(local.premium_capable, t)) ? "Premium_LRS" : "StandardSSD_LRS")
  }
}
