# Key Vault: the storage account's customer-managed key, the metastore's MySQL password and the
# service principal's secret, read by Databricks through a Key Vault-backed secret scope and by
# the orchestrator from the environment. Access is Azure RBAC; the network reaches it privately.

resource "azurerm_key_vault" "lake" {
  name                          = "${var.name}-kv"
  location                      = azurerm_resource_group.lake.location
  resource_group_name           = azurerm_resource_group.lake.name
  tenant_id                     = data.azurerm_client_config.current.tenant_id
  sku_name                      = "premium" # HSM-backed keys
  enable_rbac_authorization     = true
  purge_protection_enabled      = true
  soft_delete_retention_days    = 90
  public_network_access_enabled = false
  tags                          = local.tags

  network_acls {
    default_action = "Deny"
    bypass         = "AzureServices"
    ip_rules       = var.allowed_ip_ranges
  }
}

# Whoever applies the module writes the key and the secrets.
resource "azurerm_role_assignment" "deployer_manages_vault" {
  scope                = azurerm_key_vault.lake.id
  role_definition_name = "Key Vault Administrator"
  principal_id         = data.azurerm_client_config.current.object_id
}

resource "azurerm_key_vault_key" "lake" {
  name            = "${var.name}-storage"
  key_vault_id    = azurerm_key_vault.lake.id
  key_type        = "RSA-HSM"
  key_size        = 3072
  key_opts        = ["wrapKey", "unwrapKey"]
  expiration_date = var.key_expiration_date

  rotation_policy {
    automatic {
      time_before_expiry = "P30D"
    }
    expire_after         = "P365D"
    notify_before_expiry = "P29D"
  }

  depends_on = [azurerm_role_assignment.deployer_manages_vault]
}

resource "azurerm_role_assignment" "storage_uses_key" {
  scope                = azurerm_key_vault.lake.id
  role_definition_name = "Key Vault Crypto Service Encryption User"
  principal_id         = azurerm_storage_account.lake.identity[0].principal_id
}

resource "azurerm_private_endpoint" "vault" {
  name                = "${var.name}-vault"
  location            = azurerm_resource_group.lake.location
  resource_group_name = azurerm_resource_group.lake.name
  subnet_id           = azurerm_subnet.endpoints.id
  tags                = local.tags

  private_service_connection {
    name                           = "${var.name}-vault"
    private_connection_resource_id = azurerm_key_vault.lake.id
    subresource_names              = ["vault"]
    is_manual_connection           = false
  }

  private_dns_zone_group {
    name                 = "vault"
    private_dns_zone_ids = [azurerm_private_dns_zone.vault.id]
  }
}
