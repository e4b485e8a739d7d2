# --- The execution role: what ECS itself does to start a task --------------------------------
# Pull the one image, write to the one log group, read the database's password secret.

data "aws_iam_policy_document" "ecs_tasks_trust" {
  statement {
    effect  = "Allow"
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["ecs-tasks.amazonaws.com"]
    }
    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [local.account_id]
    }
  }
}

resource "aws_iam_role" "execution" {
  name               = "${var.name}-ecs-execution"
  description        = "ECS starts ${var.name}'s Dagster tasks: image, logs, database secret"
  assume_role_policy = data.aws_iam_policy_document.ecs_tasks_trust.json
  tags               = local.tags
}

data "aws_iam_policy_document" "execution" {
  statement {
    sid       = "PullTheImage"
    effect    = "Allow"
    actions   = ["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"]
    resources = [var.ecr_repository_arn]
  }

  # GetAuthorizationToken names no repository: AWS only allows it on "*"
  statement {
    sid       = "LogInToTheRegistry"
    effect    = "Allow"
    actions   = ["ecr:GetAuthorizationToken"]
    resources = ["*"]
  }

  statement {
    sid       = "WriteTheLogGroup"
    effect    = "Allow"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.dagster.arn}:*"]
  }

  statement {
    sid       = "ReadTheDatabasePassword"
    effect    = "Allow"
    actions   = ["secretsmanager:GetSecretValue"]
    resources = [aws_db_instance.dagster.master_user_secret[0].secret_arn]
  }

  statement {
    sid       = "DecryptTheDatabasePassword"
    effect    = "Allow"
    actions   = ["kms:Decrypt"]
    resources = [aws_kms_key.logs.arn]
  }
}

resource "aws_iam_role_policy" "execution" {
  name   = "${var.name}-ecs-execution"
  role   = aws_iam_role.execution.id
  policy = data.aws_iam_policy_document.execution.json
}

# --- The daemon: launches, watches and stops the runs' tasks ---------------------------------
# EcsRunLauncher runs the task definition named in dagster.yaml (this module's run task
# definition) in the daemon's own cluster, subnets and security group, and run monitoring
# stops a task whose run is cancelled or stuck. Nothing else of ECS, and no lake access: the
# sensors run in the code server.

resource "aws_iam_role" "daemon" {
  name               = "${var.name}-dagster-daemon"
  description        = "${var.name}'s Dagster daemon: runs, watches and stops run tasks"
  assume_role_policy = data.aws_iam_policy_document.ecs_tasks_trust.json
  tags               = local.tags
}

data "aws_iam_policy_document" "daemon" {
  statement {
    sid       = "RunTheRunTaskDefinitionInThisCluster"
    effect    = "Allow"
    actions   = ["ecs:RunTask"]
    resources = ["arn:${local.partition}:ecs:${local.region}:${local.account_id}:task-definition/${local.run_family}:*"]
    condition {
      test     = "ArnEquals"
      variable = "ecs:cluster"
      values   = [local.cluster_arn]
    }
  }

  statement {
    sid     = "WatchTagAndStopThisClustersTasks"
    effect  = "Allow"
    actions = ["ecs:DescribeTasks", "ecs:StopTask", "ecs:TagResource"]
    resources = [
      "arn:${local.partition}:ecs:${local.region}:${local.account_id}:task/${var.name}/*",
    ]
  }

  # Read-only calls AWS only allows on "*": the launcher reads its own task's definition and
  # network interface to give runs the same subnets and security group.
  statement {
    sid       = "ReadTaskDefinitionsAndNetworkInterfaces"
    effect    = "Allow"
    actions   = ["ecs:DescribeTaskDefinition", "ecs:ListAccountSettings", "ec2:DescribeNetworkInterfaces"]
    resources = ["*"]
  }

  # A run task is the orchestrator role, started by the execution role: the daemon may hand
  # these two roles to ECS, and no other.
  statement {
    sid       = "PassTheRunTasksRoles"
    effect    = "Allow"
    actions   = ["iam:PassRole"]
    resources = [var.orchestrator_role_arn, aws_iam_role.execution.arn]
    condition {
      test     = "StringEquals"
      variable = "iam:PassedToService"
      values   = ["ecs-tasks.amazonaws.com"]
    }
  }
}

resource "aws_iam_role_policy" "daemon" {
  name   = "${var.name}-dagster-daemon"
  role   = aws_iam_role.daemon.id
  policy = data.aws_iam_policy_document.daemon.json
}
