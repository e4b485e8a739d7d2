# Least-privilege IAM. Three kinds of principals touch the lake:
#   - the orchestrator (Dagster): lists the archive, uploads job packages, reads and writes
#     Pipes messages, submits syncs (EMR steps on clusters carrying the lake tag, or EMR
#     Serverless job runs on this module's application) and may register tables itself;
#   - the job (the EMR cluster's instance role, or the EMR Serverless job runtime role): reads
#     the archive, writes the lake, registers tables and partitions in Glue;
#   - the EMR service role, which launches the cluster's instances.
# "The lake" is: this bucket, this KMS key, the Glue databases in glue_databases plus
# reports_database (and their tables, partitions and functions). Nothing has "*" as resource
# for S3 or Glue.

# --- What every lake principal may do: the bucket, the key, the lake's Glue databases ---------

data "aws_iam_policy_document" "lake_data" {
  statement {
    sid       = "ListTheLakeBucket"
    effect    = "Allow"
    actions   = ["s3:ListBucket", "s3:ListBucketMultipartUploads", "s3:GetBucketLocation"]
    resources = [local.bucket_arn]
  }

  statement {
    sid    = "ReadWriteTheLakeBucketObjects"
    effect = "Allow"
    actions = [
      "s3:GetObject",
      "s3:PutObject",
      "s3:DeleteObject",
      "s3:AbortMultipartUpload",
      "s3:ListMultipartUploadParts",
    ]
    resources = ["${local.bucket_arn}/*"]
  }

  statement {
    sid       = "UseTheLakeKey"
    effect    = "Allow"
    actions   = ["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:DescribeKey"]
    resources = [local.kms_key_arn]
  }

  # Every node the cluster adds runs the bootstrap script as root: only Terraform writes it.
  statement {
    sid       = "NeverRewriteTheBootstrapScript"
    effect    = "Deny"
    actions   = ["s3:PutObject", "s3:DeleteObject"]
    resources = ["${local.bucket_arn}/${local.bootstrap_prefix}*"]
  }

  statement {
    sid    = "ReadTheLakeGlueDatabases"
    effect = "Allow"
    actions = [
      "glue:GetDatabase",
      "glue:GetDatabases",
      "glue:GetTable",
      "glue:GetTables",
      "glue:GetPartition",
      "glue:GetPartitions",
      "glue:BatchGetPartition",
      "glue:GetUserDefinedFunction",
      "glue:GetUserDefinedFunctions",
    ]
    resources = concat([local.glue_catalog_arn], local.glue_database_arns, local.glue_table_arns, local.glue_function_arns)
  }

  # Tables and partitions are only created and updated, never deleted: a sync appends and
  # widens columns and adds partitions (catalog/glue.py). CreateDatabase is scoped to the
  # lake's own names, for create_glue_databases = false.
  statement {
    sid    = "WriteTheLakeGlueDatabases"
    effect = "Allow"
    actions = [
      "glue:CreateDatabase",
      "glue:CreateTable",
      "glue:UpdateTable",
      "glue:CreatePartition",
      "glue:BatchCreatePartition",
      "glue:UpdatePartition",
      "glue:BatchUpdatePartition",
    ]
    resources = concat([local.glue_catalog_arn], local.glue_database_arns, local.glue_table_arns)
  }
}

resource "aws_iam_policy" "lake_data" {
  name        = "${var.name}-lake-data"
  description = "Segment data lake ${var.name}: its bucket, KMS key and Glue databases only"
  policy      = data.aws_iam_policy_document.lake_data.json
  tags        = local.tags
}

# --- What the job adds: Spark's Glue metastore client checks the `default` database ---------

data "aws_iam_policy_document" "job_extra" {
  statement {
    sid       = "SparkGlueMetastoreDefaultDatabase"
    effect    = "Allow"
    actions   = ["glue:GetDatabase", "glue:CreateDatabase"]
    resources = [local.glue_catalog_arn, local.glue_default_database_arn]
  }
}

resource "aws_iam_policy" "job_extra" {
  name        = "${var.name}-job-glue-default-database"
  description = "Segment data lake ${var.name}: Spark's check of the Glue `default` database"
  policy      = data.aws_iam_policy_document.job_extra.json
  tags        = local.tags
}

# --- The orchestrator ------------------------------------------------------------------------

