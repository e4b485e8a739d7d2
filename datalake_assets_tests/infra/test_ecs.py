"""The ECS recipe (``infra/ecs/``), checked statically: no AWS account and no container here.

- checkov reports no failed check on the module (each skip has its reason in the code), and,
  with the ``terraform`` binary and a local AWS provider, ``terraform validate`` passes;
- the instance of ``infra/ecs/dagster.yaml`` is ``infra/dagster/dagster.yaml`` plus an
  ``EcsRunLauncher`` whose configuration Dagster accepts, naming the module's run task
  definition and its container;
- least privilege: the webserver has no role, the daemon may only run the run task definition
  in this cluster, watch and stop this cluster's tasks and pass the runs' two roles; the code
  server and the runs are the lake's orchestrator role;
- each service's command is a role of the image's entry point, and the entry point writes the
  settings ECS passes in the environment (no file mounts on Fargate) where they are read.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from datalake_assets_tests.infra.terraform import CHECKOV_INSTALL, IN_CI, INFRA, parse_module
from datalake_assets_tests.infra.test_image import entrypoint_roles
from datalake_assets_tests.infra.test_tools import (
    _checkov_bin,
    _offline_env,
    _terraform_plugin_dir,
)

ECS = INFRA / "ecs"
ENTRYPOINT = INFRA / "docker" / "entrypoint.sh"


def _missing(reason: str) -> None:
    pytest.fail(reason) if IN_CI else pytest.skip(reason)


@pytest.fixture(scope="module")
def ecs() -> dict:
    return parse_module(ECS)


@pytest.mark.slow
def test_checkov_reports_no_failed_check_on_the_ecs_module():
    checkov = _checkov_bin()
    if not checkov:
        _missing(f"checkov not found; install it with: {CHECKOV_INSTALL}")
    run = subprocess.run(
        [checkov, "--framework", "terraform", "--directory", str(ECS), "--compact", "--quiet",
         "-o", "json", "--skip-download"],
        env=_offline_env(), capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert run.returncode in (0, 1), f"checkov failed to run:\n{run.stderr[-3000:]}"
    report = json.loads(run.stdout)
    report = report[0] if isinstance(report, list) else report
    failed = report["results"].get("failed_checks", [])
    assert not failed, "\n".join(
        f"{f['check_id']} {f['resource']}: {f['check_name']}" for f in failed
    )
    summary = report["summary"]
    assert summary["parsing_errors"] == 0 and summary["resource_count"] >= 19, summary
    skips = sum(p.read_text().count("#checkov:skip=") for p in ECS.glob("*.tf"))
    assert summary["skipped"] == skips, summary


@pytest.mark.slow
def test_terraform_validates_the_ecs_module(tmp_path):
    terraform, plugins = shutil.which("terraform"), _terraform_plugin_dir()
    if not (terraform and plugins):
        _missing("needs the terraform binary and a local AWS provider (TERRAFORM_PLUGIN_DIR)")
    work = tmp_path / "ecs"
    shutil.copytree(ECS, work, ignore=shutil.ignore_patterns(".terraform*"))
    for args in (
        ["init", "-backend=false", "-input=false", f"-plugin-dir={plugins}"],
        ["validate"],
    ):
        run = subprocess.run(
            [terraform, *args, "-no-color"],
            cwd=work, env=_offline_env(), capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        assert run.returncode == 0, f"terraform {args[0]}:\n{run.stdout}\n{run.stderr}"


def test_the_instance_is_the_compose_one_with_an_ecs_run_launcher(ecs):
    from dagster._config import process_config
    from dagster_aws.ecs import EcsRunLauncher

    on_ecs = yaml.safe_load((ECS / "dagster.yaml").read_text())
    compose = yaml.safe_load((INFRA / "dagster" / "dagster.yaml").read_text())
    launcher = on_ecs.pop("run_launcher")
    assert on_ecs == compose  # every other section, as the compose instance says it
    assert (launcher["module"], launcher["class"]) == ("dagster_aws.ecs", "EcsRunLauncher")
    checked = process_config(EcsRunLauncher.config_type(), launcher["config"])
    assert checked.success, checked.errors
    config = launcher["config"]
    # the run task definition's family comes from the environment the module gives each task
    env = {e["name"]: e["value"] for e in ecs["locals"]["common_environment"]}
    assert env[config["task_definition"]["env"]] == "${local.run_family}"
    assert env["DAGSTER_HOME"] == "/opt/dagster/ecs"
    run = ecs["resource"]["aws_ecs_task_definition.run"]
    assert run["family"] == "${local.run_family}"
    assert f'name = "{config["container_name"]}"' in run["container_definitions"]
    dockerfile = (INFRA / "docker" / "Dockerfile").read_text()
    assert "COPY infra/ecs/dagster.yaml /opt/dagster/ecs/dagster.yaml" in dockerfile


def test_each_task_has_the_least_it_needs(ecs):
    services = ecs["locals"]["services"]
    assert set(services) == {"codeserver", "webserver", "daemon"} <= entrypoint_roles()
    assert services["webserver"]["role"] is None
    assert services["codeserver"]["role"] == "${var.orchestrator_role_arn}"
    assert services["daemon"]["role"] == "${aws_iam_role.daemon.arn}"
    run = ecs["resource"]["aws_ecs_task_definition.run"]
    assert run["task_role_arn"] == "${var.orchestrator_role_arn}"
    service_def = ecs["resource"]["aws_ecs_task_definition.service"]["container_definitions"]
    assert "command = [each.key]" in service_def  # the role of the entry point
    statements = ecs["data"]["aws_iam_policy_document.daemon"]["statement"]
    by_action = {a: s for s in statements for a in s["actions"]}
    assert by_action["ecs:RunTask"]["resources"] == [
        "arn:${local.partition}:ecs:${local.region}:${local.account_id}:task-definition/"
        "${local.run_family}:*"
    ]
    assert by_action["ecs:RunTask"]["condition"][0]["values"] == ["${local.cluster_arn}"]
    assert by_action["ecs:StopTask"]["resources"][0].endswith(":task/${var.name}/*")
    assert sorted(by_action["iam:PassRole"]["resources"]) == sorted(
        ["${var.orchestrator_role_arn}", "${aws_iam_role.execution.arn}"]
    )
    # "*" only for the calls AWS allows on nothing else, and none of them writes
    star = {a for s in statements if s["resources"] == ["*"] for a in s["actions"]}
    assert star == {
        "ecs:DescribeTaskDefinition",
        "ecs:ListAccountSettings",
        "ec2:DescribeNetworkInterfaces",
    }
    # nothing in the module is reachable from outside the VPC, and no task gets a public IP
    text = "".join(p.read_text() for p in ECS.glob("*.tf"))
    assert "publicly_accessible    = false" in text and "assign_public_ip = false" in text
    assert not re.search(r"ingress\s*{[^}]*0\.0\.0\.0/0", text)


def test_the_entry_point_writes_the_settings_ecs_passes_in_the_environment(tmp_path):
    settings = tmp_path / "conf" / "lake.toml"
    toml = 'lake_root = "s3://bucket/lake"\n[[sources]]\nid = "web"'
    env = dict(os.environ, DATALAKE_SETTINGS_TOML=toml, DATALAKE_SETTINGS=str(settings))
    done = subprocess.run(
        ["sh", str(ENTRYPOINT), "sh", "-c", 'cat "$DATALAKE_SETTINGS"'],
        env=env, capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == toml + "\n" == settings.read_text()
    assert Path(settings).parent.is_dir()
