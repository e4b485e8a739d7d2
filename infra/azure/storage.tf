# The lake's storage account: ADLS Gen2 (hierarchical namespace), so that the commit protocol
# renames a staged hour into place as on a local disk (journal, rename the live hour aside,
# rename the staged hour in, delete the old one). No shared keys, no public access: the
# orchestrator and the Databricks cluster use the service principal (identity.tf) through
# Azure AD; the network reaches the account through private endpoints.

resource "azurerm_storage_account" "lake" {
  #checkov:skip=CKV_AZURE_33:Queue service logging: the account has no queues (the lake uses blobs only), and with shared keys off the provider cannot set queue properties.
  name                              = "${var.name}lake"
  resource_group_name               = azurerm_resource_group.lake.name
  location                          = azurerm_resource_group.lake.location
  account_kind                      = "StorageV2"
  account_tier                      = "Standard"
  account_replication_type          = "GZRS"
  is_hns_enabled                    = true
  min_tls_version                   = "TLS1_2"
  https_traffic_only_enabled        = true
  shared_access_key_enabled         = false
  default_to_oauth_authentication   = true
  allow_nested_items_to_be_public   = false
  public_network_access_enabled     = false
  infrastructure_encryption_enabled = true
  local_user_enabled                = false
  tags                              = local.tags

  identity {
    type = "SystemAssigned"
  }

  network_rules {
    default_action = "Deny"
    bypass         = ["AzureServices", "Logging", "Metrics"]
    ip_rules       = var.allowed_ip_ranges
    virtual_network_subnet_ids = [
      azurerm_subnet.databricks_host.id,
      azurerm_subnet.databricks_container.id,
    ]
  }

  blob_properties {
    delete_retention_policy {
      days = 7
    }
    container_delete_retention_policy {
      days = 7
    }
  }

  sas_policy {
    expiration_period = "01.00:00:00"
    expiration_action = "Log"
  }

  lifecycle {
    ignore_changes = [customer_managed_key] # set by azurerm_storage_account_customer_managed_key
  }
}

resource "azurerm_storage_account_customer_managed_key" "lake" {
  storage_account_id = azurerm_storage_account.lake.id
  key_vault_id       = azurerm_key_vault.lake.id
  key_name           = azurerm_key_vault_key.lake.name

  depends_on = [azurerm_role_assignment.storage_uses_key]
}

resource "azurerm_storage_container" "lake" {
  #checkov:skip=CKV2_AZURE_21:Blob reads are logged by the diagnostic setting in monitoring.tf (StorageRead/Write/Delete to Log Analytics); the check looks for the older storage insights, which needs an account key, and shared keys are off.
  name                  = var.lake_container
  storage_account_id    = azurerm_storage_account.lake.id
  container_access_type = "private"
}

# Transient prefixes only: nothing under the archive or the lake's data expires. The sync
# deletes its own staging; the rule removes what a crashed run on a lost cluster left behind.
resource "azurerm_storage_management_policy" "lake" {
  storage_account_id = azurerm_storage_account.lake.id

  rule {
    name    = "transient"
    enabled = true
    filters {
      blob_types = ["blockBlob"]
      prefix_match = [
        "${var.lake_container}/${local.jobs_prefix}",
        "${var.lake_container}/${local.pipes_prefix}",
        "${var.lake_container}/${local.staging_prefix}",
      ]
    }
    actions {
      base_blob {
        delete_after_days_since_modification_greater_than = var.transient_expiration_days
      }
    }
  }
}

resource "azurerm_private_endpoint" "storage" {
  for_each = {
    blob = azurerm_private_dns_zone.blob.id
    dfs  = azurerm_private_dns_zone.dfs.id
  }
  name                = "${var.name}-storage-${each.key}"
  location            = azurerm_resource_group.lake.location
  resource_group_name = azurerm_resource_group.lake.name
  subnet_id           = azurerm_subnet.endpoints.id
  tags                = local.tags

  private_service_connection {
    name                           = "${var.name}-storage-${each.key}"
    private_connection_resource_id = azurerm_storage_account.lake.id
    subresource_names              = [each.key]
    is_manual_connection           = false
  }

  private_dns_zone_group {
    name                 = each.key
    private_dns_zone_ids = [each.value]
  }
}
