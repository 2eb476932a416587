# One VM per rank.  Its custom data (what cloud-init reads on Azure) is module.nodes'
# rendering for that rank, passed through unchanged (base64 because the API takes it so).

# Why for_each keyed by rank and not count: `grow` adds nodes (node.grown, ranks past
# node_count) and `shrink` removes any of them, so each rank's VM, NIC and NIC-to-ASG
# association are addressed by the rank ("0", "1", ..., "12"): removing rank 12 never
# shifts rank 13 to another address, as count would (replacing a running node).  Not
# keyed by group either: a rank is an index everywhere (the node module renders
# user-data, env and groups as lists by rank; node_ips/node_ids are read by rank), so
# the outputs stay lists by rank.
locals {
  # Every node keyed by its rank: the cluster's own ranks, then the nodes `grow` added.
  machines = module.nodes.machines
  # Per node: its group's instance_type, else the top-level instance_type.
  machine_types = { for k, m in local.machines :
    k => m.group == null ? var.instance_type : lookup(var.group_instance_types, m.group, var.instance_type)
  }
  # The cluster's own ranks in rank order (output instance_types).
  instance_types = [for i, _ in module.nodes.groups : local.machine_types[tostring(i)]]
}

resource "azurerm_network_interface" "node" {
  for_each            = local.machines
  name                = "${local.name}-${each.key}"
  resource_group_name = local.rg_name
  location            = local.rg_location
  tags                = local.tags
  ip_configuration {
    name                          = "private"
    subnet_id                     = azurerm_subnet.nodes.id
    private_ip_address_allocation = "Dynamic"
    # no public_ip_address_id: no public IP
  }
}

resource "azurerm_network_interface_application_security_group_association" "node" {
  for_each                      = local.machines
  network_interface_id          = azurerm_network_interface.node[each.key].id
  application_security_group_id = azurerm_application_security_group.nodes.id
}

resource "azurerm_linux_virtual_machine" "node" {
  for_each                        = local.machines
  name                            = "${local.name}-${each.key}"
  computer_name                   = "syndeo-${each.key}"
  resource_group_name             = local.rg_name
  location                        = local.rg_location
  size                            = local.machine_types[each.key]
  zone                            = var.zone
  source_image_id                 = var.image
  network_interface_ids           = [azurerm_network_interface.node[each.key].id]
  custom_data                     = base64encode(each.value.user_data)
  admin_username                  = "syndeoadmin"
  disable_password_authentication = true
  allow_extension_operations      = false
  encryption_at_host_enabled      = var.encryption_at_host
  priority                        = var.spot ? "Spot" : "Regular"
  eviction_policy                 = var.spot ? "Delete" : null
  max_bid_price                   = var.spot ? -1 : null
  tags                            = merge(local.tags, { syndeo-rank = each.key })

  # Password login is disabled and Azure insists on an admin key.  Only its public
  # half is ever here: a key generated in Terraform (tls_private_key) would keep the
  # private half in the state.  The launcher passes one whose private half it never
  # kept (nobody logs in: admin access is through Bastion/the serial console).
  admin_ssh_key {
    username   = "syndeoadmin"
    public_key = var.admin_ssh_public_key
  }

  identity {
    type         = "UserAssigned"
    identity_ids = [azurerm_user_assigned_identity.nodes.id]
  }

  os_disk {
    caching              = "ReadWrite"
    storage_account_type = local.os_disk_type[local.machine_types[each.key]] # disk.tf
    disk_size_gb         = var.disk_size_gb
  }

  depends_on = [
    # Nodes read and write the container from their first boot.
    azurerm_role_assignment.nodes_container,
    azurerm_network_interface_application_security_group_association.node,
    azurerm_subnet_network_security_group_association.nodes,
  ]
}
