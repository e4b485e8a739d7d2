"""The Terraform module in infra/, checked offline (python-hcl2 parses it; no cloud account, no
network): the facts the issue asks for hold in it: the bucket's lifecycle, public access block
and encryption, least-privilege IAM (EMR actions only on lake-tagged clusters, no "*" resource
for S3 or Glue), tags, documented variables and outputs, and every checkov skip carries a
reason."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from datalake_assets_tests.infra.terraform import INFRA


def _one(block: Any) -> dict:
    """A nested block: python-hcl2 gives a list of one dict."""
    if isinstance(block, list):
        assert len(block) == 1, block
        return block[0]
    return block


def _default(module: dict, expression: str) -> Any:
    """The value of "${var.x}" under the module's defaults."""
    match = re.fullmatch(r"\$\{var\.([a-z0-9_]+)\}", expression)
    assert match, f"expected a plain variable reference, got {expression!r}"
    return module["variable"][match[1]]["default"]


def _type(module: dict, variable: str) -> str:
    """A variable's type constraint: python-hcl2 8 gives "bool", older versions "${bool}"."""
    declared = module["variable"][variable]["type"]
    return declared[2:-1] if declared.startswith("${") else declared


def _statements(document: dict) -> Iterator[dict]:
    """Every statement of an aws_iam_policy_document, dynamic ones included."""
    yield from document.get("statement", [])
    for dynamic in document.get("dynamic", []):
        for label, body in dynamic.items():
            if label == "statement":
                yield from body.get("content", [])


def _as_list(value: Any) -> list:
    return value if isinstance(value, list) else [value]


# --- The bucket ---------------------------------------------------------------------------------


def test_lifecycle_expires_job_packages_and_pipes_messages_after_14_days(module):
    rules = module["resource"]["aws_s3_bucket_lifecycle_configuration.lake"]["rule"]
    by_prefix = {_one(r["filter"])["prefix"]: r for r in rules}
    for prefix_var, expected_prefix in (
        ("job_staging_prefix", "_jobs/"),
        ("pipes_prefix", "_pipes/"),
    ):
        ref = f"${{var.{prefix_var}}}"
        assert module["variable"][prefix_var]["default"] == expected_prefix
        assert ref in by_prefix, f"no lifecycle rule for {expected_prefix}"
        rule = by_prefix[ref]
        assert rule["status"] == "Enabled"
        assert _default(module, _one(rule["expiration"])["days"]) == 14


def test_lifecycle_aborts_incomplete_multipart_uploads_bucket_wide_after_7_days(module):
    rules = module["resource"]["aws_s3_bucket_lifecycle_configuration.lake"]["rule"]
    whole_bucket = [r for r in rules if _one(r["filter"])["prefix"] == ""]
    assert len(whole_bucket) == 1, "one rule must cover the whole bucket"
    abort = _one(whole_bucket[0]["abort_incomplete_multipart_upload"])
    assert _default(module, abort["days_after_initiation"]) == 7
    assert whole_bucket[0]["status"] == "Enabled"


def test_nothing_expires_the_lake_or_the_archive(module):
    """The sync cleans its own <lake>/_staging/; the only prefixes that expire are job
    packages, Pipes messages and logs, and the rule on the whole bucket only aborts uploads and
    trims old versions."""
    rules = module["resource"]["aws_s3_bucket_lifecycle_configuration.lake"]["rule"]
    prefixes = [_one(rule["filter"])["prefix"] for rule in rules]
    assert sorted(prefixes) == sorted(
        ["", "${var.job_staging_prefix}", "${var.pipes_prefix}", "${local.logs_prefix}"]
    )
    assert module["locals"]["logs_prefix"] == "_logs/"
    lake, archive = (module["variable"][v]["default"] for v in ("lake_prefix", "archive_prefix"))
    for expiring in (
        "_logs/",
        _default(module, "${var.job_staging_prefix}"),
        _default(module, "${var.pipes_prefix}"),
    ):
        assert not expiring.startswith((lake, archive)), expiring
    whole_bucket = next(rule for rule in rules if _one(rule["filter"])["prefix"] == "")
    assert "expiration" not in whole_bucket
    for dynamic in whole_bucket.get("dynamic", []):
        for label, body in dynamic.items():
            if label == "expiration":
                assert set(_one(body["content"])) == {"expired_object_delete_marker"}, body


def test_public_access_is_blocked_all_four_ways(module):
    block = module["resource"]["aws_s3_bucket_public_access_block.lake"]
    for setting in (
        "block_public_acls",
        "block_public_policy",
        "ignore_public_acls",
        "restrict_public_buckets",
    ):
        assert block.get(setting) is True, setting
    assert block["bucket"] == "${aws_s3_bucket.lake.id}"


