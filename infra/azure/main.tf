# The lake on Azure: the same lake as on AWS (infra/ at the top), on an ADLS Gen2 account with a
# hierarchical namespace, synced on Databricks, catalogued in a Hive metastore on MySQL.
# The module configures no provider; the root module does (README.md in this folder).

data "azurerm_client_config" "current" {}

locals {
  tags = merge(var.tags, { datalake = var.name })

  # Fixed prefixes in the lake container, as in the AWS module.
  jobs_prefix    = "_jobs/"  # job packages, content-addressed ([compute] staging_prefix)
  pipes_prefix   = "_pipes/" # Dagster Pipes messages and reports of remote runs
  staging_prefix = "lake/_staging/"

  dfs_host     = "${azurerm_storage_account.lake.name}.dfs.core.windows.net"
  lake_root    = "abfss://${var.lake_container}@${local.dfs_host}/lake"
  archive_root = "abfss://${var.lake_container}@${local.dfs_host}/archive"
}

resource "azurerm_resource_group" "lake" {
  name     = "${var.name}-rg"
  location = var.location
  tags     = local.tags
}
