"""Each source's dbt project, assembled from the shipped models, the user's and the lake's tables.

The shipped project (``models/project/``: staging and mart models, macros) is the same for every
source; what differs per source is generated here into ``<build_dir>/<slug>/<fingerprint>/``:

* ``dbt_project.yml``: the project's name, the ``vars`` of ``[models]`` (session gap, late
  events), and the engine's model configs (Spark: ``+location_root``): the models' tables
  live in the lake, at ``<lake_root>/models/<slug>/<model>/``, beside the tables they are
  built from;
* ``models/_lake__sources.yml``: source ``lake`` with one table per table of the source's
  graph (``LakeState``), so a new event table is a dbt source at the next load, no YAML to edit;
* ``models/user/``: a copy of ``[models] user_models_dir`` (``.sql``, ``.yml``);
* ``profiles.yml`` (unless ``[models] profiles_dir`` names your own): the engine's local
  target (``models/engines/``) with the source's database as schema.

``dbt parse`` then writes ``target/manifest.json``, which Dagster needs before the code location
loads. It runs only when something above changed (the folder is named by a fingerprint of every
file), so a run worker rebuilding the definitions, or a reload that found nothing new, does not
parse again.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import sys
from importlib import resources

from datalake_assets.lake import records
from datalake_assets.models.engines import engine_for
from datalake_assets.models.source_project import SourceProject
from datalake_assets.settings import LakeSettings, SourceSettings
from datalake_assets.settings.models_section import ModelsSettings, build_dir, user_models_dir

PROFILE = "datalake"
LOCAL_TARGET = "local"
SOURCE_NAME = "lake"  # {{ source('lake', '<table>') }}
USER_FOLDER = "user"
# dbt must not phone home (usage statistics, version check): no network beyond loopback
DBT_QUIET_ENV = {
    "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
    "DBT_VERSION_CHECK": "false",
    "DO_NOT_TRACK": "1",
}


class ModelsError(RuntimeError):
    """The models' project could not be assembled or parsed (the message says why)."""


def shipped_project_dir() -> str:
    return str(resources.files("datalake_assets.models").joinpath("project"))


def source_tables(settings: LakeSettings, source: SourceSettings) -> list[str]:
    """The source's tables as its code location sees them (``orchestration/sync/lake_state.py``
    reads the same ``lake.records.source_tables``): the standard ones and every table of the
    lake's schema record."""
    return records.source_tables(settings.lake_root, source.lake_dir)


def project_yaml(settings: LakeSettings, source: SourceSettings) -> dict:
    m = settings.models
    return {
        "name": f"datalake_{source.slug}",
        "version": "1.0",
        "config-version": 2,
        "profile": PROFILE,
        "model-paths": ["models"],
        "macro-paths": ["macros"],
        "target-path": "target",
        "clean-targets": ["target"],
        "flags": {
            "send_anonymous_usage_stats": False,
            "version_check": False,
            "partial_parse": True,
        },
        "vars": {
            "datalake_source": source.slug,
            "session_gap_minutes": m.session_gap_minutes,
            "late_event_hours": m.late_event_hours,
        },
        "models": {f"datalake_{source.slug}": engine_for(settings).models_config(settings, source)},
    }


def sources_yaml(source: SourceSettings, tables: list[str]) -> dict:
    prefix = source.effective_table_prefix
    return {
        "version": 2,
        "sources": [
            {
                "name": SOURCE_NAME,
                "schema": source.database,
                "description": f"The lake's tables of source {source.id} (generated from the lake's "
                "state at each load of the code location)",
                "tables": [
                    {"name": t, "identifier": f"{prefix}_{t}" if prefix else t}
                    for t in sorted(tables)
                ],
            }
        ],
    }


def profiles_yaml(settings: LakeSettings, source: SourceSettings) -> dict:
    """The local profile: the engine's target for the source (``models/engines/``)."""
    return {
        PROFILE: {
            "target": LOCAL_TARGET,
            "outputs": {LOCAL_TARGET: engine_for(settings).profile(settings, source)},
        }
    }


def _shipped_files() -> dict[str, bytes]:
    root = shipped_project_dir()
    out = {}
    for folder in ("models", "macros"):
        for dirpath, _, names in os.walk(os.path.join(root, folder)):
            for name in sorted(names):
                if name.endswith((".sql", ".yml")):
                    path = os.path.join(dirpath, name)
                    with open(path, "rb") as f:
                        out[os.path.relpath(path, root)] = f.read()
    return out


