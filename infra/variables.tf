# Every variable has a description (datalake_assets_tests/infra/test_module.py checks it); the
# README lists them in tables. A variable that decides whether a resource exists defaults to "" or a
# bool, never null: checkov evaluates `x == null` in a count as false and would silently skip
# the resource's checks.

# --- Naming and tags ------------------------------------------------------------------------

variable "name" {
  description = "Name of the lake: the value of the lake tag on every resource, and the prefix of IAM roles, the EMR cluster and the EMR Serverless application. 3-32 of [a-z0-9-], starting with a letter."
  type        = string
  default     = "segment-datalake"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{2,31}$", var.name))
    error_message = "name must be 3-32 characters of [a-z0-9-] and start with a letter."
  }
}

variable "lake_tag_key" {
  description = "Key of the tag that marks the lake's resources (value: var.name). The orchestrator may only submit steps to EMR clusters carrying this tag."
  type        = string
  default     = "datalake"
}

variable "tags" {
  description = "Extra tags for every resource (the lake tag is added and wins on conflict)."
  type        = map(string)
  default     = {}
}

variable "iam_permissions_boundary_arn" {
  description = "ARN of a permissions boundary policy for every IAM role the module creates, if your organization requires one. null: none."
  type        = string
  default     = null
}

# --- The lake bucket ---------------------------------------------------------------------------

variable "bucket_name" {
  description = "Name of the S3 bucket that holds the archive, the lake, job packages, Pipes messages and EMR logs. The module creates it; import an existing bucket with `terraform import` (see the README)."
  type        = string

  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$", var.bucket_name))
    error_message = "bucket_name must be a valid S3 bucket name (3-63 of [a-z0-9.-])."
  }
}

variable "lake_prefix" {
  description = "Key prefix of the lake (lake_root = s3://<bucket>/<lake_prefix>). Without slashes at either end."
  type        = string
  default     = "lake"

  validation {
    condition     = can(regex("^[A-Za-z0-9_.=-]+(/[A-Za-z0-9_.=-]+)*$", var.lake_prefix))
    error_message = "lake_prefix must be a non-empty key prefix without a leading or trailing slash."
  }
}

variable "archive_prefix" {
  description = "Key prefix of the raw Segment archive (archive_root = s3://<bucket>/<archive_prefix>). Without slashes at either end."
  type        = string
  default     = "archive"

  validation {
    condition     = can(regex("^[A-Za-z0-9_.=-]+(/[A-Za-z0-9_.=-]+)*$", var.archive_prefix))
    error_message = "archive_prefix must be a non-empty key prefix without a leading or trailing slash."
  }
}

variable "job_staging_prefix" {
  description = "Key prefix where the orchestrator uploads job packages (the `[compute] staging_prefix`). Objects under it expire after transient_expiration_days. Must end with '/'."
  type        = string
  default     = "_jobs/"

  validation {
    condition     = can(regex("^([A-Za-z0-9_.=-]+/)+$", var.job_staging_prefix))
    error_message = "job_staging_prefix must be a key prefix ending with '/', without a leading slash."
  }
}

variable "pipes_prefix" {
  description = "Key prefix of Dagster Pipes context and message objects. Objects under it expire after transient_expiration_days. Must end with '/'."
  type        = string
  default     = "_pipes/"

  validation {
    condition     = can(regex("^([A-Za-z0-9_.=-]+/)+$", var.pipes_prefix))
    error_message = "pipes_prefix must be a key prefix ending with '/', without a leading slash."
  }
}

variable "transient_expiration_days" {
  description = "Days after which objects under job_staging_prefix and pipes_prefix expire."
  type        = number
  default     = 14

  validation {
    condition     = var.transient_expiration_days >= 1
    error_message = "transient_expiration_days must be at least 1."
  }
}

variable "abort_incomplete_multipart_upload_days" {
  description = "Days after which incomplete multipart uploads are aborted, anywhere in the bucket."
  type        = number
  default     = 7

  validation {
    condition     = var.abort_incomplete_multipart_upload_days >= 1
    error_message = "abort_incomplete_multipart_upload_days must be at least 1."
  }
}

variable "log_expiration_days" {
  description = "Days after which EMR and EMR Serverless logs (under _logs/ in the lake bucket) expire."
  type        = number
  default     = 30

  validation {
    condition     = var.log_expiration_days >= 1
    error_message = "log_expiration_days must be at least 1."
  }
}

variable "enable_versioning" {
  description = "Keep previous versions of overwritten and deleted objects in the lake bucket (a re-synced hour replaces its files). false suspends versioning."
  type        = bool
  default     = true
}

