# The lake bucket: archive (<archive_prefix>/), lake (<lake_prefix>/, with the sync's own
# _staging/, _commits/, _index/ inside), job packages (_jobs/), Pipes messages (_pipes/),
# logs (_logs/) and the bootstrap script (_bootstrap/).

resource "aws_s3_bucket" "lake" {
  #checkov:skip=CKV_AWS_144:Cross-region replication needs a second bucket in another region (a second provider configuration) and doubles the storage bill; versioning (on by default) already guards against overwrites and deletes. Replicate the archive prefix yourself if your recovery objective needs a second region.
  #checkov:skip=CKV2_AWS_62:Nothing consumes S3 event notifications: the archive sensor lists the archive with a cursor, and the sync is submitted by Dagster.
  bucket = var.bucket_name
  tags   = local.tags
}

resource "aws_s3_bucket_ownership_controls" "lake" {
  bucket = aws_s3_bucket.lake.id

  rule {
    object_ownership = "BucketOwnerEnforced" # ACLs off: access is IAM and the bucket policy only
  }
}

resource "aws_s3_bucket_public_access_block" "lake" {
  bucket = aws_s3_bucket.lake.id

  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_versioning" "lake" {
  bucket = aws_s3_bucket.lake.id

  versioning_configuration {
    status = var.enable_versioning ? "Enabled" : "Suspended"
  }
}

resource "aws_s3_bucket_server_side_encryption_configuration" "lake" {
  bucket = aws_s3_bucket.lake.id

  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm     = "aws:kms"
      kms_master_key_id = local.kms_key_arn
    }
    bucket_key_enabled = true
  }
}

resource "aws_s3_bucket_lifecycle_configuration" "lake" {
  bucket = aws_s3_bucket.lake.id

  # Whole bucket: abort multipart uploads a crashed writer left behind, and (with versioning)
  # drop old versions and the delete markers nothing hides any more. The sync's own
  # <lake_prefix>/_staging/ is cleaned by the sync itself and does not expire here.
  rule {
    id     = "bucket-abort-incomplete-multipart-uploads"
    status = "Enabled"

    filter {
      prefix = ""
    }

    abort_incomplete_multipart_upload {
      days_after_initiation = var.abort_incomplete_multipart_upload_days
    }

    dynamic "noncurrent_version_expiration" {
      for_each = var.enable_versioning ? [1] : []
      content {
        noncurrent_days = var.noncurrent_version_expiration_days
      }
    }

    dynamic "expiration" {
      for_each = var.enable_versioning ? [1] : []
      content {
        expired_object_delete_marker = true
      }
    }
  }

  # Job packages: the orchestrator uploads one per submission; a run reads it within hours.
  rule {
    id     = "expire-job-packages"
    status = "Enabled"

    filter {
      prefix = var.job_staging_prefix
    }

    expiration {
      days = var.transient_expiration_days
    }

    abort_incomplete_multipart_upload {
      days_after_initiation = var.abort_incomplete_multipart_upload_days
    }

    noncurrent_version_expiration {
      noncurrent_days = 1
    }
  }

  # Dagster Pipes context and message chunks of finished runs.
  rule {
    id     = "expire-pipes-messages"
    status = "Enabled"

    filter {
      prefix = var.pipes_prefix
    }

    expiration {
      days = var.transient_expiration_days
    }

    abort_incomplete_multipart_upload {
      days_after_initiation = var.abort_incomplete_multipart_upload_days
    }

    noncurrent_version_expiration {
      noncurrent_days = 1
    }
  }

  rule {
    id     = "expire-logs"
    status = "Enabled"

    filter {
      prefix = local.logs_prefix
    }

    expiration {
      days = var.log_expiration_days
    }

    abort_incomplete_multipart_upload {
      days_after_initiation = var.abort_incomplete_multipart_upload_days
    }

    noncurrent_version_expiration {
      noncurrent_days = 1
    }
  }

  # Rules apply to the bucket's versioning state: wait for it on first apply.
  depends_on = [aws_s3_bucket_versioning.lake]
}

resource "aws_s3_bucket_logging" "lake" {
  count = var.enable_access_logging ? 1 : 0

  bucket        = aws_s3_bucket.lake.id
  target_bucket = var.access_log_bucket_name != "" ? var.access_log_bucket_name : aws_s3_bucket.access_logs[0].id
  target_prefix = "s3/${var.bucket_name}/"
}

resource "aws_s3_bucket_policy" "lake" {
  bucket = aws_s3_bucket.lake.id
  policy = data.aws_iam_policy_document.lake_bucket.json

  depends_on = [aws_s3_bucket_public_access_block.lake]
}