def test_bucket_is_encrypted_with_a_rotating_customer_managed_key(module):
    sse = module["resource"]["aws_s3_bucket_server_side_encryption_configuration.lake"]
    rule = _one(sse["rule"])
    default = _one(rule["apply_server_side_encryption_by_default"])
    assert default["sse_algorithm"] == "aws:kms"
    assert default["kms_master_key_id"] == "${local.kms_key_arn}"
    assert rule["bucket_key_enabled"] is True
    key = module["resource"]["aws_kms_key.lake"]
    assert key["enable_key_rotation"] is True
    assert module["variable"]["kms_key_arn"]["default"] == "", "the module's own key by default"


def test_bucket_policy_denies_plain_http(module):
    document = module["data"]["aws_iam_policy_document.lake_bucket"]
    denies = [s for s in _statements(document) if s.get("effect") == "Deny"]
    assert any(
        _one(c)["variable"] == "aws:SecureTransport" and _one(c)["values"] == ["false"]
        for s in denies
        for c in s.get("condition", [])
    ), denies


def test_versioning_is_optional_and_on_by_default(module):
    assert _type(module, "enable_versioning") == "bool"
    assert module["variable"]["enable_versioning"]["default"] is True
    status = _one(module["resource"]["aws_s3_bucket_versioning.lake"]["versioning_configuration"])
    assert "var.enable_versioning" in status["status"]


# --- IAM ----------------------------------------------------------------------------------------


def test_every_policy_is_an_aws_iam_policy_document(module):
    """So the two IAM tests below see every statement the module grants."""
    attributes = {
        "aws_iam_policy": "policy",
        "aws_iam_role_policy": "policy",
        "aws_s3_bucket_policy": "policy",
        "aws_kms_key": "policy",
        "aws_iam_role": "assume_role_policy",
    }
    seen = 0
    for key, body in module["resource"].items():
        attribute = attributes.get(key.split(".")[0])
        if attribute:
            seen += 1
            assert re.fullmatch(
                r"\$\{data\.aws_iam_policy_document\.[a-z0-9_]+(\[0\])?\.json\}", body[attribute]
            ), (key, body[attribute])
    assert seen >= 10


def test_orchestrator_emr_actions_require_the_lake_tag(module):
    document = module["data"]["aws_iam_policy_document.orchestrator_submit"]
    emr_statements = [
        s
        for s in _statements(document)
        if any(a.startswith("elasticmapreduce:") for a in s["actions"])
    ]
    granted = {a for s in emr_statements for a in s["actions"]}
    assert {
        "elasticmapreduce:AddJobFlowSteps",
        "elasticmapreduce:DescribeStep",
        "elasticmapreduce:CancelSteps",
        "elasticmapreduce:DescribeCluster",
    } <= granted
    for statement in emr_statements:
        conditions = [_one(c) for c in statement.get("condition", [])]
        assert any(
            c["test"] == "StringEquals"
            and c["variable"] == "aws:ResourceTag/${var.lake_tag_key}"
            and c["values"] == ["${var.name}"]
            for c in conditions
        ), statement
        assert "*" not in statement["resources"]
    assert module["variable"]["lake_tag_key"]["default"] == "datalake"


def test_orchestrator_serverless_and_pass_role_are_scoped(module):
    statements = list(_statements(module["data"]["aws_iam_policy_document.orchestrator_submit"]))
    serverless = [
        s for s in statements if any(a.startswith("emr-serverless:") for a in s["actions"])
    ]
    assert {a for s in serverless for a in s["actions"]} == {
        "emr-serverless:StartJobRun",
        "emr-serverless:GetJobRun",
        "emr-serverless:CancelJobRun",
    }
    for statement in serverless:
        assert all("aws_emrserverless_application.lake[0].arn" in r for r in statement["resources"])
    pass_role = [s for s in statements if "iam:PassRole" in s["actions"]]
    assert len(pass_role) == 1 and pass_role[0]["actions"] == ["iam:PassRole"]
    assert pass_role[0]["resources"] == ["${aws_iam_role.serverless_job[0].arn}"]
    condition = _one(pass_role[0]["condition"])
    assert condition["variable"] == "iam:PassedToService"
    assert condition["values"] == ["emr-serverless.amazonaws.com"]
    # the orchestrator's other permissions: exactly the lake's data policy
    attachments = {
        body["policy_arn"]
        for key, body in module["resource"].items()
        if key.startswith("aws_iam_role_policy_attachment.orchestrator")
    }
    assert attachments == {
        "${aws_iam_policy.lake_data.arn}",
        "${aws_iam_policy.orchestrator_submit.arn}",
    }