def _user_files(settings: ModelsSettings) -> dict[str, bytes]:
    root = user_models_dir(settings)
    out: dict[str, bytes] = {}
    if not os.path.isdir(root):
        return out
    for dirpath, _, names in os.walk(root):
        for name in sorted(names):
            if name.endswith((".sql", ".yml", ".yaml")) and not name.startswith("."):
                path = os.path.join(dirpath, name)
                with open(path, "rb") as f:
                    out[os.path.join("models", USER_FOLDER, os.path.relpath(path, root))] = f.read()
    return out


def project_files(
    settings: LakeSettings, source: SourceSettings, tables: list[str]
) -> dict[str, bytes]:
    """Every file of the source's project, by path inside it."""
    files = {**_shipped_files(), **_user_files(settings.models)}

    def dump(d):
        return json.dumps(d, indent=2, sort_keys=True).encode()

    files["dbt_project.yml"] = dump(project_yaml(settings, source))
    files[os.path.join("models", "_lake__sources.yml")] = dump(sources_yaml(source, tables))
    if not settings.models.profiles_dir:
        files["profiles.yml"] = dump(profiles_yaml(settings, source))
    return files


def prepare_project(
    settings: LakeSettings, source: SourceSettings, tables: list[str]
) -> SourceProject:
    """Assemble the source's project and parse it, unless that was done for the same files;
    returns where it is. Raises ``ModelsError`` when dbt cannot parse it (a user model's
    error, say), with dbt's message.

    Several processes load the code location at once (the code server, run workers, a CLI), so
    a project's folder is named by the fingerprint of its files
    (``<build_dir>/<slug>/<fingerprint>``): it never changes once parsed, and a process that
    finds its ``manifest.json`` uses it as it is. Assembling and parsing happen under a lock
    of the source's folder; the newest ``KEEP_PROJECTS`` folders are kept."""
    m = settings.models
    files = project_files(settings, source, tables)
    fingerprint = hashlib.sha256()
    for path in sorted(files):
        fingerprint.update(path.encode() + b"\0" + files[path] + b"\0")
    source_dir = os.path.join(build_dir(m), source.slug)
    project_dir = os.path.join(source_dir, fingerprint.hexdigest()[:16])
    profiles_dir = os.path.abspath(m.profiles_dir) if m.profiles_dir else project_dir
    project = SourceProject(source.slug, project_dir, profiles_dir, m.target or LOCAL_TARGET)
    if os.path.exists(project.manifest_path):
        return project
    os.makedirs(source_dir, exist_ok=True)
    with open(os.path.join(source_dir, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(project.manifest_path):
            shutil.rmtree(project_dir, ignore_errors=True)  # an earlier attempt's
            for path, body in files.items():
                full = os.path.join(project_dir, path)
                os.makedirs(os.path.dirname(full), exist_ok=True)
                with open(full, "wb") as f:
                    f.write(body)
            parse(project)
            _prune(source_dir, keep=project_dir)
    return project


KEEP_PROJECTS = 5


def _prune(source_dir: str, keep: str) -> None:
    """Remove all but the newest ``KEEP_PROJECTS`` project folders of a source (a run worker
    of an older load may still use one of those kept)."""
    folders = sorted(
        (e for e in os.scandir(source_dir) if e.is_dir()),
        key=lambda e: e.stat().st_mtime,
        reverse=True,
    )
    for e in folders[KEEP_PROJECTS:]:
        if e.path != keep:
            shutil.rmtree(e.path, ignore_errors=True)


def dbt_executable() -> str:
    """The ``dbt`` installed with this Python (a venv's ``bin`` is not always on ``PATH``:
    ``.venv/bin/datalake dev``), else ``dbt`` from ``PATH``."""
    for folder in (os.path.dirname(sys.executable), os.path.join(sys.prefix, "bin")):
        dbt = os.path.join(folder, "dbt")
        if os.path.exists(dbt):
            return dbt
    return "dbt"


def parse(project: SourceProject) -> None:
    """``dbt parse``: writes ``target/manifest.json`` (no connection to Spark is made). In
    this process (dbt's Python entry point): a subprocess would pay dbt's imports again, ~3 s
    at each load of a code location whose project changed, against ~1 s."""
    from dbt.cli.main import dbtRunner

    for name, value in DBT_QUIET_ENV.items():
        os.environ.setdefault(name, value)
    args = ["parse", *project.dbt_args, "--quiet"]
    try:
        done = dbtRunner().invoke(args)
    except BaseException as e:  # noqa: BLE001 - dbt raises its own (and SystemExit) here
        raise ModelsError(f"dbt parse of {project.project_dir} failed: {e}") from None
    if not done.success:
        raise ModelsError(f"dbt parse of {project.project_dir} failed: {done.exception}")
