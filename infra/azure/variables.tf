# Every variable has a description (datalake_assets_tests/infra/test_azure_module.py checks it).

variable "name" {
  description = "Name of the lake: prefix of every resource's name and the value of the lake tag. 3-16 of [a-z0-9], starting with a letter (storage account and Key Vault names are short and global)."
  type        = string
  default     = "segmentlake"

  validation {
    condition     = can(regex("^[a-z][a-z0-9]{2,15}$", var.name))
    error_message = "name must be 3-16 characters of [a-z0-9] and start with a letter."
  }
}

variable "location" {
  description = "Azure region of every resource, e.g. westeurope."
  type        = string
  default     = "westeurope"
}

variable "tags" {
  description = "Extra tags for every resource (the lake tag `datalake = <name>` is added and wins)."
  type        = map(string)
  default     = {}
}

variable "lake_container" {
  description = "Name of the ADLS Gen2 container (file system) that holds the archive, the lake, job packages and Pipes messages."
  type        = string
  default     = "lake"

  validation {
    condition     = can(regex("^[a-z0-9](?:[a-z0-9]|-[a-z0-9]){2,62}$", var.lake_container))
    error_message = "lake_container must be a valid container name (3-63 of [a-z0-9-], no double hyphen)."
  }
}

variable "transient_expiration_days" {
  description = "Days after which job packages (_jobs/), Pipes messages (_pipes/) and crash debris under the lake's _staging/ are deleted by the storage lifecycle policy."
  type        = number
  default     = 14
}

variable "address_space" {
  description = "Address space of the lake's virtual network (Databricks subnets, MySQL, private endpoints)."
  type        = string
  default     = "10.42.0.0/16"
}

variable "allowed_ip_ranges" {
  description = "Public IP ranges (CIDR) allowed through the storage account's and Key Vault's firewalls besides the virtual network, e.g. the orchestrator's egress address. Empty: private endpoints only."
  type        = list(string)
  default     = []
}

variable "mysql_sku" {
  description = "SKU of the MySQL Flexible Server that backs the Hive metastore."
  type        = string
  default     = "GP_Standard_D2ds_v4"
}

variable "mysql_admin_login" {
  description = "Administrator login of the metastore's MySQL server (its password is generated and kept in Key Vault)."
  type        = string
  default     = "metastore"
}

variable "databricks_spark_version" {
  description = "Databricks runtime the cluster policy pins (Spark 3.5 or later; the job also runs on Spark 3.5)."
  type        = string
  default     = "15.4.x-scala2.12"
}

variable "databricks_node_type" {
  description = "VM size of the sync's Databricks workers."
  type        = string
  default     = "Standard_D4ds_v5"
}

variable "databricks_max_workers" {
  description = "Largest number of workers the cluster policy allows."
  type        = number
  default     = 8
}

variable "key_expiration_date" {
  description = "Expiration date (RFC 3339) of the customer-managed key and the MySQL password secret in Key Vault; rotate before it."
  type        = string
  default     = "2027-12-31T00:00:00Z"
}
