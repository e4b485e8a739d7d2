"""The Terraform module in infra/, checked offline: no cloud account, no network.

- The HCL parses (python-hcl2), and the facts the issue asks for hold in it: the bucket's
  lifecycle, public access block and encryption, least-privilege IAM (EMR actions only on
  lake-tagged clusters, no "*" resource for S3 or Glue), tags, documented variables and outputs.
- checkov reports no failed check, and every skip in the code carries a reason.
- With terraform: `terraform fmt`; with a local AWS provider too (TERRAFORM_PLUGIN_DIR or
  /opt/tf-plugins), `terraform test` against a mock provider (infra/tests/module.tftest.hcl),
  which first validates the configuration against the provider's schema.
- The bootstrap action's script, with stand-ins for sudo, dnf and Python.

checkov pins versions of boto3 and packaging that the project's own dependencies outgrow, so it
lives in a virtualenv of its own: CHECKOV_BIN, else `checkov` on PATH, else
<repo>/.venv-iac/bin/checkov. Missing, the checkov test is skipped locally and fails under CI.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import textwrap
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
INFRA = REPO / "infra"
ALL_FEATURES_TFVARS = INFRA / "tests" / "all-features.tfvars"
BOOTSTRAP = INFRA / "bootstrap" / "install-python-deps.sh"
IN_CI = bool(os.environ.get("CI"))

CHECKOV_INSTALL = "python3 -m venv .venv-iac && .venv-iac/bin/pip install -q 'checkov==3.3.30'"

try:
    import hcl2
except ImportError:  # pragma: no cover - depends on the environment
    if IN_CI:
        raise RuntimeError("python-hcl2 is missing: it is a test dependency (pyproject [test])")
    pytest.skip("python-hcl2 is not installed (pip install -e '.[test]')", allow_module_level=True)


# --- Parsing -----------------------------------------------------------------------------------


def _unquote(value: Any) -> Any:
    """python-hcl2 8 keeps the quotes of string literals and block labels ('"x"'); older
    versions drop them. Strip them recursively and drop the parser's markers."""
    if isinstance(value, str):
        return value[1:-1] if len(value) >= 2 and value[0] == value[-1] == '"' else value
    if isinstance(value, list):
        return [_unquote(v) for v in value]
    if isinstance(value, dict):
        return {_unquote(k): _unquote(v) for k, v in value.items()
                if k not in ("__is_block__", "__comments__", "__inline_comments__")}
    return value


@pytest.fixture(scope="module")
def module() -> dict[str, Any]:
    """The module's *.tf files merged: resources and data sources keyed "type.name",
    variables, outputs and locals by name."""
    merged: dict[str, Any] = {"resource": {}, "data": {}, "variable": {}, "output": {},
                              "locals": {}}
    files = sorted(INFRA.glob("*.tf"))
    assert files, f"no Terraform files in {INFRA}"
    for path in files:
        with path.open(encoding="utf-8") as handle:
            parsed = _unquote(hcl2.load(handle))
        for kind in ("resource", "data"):
            for block in parsed.get(kind, []):
                for rtype, named in block.items():
                    for name, body in named.items():
                        key = f"{rtype}.{name}"
                        assert key not in merged[kind], f"{kind} {key} declared twice"
                        merged[kind][key] = body
        for kind in ("variable", "output"):
            for block in parsed.get(kind, []):
                for name, body in block.items():
                    assert name not in merged[kind], f"{kind} {name} declared twice"
                    merged[kind][name] = body
        for block in parsed.get("locals", []):
            merged["locals"].update(block)
    return merged


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
    for prefix_var, expected_prefix in (("job_staging_prefix", "_jobs/"),
                                        ("pipes_prefix", "_pipes/")):
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
    assert sorted(prefixes) == sorted(["", "${var.job_staging_prefix}", "${var.pipes_prefix}",
                                       "${local.logs_prefix}"])
    assert module["locals"]["logs_prefix"] == "_logs/"
    lake, archive = (module["variable"][v]["default"] for v in ("lake_prefix", "archive_prefix"))
    for expiring in ("_logs/", _default(module, "${var.job_staging_prefix}"),
                     _default(module, "${var.pipes_prefix}")):
        assert not expiring.startswith((lake, archive)), expiring
    whole_bucket = next(rule for rule in rules if _one(rule["filter"])["prefix"] == "")
    assert "expiration" not in whole_bucket
    for dynamic in whole_bucket.get("dynamic", []):
        for label, body in dynamic.items():
            if label == "expiration":
                assert set(_one(body["content"])) == {"expired_object_delete_marker"}, body


