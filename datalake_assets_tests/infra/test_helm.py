"""The values for Dagster's Helm chart (``infra/helm/values.yaml``), checked statically: no
cluster runs on these machines, and the chart is not rendered here (no ``helm``).

- every key the file sets is a key the chart documents (``data/dagster_chart_keys.txt``, a
  trimmed copy of the chart's key paths: its header says which version);
- the instance the chart generates says what ``infra/dagster/dagster.yaml`` says: the queue's
  lanes, run monitoring, run retries, the sensors' threads;
- the code server is the image's ``codeserver`` role: the command the chart passes reaches
  ``dagster code-server start`` through the image's entry point, with the same module and port;
- no secret is written in the file, and the image has the run launcher's package.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from datalake_assets_tests.infra.terraform import REPO

VALUES = REPO / "infra" / "helm" / "values.yaml"
INSTANCE = REPO / "infra" / "dagster" / "dagster.yaml"
ENTRYPOINT = REPO / "infra" / "docker" / "entrypoint.sh"
CHART_KEYS = Path(__file__).parent / "data" / "dagster_chart_keys.txt"


def values() -> dict[str, Any]:
    return yaml.safe_load(VALUES.read_text())


def key_paths(node: Any, prefix: str = "") -> list[str]:
    """Every leaf of ``node`` as a dotted path, ``[]`` for a list's items."""
    if isinstance(node, dict):
        return [p for k, v in node.items() for p in key_paths(v, f"{prefix}.{k}" if prefix else k)]
    if isinstance(node, list):
        return [p for item in node for p in key_paths(item, f"{prefix}[]")] or [f"{prefix}[]"]
    return [prefix]


def chart_keys() -> tuple[set[str], list[str]]:
    """``(exact paths, prefixes of free-form maps)`` of the chart's documented keys."""
    lines = [
        line.strip()
        for line in CHART_KEYS.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    return {k for k in lines if not k.endswith(".*")}, [k[:-1] for k in lines if k.endswith(".*")]


def test_every_key_is_one_the_chart_documents():
    exact, free = chart_keys()
    used = key_paths(values())
    unknown = [p for p in used if p not in exact and not any(p.startswith(f) for f in free)]
    assert not unknown, "keys the chart does not document:\n" + "\n".join(unknown)
    assert len(used) > 40, used  # the walk found the file's keys


def snake(node: Any) -> Any:
    """A chart's camelCase values as dagster.yaml's snake_case."""
    if isinstance(node, dict):
        return {re.sub(r"(?<!^)([A-Z])", r"_\1", k).lower(): snake(v) for k, v in node.items()}
    if isinstance(node, list):
        return [snake(v) for v in node]
    return node


def test_the_instance_is_the_one_infra_dagster_yaml_describes():
    v, instance = values(), yaml.safe_load(INSTANCE.read_text())
    assert snake(v["concurrency"]) == {"enabled": True, **instance["concurrency"]}
    queued = v["dagsterDaemon"]["runCoordinator"]
    assert (queued["enabled"], queued["type"]) == (True, instance["run_coordinator"]["class"])
    assert snake(queued["config"]["queuedRunCoordinator"]) == instance["run_coordinator"]["config"]
    extra = v["additionalInstanceConfig"]
    for section in ("run_monitoring", "run_retries"):
        assert extra[section] == instance[section], section
        # one dagster.yaml section from one place: the chart's own keys are off
        chart_key = {"run_monitoring": "runMonitoring", "run_retries": "runRetries"}[section]
        assert v["dagsterDaemon"][chart_key] == {"enabled": False}
    for section in ("sensors", "schedules"):
        assert snake(v["dagsterDaemon"][section]) == instance[section], section
    assert v["telemetry"] == instance["telemetry"]
    pg = v["postgresql"]
    assert pg["enabled"] is False and pg["postgresqlHost"]
    assert pg["postgresqlScheme"] == instance["storage"]["postgres"]["postgres_db"]["scheme"]
    assert v["runLauncher"]["type"] == "K8sRunLauncher"


def test_the_code_server_is_the_images_codeserver_role():
    (deployment,) = v_deployments = values()["dagster-user-deployments"]["deployments"]
    assert v_deployments and values()["dagster-user-deployments"]["enabled"]
    text = ENTRYPOINT.read_text()
    role = re.search(r"^  codeserver\)\n    exec (.+?) -h ", text, re.M).group(1)
    port = re.search(r'code_port="\$\{CODE_SERVER_PORT:-(\d+)\}"', text).group(1)
    # the chart's container arguments (deployment-user.yaml), after the image's entry point
    args = ["dagster", "code-server", "start", "-h", "0.0.0.0", "-p", str(deployment["port"])]
    args += deployment["codeServerArgs"]
    assert " ".join(args[:3] + args[7:]) == role, (args, role)
    assert str(deployment["port"]) == port
    for image in (
        deployment["image"],
        values()["dagsterWebserver"]["image"],
        values()["dagsterDaemon"]["image"],
    ):
        assert image == deployment["image"]  # one image for the three
    # a first argument that is no role runs as given: `dagster ...` reaches Dagster's CLI
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    done = subprocess.run(
        ["sh", str(ENTRYPOINT), "dagster", "code-server", "start", "--help"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0 and "--module-name" in done.stdout, done.stderr[-2000:]


def test_no_secret_is_written_and_the_image_has_the_run_launcher():
    v = values()
    assert "postgresqlPassword" not in v["postgresql"]
    assert v["generatePostgresqlPasswordSecret"] is False and v["global"]["postgresqlSecretName"]
    assert not re.search(r"(?i)password\s*:\s*\S", VALUES.read_text().split("\n", 1)[1])
    lock = (REPO / "infra" / "docker" / "requirements.lock").read_text()
    assert re.search(r"^dagster-k8s==", lock, re.M), "K8sRunLauncher needs dagster-k8s"
