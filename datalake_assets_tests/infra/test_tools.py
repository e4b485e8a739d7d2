"""The Terraform module in infra/ through its tools, offline:

- checkov reports no failed check.
- With terraform: `terraform fmt`; with a local AWS provider too (TERRAFORM_PLUGIN_DIR or
  /opt/tf-plugins), `terraform test` against a mock provider (infra/tests/module.tftest.hcl),
  which first validates the configuration against the provider's schema.

checkov pins versions of boto3 and packaging that the project's own dependencies outgrow, so it
lives in a virtualenv of its own: CHECKOV_BIN, else `checkov` on PATH, else
<repo>/.venv-iac/bin/checkov. Missing, the checkov test is skipped locally and fails under CI.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from datalake_assets_tests.infra.terraform import (
    ALL_FEATURES_TFVARS,
    CHECKOV_INSTALL,
    IN_CI,
    INFRA,
    REPO,
)


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
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("BC_API_KEY", "PRISMA_API_URL", "BC_SOURCE")
    }
    env.update(CHECKPOINT_DISABLE="1", TF_IN_AUTOMATION="1", LOG_LEVEL="WARNING")
    return env


def _run_checkov(checkov: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            checkov,
            "--framework",
            "terraform",
            "--directory",
            "infra",
            "--var-file",
            str(ALL_FEATURES_TFVARS.relative_to(REPO)),
            "--compact",
            "--quiet",
            "-o",
            "json",
            "--skip-download",
        ],
        cwd=REPO,
        env=_offline_env(),
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


def _run_terraform(
    terraform: str, plugin_dir: Path, workdir: Path
) -> dict[str, subprocess.CompletedProcess]:
    shutil.copytree(INFRA, workdir, ignore=shutil.ignore_patterns(".terraform*"))
    results = {}
    # `terraform test` validates the configuration against the provider's schema first, so a
    # separate `terraform validate` would only cost another load of the provider.
    for step, args in (
        ("init", ["init", "-backend=false", "-input=false", f"-plugin-dir={plugin_dir}"]),
        ("test", ["test"]),
    ):
        results[step] = subprocess.run(
            [terraform, *args, "-no-color"],
            cwd=workdir,
            env=_offline_env(),
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
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
            runs["checkov"] = (
                f"checkov not found (CHECKOV_BIN, PATH, .venv-iac/bin/checkov); "
                f"install it with: {CHECKOV_INSTALL}"
            )
        terraform = shutil.which("terraform")
        plugin_dir = _terraform_plugin_dir()
        if terraform and plugin_dir:
            runs["terraform"] = pool.submit(
                _run_terraform, terraform, plugin_dir, tmp_path_factory.mktemp("tf") / "infra"
            )
        else:
            runs["terraform"] = (
                "needs the terraform binary and a local AWS provider "
                "(TERRAFORM_PLUGIN_DIR or /opt/tf-plugins); `terraform init` "
                "would download it, and tests stay offline"
            )
        yield runs


@pytest.mark.slow
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
        f"{f['check_name']}"
        for f in failed
    )
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
        cwd=REPO,
        env=_offline_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, f"terraform fmt would change:\n{result.stdout}{result.stderr}"


@pytest.mark.slow
def test_terraform_validates_and_passes_its_tests_with_a_mock_provider(tool_runs):
    result = _terraform_step(tool_runs, "test")
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"Success! [1-9]\d* passed, 0 failed", result.stdout), result.stdout