def test_public_access_is_blocked_all_four_ways(module):
    block = module["resource"]["aws_s3_bucket_public_access_block.lake"]
    for setting in ("block_public_acls", "block_public_policy", "ignore_public_acls",
                    "restrict_public_buckets"):
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
    assert any(_one(c)["variable"] == "aws:SecureTransport" and _one(c)["values"] == ["false"]
               for s in denies for c in s.get("condition", [])), denies


def test_versioning_is_optional_and_on_by_default(module):
    assert _type(module, "enable_versioning") == "bool"
    assert module["variable"]["enable_versioning"]["default"] is True
    status = _one(module["resource"]["aws_s3_bucket_versioning.lake"]["versioning_configuration"])
    assert "var.enable_versioning" in status["status"]


# --- IAM ----------------------------------------------------------------------------------------


def test_every_policy_is_an_aws_iam_policy_document(module):
    """So the two IAM tests below see every statement the module grants."""
    attributes = {"aws_iam_policy": "policy", "aws_iam_role_policy": "policy",
                  "aws_s3_bucket_policy": "policy", "aws_kms_key": "policy",
                  "aws_iam_role": "assume_role_policy"}
    seen = 0
    for key, body in module["resource"].items():
        attribute = attributes.get(key.split(".")[0])
        if attribute:
            seen += 1
            assert re.fullmatch(r"\$\{data\.aws_iam_policy_document\.[a-z0-9_]+(\[0\])?\.json\}",
                                body[attribute]), (key, body[attribute])
    assert seen >= 10


def test_orchestrator_emr_actions_require_the_lake_tag(module):
    document = module["data"]["aws_iam_policy_document.orchestrator_submit"]
    emr_statements = [s for s in _statements(document)
                      if any(a.startswith("elasticmapreduce:") for a in s["actions"])]
    granted = {a for s in emr_statements for a in s["actions"]}
    assert {"elasticmapreduce:AddJobFlowSteps", "elasticmapreduce:DescribeStep",
            "elasticmapreduce:CancelSteps", "elasticmapreduce:DescribeCluster"} <= granted
    for statement in emr_statements:
        conditions = [_one(c) for c in statement.get("condition", [])]
        assert any(c["test"] == "StringEquals"
                   and c["variable"] == "aws:ResourceTag/${var.lake_tag_key}"
                   and c["values"] == ["${var.name}"] for c in conditions), statement
        assert "*" not in statement["resources"]
    assert module["variable"]["lake_tag_key"]["default"] == "datalake"


def test_orchestrator_serverless_and_pass_role_are_scoped(module):
    statements = list(_statements(module["data"]["aws_iam_policy_document.orchestrator_submit"]))
    serverless = [s for s in statements
                  if any(a.startswith("emr-serverless:") for a in s["actions"])]
    assert {a for s in serverless for a in s["actions"]} == {
        "emr-serverless:StartJobRun", "emr-serverless:GetJobRun", "emr-serverless:CancelJobRun"}
    for statement in serverless:
        assert all("aws_emrserverless_application.lake[0].arn" in r for r in statement["resources"])
    pass_role = [s for s in statements if "iam:PassRole" in s["actions"]]
    assert len(pass_role) == 1 and pass_role[0]["actions"] == ["iam:PassRole"]
    assert pass_role[0]["resources"] == ["${aws_iam_role.serverless_job[0].arn}"]
    condition = _one(pass_role[0]["condition"])
    assert condition["variable"] == "iam:PassedToService"
    assert condition["values"] == ["emr-serverless.amazonaws.com"]
    # the orchestrator's other permissions: exactly the lake's data policy
    attachments = {body["policy_arn"] for key, body in module["resource"].items()
                   if key.startswith("aws_iam_role_policy_attachment.orchestrator")}
    assert attachments == {"${aws_iam_policy.lake_data.arn}",
                           "${aws_iam_policy.orchestrator_submit.arn}"}


