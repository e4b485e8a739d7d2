variable "name" {
  description = "Prefix of every resource's name, e.g. the lake module's name (acme-datalake)."
  type        = string
}

variable "image" {
  description = "The platform's image (infra/docker/Dockerfile) with its tag, e.g. 123456789012.dkr.ecr.eu-west-1.amazonaws.com/datalake-assets:1.0.0."
  type        = string
}

variable "ecr_repository_arn" {
  description = "ARN of the ECR repository that holds the image: the tasks may pull from it and from nothing else."
  type        = string
}

variable "orchestrator_role_arn" {
  description = "The lake module's orchestrator role (output orchestrator_role_arn), created with orchestrator_trusted_services = [\"ecs-tasks.amazonaws.com\"]: the code server's and every run's task role."
  type        = string
}

variable "vpc_id" {
  description = "The VPC of the services and the database."
  type        = string
}

variable "private_subnet_ids" {
  description = "Private subnets (at least two, in two availability zones, for the database) with a NAT gateway or VPC endpoints for S3, Glue, ECR, CloudWatch Logs, Secrets Manager and ECS."
  type        = list(string)
}

variable "settings_toml" {
  description = "The lake settings (lake.toml) the code server and the runs read, passed as DATALAKE_SETTINGS_TOML and written to a file at start: no secret may be in it."
  type        = string
}

variable "log_retention_days" {
  description = "Days the services' and runs' logs are kept in CloudWatch Logs."
  type        = number
  default     = 365
}

variable "db_instance_class" {
  description = "The PostgreSQL instance class of the Dagster instance's database."
  type        = string
  default     = "db.t4g.medium"
}

variable "run_cpu" {
  description = "CPU units of a run's task (a sync's Spark driver; 1024 = one vCPU)."
  type        = number
  default     = 2048
}

variable "run_memory" {
  description = "Memory (MiB) of a run's task: a local sync's driver; lower it with an EMR, EMR Serverless or Databricks compute backend."
  type        = number
  default     = 8192
}

variable "tags" {
  description = "Tags for every resource."
  type        = map(string)
  default     = {}
}
