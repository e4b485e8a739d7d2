# A long-running EMR cluster for the hourly syncs (create_emr_cluster). The orchestrator adds
# one step per sync (add_job_flow_steps); the cluster uses Glue as its metastore, installs the
# job's native Python dependencies at boot, encrypts at rest with the lake's key and scales
# itself (managed scaling).

locals {
  create_emr = var.create_emr_cluster

  emr_log_uri = "s3://${aws_s3_bucket.lake.id}/${local.logs_prefix}emr/"

  # The bootstrap action builds a virtualenv here; PySpark's driver and executors run in it.
  emr_python_venv = "/opt/datalake/python"
  emr_python      = "${local.emr_python_venv}/bin/python"

  glue_metastore_factory = "com.amazonaws.glue.catalog.metastore.AWSGlueDataCatalogHiveClientFactory"

  emr_configurations = [
    {
      # Spark SQL's catalog is the Glue Data Catalog (the tables the sync registers).
      Classification = "spark-hive-site"
      Properties     = { "hive.metastore.client.factory.class" = local.glue_metastore_factory }
    },
    {
      # ... and so is Hive's (hive / beeline on the primary node).
      Classification = "hive-site"
      Properties     = { "hive.metastore.client.factory.class" = local.glue_metastore_factory }
    },
    {
      Classification = "spark-env"
      Properties     = {}
      Configurations = [
        {
          Classification = "export"
          Properties = {
            PYSPARK_PYTHON        = local.emr_python
            PYSPARK_DRIVER_PYTHON = local.emr_python
          }
        },
      ]
    },
    {
      Classification = "spark-defaults"
      Properties = {
        # Cluster-mode drivers and executors get the same interpreter as spark-env's.
        "spark.yarn.appMasterEnv.PYSPARK_PYTHON" = local.emr_python
        "spark.executorEnv.PYSPARK_PYTHON"       = local.emr_python
      }
    },
  ]

  bootstrap_args = concat(
    ["--python", var.bootstrap_python_version, "--venv", local.emr_python_venv],
    var.bootstrap_pip_index_url != null ? ["--index-url", var.bootstrap_pip_index_url] : [],
    flatten([for m in var.bootstrap_check_imports : ["--import", m]]),
    ["--"],
    var.bootstrap_python_packages,
  )

  emr_in_transit_encryption = var.emr_in_transit_tls_certificates_s3_uri != null
}

# --- Network ---------------------------------------------------------------------------------

data "aws_subnet" "emr" {
  count = local.create_emr ? 1 : 0
  id    = var.emr_subnet_id
}

# AmazonEMRServicePolicy_v2 launches instances only into subnets carrying this tag.
resource "aws_ec2_tag" "emr_subnet" {
  count = local.create_emr && var.tag_emr_subnet ? 1 : 0

  resource_id = var.emr_subnet_id
  key         = "for-use-with-amazon-emr-managed-policies"
  value       = "true"
}

# EMR-managed security groups. EMR adds the *inbound* rules the cluster needs to groups you
# give it, not outbound ones (its default groups allow all outbound traffic), and Terraform
# removes the default allow-all egress of a group it creates. So the module declares the
# outbound rules: all traffic between the cluster's own groups, HTTPS out (AWS APIs, the package
# index) and, in a private subnet, the service-access rules. Rules are separate resources, so
# Terraform never removes the ones EMR adds.
resource "aws_security_group" "emr_primary" {
  count = local.create_emr ? 1 : 0

  name_prefix            = "${var.name}-emr-primary-"
  description            = "EMR-managed security group of the primary node of ${var.name}"
  vpc_id                 = data.aws_subnet.emr[0].vpc_id
  revoke_rules_on_delete = true
  tags                   = merge(local.tags, local.emr_managed_policy_tags, { Name = "${var.name}-emr-primary" })

  lifecycle {
    create_before_destroy = true
  }
}

resource "aws_security_group" "emr_core" {
  count = local.create_emr ? 1 : 0

  name_prefix            = "${var.name}-emr-core-"
  description            = "EMR-managed security group of the core and task nodes of ${var.name}"
  vpc_id                 = data.aws_subnet.emr[0].vpc_id
  revoke_rules_on_delete = true
  tags                   = merge(local.tags, local.emr_managed_policy_tags, { Name = "${var.name}-emr-core" })

  lifecycle {
    create_before_destroy = true
  }
}

resource "aws_security_group" "emr_service_access" {
  count = local.create_emr && var.emr_subnet_is_private ? 1 : 0

  name_prefix            = "${var.name}-emr-service-access-"
  description            = "EMR service access to the nodes of ${var.name} in a private subnet"
  vpc_id                 = data.aws_subnet.emr[0].vpc_id
  revoke_rules_on_delete = true
  tags                   = merge(local.tags, local.emr_managed_policy_tags, { Name = "${var.name}-emr-service-access" })

  lifecycle {
    create_before_destroy = true
  }
}