_S3_GLUE_WRITE = re.compile(
    r"^(s3|glue):(\*|Put.*|Delete.*|Create.*|Update.*|Batch(Create|Update|Delete).*|Abort.*"
    r"|Restore.*|Replicate.*)$")


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
            assert not (writes and any(r == "*" or r.endswith(":*") or r == "arn:aws:s3:::*"
                                       for r in resources)), (key, statement)
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
                "${concat([local.glue_catalog_arn], local.glue_database_arns"), resources
            assert all(a.startswith("glue:") for a in statement["actions"])
        else:
            assert set(resources) <= allowed, statement
    glue_locals = module["locals"]
    assert "local.glue_database_names" in glue_locals["glue_database_arns"]
    assert glue_locals["glue_database_names"] == \
        "${distinct(concat(var.glue_databases, [var.reports_database]))}"
    assert module["variable"]["reports_database"]["default"] == "segment_datalake_meta"


def test_the_cluster_instance_role_gets_the_lake_policy_and_nothing_broader(module):
    attached = {body["policy_arn"] for key, body in module["resource"].items()
                if key.startswith("aws_iam_role_policy_attachment.emr_instance")}
    assert attached == {"${aws_iam_policy.lake_data.arn}", "${aws_iam_policy.job_extra.arn}"}
    inline = [k for k, b in module["resource"].items()
              if k.startswith("aws_iam_role_policy.") and "emr_instance" in b["role"]]
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
    egress = {k: b for k, b in module["resource"].items()
              if k.startswith("aws_vpc_security_group_egress_rule.")}
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
    "aws_s3_bucket_ownership_controls", "aws_s3_bucket_public_access_block",
    "aws_s3_bucket_versioning", "aws_s3_bucket_server_side_encryption_configuration",
    "aws_s3_bucket_lifecycle_configuration", "aws_s3_bucket_logging", "aws_s3_bucket_policy",
    "aws_kms_alias", "aws_iam_role_policy_attachment", "aws_iam_role_policy", "aws_ec2_tag",
    "aws_emr_security_configuration", "aws_emr_managed_scaling_policy",
    "aws_lakeformation_resource", "aws_lakeformation_permissions",
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
            assert re.search(rf"^\|\s*`{name}`\s*\|", readme, re.MULTILINE), \
                f"{kind} {name} is missing from the tables of infra/README.md"


def test_every_checkov_skip_gives_a_reason():
    skips = 0
    for path in sorted(INFRA.rglob("*.tf")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if "checkov:skip" in line:
                skips += 1
                match = re.fullmatch(r"\s*#checkov:skip=(CKV2?_AWS_\d+):(.+)", line)
                assert match, f"{path.name}:{number}: malformed skip {line.strip()!r}"
                assert len(match[2].split()) >= 8, f"{path.name}:{number}: reason too short"


# --- Tools: checkov, terraform (run in the background, together) ----------------------------


def _missing(reason: str) -> None:
    """A tool that is not there: a skip on a laptop, a failure under CI (``CI`` set, as
    ``.ci/run`` does), where a silent skip would pass a check that never ran."""
    if IN_CI:
        pytest.fail(reason)
    pytest.skip(reason)


def _checkov_bin() -> str | None:
    configured = os.environ.get("CHECKOV_BIN")
    if configured:
        return configured
    found = shutil.which("checkov")
    if found:
        return found
    local = REPO / ".venv-iac" / "bin" / "checkov"
    return str(local) if local.exists() else None


def _terraform_plugin_dir() -> Path | None:
    for candidate in (os.environ.get("TERRAFORM_PLUGIN_DIR"), "/opt/tf-plugins"):
        if candidate and (Path(candidate) / "registry.terraform.io" / "hashicorp" / "aws").is_dir():
            return Path(candidate)
    return None


def _offline_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("BC_API_KEY", "PRISMA_API_URL", "BC_SOURCE")}
    env.update(CHECKPOINT_DISABLE="1", TF_IN_AUTOMATION="1", LOG_LEVEL="WARNING")
    return env


def _run_checkov(checkov: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [checkov, "--framework", "terraform", "--directory", "infra",
         "--var-file", str(ALL_FEATURES_TFVARS.relative_to(REPO)),
         "--compact", "--quiet", "-o", "json", "--skip-download"],
        cwd=REPO, env=_offline_env(), capture_output=True, text=True, timeout=900, check=False)


