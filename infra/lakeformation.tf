# Optional Lake Formation grants (enable_lakeformation). With Lake Formation in charge of the
# Glue catalog, IAM alone no longer lets the lake's principals read or write the tables: the
# lake location is registered with a data-access role, and each principal gets the database,
# table and location permissions the sync uses (no DROP, no DELETE).

locals {
  create_lakeformation = var.enable_lakeformation

  # Static keys (known at plan time) -> role ARNs.
  lakeformation_principals = merge(
    { orchestrator = aws_iam_role.orchestrator.arn },
    local.create_emr ? { emr_instance = aws_iam_role.emr_instance[0].arn } : {},
    local.create_serverless ? { serverless_job = aws_iam_role.serverless_job[0].arn } : {},
  )
  lakeformation_principal_keys = concat(
    ["orchestrator"],
    local.create_emr ? ["emr_instance"] : [],
    local.create_serverless ? ["serverless_job"] : [],
  )
  lakeformation_grants = local.create_lakeformation ? {
    for pair in setproduct(local.lakeformation_principal_keys, local.glue_database_names) :
    "${pair[0]}/${pair[1]}" => { principal = pair[0], database = pair[1] }
  } : {}
  lakeformation_location_arn = "${local.bucket_arn}/${var.lake_prefix}"
}

data "aws_iam_policy_document" "lakeformation_trust" {
  statement {
    sid     = "LakeFormation"
    effect  = "Allow"
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["lakeformation.amazonaws.com"]
    }

    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [local.account_id]
    }
  }
}

resource "aws_iam_role" "lakeformation_data_access" {
  count = local.create_lakeformation ? 1 : 0

  name                  = "${var.name}-lakeformation-data-access"
  description           = "Lake Formation's access to the lake location of ${var.name}"
  assume_role_policy    = data.aws_iam_policy_document.lakeformation_trust.json
  permissions_boundary  = var.iam_permissions_boundary_arn
  force_detach_policies = true
  tags                  = local.tags
}

data "aws_iam_policy_document" "lakeformation_data_access" {
  count = local.create_lakeformation ? 1 : 0

  statement {
    sid       = "ListTheLakePrefix"
    effect    = "Allow"
    actions   = ["s3:ListBucket"]
    resources = [local.bucket_arn]

    condition {
      test     = "StringLike"
      variable = "s3:prefix"
      values   = [var.lake_prefix, "${var.lake_prefix}/*"]
    }
  }

  statement {
    sid       = "ReadWriteTheLakePrefix"
    effect    = "Allow"
    actions   = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"]
    resources = ["${local.lakeformation_location_arn}/*"]
  }

  statement {
    sid       = "UseTheLakeKey"
    effect    = "Allow"
    actions   = ["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:DescribeKey"]
    resources = [local.kms_key_arn]
  }
}

resource "aws_iam_role_policy" "lakeformation_data_access" {
  count = local.create_lakeformation ? 1 : 0

  name   = "lake-location"
  role   = aws_iam_role.lakeformation_data_access[0].id
  policy = data.aws_iam_policy_document.lakeformation_data_access[0].json
}

resource "aws_lakeformation_resource" "lake" {
  count = local.create_lakeformation ? 1 : 0

  arn      = local.lakeformation_location_arn
  role_arn = aws_iam_role.lakeformation_data_access[0].arn

  depends_on = [aws_iam_role_policy.lakeformation_data_access]
}

resource "aws_lakeformation_permissions" "location" {
  for_each = local.create_lakeformation ? toset(local.lakeformation_principal_keys) : toset([])

  principal   = local.lakeformation_principals[each.value]
  permissions = ["DATA_LOCATION_ACCESS"]

  data_location {
    arn = aws_lakeformation_resource.lake[0].arn
  }
}

resource "aws_lakeformation_permissions" "database" {
  for_each = local.lakeformation_grants

  principal   = local.lakeformation_principals[each.value.principal]
  permissions = ["CREATE_TABLE", "ALTER", "DESCRIBE"]

  database {
    name = each.value.database
  }

  depends_on = [aws_glue_catalog_database.lake]
}

resource "aws_lakeformation_permissions" "tables" {
  for_each = local.lakeformation_grants

  principal   = local.lakeformation_principals[each.value.principal]
  permissions = ["SELECT", "INSERT", "ALTER", "DESCRIBE"]

  table {
    database_name = each.value.database
    wildcard      = true
  }

  depends_on = [aws_glue_catalog_database.lake]
}