variable "noncurrent_version_expiration_days" {
  description = "With versioning, days after which previous object versions are deleted (the lake rewrites hours on every replay, so keep this short)."
  type        = number
  default     = 30

  validation {
    condition     = var.noncurrent_version_expiration_days >= 1
    error_message = "noncurrent_version_expiration_days must be at least 1."
  }
}

variable "kms_key_arn" {
  description = "ARN of an existing customer-managed KMS key for the bucket, the EMR security configuration and EMR logs. \"\" (the default): the module creates one, with rotation on."
  type        = string
  default     = ""

  validation {
    condition     = var.kms_key_arn == "" || can(regex("^arn:[a-z-]+:kms:[a-z0-9-]+:[0-9]{12}:key/[A-Za-z0-9-]+$", var.kms_key_arn))
    error_message = "kms_key_arn must be \"\" or the ARN of a KMS key (arn:aws:kms:<region>:<account>:key/<id>)."
  }
}

variable "kms_key_deletion_window_days" {
  description = "Waiting period before a module-created KMS key is deleted after `terraform destroy` (7-30)."
  type        = number
  default     = 30

  validation {
    condition     = var.kms_key_deletion_window_days >= 7 && var.kms_key_deletion_window_days <= 30
    error_message = "kms_key_deletion_window_days must be between 7 and 30."
  }
}

variable "enable_access_logging" {
  description = "Write S3 server access logs of the lake bucket to a log bucket."
  type        = bool
  default     = true
}

variable "access_log_bucket_name" {
  description = "Existing bucket to receive the lake bucket's server access logs (it must allow logging.s3.amazonaws.com to write, and use SSE-S3). \"\" (the default): the module creates <bucket_name>-access-logs."
  type        = string
  default     = ""
}

variable "access_log_expiration_days" {
  description = "Days after which access logs in a module-created log bucket expire."
  type        = number
  default     = 90

  validation {
    condition     = var.access_log_expiration_days >= 1
    error_message = "access_log_expiration_days must be at least 1."
  }
}

# --- Glue ------------------------------------------------------------------------------------

variable "glue_databases" {
  description = "Glue databases of the sources' tables: the `database` of every [[sources]] entry in lake.toml (default: the source's slug). The IAM policies allow exactly these databases plus reports_database."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for d in var.glue_databases : can(regex("^[a-z0-9_]{1,255}$", d))])
    error_message = "Each Glue database name must be 1-255 of [a-z0-9_]."
  }
}

variable "reports_database" {
  description = "Glue database of the sync_reports table (lake.toml `[catalog] reports_database`)."
  type        = string
  default     = "segment_datalake_meta"

  validation {
    condition     = can(regex("^[a-z0-9_]{1,255}$", var.reports_database))
    error_message = "reports_database must be 1-255 of [a-z0-9_]."
  }
}

variable "create_glue_databases" {
  description = "Create the Glue databases (glue_databases and reports_database). false: they already exist; the IAM policies are scoped to their names either way."
  type        = bool
  default     = true
}

# --- EMR on EC2 ------------------------------------------------------------------------------

variable "create_emr_cluster" {
  description = "Create a long-running EMR cluster for the hourly syncs (lake.toml `[compute] backend = \"emr\"`)."
  type        = bool
  default     = true
}

variable "emr_release_label" {
  description = "EMR release of the cluster (and default of the Serverless application). An emr-7.x release: the bootstrap installs Python with dnf (Amazon Linux 2023)."
  type        = string
  default     = "emr-7.12.0"

  validation {
    condition     = can(regex("^emr-7\\.[0-9]+\\.[0-9]+$", var.emr_release_label))
    error_message = "emr_release_label must be an emr-7.x.y release (Amazon Linux 2023)."
  }
}

variable "emr_subnet_id" {
  description = "Subnet of the EMR cluster (required when create_emr_cluster). A private subnet needs a NAT gateway or VPC endpoints for S3, Glue, EMR and KMS, plus a route to the package index of bootstrap_pip_index_url."
  type        = string
  default     = null

  validation {
    condition     = !var.create_emr_cluster || var.emr_subnet_id != null
    error_message = "create_emr_cluster = true needs emr_subnet_id (the subnet of the cluster)."
  }
}

variable "emr_subnet_is_private" {
  description = "Whether emr_subnet_id is a private subnet: EMR then requires a service-access security group, which the module creates."
  type        = bool
  default     = true
}

