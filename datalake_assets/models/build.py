"""One dbt build of a source's models, on its engine, and what it built.

Every build (a Dagster asset's, an erasure's, the benchmark's) is wrapped by the engine's
``run`` (``models/engines/``): dbt runs with the environment it gives, then the models dbt
built successfully (``run_results.json``) are published into the lake. A model that failed,
or whose tests failed before it, is not published: the lake keeps its previous version.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from datalake_assets.models.engines import BuiltModel, engine_for
from datalake_assets.models.workspace import DBT_QUIET_ENV, SourceProject, dbt_executable
from datalake_assets.settings import LakeSettings, SourceSettings

PARTIAL_PARSE = "partial_parse.msgpack"  # dbt's saved parse, in a project's target folder
DATALAKE_META = "datalake"  # a model's meta key: {"day_column": ..., "days_before": ...}
# a build's days, in dbt's environment: the project's build_days() reads them (macros/lake.sql)
DAY_ENV = {"min_day": "DATALAKE_MIN_DAY", "max_day": "DATALAKE_MAX_DAY"}


def day_range(days: dict[str, str] | None) -> tuple[str, str] | None:
    """``(min_day, max_day)`` of a build's days; ``None``: every day."""
    if not days or "min_day" not in days:
        return None
    return days["min_day"], days["max_day"]


def day_env(days: dict[str, str] | None) -> dict[str, str]:
    """dbt's environment for a build of ``days`` ``{min_day, max_day}`` (``None``: every day,
    and the variables set empty, so that none is inherited from this process)."""
    return {var: (days or {}).get(key, "") for key, var in DAY_ENV.items()}


def built_models(
    manifest: dict[str, Any], run_results: dict[str, Any], days: tuple[str, str] | None
) -> list[BuiltModel]:
    """The models a build made (status ``success``), with the days each replaces: a daily
    model's ``meta.datalake`` names its day column and how many days before ``min_day`` its
    build rewrites (sessions: the day before)."""
    out = []
    for result in run_results.get("results", []):
        uid = result["unique_id"]
        node = manifest["nodes"].get(uid)
        if node is None or node["resource_type"] != "model" or result["status"] != "success":
            continue
        if node["config"].get("materialized") == "ephemeral":
            continue
        meta = (node["config"].get("meta") or node.get("meta") or {}).get(DATALAKE_META) or {}
        column = meta.get("day_column") or ""
        replaced = None
        if column and days is not None:
            before = int(meta.get("days_before", 0))
            first = (date.fromisoformat(days[0]) - timedelta(days=before)).isoformat()
            replaced = (first, days[1])
        out.append(
            BuiltModel(
                name=node["name"],
                schema=node["schema"],
                identifier=node.get("alias") or node["name"],
                day_column=column,
                days=replaced,
            )
        )
    return out


@dataclass
class BuildResult:
    returncode: int
    output: str
    published: list[Any]


def build_outside_dagster(
    settings: LakeSettings,
    source: SourceSettings,
    project: SourceProject,
    args: list[str],
    run_id: str,
    days: dict[str, str] | None = None,
) -> BuildResult:
    """``dbt <args>`` in a subprocess on the source's engine (an erasure, the benchmark), the
    built models published; ``days`` ``{min_day, max_day}``: the days built (``None``: all).
    As dagster-dbt does, the project's parse is reused (``partial_parse.msgpack``)."""
    engine = engine_for(settings)
    with engine.run(settings, source, project, run_id) as run:
        with tempfile.TemporaryDirectory(prefix="dbt-target-") as target:
            parsed = os.path.join(os.path.dirname(project.manifest_path), PARTIAL_PARSE)
            if os.path.exists(parsed):
                shutil.copy(parsed, os.path.join(target, PARTIAL_PARSE))
            cmd = [dbt_executable(), *args, *project.dbt_args, "--target-path", target]
            env = {**os.environ, **DBT_QUIET_ENV, **run.env, **day_env(days)}
            done = subprocess.run(
                cmd,
                check=False,
                capture_output=True,
                text=True,
                env=env,
                cwd=project.project_dir,
            )
            results = _artifact(target, "run_results.json")
            manifest = _artifact(target, "manifest.json")
        built = built_models(manifest, results, day_range(days)) if manifest else []
        published = run.publish(built)
    return BuildResult(done.returncode, done.stdout + done.stderr, published)


def _artifact(target: str, name: str) -> dict[str, Any]:
    try:
        with open(os.path.join(target, name), "rb") as f:
            return json.load(f)
    except FileNotFoundError:
        return {}