def _run_terraform(terraform: str, plugin_dir: Path,
                   workdir: Path) -> dict[str, subprocess.CompletedProcess]:
    shutil.copytree(INFRA, workdir, ignore=shutil.ignore_patterns(".terraform*"))
    results = {}
    # `terraform test` validates the configuration against the provider's schema first, so a
    # separate `terraform validate` would only cost another load of the provider.
    for step, args in (
        ("init", ["init", "-backend=false", "-input=false", f"-plugin-dir={plugin_dir}"]),
        ("test", ["test"]),
    ):
        results[step] = subprocess.run([terraform, *args, "-no-color"], cwd=workdir,
                                       env=_offline_env(), capture_output=True, text=True,
                                       timeout=900, check=False)
        if results[step].returncode != 0:
            break
    return results


@pytest.fixture(scope="module")
def tool_runs(tmp_path_factory) -> Iterator[dict[str, Future | str]]:
    """checkov and terraform started once, side by side; each test waits for its own."""
    runs: dict[str, Future | str] = {}
    with ThreadPoolExecutor(max_workers=2) as pool:
        checkov = _checkov_bin()
        if checkov:
            runs["checkov"] = pool.submit(_run_checkov, checkov)
        else:
            runs["checkov"] = (f"checkov not found (CHECKOV_BIN, PATH, .venv-iac/bin/checkov); "
                               f"install it with: {CHECKOV_INSTALL}")
        terraform = shutil.which("terraform")
        plugin_dir = _terraform_plugin_dir()
        if terraform and plugin_dir:
            runs["terraform"] = pool.submit(_run_terraform, terraform, plugin_dir,
                                            tmp_path_factory.mktemp("tf") / "infra")
        else:
            runs["terraform"] = ("needs the terraform binary and a local AWS provider "
                                 "(TERRAFORM_PLUGIN_DIR or /opt/tf-plugins); `terraform init` "
                                 "would download it, and tests stay offline")
        yield runs


def test_checkov_reports_no_failed_check(tool_runs):
    run = tool_runs["checkov"]
    if isinstance(run, str):
        _missing(run)
    result = run.result()
    assert result.returncode in (0, 1), f"checkov failed to run:\n{result.stderr[-3000:]}"
    report = json.loads(result.stdout)
    reports = report if isinstance(report, list) else [report]
    assert [r["check_type"] for r in reports] == ["terraform"]
    summary = reports[0]["summary"]
    failed = reports[0]["results"].get("failed_checks", [])
    assert failed == [] and summary["failed"] == 0, "\n".join(
        f"{f['check_id']} {f['resource']} ({f['file_path']}:{f['file_line_range']}): "
        f"{f['check_name']}" for f in failed)
    assert summary["parsing_errors"] == 0
    assert summary["passed"] >= 200 and summary["resource_count"] >= 45, summary
    # Every skip in the code was applied to a check checkov ran: no stale skip, and no
    # resource whose checks were silently left out (a count checkov evaluated to 0).
    skips = sum(p.read_text(encoding="utf-8").count("#checkov:skip=") for p in INFRA.rglob("*.tf"))
    assert summary["skipped"] == skips, summary


def _terraform_step(tool_runs, step: str) -> subprocess.CompletedProcess:
    run = tool_runs["terraform"]
    if isinstance(run, str):
        _missing(run)
    results = run.result()
    for earlier in ("init", "test"):
        result = results.get(earlier)
        assert result is not None, f"terraform {earlier} did not run"
        if earlier == step:
            return result
        assert result.returncode == 0, f"terraform {earlier}:\n{result.stdout}\n{result.stderr}"
    raise AssertionError(step)


def test_terraform_fmt_is_clean():
    terraform = shutil.which("terraform")
    if not terraform:
        _missing("the terraform binary is not installed; formatting is not checked")
    result = subprocess.run(
        [terraform, "fmt", "-check", "-recursive", "-diff", "-no-color", "infra"],
        cwd=REPO, env=_offline_env(), capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, f"terraform fmt would change:\n{result.stdout}{result.stderr}"


def test_terraform_validates_and_passes_its_tests_with_a_mock_provider(tool_runs):
    result = _terraform_step(tool_runs, "test")
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"Success! [1-9]\d* passed, 0 failed", result.stdout), result.stdout