variable "tag_emr_subnet" {
  description = "Tag emr_subnet_id with for-use-with-amazon-emr-managed-policies=true, which the EMR service role's managed policy (AmazonEMRServicePolicy_v2) requires. false: tag it yourself."
  type        = bool
  default     = true
}

variable "emr_egress_cidr_blocks" {
  description = "IPv4 ranges the cluster's nodes may reach on HTTPS (443): AWS APIs (S3, Glue, KMS, EMR) and the package index used by the bootstrap action."
  type        = list(string)
  default     = ["0.0.0.0/0"]
}

variable "emr_master_instance_type" {
  description = "EC2 instance type of the primary (master) node."
  type        = string
  default     = "m5.xlarge"
}

variable "emr_core_instance_type" {
  description = "EC2 instance type of the core nodes."
  type        = string
  default     = "m5.xlarge"
}

variable "emr_core_instance_count" {
  description = "Core nodes at cluster start (managed scaling then moves between emr_min_capacity_units and emr_max_capacity_units)."
  type        = number
  default     = 2

  validation {
    condition     = var.emr_core_instance_count >= 1
    error_message = "emr_core_instance_count must be at least 1."
  }
}

variable "emr_core_ebs_size_gb" {
  description = "Size in GiB of the gp3 data volume of each core node (Spark shuffle and spill)."
  type        = number
  default     = 64
}

variable "emr_min_capacity_units" {
  description = "Managed scaling: minimum instances in the core and task groups."
  type        = number
  default     = 2

  validation {
    condition     = var.emr_min_capacity_units >= 1
    error_message = "emr_min_capacity_units must be at least 1."
  }
}

variable "emr_max_capacity_units" {
  description = "Managed scaling: maximum instances in the core and task groups."
  type        = number
  default     = 10
}

variable "emr_max_ondemand_capacity_units" {
  description = "Managed scaling: maximum On-Demand instances; above it, EMR adds Spot capacity. null: all On-Demand (= emr_max_capacity_units)."
  type        = number
  default     = null
}

variable "emr_max_core_capacity_units" {
  description = "Managed scaling: maximum core instances; above it, EMR adds task instances (no HDFS, cheaper to remove). null: = emr_max_capacity_units."
  type        = number
  default     = null
}

variable "emr_step_concurrency_level" {
  description = "Steps (syncs) the cluster runs at once: one per source is typical (1-256)."
  type        = number
  default     = 4

  validation {
    condition     = var.emr_step_concurrency_level >= 1 && var.emr_step_concurrency_level <= 256
    error_message = "emr_step_concurrency_level must be between 1 and 256."
  }
}

variable "emr_idle_timeout_seconds" {
  description = "Terminate the cluster after this many idle seconds (auto-termination). null: never; the hourly sync keeps it busy, and an on-demand replay cluster is better served by its own module instance."
  type        = number
  default     = null
}

variable "emr_termination_protection" {
  description = "Protect the cluster against termination (set false before `terraform destroy`)."
  type        = bool
  default     = false
}

variable "emr_ec2_key_name" {
  description = "EC2 key pair for SSH to the primary node as `hadoop`. null: no SSH key (use SSM Session Manager)."
  type        = string
  default     = null
}

variable "emr_in_transit_tls_certificates_s3_uri" {
  description = "S3 URI of a zip of PEM files (privateKey.pem, certificateChain.pem, trustedCertificates.pem) that enables EMR in-transit encryption between nodes. null: in-transit encryption off (see the README)."
  type        = string
  default     = null
}

# --- Python on the cluster (bootstrap action) ----------------------------------------------------

variable "bootstrap_python_version" {
  description = "Python the bootstrap action installs on every node (dnf package python<version>) and that PySpark uses (PYSPARK_PYTHON). The job's code needs 3.11 or later."
  type        = string
  default     = "3.11"

  validation {
    condition     = can(regex("^3\\.[0-9]{1,2}$", var.bootstrap_python_version))
    error_message = "bootstrap_python_version must look like 3.11."
  }
}