data "aws_iam_policy_document" "lake_bucket" {
  statement {
    sid       = "DenyInsecureTransport"
    effect    = "Deny"
    actions   = ["s3:*"]
    resources = [local.bucket_arn, "${local.bucket_arn}/*"]

    principals {
      type        = "*"
      identifiers = ["*"]
    }

    condition {
      test     = "Bool"
      variable = "aws:SecureTransport"
      values   = ["false"]
    }
  }
}

# --- Access log bucket (when enable_access_logging and access_log_bucket_name is "") --------------

locals {
  create_access_log_bucket = var.enable_access_logging && var.access_log_bucket_name == ""
}

resource "aws_s3_bucket" "access_logs" {
  #checkov:skip=CKV_AWS_144:Access logs are an audit aid that expires after access_log_expiration_days; replicating them to another region is not worth a second copy.
  #checkov:skip=CKV2_AWS_62:Nothing consumes events of the access log bucket.
  #checkov:skip=CKV_AWS_145:AWS documents SSE-S3 as the only default encryption supported on a server access log destination bucket; the logs are encrypted at rest with SSE-S3 (AES256).
  count = local.create_access_log_bucket ? 1 : 0

  bucket = "${var.bucket_name}-access-logs"
  tags   = local.tags

  lifecycle {
    precondition {
      condition     = length(var.bucket_name) <= 51
      error_message = "<bucket_name>-access-logs would exceed 63 characters: set access_log_bucket_name."
    }
  }
}

resource "aws_s3_bucket_ownership_controls" "access_logs" {
  count  = local.create_access_log_bucket ? 1 : 0
  bucket = aws_s3_bucket.access_logs[0].id

  rule {
    object_ownership = "BucketOwnerEnforced"
  }
}

resource "aws_s3_bucket_public_access_block" "access_logs" {
  count  = local.create_access_log_bucket ? 1 : 0
  bucket = aws_s3_bucket.access_logs[0].id

  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_versioning" "access_logs" {
  count  = local.create_access_log_bucket ? 1 : 0
  bucket = aws_s3_bucket.access_logs[0].id

  versioning_configuration {
    status = "Enabled"
  }
}

resource "aws_s3_bucket_server_side_encryption_configuration" "access_logs" {
  count  = local.create_access_log_bucket ? 1 : 0
  bucket = aws_s3_bucket.access_logs[0].id

  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm = "AES256" # what AWS documents for server access log destinations
    }
  }
}

resource "aws_s3_bucket_lifecycle_configuration" "access_logs" {
  count  = local.create_access_log_bucket ? 1 : 0
  bucket = aws_s3_bucket.access_logs[0].id

  rule {
    id     = "expire-access-logs"
    status = "Enabled"

    filter {
      prefix = ""
    }

    expiration {
      days = var.access_log_expiration_days
    }

    noncurrent_version_expiration {
      noncurrent_days = 1
    }

    abort_incomplete_multipart_upload {
      days_after_initiation = var.abort_incomplete_multipart_upload_days
    }
  }

  depends_on = [aws_s3_bucket_versioning.access_logs]
}

resource "aws_s3_bucket_policy" "access_logs" {
  count  = local.create_access_log_bucket ? 1 : 0
  bucket = aws_s3_bucket.access_logs[0].id
  policy = data.aws_iam_policy_document.access_logs[0].json

  depends_on = [aws_s3_bucket_public_access_block.access_logs]
}

data "aws_iam_policy_document" "access_logs" {
  count = local.create_access_log_bucket ? 1 : 0

  statement {
    sid       = "S3ServerAccessLogsFromTheLakeBucket"
    effect    = "Allow"
    actions   = ["s3:PutObject"]
    resources = ["${aws_s3_bucket.access_logs[0].arn}/s3/${var.bucket_name}/*"]

    principals {
      type        = "Service"
      identifiers = ["logging.s3.amazonaws.com"]
    }

    condition {
      test     = "ArnLike"
      variable = "aws:SourceArn"
      values   = [local.bucket_arn]
    }

    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [local.account_id]
    }
  }

  statement {
    sid       = "DenyInsecureTransport"
    effect    = "Deny"
    actions   = ["s3:*"]
    resources = [aws_s3_bucket.access_logs[0].arn, "${aws_s3_bucket.access_logs[0].arn}/*"]

    principals {
      type        = "*"
      identifiers = ["*"]
    }

    condition {
      test     = "Bool"
      variable = "aws:SecureTransport"
      values   = ["false"]
    }
  }
}
