# Reads, writes and deletes of the lake's blobs are logged (who read which hour, who erased
# what: the audit trail beside the lake's own privacy_requests table), kept a year.

resource "azurerm_log_analytics_workspace" "lake" {
  name                = "${var.name}-logs"
  location            = azurerm_resource_group.lake.location
  resource_group_name = azurerm_resource_group.lake.name
  sku                 = "PerGB2018"
  retention_in_days   = 365
  tags                = local.tags
}

resource "azurerm_monitor_diagnostic_setting" "blob" {
  name                       = "${var.name}-blob"
  target_resource_id         = "${azurerm_storage_account.lake.id}/blobServices/default"
  log_analytics_workspace_id = azurerm_log_analytics_workspace.lake.id

  enabled_log {
    category = "StorageRead"
  }
  enabled_log {
    category = "StorageWrite"
  }
  enabled_log {
    category = "StorageDelete"
  }
}
