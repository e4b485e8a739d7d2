data "aws_caller_identity" "current" {}
data "aws_partition" "current" {}
data "aws_region" "current" {}

locals {
  account_id = data.aws_caller_identity.current.account_id
  partition  = data.aws_partition.current.partition
  # `id` is the region's name in provider 5.x and 6.x alike (6.x deprecates `name`).
  region = data.aws_region.current.id

  # The lake tag goes on every resource; the orchestrator's EMR permissions are conditioned on it.
  tags = merge(var.tags, { (var.lake_tag_key) = var.name })
  # AmazonEMRServicePolicy_v2 only acts on subnets, security groups and clusters with this tag.
  emr_managed_policy_tags = { "for-use-with-amazon-emr-managed-policies" = "true" }

  # Fixed prefixes in the lake bucket (the configurable ones are variables).
  logs_prefix      = "_logs/"      # EMR cluster logs (emr/) and EMR Serverless logs (serverless/)
  bootstrap_prefix = "_bootstrap/" # the bootstrap script: never expires, new nodes run it

  bucket_arn   = aws_s3_bucket.lake.arn
  kms_key_arn  = var.kms_key_arn != "" ? var.kms_key_arn : aws_kms_key.lake[0].arn
  lake_root    = "s3://${aws_s3_bucket.lake.id}/${var.lake_prefix}"
  archive_root = "s3://${aws_s3_bucket.lake.id}/${var.archive_prefix}"

  # Glue: the sources' databases and the reports database, and nothing else.
  glue_database_names = distinct(concat(var.glue_databases, [var.reports_database]))
  glue_arn_prefix     = "arn:${local.partition}:glue:${local.region}:${local.account_id}"
  glue_catalog_arn    = "${local.glue_arn_prefix}:catalog"
  glue_database_arns  = [for d in local.glue_database_names : "${local.glue_arn_prefix}:database/${d}"]
  glue_table_arns     = [for d in local.glue_database_names : "${local.glue_arn_prefix}:table/${d}/*"]
  glue_function_arns  = [for d in local.glue_database_names : "${local.glue_arn_prefix}:userDefinedFunction/${d}/*"]
  # Spark with the Glue metastore checks (and creates, if missing) the `default` database when a
  # session with Hive support starts; the job roles may do exactly that to it, nothing more.
  glue_default_database_arn = "${local.glue_arn_prefix}:database/default"

  emr_cluster_arn_pattern = "arn:${local.partition}:elasticmapreduce:${local.region}:${local.account_id}:cluster/*"
}
