# One service principal for the lake's jobs, with the least it needs: read and write blobs in
# the lake's container (not the account, not other containers) and read the lake's secrets.
# The orchestrator (Dagster) signs in as it (AZURE_CLIENT_ID / AZURE_TENANT_ID /
# AZURE_CLIENT_SECRET in its environment) to write the archive and submit Databricks runs;
# the Databricks cluster uses it through the secret scope for abfss:// access.

resource "azuread_application" "lake" {
  display_name = "${var.name}-jobs"
}

resource "azuread_service_principal" "lake" {
  client_id = azuread_application.lake.client_id
}

resource "azuread_application_password" "lake" {
  application_id = azuread_application.lake.id
  display_name   = "${var.name}-jobs"
  end_date       = var.key_expiration_date
}

resource "azurerm_role_assignment" "jobs_use_container" {
  scope                = azurerm_storage_container.lake.id
  role_definition_name = "Storage Blob Data Contributor"
  principal_id         = azuread_service_principal.lake.object_id
}

resource "azurerm_role_assignment" "jobs_read_secrets" {
  scope                = azurerm_key_vault.lake.id
  role_definition_name = "Key Vault Secrets User"
  principal_id         = azuread_service_principal.lake.object_id
}

resource "azurerm_key_vault_secret" "jobs_secret" {
  name            = "jobs-client-secret"
  value           = azuread_application_password.lake.value
  key_vault_id    = azurerm_key_vault.lake.id
  content_type    = "password"
  expiration_date = var.key_expiration_date

  depends_on = [azurerm_role_assignment.deployer_manages_vault]
}
