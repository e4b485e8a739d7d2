# The Databricks workspace that runs the syncs (Segment's model: the customer's own workspace),
# injected into the lake's network with no public IPs on its nodes, and a cluster policy that
# fixes what a sync's cluster may be. The Databricks provider is configured by the root module
# with this workspace's URL (outputs.databricks_workspace_url; README.md says how).

resource "azurerm_databricks_workspace" "lake" {
  #checkov:skip=CKV_AZURE_158:Back-end Private Link needs the orchestrator (which calls the workspace API to submit runs) inside the lake's network or peered with it; the cluster's nodes already have no public IPs and live in the injected subnets. Turn it on with public_network_access_enabled = false and NoAzureDatabricksRules when your orchestrator runs in the network.
  name                                  = "${var.name}-databricks"
  resource_group_name                   = azurerm_resource_group.lake.name
  location                              = azurerm_resource_group.lake.location
  sku                                   = "premium" # secret scopes on Key Vault, cluster policies
  managed_resource_group_name           = "${var.name}-databricks-managed"
  public_network_access_enabled         = true # the orchestrator submits runs over the API
  network_security_group_rules_required = "AllRules"
  infrastructure_encryption_enabled     = true
  customer_managed_key_enabled          = true
  tags                                  = local.tags

  custom_parameters {
    no_public_ip                                         = true
    virtual_network_id                                   = azurerm_virtual_network.lake.id
    public_subnet_name                                   = azurerm_subnet.databricks_host.name
    private_subnet_name                                  = azurerm_subnet.databricks_container.name
    public_subnet_network_security_group_association_id  = azurerm_subnet_network_security_group_association.databricks_host.id
    private_subnet_network_security_group_association_id = azurerm_subnet_network_security_group_association.databricks_container.id
  }
}

# DBFS root (cluster logs, libraries) encrypted with the lake's key too.
resource "azurerm_role_assignment" "dbfs_uses_key" {
  scope                = azurerm_key_vault.lake.id
  role_definition_name = "Key Vault Crypto Service Encryption User"
  principal_id         = azurerm_databricks_workspace.lake.storage_account_identity[0].principal_id
}

resource "azurerm_databricks_workspace_root_dbfs_customer_managed_key" "lake" {
  workspace_id     = azurerm_databricks_workspace.lake.id
  key_vault_key_id = azurerm_key_vault_key.lake.id

  depends_on = [azurerm_role_assignment.dbfs_uses_key]
}

# The cluster reads the service principal's secret and the metastore's password from here.
resource "databricks_secret_scope" "lake" {
  name = var.name

  keyvault_metadata {
    resource_id = azurerm_key_vault.lake.id
    dns_name    = azurerm_key_vault.lake.vault_uri
  }
}

locals {
  metastore_jdbc_url = "jdbc:mysql://${azurerm_mysql_flexible_server.metastore.fqdn}:3306/metastore?useSSL=true&requireSSL=true&useMysqlMetadata=true"
  oauth_endpoint     = "https://login.microsoftonline.com/${data.azurerm_client_config.current.tenant_id}/oauth2/token"

  # Spark settings every sync cluster gets: abfss:// through the service principal, and the
  # external Hive metastore on MySQL (schema created up front: verification on, no auto-create)
  # through the runtime's built-in Hive 2.3 client: the schema version that
  # `datalake catalog init-metastore` creates, so local runs and the cluster share one database.
  sync_spark_conf = {
    "spark.hadoop.fs.azure.account.auth.type.${local.dfs_host}"              = "OAuth"
    "spark.hadoop.fs.azure.account.oauth.provider.type.${local.dfs_host}"    = "org.apache.hadoop.fs.azurebfs.oauth2.ClientCredsTokenProvider"
    "spark.hadoop.fs.azure.account.oauth2.client.id.${local.dfs_host}"       = azuread_application.lake.client_id
    "spark.hadoop.fs.azure.account.oauth2.client.secret.${local.dfs_host}"   = "{{secrets/${var.name}/jobs-client-secret}}"
    "spark.hadoop.fs.azure.account.oauth2.client.endpoint.${local.dfs_host}" = local.oauth_endpoint
    "spark.sql.hive.metastore.version"                                       = "2.3.9"
    "spark.sql.hive.metastore.jars"                                          = "builtin"
    "spark.hadoop.javax.jdo.option.ConnectionURL"                            = local.metastore_jdbc_url
    "spark.hadoop.javax.jdo.option.ConnectionDriverName"                     = "org.mariadb.jdbc.Driver"
    "spark.hadoop.javax.jdo.option.ConnectionUserName"                       = var.mysql_admin_login
    "spark.hadoop.javax.jdo.option.ConnectionPassword"                       = "{{secrets/${var.name}/metastore-password}}"
    "spark.hadoop.datanucleus.schema.autoCreateAll"                          = "false"
    "spark.hadoop.hive.metastore.schema.verification"                        = "true"
  }
}

resource "databricks_cluster_policy" "sync" {
  name = "${var.name}-sync"
  definition = jsonencode(merge(
    {
      spark_version           = { type = "fixed", value = var.databricks_spark_version }
      node_type_id            = { type = "fixed", value = var.databricks_node_type }
      driver_node_type_id     = { type = "fixed", value = var.databricks_node_type }
      autotermination_minutes = { type = "range", maxValue = 60, defaultValue = 20 }
      "autoscale.max_workers" = { type = "range", maxValue = var.databricks_max_workers }
      "custom_tags.datalake"  = { type = "fixed", value = var.name }
      data_security_mode      = { type = "fixed", value = "SINGLE_USER" }
    },
    { for k, v in local.sync_spark_conf : "spark_conf.${k}" => { type = "fixed", value = v } },
    # The job's own file I/O (pyarrow.fs, and the Pipes files under _pipes/) reads the lake as
    # the jobs' principal, from the standard Azure variables; the secret stays in Key Vault.
    { for k, v in local.sync_env_vars : "spark_env_vars.${k}" => { type = "fixed", value = v } },
  ))
}

locals {
  sync_env_vars = {
    AZURE_TENANT_ID     = data.azurerm_client_config.current.tenant_id
    AZURE_CLIENT_ID     = azuread_application.lake.client_id
    AZURE_CLIENT_SECRET = "{{secrets/${var.name}/jobs-client-secret}}"
  }
}

# The jobs' principal in the workspace: the orchestrator authenticates as it to submit the
# sync runs ([compute] backend = "databricks"). No cluster creation of its own: job clusters
# only under the sync policy (CAN_USE), which fixes what they may be.
resource "databricks_service_principal" "jobs" {
  application_id       = azuread_application.lake.client_id
  display_name         = "${var.name}-jobs"
  allow_cluster_create = false
}

resource "databricks_permissions" "sync_policy" {
  cluster_policy_id = databricks_cluster_policy.sync.id

  access_control {
    service_principal_name = databricks_service_principal.jobs.application_id
    permission_level       = "CAN_USE"
  }
}
