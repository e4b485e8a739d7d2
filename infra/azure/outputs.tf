output "lake_root" {
  description = "The lake's root for the settings: [lake] lake_root (the sync, the catalog)."
  value       = local.lake_root
}

output "archive_root" {
  description = "The raw archive's root for the settings: archive_root (the collector, the importer, the sensors)."
  value       = local.archive_root
}

output "storage_account_name" {
  description = "The ADLS Gen2 account (hierarchical namespace on)."
  value       = azurerm_storage_account.lake.name
}

output "databricks_workspace_url" {
  description = "URL of the Databricks workspace: the Databricks provider's host and [compute] databricks_host."
  value       = "https://${azurerm_databricks_workspace.lake.workspace_url}"
}

output "databricks_cluster_policy_id" {
  description = "Cluster policy a sync's job cluster must use ([compute] databricks_policy_id)."
  value       = databricks_cluster_policy.sync.id
}

output "service_principal_client_id" {
  description = "Client id of the jobs' service principal (AZURE_CLIENT_ID of the orchestrator); its secret is the Key Vault secret jobs-client-secret."
  value       = azuread_application.lake.client_id
}

output "key_vault_uri" {
  description = "The lake's Key Vault (the metastore password and the service principal's secret)."
  value       = azurerm_key_vault.lake.vault_uri
}

output "metastore_jdbc_url" {
  description = "JDBC URL of the Hive metastore's database ([catalog] metastore_jdbc_url)."
  value       = local.metastore_jdbc_url
}