locals {
  emr_security_group_ids = local.create_emr ? {
    primary = aws_security_group.emr_primary[0].id
    core    = aws_security_group.emr_core[0].id
  } : {}

  emr_https_egress = local.create_emr ? {
    for pair in setproduct(["primary", "core"], var.emr_egress_cidr_blocks) :
    "${pair[0]}-${pair[1]}" => { group = pair[0], cidr = pair[1] }
  } : {}

  emr_intra_cluster_egress = local.create_emr ? {
    for pair in setproduct(["primary", "core"], ["primary", "core"]) :
    "${pair[0]}-to-${pair[1]}" => { from = pair[0], to = pair[1] }
  } : {}
}

resource "aws_vpc_security_group_egress_rule" "emr_https" {
  for_each = local.emr_https_egress

  security_group_id = local.emr_security_group_ids[each.value.group]
  description       = "HTTPS to AWS APIs (S3, Glue, KMS, EMR) and the package index of the bootstrap action"
  ip_protocol       = "tcp"
  from_port         = 443
  to_port           = 443
  cidr_ipv4         = each.value.cidr
  tags              = local.tags
}

# YARN, HDFS and Spark connect between the cluster's nodes on many ports.
resource "aws_vpc_security_group_egress_rule" "emr_intra_cluster" {
  for_each = local.emr_intra_cluster_egress

  security_group_id            = local.emr_security_group_ids[each.value.from]
  description                  = "EMR: ${each.value.from} nodes to ${each.value.to} nodes of the same cluster, all protocols"
  ip_protocol                  = "-1"
  referenced_security_group_id = local.emr_security_group_ids[each.value.to]
  tags                         = local.tags
}

resource "aws_vpc_security_group_egress_rule" "emr_primary_to_service_access" {
  count = local.create_emr && var.emr_subnet_is_private ? 1 : 0

  security_group_id            = aws_security_group.emr_primary[0].id
  description                  = "EMR: the primary node reaches the service access group on 9443"
  ip_protocol                  = "tcp"
  from_port                    = 9443
  to_port                      = 9443
  referenced_security_group_id = aws_security_group.emr_service_access[0].id
  tags                         = local.tags
}

resource "aws_vpc_security_group_ingress_rule" "emr_service_access_from_primary" {
  count = local.create_emr && var.emr_subnet_is_private ? 1 : 0

  security_group_id            = aws_security_group.emr_service_access[0].id
  description                  = "EMR: the primary node reaches the service access group on 9443"
  ip_protocol                  = "tcp"
  from_port                    = 9443
  to_port                      = 9443
  referenced_security_group_id = aws_security_group.emr_primary[0].id
  tags                         = local.tags
}

resource "aws_vpc_security_group_egress_rule" "emr_service_access_to_nodes" {
  for_each = local.create_emr && var.emr_subnet_is_private ? { primary = 0, core = 1 } : {}

  security_group_id            = aws_security_group.emr_service_access[0].id
  description                  = "EMR: the cluster manager reaches the ${each.key} nodes on 8443"
  ip_protocol                  = "tcp"
  from_port                    = 8443
  to_port                      = 8443
  referenced_security_group_id = each.key == "primary" ? aws_security_group.emr_primary[0].id : aws_security_group.emr_core[0].id
  tags                         = local.tags
}

# --- IAM: the EMR service role and the instance profile --------------------------------------

data "aws_iam_policy_document" "emr_service_trust" {
  statement {
    sid     = "EmrServiceOfThisAccount"
    effect  = "Allow"
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["elasticmapreduce.amazonaws.com"]
    }

    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [local.account_id]
    }

    condition {
      test     = "ArnLike"
      variable = "aws:SourceArn"
      values   = ["arn:${local.partition}:elasticmapreduce:${local.region}:${local.account_id}:*"]
    }
  }
}

resource "aws_iam_role" "emr_service" {
  count = local.create_emr ? 1 : 0

  name                  = "${var.name}-emr-service"
  description           = "EMR service role of the Segment data lake cluster ${var.name}"
  assume_role_policy    = data.aws_iam_policy_document.emr_service_trust.json
  permissions_boundary  = var.iam_permissions_boundary_arn
  force_detach_policies = true
  tags                  = local.tags
}

# AWS's scoped service policy: it only acts on subnets, security groups and instances that
# carry for-use-with-amazon-emr-managed-policies=true (managed scaling included).
resource "aws_iam_role_policy_attachment" "emr_service_v2" {
  count = local.create_emr ? 1 : 0

  role       = aws_iam_role.emr_service[0].name
  policy_arn = "arn:${local.partition}:iam::aws:policy/service-role/AmazonEMRServicePolicy_v2"
}