locals {
  orchestrator_principal_arns = (
    length(var.orchestrator_trusted_principal_arns) == 0 && length(var.orchestrator_trusted_services) == 0
    ? ["arn:${local.partition}:iam::${local.account_id}:root"]
    : var.orchestrator_trusted_principal_arns
  )
}

data "aws_iam_policy_document" "orchestrator_trust" {
  dynamic "statement" {
    for_each = length(local.orchestrator_principal_arns) > 0 ? [1] : []
    content {
      sid     = "TrustedPrincipals"
      effect  = "Allow"
      actions = ["sts:AssumeRole"]

      principals {
        type        = "AWS"
        identifiers = local.orchestrator_principal_arns
      }

      dynamic "condition" {
        for_each = var.orchestrator_external_id != null ? [var.orchestrator_external_id] : []
        content {
          test     = "StringEquals"
          variable = "sts:ExternalId"
          values   = [condition.value]
        }
      }
    }
  }

  dynamic "statement" {
    for_each = length(var.orchestrator_trusted_services) > 0 ? [1] : []
    content {
      sid     = "TrustedServices"
      effect  = "Allow"
      actions = ["sts:AssumeRole"]

      principals {
        type        = "Service"
        identifiers = var.orchestrator_trusted_services
      }

      condition {
        test     = "StringEquals"
        variable = "aws:SourceAccount"
        values   = [local.account_id]
      }
    }
  }
}

resource "aws_iam_role" "orchestrator" {
  name                 = "${var.name}-orchestrator"
  description          = "Dagster orchestrator of the Segment data lake ${var.name}"
  assume_role_policy   = data.aws_iam_policy_document.orchestrator_trust.json
  permissions_boundary = var.iam_permissions_boundary_arn
  max_session_duration = 3600
  tags                 = local.tags
}

data "aws_iam_policy_document" "orchestrator_submit" {
  # EMR on EC2: steps only on clusters that carry the lake tag (this module's cluster, or
  # another one you tag the same way, e.g. for replays).
  statement {
    sid    = "SubmitStepsToLakeTaggedClusters"
    effect = "Allow"
    actions = [
      "elasticmapreduce:AddJobFlowSteps",
      "elasticmapreduce:DescribeStep",
      "elasticmapreduce:CancelSteps",
      "elasticmapreduce:DescribeCluster",
      "elasticmapreduce:ListSteps",
    ]
    resources = [local.emr_cluster_arn_pattern]

    condition {
      test     = "StringEquals"
      variable = "aws:ResourceTag/${var.lake_tag_key}"
      values   = [var.name]
    }
  }

  # EMR Serverless: job runs on this module's application only.
  dynamic "statement" {
    for_each = var.create_emr_serverless ? [1] : []
    content {
      sid     = "RunJobsOnTheLakeServerlessApplication"
      effect  = "Allow"
      actions = ["emr-serverless:StartJobRun", "emr-serverless:GetJobRun", "emr-serverless:CancelJobRun"]
      resources = [
        aws_emrserverless_application.lake[0].arn,
        "${aws_emrserverless_application.lake[0].arn}/jobruns/*",
      ]
    }
  }

  # StartJobRun passes the job runtime role: that role, to EMR Serverless, and nothing else.
  dynamic "statement" {
    for_each = var.create_emr_serverless ? [1] : []
    content {
      sid       = "PassTheJobRuntimeRoleToEmrServerless"
      effect    = "Allow"
      actions   = ["iam:PassRole"]
      resources = [aws_iam_role.serverless_job[0].arn]

      condition {
        test     = "StringEquals"
        variable = "iam:PassedToService"
        values   = ["emr-serverless.amazonaws.com"]
      }
    }
  }
}

resource "aws_iam_policy" "orchestrator_submit" {
  name        = "${var.name}-orchestrator-submit"
  description = "Segment data lake ${var.name}: submit syncs to the lake's EMR cluster or EMR Serverless application"
  policy      = data.aws_iam_policy_document.orchestrator_submit.json
  tags        = local.tags
}

resource "aws_iam_role_policy_attachment" "orchestrator_lake_data" {
  role       = aws_iam_role.orchestrator.name
  policy_arn = aws_iam_policy.lake_data.arn
}

resource "aws_iam_role_policy_attachment" "orchestrator_submit" {
  role       = aws_iam_role.orchestrator.name
  policy_arn = aws_iam_policy.orchestrator_submit.arn
}
