# `terraform test` of the module's own logic, offline: a mock AWS provider answers every call,
# so nothing is created and no credentials are needed (datalake_assets_tests/infra/test_tools.py
# runs it when terraform and the AWS provider are installed locally).

mock_provider "aws" {
  mock_data "aws_caller_identity" {
    defaults = { account_id = "123456789012" }
  }
  mock_data "aws_partition" {
    defaults = { partition = "aws" }
  }
  mock_data "aws_region" {
    defaults = { id = "eu-west-1", name = "eu-west-1" }
  }
  mock_data "aws_subnet" {
    defaults = { vpc_id = "vpc-0123456789abcdef0" }
  }
  mock_data "aws_iam_policy_document" {
    defaults = { json = "{\"Version\":\"2012-10-17\",\"Statement\":[]}" }
  }
  mock_resource "aws_kms_key" {
    defaults = { arn = "arn:aws:kms:eu-west-1:123456789012:key/11111111-2222-3333-4444-555555555555" }
  }
  mock_resource "aws_iam_role" {
    defaults = { arn = "arn:aws:iam::123456789012:role/mocked" }
  }
  mock_resource "aws_iam_policy" {
    defaults = { arn = "arn:aws:iam::123456789012:policy/mocked" }
  }
  mock_resource "aws_iam_instance_profile" {
    defaults = { arn = "arn:aws:iam::123456789012:instance-profile/mocked" }
  }
  mock_resource "aws_emrserverless_application" {
    defaults = {
      id  = "00fabcdefghijk0l"
      arn = "arn:aws:emr-serverless:eu-west-1:123456789012:/applications/00fabcdefghijk0l"
    }
  }
  mock_resource "aws_emr_cluster" {
    defaults = { id = "j-1ABCDEFGHIJKL", arn = "arn:aws:elasticmapreduce:eu-west-1:123456789012:cluster/j-1ABCDEFGHIJKL" }
  }
}

variables {
  bucket_name    = "acme-segment-lake"
  glue_databases = ["web", "ios"]
  emr_subnet_id  = "subnet-0123456789abcdef0"
}

override_resource {
  target = aws_s3_bucket.lake
  values = { id = "acme-segment-lake", arn = "arn:aws:s3:::acme-segment-lake" }
}

run "defaults_make_an_emr_cluster_and_no_serverless_application" {
  command = apply

  assert {
    condition     = length(aws_emr_cluster.lake) == 1 && length(aws_emrserverless_application.lake) == 0
    error_message = "The defaults must create the EMR cluster and no Serverless application."
  }
  assert {
    condition     = length(aws_kms_key.lake) == 1 && aws_kms_key.lake[0].enable_key_rotation
    error_message = "Without kms_key_arn the module must create a key with rotation on."
  }
  assert {
    condition     = output.lake_root == "s3://acme-segment-lake/lake" && output.archive_root == "s3://acme-segment-lake/archive"
    error_message = "lake_root / archive_root: ${output.lake_root} ${output.archive_root}"
  }
  assert {
    condition     = output.job_staging_uri == "s3://acme-segment-lake/_jobs/"
    error_message = "job_staging_uri: ${output.job_staging_uri}"
  }
  assert {
    condition     = strcontains(output.lake_toml, "backend = \"emr\"") && strcontains(output.lake_toml, "cluster_id = \"j-1ABCDEFGHIJKL\"") && strcontains(output.lake_toml, "staging_prefix = \"s3://acme-segment-lake/_jobs/\"") && strcontains(output.lake_toml, "[catalog]\nbackend = \"glue\"")
    error_message = "lake_toml:\n${output.lake_toml}"
  }
  assert {
    condition     = toset(output.glue_databases) == toset(["web", "ios", "segment_datalake_meta"]) && length(aws_glue_catalog_database.lake) == 3
    error_message = "The Glue databases must be glue_databases plus reports_database."
  }
  assert {
    condition = alltrue([
      for r in aws_s3_bucket_lifecycle_configuration.lake.rule :
      r.expiration[0].days == 14 if contains(["_jobs/", "_pipes/"], r.filter[0].prefix)
    ]) && length([for r in aws_s3_bucket_lifecycle_configuration.lake.rule : r if contains(["_jobs/", "_pipes/"], r.filter[0].prefix)]) == 2
    error_message = "_jobs/ and _pipes/ must expire after 14 days."
  }
  assert {
    condition     = alltrue([for r in aws_s3_bucket_lifecycle_configuration.lake.rule : r.abort_incomplete_multipart_upload[0].days_after_initiation == 7])
    error_message = "Every lifecycle rule must abort incomplete multipart uploads after 7 days."
  }
  assert {
    condition     = length([for r in aws_s3_bucket_lifecycle_configuration.lake.rule : r if startswith(r.filter[0].prefix, "lake")]) == 0
    error_message = "Nothing under the lake prefix (its _staging/ included) may expire."
  }
  assert {
    condition     = aws_emr_cluster.lake[0].tags["datalake"] == "segment-datalake" && aws_emr_cluster.lake[0].tags["for-use-with-amazon-emr-managed-policies"] == "true"
    error_message = "The cluster must carry the lake tag and the EMR managed-policy tag."
  }
  assert {
    condition     = strcontains(aws_emr_cluster.lake[0].configurations_json, "com.amazonaws.glue.catalog.metastore.AWSGlueDataCatalogHiveClientFactory")
    error_message = "The cluster must use Glue as its metastore."
  }
  assert {
    condition     = contains(aws_emr_cluster.lake[0].bootstrap_action[0].args, "pyarrow>=16") && contains(aws_emr_cluster.lake[0].bootstrap_action[0].args, "--")
    error_message = "The bootstrap action must receive the package list after --."
  }
  assert {
    condition     = length(aws_vpc_security_group_egress_rule.emr_intra_cluster) == 4 && length(aws_vpc_security_group_egress_rule.emr_https) == 2 && alltrue([for r in aws_vpc_security_group_egress_rule.emr_https : r.from_port == 443 && r.to_port == 443])
    error_message = "The cluster's groups need all traffic between them and HTTPS out, nothing else."
  }
  assert {
    condition     = length(aws_security_group.emr_service_access) == 1 && length(aws_ec2_tag.emr_subnet) == 1
    error_message = "A private subnet needs the service-access group; the subnet gets the EMR managed-policy tag."
  }
  assert {
    condition     = one(aws_emr_managed_scaling_policy.lake[0].compute_limits).maximum_capacity_units == 10 && one(aws_emr_managed_scaling_policy.lake[0].compute_limits).maximum_ondemand_capacity_units == 10
    error_message = "Managed scaling limits must default to 10 instances, all On-Demand."
  }
  assert {
    condition     = length(aws_s3_bucket.access_logs) == 1 && aws_s3_bucket_logging.lake[0].target_bucket == aws_s3_bucket.access_logs[0].id
    error_message = "Access logging must go to the module's log bucket by default."
  }
  assert {
    condition     = length(aws_lakeformation_permissions.database) == 0 && length(aws_lakeformation_resource.lake) == 0
    error_message = "Lake Formation is off by default."
  }
}

