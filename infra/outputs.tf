# Every output has a description (datalake_assets_tests/infra/test_module.py checks it).

output "region" {
  description = "AWS region of the lake (lake.toml `[compute] region` and `[catalog] glue_region`)."
  value       = local.region
}

output "bucket_name" {
  description = "Name of the lake bucket."
  value       = aws_s3_bucket.lake.id
}

output "bucket_arn" {
  description = "ARN of the lake bucket."
  value       = aws_s3_bucket.lake.arn
}

output "lake_root" {
  description = "lake.toml `lake_root`: s3://<bucket>/<lake_prefix>."
  value       = local.lake_root
}

output "archive_root" {
  description = "lake.toml `archive_root`: s3://<bucket>/<archive_prefix>, where the raw Segment archive lands."
  value       = local.archive_root
}

output "job_staging_uri" {
  description = "lake.toml `[compute] staging_prefix`: where the orchestrator uploads job packages (expire after transient_expiration_days)."
  value       = "s3://${aws_s3_bucket.lake.id}/${var.job_staging_prefix}"
}

output "pipes_uri" {
  description = "Where Dagster Pipes context and messages go (expire after transient_expiration_days)."
  value       = "s3://${aws_s3_bucket.lake.id}/${var.pipes_prefix}"
}

output "logs_uri" {
  description = "Prefix of the EMR cluster's logs (emr/) and, when the submitter sets it as the job run's S3 log URI, EMR Serverless logs (serverless/)."
  value       = "s3://${aws_s3_bucket.lake.id}/${local.logs_prefix}"
}

output "kms_key_arn" {
  description = "ARN of the KMS key that encrypts the bucket and the cluster's disks; readers of the lake (Athena users) need kms:Decrypt on it."
  value       = local.kms_key_arn
}

output "glue_databases" {
  description = "Glue databases the lake's principals may use: glue_databases plus reports_database."
  value       = local.glue_database_names
}

output "reports_database" {
  description = "lake.toml `[catalog] reports_database`."
  value       = var.reports_database
}

output "orchestrator_role_arn" {
  description = "IAM role Dagster runs as (or assumes): submit syncs, the lake bucket, the lake's Glue databases."
  value       = aws_iam_role.orchestrator.arn
}

output "emr_cluster_id" {
  description = "lake.toml `[compute] cluster_id` (backend \"emr\"). null without create_emr_cluster."
  value       = local.create_emr ? aws_emr_cluster.lake[0].id : null
}

output "emr_cluster_arn" {
  description = "ARN of the EMR cluster. null without create_emr_cluster."
  value       = local.create_emr ? aws_emr_cluster.lake[0].arn : null
}

output "emr_instance_role_arn" {
  description = "IAM role of the cluster's EC2 instances (what a sync step may do). null without create_emr_cluster."
  value       = local.create_emr ? aws_iam_role.emr_instance[0].arn : null
}

output "emr_service_role_arn" {
  description = "IAM role the EMR service uses to run the cluster. null without create_emr_cluster."
  value       = local.create_emr ? aws_iam_role.emr_service[0].arn : null
}

output "emr_python" {
  description = "Interpreter of the bootstrap's virtualenv on every node (PYSPARK_PYTHON)."
  value       = local.emr_python
}

output "emr_serverless_application_id" {
  description = "lake.toml `[compute] application_id` (backend \"emr_serverless\"). null without create_emr_serverless."
  value       = local.create_serverless ? aws_emrserverless_application.lake[0].id : null
}

output "emr_serverless_application_arn" {
  description = "ARN of the EMR Serverless application. null without create_emr_serverless."
  value       = local.create_serverless ? aws_emrserverless_application.lake[0].arn : null
}

output "emr_serverless_execution_role_arn" {
  description = "lake.toml `[compute] execution_role_arn`: the job runtime role of EMR Serverless runs. null without create_emr_serverless."
  value       = local.create_serverless ? aws_iam_role.serverless_job[0].arn : null
}

output "lake_toml" {
  description = "The lake.toml settings that point the project at these resources: paste them into your settings file and add your [[sources]]."
  value = join("\n", concat(
    [
      "lake_root = \"${local.lake_root}\"",
      "archive_root = \"${local.archive_root}\"",
      "",
    ],
    local.create_emr ? [
      "[compute]",
      "backend = \"emr\"",
      "cluster_id = \"${aws_emr_cluster.lake[0].id}\"",
      "region = \"${local.region}\"",
      "staging_prefix = \"s3://${aws_s3_bucket.lake.id}/${var.job_staging_prefix}\"",
      "",
    ] : [],
    local.create_serverless ? [
      local.create_emr ? "# [compute] for EMR Serverless instead:" : "[compute]",
      "${local.create_emr ? "# " : ""}backend = \"emr_serverless\"",
      "${local.create_emr ? "# " : ""}application_id = \"${aws_emrserverless_application.lake[0].id}\"",
      "${local.create_emr ? "# " : ""}execution_role_arn = \"${aws_iam_role.serverless_job[0].arn}\"",
      "${local.create_emr ? "# " : ""}region = \"${local.region}\"",
      "${local.create_emr ? "# " : ""}staging_prefix = \"s3://${aws_s3_bucket.lake.id}/${var.job_staging_prefix}\"",
      "",
    ] : [],
    [
      "[catalog]",
      "backend = \"glue\"",
      "glue_region = \"${local.region}\"",
      "reports_database = \"${var.reports_database}\"",
    ],
  ))
}