data "aws_iam_policy_document" "emr_service_extra" {
  count = local.create_emr ? 1 : 0

  # The v2 policy may only pass EMR's default instance role; ours is passed here, to EC2 only.
  statement {
    sid       = "PassTheInstanceRoleToEc2"
    effect    = "Allow"
    actions   = ["iam:PassRole"]
    resources = [aws_iam_role.emr_instance[0].arn]

    condition {
      test     = "StringEquals"
      variable = "iam:PassedToService"
      values   = ["ec2.amazonaws.com"]
    }
  }

  # EBS encryption of the security configuration: EMR creates the volumes' grants on the key.
  statement {
    sid    = "EncryptEbsVolumesWithTheLakeKey"
    effect = "Allow"
    actions = [
      "kms:Encrypt",
      "kms:Decrypt",
      "kms:ReEncryptFrom",
      "kms:ReEncryptTo",
      "kms:GenerateDataKey",
      "kms:GenerateDataKeyWithoutPlaintext",
      "kms:DescribeKey",
    ]
    resources = [local.kms_key_arn]
  }

  statement {
    sid       = "GrantTheLakeKeyToEbs"
    effect    = "Allow"
    actions   = ["kms:CreateGrant", "kms:ListGrants", "kms:RevokeGrant"]
    resources = [local.kms_key_arn]

    condition {
      test     = "Bool"
      variable = "kms:GrantIsForAWSResource"
      values   = ["true"]
    }
  }
}

resource "aws_iam_role_policy" "emr_service_extra" {
  count = local.create_emr ? 1 : 0

  name   = "pass-instance-role-and-ebs-encryption"
  role   = aws_iam_role.emr_service[0].id
  policy = data.aws_iam_policy_document.emr_service_extra[0].json
}

data "aws_iam_policy_document" "ec2_trust" {
  statement {
    sid     = "Ec2"
    effect  = "Allow"
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["ec2.amazonaws.com"]
    }
  }
}

# What the job can do on the cluster: the lake (lake_data) and Spark's `default` database check
# (job_extra). No EMR, EC2, CloudWatch or other bucket permissions.
resource "aws_iam_role" "emr_instance" {
  count = local.create_emr ? 1 : 0

  name                  = "${var.name}-emr-instance"
  description           = "EC2 instance role of the Segment data lake cluster ${var.name}: the lake's bucket, key and Glue databases"
  assume_role_policy    = data.aws_iam_policy_document.ec2_trust.json
  permissions_boundary  = var.iam_permissions_boundary_arn
  force_detach_policies = true
  tags                  = local.tags
}

resource "aws_iam_role_policy_attachment" "emr_instance_lake_data" {
  count = local.create_emr ? 1 : 0

  role       = aws_iam_role.emr_instance[0].name
  policy_arn = aws_iam_policy.lake_data.arn
}

resource "aws_iam_role_policy_attachment" "emr_instance_job_extra" {
  count = local.create_emr ? 1 : 0

  role       = aws_iam_role.emr_instance[0].name
  policy_arn = aws_iam_policy.job_extra.arn
}

resource "aws_iam_instance_profile" "emr" {
  count = local.create_emr ? 1 : 0

  name = "${var.name}-emr-instance"
  role = aws_iam_role.emr_instance[0].name
  tags = local.tags
}

# --- Security configuration: encryption at rest, IMDSv2 -----------------------------------------

resource "aws_emr_security_configuration" "lake" {
  count = local.create_emr ? 1 : 0

  name_prefix = "${var.name}-"
  configuration = jsonencode({
    EncryptionConfiguration = merge(
      {
        EnableAtRestEncryption    = true
        EnableInTransitEncryption = local.emr_in_transit_encryption
        AtRestEncryptionConfiguration = {
          # EMRFS writes with SSE-KMS and the lake's key, like the bucket's default.
          S3EncryptionConfiguration = {
            EncryptionMode = "SSE-KMS"
            AwsKmsKey      = local.kms_key_arn
          }
          # Local disks (HDFS, shuffle, spill) and EBS volumes, root volume included.
          LocalDiskEncryptionConfiguration = {
            EncryptionKeyProviderType = "AwsKms"
            AwsKmsKey                 = local.kms_key_arn
            EnableEbsEncryption       = true
          }
        }
      },
      local.emr_in_transit_encryption ? {
        InTransitEncryptionConfiguration = {
          TLSCertificateConfiguration = {
            CertificateProviderType = "PEM"
            S3Object                = var.emr_in_transit_tls_certificates_s3_uri
          }
        }
      } : {},
    )
    InstanceMetadataServiceConfiguration = {
      MinimumInstanceMetadataServiceVersion = 2
      HttpPutResponseHopLimit               = 1
    }
  })

  lifecycle {
    create_before_destroy = true
  }
}

