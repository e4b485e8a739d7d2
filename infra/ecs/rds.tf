# The Dagster instance's database: PostgreSQL on RDS, private, encrypted, in two availability
# zones, its password generated and kept by RDS in Secrets Manager (never in Terraform's state
# or in a task definition), TLS required.

resource "aws_db_subnet_group" "dagster" {
  name       = "${var.name}-dagster"
  subnet_ids = var.private_subnet_ids
  tags       = local.tags
}

resource "aws_db_parameter_group" "dagster" {
  name   = "${var.name}-dagster-postgres15"
  family = "postgres15"

  # connections without TLS are refused
  parameter {
    name  = "rds.force_ssl"
    value = "1"
  }
  # statements slower than a second are logged (to CloudWatch Logs: enabled_cloudwatch_logs_exports)
  parameter {
    name  = "log_min_duration_statement"
    value = "1000"
  }
  parameter {
    name  = "log_statement"
    value = "ddl"
  }

  tags = local.tags
}

resource "aws_db_instance" "dagster" {
  identifier     = "${var.name}-dagster"
  engine         = "postgres"
  engine_version = "15"
  instance_class = var.db_instance_class
  db_name        = "dagster"
  username       = "dagster"
  # RDS generates the password and keeps it in Secrets Manager, encrypted with the module's key
  manage_master_user_password   = true
  master_user_secret_kms_key_id = aws_kms_key.logs.arn

  allocated_storage     = 20
  max_allocated_storage = 200
  storage_type          = "gp3"
  storage_encrypted     = true
  kms_key_id            = aws_kms_key.logs.arn

  db_subnet_group_name   = aws_db_subnet_group.dagster.name
  parameter_group_name   = aws_db_parameter_group.dagster.name
  vpc_security_group_ids = [aws_security_group.database.id]
  publicly_accessible    = false
  multi_az               = true
  ca_cert_identifier     = "rds-ca-rsa2048-g1"

  iam_database_authentication_enabled = true
  auto_minor_version_upgrade          = true
  backup_retention_period             = 14
  copy_tags_to_snapshot               = true
  deletion_protection                 = true
  skip_final_snapshot                 = false
  final_snapshot_identifier           = "${var.name}-dagster-final"

  enabled_cloudwatch_logs_exports       = ["postgresql", "upgrade"]
  performance_insights_enabled          = true
  performance_insights_kms_key_id       = aws_kms_key.logs.arn
  performance_insights_retention_period = 7
  monitoring_interval                   = 60
  monitoring_role_arn                   = aws_iam_role.rds_monitoring.arn

  tags = local.tags
}

# Enhanced monitoring: RDS publishes the instance's OS metrics with AWS's managed policy for it.
resource "aws_iam_role" "rds_monitoring" {
  name               = "${var.name}-rds-monitoring"
  description        = "RDS enhanced monitoring of ${var.name}'s Dagster database"
  assume_role_policy = data.aws_iam_policy_document.rds_monitoring_trust.json
  tags               = local.tags
}

data "aws_iam_policy_document" "rds_monitoring_trust" {
  statement {
    effect  = "Allow"
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["monitoring.rds.amazonaws.com"]
    }
  }
}

resource "aws_iam_role_policy_attachment" "rds_monitoring" {
  role       = aws_iam_role.rds_monitoring.name
  policy_arn = "arn:${local.partition}:iam::aws:policy/service-role/AmazonRDSEnhancedMonitoringRole"
}