# --- The bootstrap action -------------------------------------------------------------------


def _stub(path: Path, body: str) -> None:
    path.write_text("#!/usr/bin/env bash\n" + textwrap.dedent(body), encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


@pytest.fixture()
def bootstrap_sandbox(tmp_path) -> dict[str, Any]:
    """Stand-ins for dnf and python3.11 that log their arguments; the virtualenv's python is
    one too. sudo is `env`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.log"
    _stub(bin_dir / "fake-dnf", f"""\
        printf 'dnf' >> {log}; printf ' [%s]' "$@" >> {log}; echo >> {log}
        """)
    _stub(bin_dir / "python3.11", f"""\
        printf 'python3.11' >> {log}; printf ' [%s]' "$@" >> {log}; echo >> {log}
        if [ "$1 $2" = "-m venv" ]; then
          mkdir -p "$3/bin"
          {{ echo '#!/usr/bin/env bash'
             echo 'printf "venv-python" >> {log}; printf " [%s]" "$@" >> {log}; echo >> {log}'
          }} > "$3/bin/python"
          chmod +x "$3/bin/python"
        fi
        """)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
           "DATALAKE_BOOTSTRAP_SUDO": "env", "DATALAKE_BOOTSTRAP_DNF": "fake-dnf"}
    return {"env": env, "log": log, "venv": tmp_path / "opt" / "python"}


def test_bootstrap_installs_python_and_the_packages_into_a_venv(bootstrap_sandbox):
    box = bootstrap_sandbox
    venv = str(box["venv"])
    result = subprocess.run(
        ["bash", str(BOOTSTRAP), "--python", "3.11", "--venv", venv,
         "--index-url", "https://pypi.example.test/simple", "--import", "pyarrow",
         "--import", "dagster_pipes",
         "--", "pyarrow>=16", "pandas>=2.2,<3", "pandera[pandas]>=0.20"],
        env=box["env"], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    calls = box["log"].read_text(encoding="utf-8").splitlines()
    pip_install = ("venv-python [-m] [pip] [install] [--no-cache-dir] [--retries] [10] "
                   "[--timeout] [60] [--index-url] [https://pypi.example.test/simple]")
    assert calls == [
        "dnf [install] [-y] [python3.11] [python3.11-pip]",
        f"python3.11 [-m] [venv] [{venv}]",
        f"{pip_install} [--upgrade] [pip]",
        f"{pip_install} [pyarrow>=16] [pandas>=2.2,<3] [pandera[pandas]>=0.20]",
        "venv-python [-m] [pip] [check]",
        "venv-python [-c] [import pyarrow]",
        "venv-python [-c] [import dagster_pipes]",
    ]


@pytest.mark.parametrize("args, message", [
    (["--python", "3.11", "--venv", "/opt/x", "--"], "no packages"),
    (["--python", "3.11; rm", "--venv", "/opt/x", "--", "pyarrow"], "--python must look like"),
    (["--python", "3.11", "--venv", "relative", "--", "pyarrow"], "absolute path"),
    (["--python", "3.11", "--venv", "/opt/x", "--import", "os; rm -rf /", "--", "pyarrow"],
     "not a module name"),
    (["--python", "3.11", "--venv", "/opt/x", "--bogus", "--", "pyarrow"], "unknown argument"),
])
def test_bootstrap_refuses_bad_arguments_before_installing_anything(bootstrap_sandbox, args,
                                                                    message):
    result = subprocess.run(["bash", str(BOOTSTRAP), *args], env=bootstrap_sandbox["env"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert not bootstrap_sandbox["log"].exists()


def test_terraform_passes_the_bootstrap_the_arguments_it_parses(module):
    """The argument list built in emr.tf uses the options the script understands, and the
    virtualenv it builds is the interpreter spark-env exports."""
    args = module["locals"]["bootstrap_args"]
    script = BOOTSTRAP.read_text(encoding="utf-8")
    for option in re.findall(r'"(--[a-z-]+)"', args):
        assert f"    {option})" in script, option
    assert '"--venv", local.emr_python_venv' in args
    assert module["locals"]["emr_python"] == "${local.emr_python_venv}/bin/python"
