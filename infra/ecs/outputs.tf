output "cluster_arn" {
  description = "The ECS cluster of the services and the runs."
  value       = aws_ecs_cluster.dagster.arn
}

output "run_task_family" {
  description = "The runs' task definition family (DAGSTER_RUN_TASK_FAMILY, read by dagster.yaml's EcsRunLauncher)."
  value       = local.run_family
}

output "database_address" {
  description = "The Dagster instance's PostgreSQL host."
  value       = aws_db_instance.dagster.address
}

output "database_secret_arn" {
  description = "The Secrets Manager secret RDS keeps the database's password in."
  value       = aws_db_instance.dagster.master_user_secret[0].secret_arn
}

output "log_group" {
  description = "The CloudWatch Logs group of the services and the runs."
  value       = aws_cloudwatch_log_group.dagster.name
}