# --- Bootstrap action: Python and the job's native dependencies on every node -----------------

resource "aws_s3_object" "bootstrap" {
  count = local.create_emr ? 1 : 0

  bucket      = aws_s3_bucket.lake.id
  key         = "${local.bootstrap_prefix}install-python-deps.sh"
  source      = "${path.module}/bootstrap/install-python-deps.sh"
  source_hash = filemd5("${path.module}/bootstrap/install-python-deps.sh")
  # Uploaded with the lake's key, like everything else in the bucket (the etag of an SSE-KMS
  # object is no MD5, hence source_hash).
  server_side_encryption = "aws:kms"
  kms_key_id             = local.kms_key_arn
  content_type           = "text/x-shellscript"
  tags                   = local.tags
}

# --- The cluster ------------------------------------------------------------------------------

resource "aws_emr_cluster" "lake" {
  count = local.create_emr ? 1 : 0

  name          = var.name
  release_label = var.emr_release_label
  applications  = ["Hadoop", "Spark", "Hive"]

  service_role           = aws_iam_role.emr_service[0].arn
  security_configuration = aws_emr_security_configuration.lake[0].name

  log_uri                   = local.emr_log_uri
  log_encryption_kms_key_id = local.kms_key_arn

  termination_protection            = var.emr_termination_protection
  keep_job_flow_alive_when_no_steps = true # a long-running cluster: syncs arrive as steps
  step_concurrency_level            = var.emr_step_concurrency_level
  unhealthy_node_replacement        = true
  ebs_root_volume_size              = 32 # the bootstrap's virtualenv (pyarrow, pandas, numpy) lives on it

  ec2_attributes {
    subnet_id                         = var.emr_subnet_id
    instance_profile                  = aws_iam_instance_profile.emr[0].arn
    emr_managed_master_security_group = aws_security_group.emr_primary[0].id
    emr_managed_slave_security_group  = aws_security_group.emr_core[0].id
    service_access_security_group     = var.emr_subnet_is_private ? aws_security_group.emr_service_access[0].id : null
    key_name                          = var.emr_ec2_key_name
  }

  master_instance_group {
    instance_type = var.emr_master_instance_type
  }

  core_instance_group {
    instance_type  = var.emr_core_instance_type
    instance_count = var.emr_core_instance_count

    ebs_config {
      size                 = var.emr_core_ebs_size_gb
      type                 = "gp3"
      volumes_per_instance = 1
    }
  }

  bootstrap_action {
    name = "install-python-deps"
    path = "s3://${aws_s3_bucket.lake.id}/${aws_s3_object.bootstrap[0].key}"
    args = local.bootstrap_args
  }

  configurations_json = jsonencode(local.emr_configurations)

  dynamic "auto_termination_policy" {
    for_each = var.emr_idle_timeout_seconds != null ? [var.emr_idle_timeout_seconds] : []
    content {
      idle_timeout = auto_termination_policy.value
    }
  }

  tags = merge(local.tags, local.emr_managed_policy_tags)

  lifecycle {
    # Managed scaling changes the core group's size; Terraform must not undo it.
    ignore_changes = [core_instance_group[0].instance_count]
  }

  depends_on = [
    aws_ec2_tag.emr_subnet,
    aws_iam_role_policy_attachment.emr_service_v2,
    aws_iam_role_policy.emr_service_extra,
    aws_iam_role_policy_attachment.emr_instance_lake_data,
    aws_iam_role_policy_attachment.emr_instance_job_extra,
    aws_s3_bucket_policy.lake,
    aws_vpc_security_group_egress_rule.emr_https,
    aws_vpc_security_group_egress_rule.emr_intra_cluster,
    aws_vpc_security_group_egress_rule.emr_primary_to_service_access,
    aws_vpc_security_group_ingress_rule.emr_service_access_from_primary,
    aws_vpc_security_group_egress_rule.emr_service_access_to_nodes,
  ]
}

resource "aws_emr_managed_scaling_policy" "lake" {
  count = local.create_emr ? 1 : 0

  cluster_id = aws_emr_cluster.lake[0].id

  compute_limits {
    unit_type                       = "Instances"
    minimum_capacity_units          = var.emr_min_capacity_units
    maximum_capacity_units          = var.emr_max_capacity_units
    maximum_ondemand_capacity_units = coalesce(var.emr_max_ondemand_capacity_units, var.emr_max_capacity_units)
    maximum_core_capacity_units     = coalesce(var.emr_max_core_capacity_units, var.emr_max_capacity_units)
  }
}
