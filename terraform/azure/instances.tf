# One VM per rank.  Its custom data (what cloud-init reads on Azure) is module.nodes'
# rendering for that rank, passed through unchanged (base64 because the API takes it so).

# Why count and not a for_each per group: a rank is an index everywhere -- the node
# module renders user-data, env and groups as lists by rank, and node_ips/node_ids are
# read by rank -- so instance N is rank N, and its group (hence its type) is looked up
# from module.nodes.groups[N].  Instances keyed by group would give the same machines
# under other addresses, with the rank -> index mapping to redo in every output.
locals {
  group_of_name = { for g in var.groups : g.name => g }
  # Per rank: its group's instance_type, else the top-level instance_type.
  instance_types = [for name in module.nodes.groups :
    name == null ? var.instance_type : coalesce(local.group_of_name[name].instance_type, var.instance_type)
  ]
}

# Password login is disabled and Azure insists on an admin key; without
# admin_ssh_public_key one is generated here and never output.
resource "tls_private_key" "admin" {
  count     = var.admin_ssh_public_key == null ? 1 : 0
  algorithm = "RSA"
  rsa_bits  = 4096
}

resource "azurerm_network_interface" "node" {
  count               = var.node_count
  name                = "${local.name}-${count.index}"
  resource_group_name = azurerm_resource_group.this.name
  location            = azurerm_resource_group.this.location
  tags                = local.tags
  ip_configuration {
    name                          = "private"
    subnet_id                     = azurerm_subnet.nodes.id
    private_ip_address_allocation = "Dynamic"
    # no public_ip_address_id: no public IP
  }
}

resource "azurerm_network_interface_application_security_group_association" "node" {
  count                         = var.node_count
  network_interface_id          = azurerm_network_interface.node[count.index].id
  application_security_group_id = azurerm_application_security_group.nodes.id
}

resource "azurerm_linux_virtual_machine" "node" {
  count                           = var.node_count
  name                            = "${local.name}-${count.index}"
  computer_name                   = "syndeo-${count.index}"
  resource_group_name             = azurerm_resource_group.this.name
  location                        = azurerm_resource_group.this.location
  size                            = local.instance_types[count.index]
  zone                            = var.zone
  source_image_id                 = var.image
  network_interface_ids           = [azurerm_network_interface.node[count.index].id]
  custom_data                     = base64encode(module.nodes.user_data[count.index])
  admin_username                  = "syndeoadmin"
  disable_password_authentication = true
  allow_extension_operations      = false
  encryption_at_host_enabled      = var.encryption_at_host
  priority                        = var.spot ? "Spot" : "Regular"
  eviction_policy                 = var.spot ? "Delete" : null
  max_bid_price                   = var.spot ? -1 : null
  tags                            = merge(local.tags, { syndeo-rank = tostring(count.index) })

  admin_ssh_key {
    username   = "syndeoadmin"
    public_key = var.admin_ssh_public_key != null ? var.admin_ssh_public_key : tls_private_key.admin[0].public_key_openssh
  }

  identity {
    type         = "UserAssigned"
    identity_ids = [azurerm_user_assigned_identity.nodes.id]
  }

  os_disk {
    caching              = "ReadWrite"
    storage_account_type = "Premium_LRS"
    disk_size_gb         = var.disk_size_gb
  }

  depends_on = [
    # Nodes read and write the container from their first boot.
    azurerm_role_assignment.nodes_container,
    azurerm_network_interface_application_security_group_association.node,
    azurerm_subnet_network_security_group_association.nodes,
  ]
}
