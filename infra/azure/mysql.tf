# The Hive metastore's database: MySQL Flexible Server in the lake's network, TLS required.
# The metastore database is latin1: with utf8mb4 the metastore's index keys exceed MySQL's
# 767-byte limit and schema creation fails. The sync creates the schema up front (SchemaTool),
# never with datanucleus.schema.autoCreateAll, which deadlocks under concurrent first use.

resource "random_password" "mysql" {
  length  = 32
  special = false # it goes into a JDBC URL's properties and Spark conf unescaped
}

resource "azurerm_mysql_flexible_server" "metastore" {
  #checkov:skip=CKV_AZURE_53:The server is VNet-integrated (delegated_subnet_id): it has no public endpoint at all, which the provider does not express as an argument of its own.
  #checkov:skip=CKV2_AZURE_56:A VNet-integrated server is reached through its delegated subnet; Azure offers private endpoints only to servers in public-access mode.
  name                         = "${var.name}-metastore"
  resource_group_name          = azurerm_resource_group.lake.name
  location                     = azurerm_resource_group.lake.location
  administrator_login          = var.mysql_admin_login
  administrator_password       = random_password.mysql.result
  sku_name                     = var.mysql_sku
  version                      = "8.0.21"
  backup_retention_days        = 14
  geo_redundant_backup_enabled = true
  delegated_subnet_id          = azurerm_subnet.mysql.id
  private_dns_zone_id          = azurerm_private_dns_zone.mysql.id
  tags                         = local.tags

  storage {
    auto_grow_enabled = true
  }

  depends_on = [azurerm_private_dns_zone_virtual_network_link.zones]
}

resource "azurerm_mysql_flexible_server_configuration" "require_tls" {
  name                = "require_secure_transport"
  resource_group_name = azurerm_resource_group.lake.name
  server_name         = azurerm_mysql_flexible_server.metastore.name
  value               = "ON"
}

resource "azurerm_mysql_flexible_server_configuration" "tls_version" {
  name                = "tls_version"
  resource_group_name = azurerm_resource_group.lake.name
  server_name         = azurerm_mysql_flexible_server.metastore.name
  value               = "TLSv1.2"
}

resource "azurerm_mysql_flexible_database" "metastore" {
  name                = "metastore"
  resource_group_name = azurerm_resource_group.lake.name
  server_name         = azurerm_mysql_flexible_server.metastore.name
  charset             = "latin1"
  collation           = "latin1_swedish_ci"
}

resource "azurerm_key_vault_secret" "mysql_password" {
  name            = "metastore-password"
  value           = random_password.mysql.result
  key_vault_id    = azurerm_key_vault.lake.id
  content_type    = "password"
  expiration_date = var.key_expiration_date

  depends_on = [azurerm_role_assignment.deployer_manages_vault]
}
