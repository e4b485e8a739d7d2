# One virtual network: the Databricks workspace's two injected subnets, the MySQL server's
# delegated subnet and a subnet for the private endpoints of storage and Key Vault.

resource "azurerm_virtual_network" "lake" {
  name                = "${var.name}-vnet"
  location            = azurerm_resource_group.lake.location
  resource_group_name = azurerm_resource_group.lake.name
  address_space       = [var.address_space]
  tags                = local.tags
}

resource "azurerm_subnet" "databricks_host" {
  name                 = "databricks-host"
  resource_group_name  = azurerm_resource_group.lake.name
  virtual_network_name = azurerm_virtual_network.lake.name
  address_prefixes     = [cidrsubnet(var.address_space, 6, 0)]

  delegation {
    name = "databricks"
    service_delegation {
      name = "Microsoft.Databricks/workspaces"
      actions = [
        "Microsoft.Network/virtualNetworks/subnets/join/action",
        "Microsoft.Network/virtualNetworks/subnets/prepareNetworkPolicies/action",
        "Microsoft.Network/virtualNetworks/subnets/unprepareNetworkPolicies/action",
      ]
    }
  }
}

resource "azurerm_subnet" "databricks_container" {
  name                 = "databricks-container"
  resource_group_name  = azurerm_resource_group.lake.name
  virtual_network_name = azurerm_virtual_network.lake.name
  address_prefixes     = [cidrsubnet(var.address_space, 6, 1)]

  delegation {
    name = "databricks"
    service_delegation {
      name = "Microsoft.Databricks/workspaces"
      actions = [
        "Microsoft.Network/virtualNetworks/subnets/join/action",
        "Microsoft.Network/virtualNetworks/subnets/prepareNetworkPolicies/action",
        "Microsoft.Network/virtualNetworks/subnets/unprepareNetworkPolicies/action",
      ]
    }
  }
}

resource "azurerm_subnet" "mysql" {
  name                 = "mysql"
  resource_group_name  = azurerm_resource_group.lake.name
  virtual_network_name = azurerm_virtual_network.lake.name
  address_prefixes     = [cidrsubnet(var.address_space, 8, 8)]

  delegation {
    name = "mysql"
    service_delegation {
      name    = "Microsoft.DBforMySQL/flexibleServers"
      actions = ["Microsoft.Network/virtualNetworks/subnets/join/action"]
    }
  }
}

resource "azurerm_subnet" "endpoints" {
  name                 = "private-endpoints"
  resource_group_name  = azurerm_resource_group.lake.name
  virtual_network_name = azurerm_virtual_network.lake.name
  address_prefixes     = [cidrsubnet(var.address_space, 8, 9)]
}

# Databricks manages the rules of these groups (no public IPs on the cluster's nodes).
resource "azurerm_network_security_group" "databricks" {
  name                = "${var.name}-databricks-nsg"
  location            = azurerm_resource_group.lake.location
  resource_group_name = azurerm_resource_group.lake.name
  tags                = local.tags
}

resource "azurerm_subnet_network_security_group_association" "databricks_host" {
  subnet_id                 = azurerm_subnet.databricks_host.id
  network_security_group_id = azurerm_network_security_group.databricks.id
}

resource "azurerm_subnet_network_security_group_association" "databricks_container" {
  subnet_id                 = azurerm_subnet.databricks_container.id
  network_security_group_id = azurerm_network_security_group.databricks.id
}

resource "azurerm_network_security_group" "private" {
  name                = "${var.name}-private-nsg"
  location            = azurerm_resource_group.lake.location
  resource_group_name = azurerm_resource_group.lake.name
  tags                = local.tags
}

resource "azurerm_subnet_network_security_group_association" "endpoints" {
  subnet_id                 = azurerm_subnet.endpoints.id
  network_security_group_id = azurerm_network_security_group.private.id
}

resource "azurerm_subnet_network_security_group_association" "mysql" {
  subnet_id                 = azurerm_subnet.mysql.id
  network_security_group_id = azurerm_network_security_group.private.id
}

resource "azurerm_private_dns_zone" "blob" {
  name                = "privatelink.blob.core.windows.net"
  resource_group_name = azurerm_resource_group.lake.name
  tags                = local.tags
}

resource "azurerm_private_dns_zone" "dfs" {
  name                = "privatelink.dfs.core.windows.net"
  resource_group_name = azurerm_resource_group.lake.name
  tags                = local.tags
}

resource "azurerm_private_dns_zone" "vault" {
  name                = "privatelink.vaultcore.azure.net"
  resource_group_name = azurerm_resource_group.lake.name
  tags                = local.tags
}

resource "azurerm_private_dns_zone" "mysql" {
  name                = "${var.name}.private.mysql.database.azure.com"
  resource_group_name = azurerm_resource_group.lake.name
  tags                = local.tags
}

resource "azurerm_private_dns_zone_virtual_network_link" "zones" {
  for_each = {
    blob  = azurerm_private_dns_zone.blob.name
    dfs   = azurerm_private_dns_zone.dfs.name
    vault = azurerm_private_dns_zone.vault.name
    mysql = azurerm_private_dns_zone.mysql.name
  }
  name                  = "${var.name}-${each.key}"
  resource_group_name   = azurerm_resource_group.lake.name
  private_dns_zone_name = each.value
  virtual_network_id    = azurerm_virtual_network.lake.id
  tags                  = local.tags
}
