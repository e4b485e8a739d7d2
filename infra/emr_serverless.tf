# An EMR Serverless Spark application (create_emr_serverless): no cluster to keep running; each
# sync is a job run that the orchestrator starts with the job runtime role below.

locals {
  create_serverless = var.create_emr_serverless
}

resource "aws_emrserverless_application" "lake" {
  count = local.create_serverless ? 1 : 0

  name          = "${var.name}-sync"
  release_label = coalesce(var.emr_serverless_release_label, var.emr_release_label)
  type          = "spark"
  architecture  = var.emr_serverless_architecture

  maximum_capacity {
    cpu    = var.emr_serverless_max_cpu
    memory = var.emr_serverless_max_memory
  }

  auto_start_configuration {
    enabled = true
  }

  auto_stop_configuration {
    enabled              = true
    idle_timeout_minutes = var.emr_serverless_idle_timeout_minutes
  }

  dynamic "network_configuration" {
    for_each = length(var.emr_serverless_subnet_ids) > 0 ? [1] : []
    content {
      subnet_ids         = var.emr_serverless_subnet_ids
      security_group_ids = var.emr_serverless_security_group_ids
    }
  }

  dynamic "image_configuration" {
    for_each = var.emr_serverless_image_uri != null ? [var.emr_serverless_image_uri] : []
    content {
      image_uri = image_configuration.value
    }
  }

  tags = local.tags
}

# The job runtime role: trusted by EMR Serverless for this application's job runs only, and
# allowed the lake (lake_data) plus Spark's `default` database check (job_extra).
data "aws_iam_policy_document" "serverless_job_trust" {
  count = local.create_serverless ? 1 : 0

  statement {
    sid     = "EmrServerlessJobsOfTheLakeApplication"
    effect  = "Allow"
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["emr-serverless.amazonaws.com"]
    }

    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [local.account_id]
    }

    condition {
      test     = "ArnLike"
      variable = "aws:SourceArn"
      values   = [aws_emrserverless_application.lake[0].arn]
    }
  }
}

resource "aws_iam_role" "serverless_job" {
  count = local.create_serverless ? 1 : 0

  name                  = "${var.name}-serverless-job"
  description           = "EMR Serverless job runtime role of the Segment data lake ${var.name}: the lake's bucket, key and Glue databases"
  assume_role_policy    = data.aws_iam_policy_document.serverless_job_trust[0].json
  permissions_boundary  = var.iam_permissions_boundary_arn
  force_detach_policies = true
  tags                  = local.tags
}

resource "aws_iam_role_policy_attachment" "serverless_job_lake_data" {
  count = local.create_serverless ? 1 : 0

  role       = aws_iam_role.serverless_job[0].name
  policy_arn = aws_iam_policy.lake_data.arn
}

resource "aws_iam_role_policy_attachment" "serverless_job_extra" {
  count = local.create_serverless ? 1 : 0

  role       = aws_iam_role.serverless_job[0].name
  policy_arn = aws_iam_policy.job_extra.arn
}