variable "bootstrap_python_packages" {
  description = "pip requirement specifiers the bootstrap action installs on every node: the native dependencies of the sync job (its own code arrives with each job package). Keep them in step with pyproject.toml."
  type        = list(string)
  default = [
    "pyarrow>=16",
    "orjson>=3.9",
    "numpy>=1.26",
    "pandas>=2.2,<3",
    "pandera[pandas]>=0.20",
    "pydantic>=2.11,<3",
    "boto3>=1.34",
    "duckdb==1.5.5",
    "dagster-pipes>=1.13,<1.14",
    # table_format = "iceberg": the commit runs in the driver's Python (no Iceberg jars)
    "pyiceberg==0.12.0",
    "sqlalchemy>=2,<3",
  ]

  validation {
    condition     = length(var.bootstrap_python_packages) > 0 && alltrue([for p in var.bootstrap_python_packages : can(regex("^[A-Za-z0-9][A-Za-z0-9._\\[\\],<>=!~ -]*$", p))])
    error_message = "bootstrap_python_packages must be plain pip requirement specifiers (no options, URLs or shell characters)."
  }
}

variable "bootstrap_check_imports" {
  description = "Python modules the bootstrap action imports after installing, so a node with a broken environment fails at boot rather than at the first sync."
  type        = list(string)
  default     = ["pyarrow", "orjson", "numpy", "pandas", "pandera", "pydantic", "duckdb", "dagster_pipes", "pyiceberg"]

  validation {
    condition     = alltrue([for m in var.bootstrap_check_imports : can(regex("^[A-Za-z_][A-Za-z0-9_.]*$", m))])
    error_message = "bootstrap_check_imports must be Python module names."
  }
}

variable "bootstrap_pip_index_url" {
  description = "Package index for the bootstrap's pip (a private mirror for clusters without internet access). null: PyPI."
  type        = string
  default     = null
}

# --- EMR Serverless ---------------------------------------------------------------------------

variable "create_emr_serverless" {
  description = "Create an EMR Serverless Spark application and its job runtime role (lake.toml `[compute] backend = \"emr_serverless\"`)."
  type        = bool
  default     = false
}

variable "emr_serverless_release_label" {
  description = "EMR release of the Serverless application. null: emr_release_label."
  type        = string
  default     = null
}

variable "emr_serverless_architecture" {
  description = "CPU architecture of the Serverless application: X86_64 or ARM64."
  type        = string
  default     = "X86_64"

  validation {
    condition     = contains(["X86_64", "ARM64"], var.emr_serverless_architecture)
    error_message = "emr_serverless_architecture must be X86_64 or ARM64."
  }
}

variable "emr_serverless_max_cpu" {
  description = "Maximum vCPU of all the application's workers at once, e.g. \"32 vCPU\"."
  type        = string
  default     = "32 vCPU"
}

variable "emr_serverless_max_memory" {
  description = "Maximum memory of all the application's workers at once, e.g. \"128 GB\"."
  type        = string
  default     = "128 GB"
}

variable "emr_serverless_idle_timeout_minutes" {
  description = "Minutes without jobs after which the Serverless application stops (it starts again on the next job)."
  type        = number
  default     = 15
}

variable "emr_serverless_subnet_ids" {
  description = "Subnets for the Serverless application's workers (VPC access). Empty: no VPC (workers reach S3 and Glue through AWS's network)."
  type        = list(string)
  default     = []
}

variable "emr_serverless_security_group_ids" {
  description = "Security groups for the Serverless application's workers, with emr_serverless_subnet_ids."
  type        = list(string)
  default     = []
}

variable "emr_serverless_image_uri" {
  description = "Custom image (ECR URI) for the Serverless workers with Python 3.11+ and bootstrap_python_packages installed. null: EMR's image; the job package must then carry its Python environment."
  type        = string
  default     = null
}

# --- The orchestrator (Dagster) ---------------------------------------------------------------

variable "orchestrator_trusted_principal_arns" {
  description = "IAM principals (roles, users) allowed to assume the orchestrator role: the identity Dagster runs as. Empty with no orchestrator_trusted_services: this account's root, i.e. any principal of the account that is itself allowed sts:AssumeRole on it."
  type        = list(string)
  default     = []
}

variable "orchestrator_trusted_services" {
  description = "AWS services allowed to assume the orchestrator role, e.g. [\"ecs-tasks.amazonaws.com\"] when Dagster runs on ECS, [\"ec2.amazonaws.com\"] on EC2."
  type        = list(string)
  default     = []
}

variable "orchestrator_external_id" {
  description = "sts:ExternalId the orchestrator must present when it assumes the role from another account. null: not required."
  type        = string
  default     = null
}

# --- Lake Formation ---------------------------------------------------------------------------

variable "enable_lakeformation" {
  description = "Register the lake location with Lake Formation and grant the orchestrator, the cluster and the Serverless job role on the lake's databases. Needs the applying principal to be a Lake Formation administrator. false: IAM-only access (the Glue default)."
  type        = bool
  default     = false
}