run "serverless_existing_key_and_log_bucket_lakeformation" {
  command = apply

  variables {
    create_emr_cluster     = false
    create_emr_serverless  = true
    emr_subnet_id          = null
    kms_key_arn            = "arn:aws:kms:eu-west-1:123456789012:key/99999999-8888-7777-6666-555555555555"
    access_log_bucket_name = "acme-central-access-logs"
    enable_lakeformation   = true
    enable_versioning      = false
  }

  assert {
    condition     = length(aws_emr_cluster.lake) == 0 && length(aws_iam_role.emr_instance) == 0 && length(aws_security_group.emr_primary) == 0 && length(aws_ec2_tag.emr_subnet) == 0
    error_message = "Without create_emr_cluster nothing of the cluster may be created."
  }
  assert {
    condition     = length(aws_emrserverless_application.lake) == 1 && aws_emrserverless_application.lake[0].release_label == "emr-7.12.0"
    error_message = "The Serverless application must default to emr_release_label."
  }
  assert {
    condition     = output.emr_cluster_id == null && output.emr_serverless_application_id == "00fabcdefghijk0l"
    error_message = "Outputs must follow the created compute."
  }
  assert {
    condition     = strcontains(output.lake_toml, "backend = \"emr_serverless\"") && strcontains(output.lake_toml, "application_id = \"00fabcdefghijk0l\"") && !strcontains(output.lake_toml, "cluster_id")
    error_message = "lake_toml:\n${output.lake_toml}"
  }
  assert {
    condition     = length(aws_kms_key.lake) == 0 && output.kms_key_arn == "arn:aws:kms:eu-west-1:123456789012:key/99999999-8888-7777-6666-555555555555"
    error_message = "An existing key must be used as is."
  }
  assert {
    condition     = [for r in aws_s3_bucket_server_side_encryption_configuration.lake.rule : r.apply_server_side_encryption_by_default[0].kms_master_key_id][0] == var.kms_key_arn
    error_message = "The bucket must be encrypted with the given key."
  }
  assert {
    condition     = length(aws_s3_bucket.access_logs) == 0 && aws_s3_bucket_logging.lake[0].target_bucket == "acme-central-access-logs"
    error_message = "An existing log bucket must be used and none created."
  }
  assert {
    condition     = aws_s3_bucket_versioning.lake.versioning_configuration[0].status == "Suspended"
    error_message = "enable_versioning = false must suspend versioning."
  }
  assert {
    # the orchestrator and the Serverless job role, on 3 databases each
    condition     = length(aws_lakeformation_permissions.database) == 6 && length(aws_lakeformation_permissions.tables) == 6 && length(aws_lakeformation_permissions.location) == 2
    error_message = "Lake Formation grants: one per principal and database."
  }
}

run "bad_settings_are_refused_at_plan" {
  command = plan

  variables {
    emr_subnet_id             = null
    bucket_name               = "Not_A_Bucket"
    glue_databases            = ["Web-Prod"]
    bootstrap_python_packages = ["pyarrow; rm -rf /"]
    kms_key_arn               = "alias/my-key"
  }

  expect_failures = [
    var.emr_subnet_id,
    var.bucket_name,
    var.glue_databases,
    var.bootstrap_python_packages,
    var.kms_key_arn,
  ]
}

run "a_long_bucket_name_needs_an_access_log_bucket_name" {
  command = plan

  variables {
    bucket_name = "acme-segment-datalake-production-eu-west-1-archive-lake"
  }

  expect_failures = [aws_s3_bucket.access_logs]
}
