# One customer-managed key for the lake: S3 default encryption (with S3 bucket keys, so the
# lake's many small objects cost few KMS requests), EMR at-rest encryption and EMR log files.

resource "aws_kms_key" "lake" {
  count = var.kms_key_arn == "" ? 1 : 0

  description             = "Segment data lake ${var.name}: S3 objects, EMR local disks and logs"
  enable_key_rotation     = true
  deletion_window_in_days = var.kms_key_deletion_window_days
  policy                  = data.aws_iam_policy_document.kms[0].json
  tags                    = local.tags
}

resource "aws_kms_alias" "lake" {
  count = var.kms_key_arn == "" ? 1 : 0

  name          = "alias/${var.name}"
  target_key_id = aws_kms_key.lake[0].key_id
}

# The key policy delegates to IAM (AWS's default key policy): the account administers the key,
# and a principal uses it only if an IAM policy grants it. The module's roles get exactly
# Encrypt/Decrypt/GenerateDataKey/DescribeKey on this key (iam.tf), readers you add (Athena
# users) need kms:Decrypt on it too. No other account and no service principal is named.
data "aws_iam_policy_document" "kms" {
  #checkov:skip=CKV_AWS_109:This is a key policy, not an identity policy: its Resource "*" is this one key, and the only principal is this account, which must be able to administer the key it owns (AWS's default key policy).
  #checkov:skip=CKV_AWS_111:This is a key policy, not an identity policy: its Resource "*" is this one key, and kms:* goes to this account only, so that IAM policies decide who uses the key.
  #checkov:skip=CKV_AWS_356:This is a key policy: Resource "*" is the only value a key policy takes and means this key.
  count = var.kms_key_arn == "" ? 1 : 0

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
}
