# A VNet of its own with one subnet.  No public IPs, no NAT gateway, and the subnet's
# default outbound access is off: the image is baked, and the only service the nodes
# use is Blob Storage, reached through the subnet's Microsoft.Storage service endpoint,
# whose service endpoint policy admits the cluster's storage account only (the NSG's
# `Storage` service tag alone would let a node reach every account in the region).
# Instance metadata (identity tokens) and Azure DNS are platform addresses no NSG blocks.

resource "azurerm_virtual_network" "this" {
  name                = local.name
  resource_group_name = local.rg_name
  location            = local.rg_location
  address_space       = [var.network_cidr]
  tags                = local.tags
}

resource "azurerm_subnet" "nodes" {
  name                            = "nodes"
  resource_group_name             = local.rg_name
  virtual_network_name            = azurerm_virtual_network.this.name
  address_prefixes                = [cidrsubnet(var.network_cidr, 20 - tonumber(split("/", var.network_cidr)[1]), 0)]
  service_endpoints               = ["Microsoft.Storage"]
  service_endpoint_policy_ids     = [azurerm_subnet_service_endpoint_storage_policy.nodes.id]
  default_outbound_access_enabled = false
}

# Egress over the service endpoint to this storage account only: a node (or code run on
# it) cannot write the cluster's data to another account, whatever credentials it holds.
resource "azurerm_subnet_service_endpoint_storage_policy" "nodes" {
  name                = "${local.name}-storage"
  resource_group_name = local.rg_name
  location            = local.rg_location
  tags                = local.tags
  definition {
    name              = "rendezvous-account"
    description       = "The cluster's rendezvous storage account only"
    service_resources = [local.storage_account_arm_id]
  }
}

resource "azurerm_application_security_group" "nodes" {
  name                = "${local.name}-nodes"
  resource_group_name = local.rg_name
  location            = local.rg_location
  tags                = local.tags
}

resource "azurerm_network_security_group" "nodes" {
  name                = "${local.name}-nodes"
  resource_group_name = local.rg_name
  location            = local.rg_location
  tags                = local.tags
  # Rules are separate resources below.
}

resource "azurerm_subnet_network_security_group_association" "nodes" {
  subnet_id                 = azurerm_subnet.nodes.id
  network_security_group_id = azurerm_network_security_group.nodes.id
}

# Ray binds OS-chosen ports (and the client server a derived port in 20000-29999):
# every unprivileged TCP port, from members of the cluster's ASG to members.
resource "azurerm_network_security_rule" "ray_in" {
  name                                       = "ray-from-cluster"
  resource_group_name                        = local.rg_name
  network_security_group_name                = azurerm_network_security_group.nodes.name
  priority                                   = 100
  direction                                  = "Inbound"
  access                                     = "Allow"
  protocol                                   = "Tcp"
  source_port_range                          = "*"
  destination_port_range                     = "1024-65535"
  source_application_security_group_ids      = [azurerm_application_security_group.nodes.id]
  destination_application_security_group_ids = [azurerm_application_security_group.nodes.id]
  description                                = "Ray between the cluster's own nodes"
}

resource "azurerm_network_security_rule" "admin_ssh" {
  count                                      = length(var.admin_cidrs) > 0 ? 1 : 0
  name                                       = "ssh-from-admin-cidrs"
  resource_group_name                        = local.rg_name
  network_security_group_name                = azurerm_network_security_group.nodes.name
  priority                                   = 110
  direction                                  = "Inbound"
  access                                     = "Allow"
  protocol                                   = "Tcp"
  source_port_range                          = "*"
  destination_port_range                     = "22"
  source_address_prefixes                    = var.admin_cidrs
  destination_application_security_group_ids = [azurerm_application_security_group.nodes.id]
  description                                = "SSH from admin_cidrs (e.g. the Azure Bastion subnet)"
}

# Azure's default rule 65000 admits everything from the VNet: close it, so that only
# the cluster's ASG reaches the nodes.
resource "azurerm_network_security_rule" "deny_vnet_in" {
  name                        = "deny-other-vnet-inbound"
  resource_group_name         = local.rg_name
  network_security_group_name = azurerm_network_security_group.nodes.name
  priority                    = 4000
  direction                   = "Inbound"
  access                      = "Deny"
  protocol                    = "*"
  source_port_range           = "*"
  destination_port_range      = "*"
  source_address_prefix       = "VirtualNetwork"
  destination_address_prefix  = "*"
  description                 = "Nothing else in the VNet may connect"
}

resource "azurerm_network_security_rule" "ray_out" {
  name                                       = "ray-to-cluster"
  resource_group_name                        = local.rg_name
  network_security_group_name                = azurerm_network_security_group.nodes.name
  priority                                   = 100
  direction                                  = "Outbound"
  access                                     = "Allow"
  protocol                                   = "Tcp"
  source_port_range                          = "*"
  destination_port_range                     = "1024-65535"
  source_application_security_group_ids      = [azurerm_application_security_group.nodes.id]
  destination_application_security_group_ids = [azurerm_application_security_group.nodes.id]
  description                                = "Ray to the cluster's own nodes"
}

resource "azurerm_network_security_rule" "storage_out" {
  name                        = "https-to-storage"
  resource_group_name         = local.rg_name
  network_security_group_name = azurerm_network_security_group.nodes.name
  priority                    = 110
  direction                   = "Outbound"
  access                      = "Allow"
  protocol                    = "Tcp"
  source_port_range           = "*"
  destination_port_range      = "443"
  source_address_prefix       = "VirtualNetwork"
  destination_address_prefix  = "Storage"
  description                 = "HTTPS to Blob Storage (rendezvous) over the service endpoint"
}

resource "azurerm_network_security_rule" "deny_internet_out" {
  name                        = "deny-internet-outbound"
  resource_group_name         = local.rg_name
  network_security_group_name = azurerm_network_security_group.nodes.name
  priority                    = 4000
  direction                   = "Outbound"
  access                      = "Deny"
  protocol                    = "*"
  source_port_range           = "*"
  destination_port_range      = "*"
  source_address_prefix       = "*"
  destination_address_prefix  = "Internet"
  description                 = "The image is baked: nothing else leaves the VNet"
}