_S3_GLUE_WRITE = re.compile(
    r"^(s3|glue):(\*|Put.*|Delete.*|Create.*|Update.*|Batch(Create|Update|Delete).*|Abort.*"
    r"|Restore.*|Replicate.*)$"
)


def test_no_s3_or_glue_write_action_on_a_wildcard_resource(module):
    checked = 0
    for key, document in module["data"].items():
        if not key.startswith("aws_iam_policy_document."):
            continue
        for statement in _statements(document):
            if statement.get("effect", "Allow") != "Allow":
                continue
            checked += 1
            actions = statement.get("actions", [])
            resources = statement.get("resources", [])
            writes = [a for a in actions if _S3_GLUE_WRITE.match(a)]
            assert not (
                writes
                and any(r == "*" or r.endswith(":*") or r == "arn:aws:s3:::*" for r in resources)
            ), (key, statement)
            assert "s3:*" not in actions and "glue:*" not in actions, (key, statement)
    assert checked >= 15


def test_s3_and_glue_grants_name_only_the_lake(module):
    """The data policy (orchestrator, cluster, Serverless job) names the lake bucket and the
    lake's Glue ARNs, never another bucket or database."""
    document = module["data"]["aws_iam_policy_document.lake_data"]
    allowed = {"${local.bucket_arn}", "${local.bucket_arn}/*", "${local.kms_key_arn}"}
    denies = [s for s in _statements(document) if s.get("effect") == "Deny"]
    assert [d["resources"] for d in denies] == [["${local.bucket_arn}/${local.bootstrap_prefix}*"]]
    assert module["locals"]["bootstrap_prefix"] == "_bootstrap/"
    for statement in _statements(document):
        if statement.get("effect") == "Deny":
            continue
        resources = statement["resources"]
        if isinstance(resources, str):  # concat(...) of the Glue ARNs
            assert resources.startswith(
                "${concat([local.glue_catalog_arn], local.glue_database_arns"
            ), resources
            assert all(a.startswith("glue:") for a in statement["actions"])
        else:
            assert set(resources) <= allowed, statement
    glue_locals = module["locals"]
    assert "local.glue_database_names" in glue_locals["glue_database_arns"]
    assert (
        glue_locals["glue_database_names"]
        == "${distinct(concat(var.glue_databases, [var.reports_database]))}"
    )
    assert module["variable"]["reports_database"]["default"] == "segment_datalake_meta"


def test_the_cluster_instance_role_gets_the_lake_policy_and_nothing_broader(module):
    attached = {
        body["policy_arn"]
        for key, body in module["resource"].items()
        if key.startswith("aws_iam_role_policy_attachment.emr_instance")
    }
    assert attached == {"${aws_iam_policy.lake_data.arn}", "${aws_iam_policy.job_extra.arn}"}
    inline = [
        k
        for k, b in module["resource"].items()
        if k.startswith("aws_iam_role_policy.") and "emr_instance" in b["role"]
    ]
    assert inline == []


# --- EMR ----------------------------------------------------------------------------------------


def test_emr_cluster_uses_glue_bootstrap_scaling_and_encryption(module):
    cluster = module["resource"]["aws_emr_cluster.lake"]
    assert cluster["count"] == "${local.create_emr ? 1 : 0}"
    assert cluster["configurations_json"] == "${jsonencode(local.emr_configurations)}"
    configurations = {c["Classification"]: c for c in module["locals"]["emr_configurations"]}
    factory = "com.amazonaws.glue.catalog.metastore.AWSGlueDataCatalogHiveClientFactory"
    assert module["locals"]["glue_metastore_factory"] == factory
    for classification in ("spark-hive-site", "hive-site"):
        properties = configurations[classification]["Properties"]
        factory_ref = properties["hive.metastore.client.factory.class"]
        assert factory_ref == "${local.glue_metastore_factory}"
    exports = _one(configurations["spark-env"]["Configurations"])["Properties"]
    assert exports["PYSPARK_PYTHON"] == "${local.emr_python}"
    bootstrap = _one(cluster["bootstrap_action"])
    assert "aws_s3_object.bootstrap[0].key" in bootstrap["path"]
    assert bootstrap["args"] == "${local.bootstrap_args}"
    assert "var.bootstrap_python_packages" in module["locals"]["bootstrap_args"]
    assert cluster["security_configuration"] == "${aws_emr_security_configuration.lake[0].name}"
    assert "local.emr_managed_policy_tags" in cluster["tags"]
    scaling = module["resource"]["aws_emr_managed_scaling_policy.lake"]
    assert scaling["cluster_id"] == "${aws_emr_cluster.lake[0].id}"
    packages = module["variable"]["bootstrap_python_packages"]["default"]
    for name in ("pyarrow", "orjson", "numpy", "pandas", "pandera"):
        assert any(p.startswith(name) for p in packages), name


