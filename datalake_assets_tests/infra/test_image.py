"""The image and the one-VM recipe, checked statically (no container runs on these machines:
the OCI runtime is refused, and no base image can be pulled). What runs in them is proven by
``test_production_instance.py``, which starts the processes through the same entry point.

- checkov's Dockerfile checks pass on ``infra/docker/Dockerfile``;
- every command the compose file gives a container is a role of the entry point, the order of
  starting follows the health checks (Postgres, then the code server, then the webserver and
  the daemon), and no secret is written in it;
- the lock pins every dependency the package declares, with hashes.
"""

from __future__ import annotations

import json
import re
import subprocess
import tomllib

import pytest
import yaml

from datalake_assets_tests.infra.terraform import CHECKOV_INSTALL, IN_CI, REPO
from datalake_assets_tests.infra.test_tools import _checkov_bin, _offline_env

DOCKER = REPO / "infra" / "docker"
ROLES = {"codeserver", "webserver", "daemon", "collector"}


def entrypoint_roles() -> set[str]:
    text = (DOCKER / "entrypoint.sh").read_text()
    return set(re.findall(r"^  (\w+)\)\n    exec ", text, re.M))


def test_the_entry_point_starts_every_role():
    assert entrypoint_roles() == ROLES
    run = subprocess.run(["sh", "-n", str(DOCKER / "entrypoint.sh")], capture_output=True)
    assert run.returncode == 0, run.stderr


def test_checkov_passes_the_dockerfile():
    checkov = _checkov_bin()
    if not checkov:
        reason = f"checkov not found; install it with: {CHECKOV_INSTALL}"
        pytest.fail(reason) if IN_CI else pytest.skip(reason)
    run = subprocess.run(
        [checkov, "--framework", "dockerfile", "-f", str(DOCKER / "Dockerfile"), "--compact",
         "--quiet", "-o", "json", "--skip-download"],
        cwd=REPO, env=_offline_env(), capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert run.returncode in (0, 1), f"checkov failed to run:\n{run.stderr[-3000:]}"
    report = json.loads(run.stdout)
    report = report[0] if isinstance(report, list) else report
    failed = report["results"].get("failed_checks", [])
    assert not failed, "\n".join(f"{f['check_id']}: {f['check_name']}" for f in failed)
    assert report["summary"]["passed"] >= 5, report["summary"]


def test_the_dockerfile_runs_as_a_user_and_checks_its_health():
    text = (DOCKER / "Dockerfile").read_text()
    assert re.search(r"^USER datalake$", text, re.M)
    assert re.search(r"^HEALTHCHECK .*\n\s+CMD \[\"datalake-entrypoint\", \"health\"\]", text, re.M)
    assert "FROM python:3.11" in text and "openjdk-17" in text
    for copied in re.findall(r"^COPY (\S+)", text, re.M):
        assert (REPO / copied).exists(), f"COPY {copied}: no such file in the repository"


def test_the_compose_file_starts_in_order_without_secrets():
    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    services = compose["services"]
    assert set(services) == ROLES | {"postgres"}
    for name in ROLES:
        svc = services[name]
        assert svc["command"] == [name], (name, svc["command"])
        assert svc["build"]["dockerfile"] == "infra/docker/Dockerfile"
        assert (DOCKER / svc["build"]["context"] / svc["build"]["dockerfile"]).resolve().exists()
    waits = {n: s.get("depends_on", {}) for n, s in services.items()}
    assert waits["codeserver"] == {"postgres": {"condition": "service_healthy"}}
    for later in ("webserver", "daemon"):
        assert waits[later] == {"codeserver": {"condition": "service_healthy"}}, later
    assert "healthcheck" in services["postgres"]
    # every secret is a required variable of the environment, never a value in the file
    for name, svc in services.items():
        for key, value in (svc.get("environment") or {}).items():
            if re.search(r"PASSWORD|WRITE_KEYS|SECRET", key):
                assert re.fullmatch(r"\$\{\w+:\?[^}]+\}", str(value)), (name, key)
    # the webserver has no login: published on the VM's loopback only
    assert services["webserver"]["ports"] == ["127.0.0.1:3000:3000"]


def test_the_lock_pins_every_dependency_with_hashes():
    lock = (DOCKER / "requirements.lock").read_text()
    pinned = {
        m.group(1).lower().replace("_", "-")
        for m in re.finditer(
            r"^([A-Za-z0-9_.-]+)==\S+ \\\n\s+--hash=sha256:[0-9a-f]{64}", lock, re.M
        )
    }
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {re.split(r"[\[<>=!~ ;]", d, maxsplit=1)[0].lower().replace("_", "-") for d in declared}
    assert names <= pinned, f"not in infra/docker/requirements.lock: {sorted(names - pinned)}"
    entries = re.findall(r"^[A-Za-z0-9_.-]+==", lock, re.M)
    assert len(entries) == len(pinned), "a pin without a hash"
