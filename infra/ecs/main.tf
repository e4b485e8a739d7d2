# Dagster on ECS Fargate beside the lake's module (..): the code server, the webserver and the
# daemon as three services from the one image (infra/docker; each task's command is its role in
# entrypoint.sh), every run a Fargate task of its own (EcsRunLauncher, instance in
# dagster.yaml beside this file), the instance's database on RDS PostgreSQL. Walk-through:
# docs/guides/production.md ("On ECS").
#
# Who may do what (iam.tf): the code server and the runs are the lake's orchestrator role (they
# list the archive and sync); the daemon may only start, watch and stop run tasks of this
# cluster's run task definition; the webserver has no role at all; the execution role pulls
# the one image, writes the logs and reads the database's password secret.

data "aws_caller_identity" "current" {}
data "aws_partition" "current" {}
data "aws_region" "current" {}

locals {
  account_id = data.aws_caller_identity.current.account_id
  partition  = data.aws_partition.current.partition
  region     = data.aws_region.current.id
  tags       = merge(var.tags, { "datalake/component" = "dagster" })

  cluster_arn = "arn:${local.partition}:ecs:${local.region}:${local.account_id}:cluster/${var.name}"
  # the family of the runs' task definition: the daemon may run tasks of it and of nothing else
  run_family = "${var.name}-run"

  # Every container: the instance of dagster.yaml beside this file (the image holds it), its
  # database, the settings, and Spark bound to the task itself.
  common_environment = [
    { name = "DAGSTER_HOME", value = "/opt/dagster/ecs" },
    { name = "DAGSTER_PG_HOST", value = aws_db_instance.dagster.address },
    { name = "DAGSTER_PG_PORT", value = tostring(aws_db_instance.dagster.port) },
    { name = "DAGSTER_PG_DB", value = aws_db_instance.dagster.db_name },
    { name = "DAGSTER_PG_USERNAME", value = aws_db_instance.dagster.username },
    { name = "DATALAKE_SETTINGS", value = "/tmp/datalake/lake.toml" },
    { name = "DATALAKE_SETTINGS_TOML", value = var.settings_toml },
    { name = "DATALAKE_WEBSERVER_URL", value = "http://webserver:3000" },
    { name = "DAGSTER_RUN_TASK_FAMILY", value = local.run_family },
    { name = "SPARK_LOCAL_IP", value = "127.0.0.1" },
  ]
  # the password from the secret RDS manages (its JSON's "password" key), never in the task
  db_password_secret = [
    { name = "DAGSTER_PG_PASSWORD", valueFrom = "${aws_db_instance.dagster.master_user_secret[0].secret_arn}:password::" },
  ]
}

resource "aws_ecs_cluster" "dagster" {
  name = var.name

  setting {
    name  = "containerInsights"
    value = "enabled"
  }

  tags = local.tags
}

# Service Connect: the webserver and the daemon reach the code server as codeserver:4000, the
# host infra/dagster/workspace.yaml names (as in the compose file and the Helm chart).
resource "aws_service_discovery_http_namespace" "dagster" {
  name        = var.name
  description = "Service Connect namespace of ${var.name}'s Dagster services"
  tags        = local.tags
}

resource "aws_cloudwatch_log_group" "dagster" {
  name              = "/ecs/${var.name}"
  retention_in_days = var.log_retention_days
  kms_key_id        = aws_kms_key.logs.arn
  tags              = local.tags
}

# The logs' key: CloudWatch Logs encrypts this log group with it.
resource "aws_kms_key" "logs" {
  description         = "${var.name}: Dagster's ECS logs and the database"
  enable_key_rotation = true
  policy              = data.aws_iam_policy_document.logs_key.json
  tags                = local.tags
}

data "aws_iam_policy_document" "logs_key" {
  #checkov:skip=CKV_AWS_109:This is a key policy, not an identity policy: its Resource "*" is this one key, and the only principal is this account, which must be able to administer the key it owns (AWS's default key policy).
  #checkov:skip=CKV_AWS_111:This is a key policy, not an identity policy: its Resource "*" is this one key, and kms:* goes to this account only, so that IAM policies decide who uses the key.
  #checkov:skip=CKV_AWS_356:This is a key policy: Resource "*" is the only value a key policy takes and means this key.
  statement {
    sid       = "AccountAdministersAndDelegatesToIam"
    effect    = "Allow"
    actions   = ["kms:*"]
    resources = ["*"] # in a key policy, "*" is this key

    principals {
      type        = "AWS"
      identifiers = ["arn:${local.partition}:iam::${local.account_id}:root"]
    }
  }

  statement {
    sid       = "CloudWatchLogsUsesItForThisLogGroup"
    effect    = "Allow"
    actions   = ["kms:Encrypt", "kms:Decrypt", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"]
    resources = ["*"] # in a key policy, "*" is this key

    principals {
      type        = "Service"
      identifiers = ["logs.${local.region}.amazonaws.com"]
    }

    condition {
      test     = "ArnEquals"
      variable = "kms:EncryptionContext:aws:logs:arn"
      values   = ["arn:${local.partition}:logs:${local.region}:${local.account_id}:log-group:/ecs/${var.name}"]
    }
  }
}
