# The three services and the runs' task definition, and who may talk to whom: the webserver and
# the daemon to the code server (gRPC, 4000), every Dagster task to the database (5432), and
# out to AWS's APIs and the archive (HTTPS). Nothing is reachable from outside the VPC: Dagster
# has no login (reach the webserver through an authenticating load balancer or a tunnel).

locals {
  services = {
    codeserver = { cpu = 1024, memory = 4096, role = var.orchestrator_role_arn, port = 4000 }
    webserver  = { cpu = 512, memory = 2048, role = null, port = 3000 }
    daemon     = { cpu = 512, memory = 2048, role = aws_iam_role.daemon.arn, port = null }
  }
}

resource "aws_ecs_task_definition" "service" {
  #checkov:skip=CKV_AWS_336:Spark's driver and Dagster write scratch files (the JVM's /tmp, DAGSTER_HOME's storage, the settings file written at start); a read-only root has not been proven with this image.
  for_each = local.services

  family                   = "${var.name}-${each.key}"
  requires_compatibilities = ["FARGATE"]
  network_mode             = "awsvpc"
  cpu                      = each.value.cpu
  memory                   = each.value.memory
  execution_role_arn       = aws_iam_role.execution.arn
  task_role_arn            = each.value.role

  container_definitions = jsonencode([
    {
      name      = each.key
      image     = var.image
      essential = true
      # the image's entry point runs the role; its health check asks that process
      command      = [each.key]
      environment  = local.common_environment
      secrets      = local.db_password_secret
      portMappings = each.value.port == null ? [] : [{ name = each.key, containerPort = each.value.port, protocol = "tcp" }]
      healthCheck = {
        command     = ["CMD", "datalake-entrypoint", "health", each.key]
        interval    = 30
        timeout     = 10
        retries     = 3
        startPeriod = 120
      }
      logConfiguration = {
        logDriver = "awslogs"
        options = {
          awslogs-group         = aws_cloudwatch_log_group.dagster.name
          awslogs-region        = local.region
          awslogs-stream-prefix = each.key
        }
      }
    }
  ])

  tags = local.tags
}

# A run: the sync's task. EcsRunLauncher (dagster.yaml) runs it with the run's command in
# container "run"; its role is the orchestrator's, like the code server's.
resource "aws_ecs_task_definition" "run" {
  #checkov:skip=CKV_AWS_336:Spark's driver and Dagster write scratch files (the JVM's /tmp, DAGSTER_HOME's storage, the settings file written at start); a read-only root has not been proven with this image.
  family                   = local.run_family
  requires_compatibilities = ["FARGATE"]
  network_mode             = "awsvpc"
  cpu                      = var.run_cpu
  memory                   = var.run_memory
  execution_role_arn       = aws_iam_role.execution.arn
  task_role_arn            = var.orchestrator_role_arn

  container_definitions = jsonencode([
    {
      name        = "run"
      image       = var.image
      essential   = true
      environment = local.common_environment
      secrets     = local.db_password_secret
      logConfiguration = {
        logDriver = "awslogs"
        options = {
          awslogs-group         = aws_cloudwatch_log_group.dagster.name
          awslogs-region        = local.region
          awslogs-stream-prefix = "run"
        }
      }
    }
  ])

  tags = local.tags
}

resource "aws_ecs_service" "service" {
  for_each = local.services

  name             = each.key
  cluster          = aws_ecs_cluster.dagster.id
  task_definition  = aws_ecs_task_definition.service[each.key].arn
  desired_count    = 1
  launch_type      = "FARGATE"
  platform_version = "LATEST"
  # the daemon must never run twice (two daemons would launch every queued run twice)
  deployment_minimum_healthy_percent = each.key == "daemon" ? 0 : 100
  deployment_maximum_percent         = each.key == "daemon" ? 100 : 200

  network_configuration {
    subnets          = var.private_subnet_ids
    security_groups  = [aws_security_group.tasks.id]
    assign_public_ip = false
  }

  # the code server offers codeserver:4000 and the webserver webserver:3000; the daemon only
  # calls them
  service_connect_configuration {
    enabled   = true
    namespace = aws_service_discovery_http_namespace.dagster.arn

    dynamic "service" {
      for_each = each.value.port == null ? [] : [each.value.port]
      content {
        port_name      = each.key
        discovery_name = each.key
        client_alias {
          port     = service.value
          dns_name = each.key
        }
      }
    }
  }

  tags = local.tags
}

resource "aws_security_group" "tasks" {
  name        = "${var.name}-dagster-tasks"
  description = "Dagster services and runs of ${var.name}"
  vpc_id      = var.vpc_id

  ingress {
    description = "code server gRPC and webserver, from the other Dagster tasks"
    from_port   = 3000
    to_port     = 4000
    protocol    = "tcp"
    self        = true
  }

  egress {
    description = "code server gRPC and webserver, to the other Dagster tasks"
    from_port   = 3000
    to_port     = 4000
    protocol    = "tcp"
    self        = true
  }

  egress {
    description     = "the Dagster instance database"
    from_port       = 5432
    to_port         = 5432
    protocol        = "tcp"
    security_groups = [aws_security_group.database.id]
  }

  egress {
    description = "AWS APIs (S3, Glue, ECS, ECR, EMR, CloudWatch Logs, Secrets Manager) over HTTPS"
    from_port   = 443
    to_port     = 443
    protocol    = "tcp"
    cidr_blocks = ["0.0.0.0/0"]
  }

  tags = local.tags
}

resource "aws_security_group" "database" {
  name        = "${var.name}-dagster-database"
  description = "The Dagster instance PostgreSQL of ${var.name}"
  vpc_id      = var.vpc_id
  tags        = local.tags
}

# Separate rules: the two groups name each other.
resource "aws_security_group_rule" "database_from_tasks" {
  description              = "PostgreSQL from the Dagster services and runs"
  type                     = "ingress"
  security_group_id        = aws_security_group.database.id
  from_port                = 5432
  to_port                  = 5432
  protocol                 = "tcp"
  source_security_group_id = aws_security_group.tasks.id
}