def test_cluster_egress_is_intra_cluster_or_https(module):
    """EMR only adds inbound rules to the groups it is given: the nodes' traffic to each other
    must be allowed outbound by the module, and nothing else but HTTPS may leave."""
    egress = {
        k: b
        for k, b in module["resource"].items()
        if k.startswith("aws_vpc_security_group_egress_rule.")
    }
    intra = egress.pop("aws_vpc_security_group_egress_rule.emr_intra_cluster")
    assert intra["ip_protocol"] == "-1" and "cidr_ipv4" not in intra
    assert "referenced_security_group_id" in intra
    pairs = module["locals"]["emr_intra_cluster_egress"]
    assert 'setproduct(["primary", "core"], ["primary", "core"])' in pairs
    for key, body in egress.items():
        if "cidr_ipv4" in body:
            port = (body["ip_protocol"], body["from_port"], body["to_port"])
            assert port == ("tcp", 443, 443), key
        else:
            assert "referenced_security_group_id" in body and body["ip_protocol"] == "tcp", key
    for key, body in module["resource"].items():
        if key.startswith("aws_security_group."):
            assert "egress" not in body and "ingress" not in body, f"{key}: inline rules"


def test_cluster_and_serverless_are_each_optional(module):
    for variable in ("create_emr_cluster", "create_emr_serverless", "enable_lakeformation"):
        assert _type(module, variable) == "bool"
    assert module["locals"]["create_emr"] == "${var.create_emr_cluster}"
    assert module["locals"]["create_serverless"] == "${var.create_emr_serverless}"
    for key, body in module["resource"].items():
        if key.startswith(("aws_emr_", "aws_security_group.emr", "aws_ec2_tag")):
            assert "local.create_emr" in str(body.get("count", "")), key
        if key.startswith("aws_emrserverless_"):
            assert "local.create_serverless" in body["count"], key


# --- Tags and documentation ---------------------------------------------------------------------

# Resource types that take no `tags` argument.
_NOT_TAGGABLE = {
    "aws_s3_bucket_ownership_controls",
    "aws_s3_bucket_public_access_block",
    "aws_s3_bucket_versioning",
    "aws_s3_bucket_server_side_encryption_configuration",
    "aws_s3_bucket_lifecycle_configuration",
    "aws_s3_bucket_logging",
    "aws_s3_bucket_policy",
    "aws_kms_alias",
    "aws_iam_role_policy_attachment",
    "aws_iam_role_policy",
    "aws_ec2_tag",
    "aws_emr_security_configuration",
    "aws_emr_managed_scaling_policy",
    "aws_lakeformation_resource",
    "aws_lakeformation_permissions",
}


def test_every_taggable_resource_carries_the_lake_tag(module):
    assert module["locals"]["tags"] == "${merge(var.tags, {(var.lake_tag_key) = var.name})}"
    for key, body in module["resource"].items():
        if key.split(".")[0] in _NOT_TAGGABLE:
            continue
        assert "local.tags" in str(body.get("tags", "")), f"{key} is not tagged with local.tags"


def test_every_variable_and_output_is_described(module):
    for kind in ("variable", "output"):
        assert module[kind], kind
        for name, body in module[kind].items():
            description = body.get("description", "")
            assert isinstance(description, str) and len(description) >= 20, f"{kind} {name}"


def test_the_readme_documents_every_variable_and_output(module):
    readme = (INFRA / "README.md").read_text(encoding="utf-8")
    for kind in ("variable", "output"):
        for name in module[kind]:
            assert re.search(rf"^\|\s*`{name}`\s*\|", readme, re.MULTILINE), (
                f"{kind} {name} is missing from the tables of infra/README.md"
            )


def test_every_checkov_skip_gives_a_reason():
    skips = 0
    for path in sorted(INFRA.rglob("*.tf")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if "checkov:skip" in line:
                skips += 1
                match = re.fullmatch(r"\s*#checkov:skip=(CKV2?_(?:AWS|AZURE)_\d+):(.+)", line)
                assert match, f"{path.name}:{number}: malformed skip {line.strip()!r}"
                assert len(match[2].split()) >= 8, f"{path.name}:{number}: reason too short"
