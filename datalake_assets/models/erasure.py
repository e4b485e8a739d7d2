"""A privacy request reaches the models: rebuild what the person was in, then prove it.

The models are computed from the lake's tables, so once ``privacy.forget`` has erased a person
from the tables, building the models again over the days it touched removes them from every
model (and corrects the aggregates they counted in): ``dbt build`` of the touched received
days, ``min_day``..``max_day`` (daily models: those days, and sessions the day before them
too, ``sessions.sql``); whole-table models are rebuilt entirely. The user's own
models are in the same project and are rebuilt the same way (``docs/concepts/models.md`` says what a
model must look like for that to remove a person).

The proof reads every model's files in the lake (``<lake_root>/models/<slug>/``: the built-in
models and the user's) and counts the rows whose identity columns (``ID_COLUMNS``) hash to
one of the request's identities: ``models_rows_remaining``, which must be 0. It joins the
request's own proof in its ``privacy_requests`` row (``privacy/downstream.py``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from datalake_assets.lake import storage
from datalake_assets.lake.identities import lake_key
from datalake_assets.models.build import build_outside_dagster
from datalake_assets.models.engines import can_run
from datalake_assets.models.publish import lake_format, model_location, models_root, tables_of
from datalake_assets.models.source_project import SourceProject
from datalake_assets.models.workspace import prepare_project, source_tables
from datalake_assets.privacy.downstream import record_downstream_proof
from datalake_assets.privacy.state import load_state
from datalake_assets.settings import LakeSettings, SourceSettings
from datalake_assets.spec.identity import ID, Identity, identity_hash

log = logging.getLogger(__name__)
# columns of a model that hold a person's id; sessions' visitor is "user:<user id>" when the
# events had no anonymous id
ID_COLUMNS = ("user_id", "anonymous_id", "previous_id", "visitor")
_USER_PREFIX = "user:"


@dataclass
class ModelsErasure:
    """What a request did to the models, per source slug."""

    rebuilt_days: dict[str, tuple[str, str]] = field(default_factory=dict)  # slug -> range
    models_checked: dict[str, list[str]] = field(default_factory=dict)
    rows_remaining: int = 0
    errors: list[str] = field(default_factory=list)


def reach_models(settings: LakeSettings, result: Any) -> dict[str, Any] | None:
    """After ``privacy.forget`` (``result``: its ``ForgetResult``): rebuild the models the
    request touched and prove them; the counts for the command's output and the run's
    metadata. ``None`` when there is nothing to do: models off, no engine for them here, a
    request that erased nothing or did not complete."""
    if (
        not settings.models.enabled
        or can_run(settings) is not None
        or result.status != "completed"
        or not result.hours_rewritten
    ):
        return None
    projects = {
        s.slug: prepare_project(settings, s, source_tables(settings, s)) for s in settings.sources
    }
    done = rebuild_and_prove(settings, projects, result.request_id, result.identity_hashes)
    # the request's audit row (privacy_requests) carries the models' proof with the lake's
    record_downstream_proof(
        settings,
        result.request_id,
        "models",
        done.rows_remaining,
        "; ".join(done.errors)[:2000] or None,
    )
    return {
        "models_rebuilt_days": {k: list(v) for k, v in done.rebuilt_days.items()},
        "models_checked": done.models_checked,
        "models_rows_remaining": done.rows_remaining,
        "models_errors": done.errors,
    }


def touched_days(settings: LakeSettings, request_id: str) -> dict[str, tuple[str, str]]:
    """Source slug -> (first, last) received day of the hours the request rewrote."""
    state = load_state(settings.lake_root, request_id)
    out: dict[str, tuple[str, str]] = {}
    if state is None:
        return out
    for source_id, hours in state.hours.items():
        days = sorted({_day(h) for h, record in hours.items() if record.files or record.rows})
        if days:
            out[settings.source(source_id).slug] = (days[0], days[-1])
    return out


def _day(hour: str) -> str:
    """The day of an hour as the request's state spells it (``YYYYMMDDHH`` or ISO)."""
    digits = hour.replace("-", "").replace("T", "")[:8]
    return f"{digits[:4]}-{digits[4:6]}-{digits[6:8]}"


def rebuild_and_prove(
    settings: LakeSettings,
    projects: dict[str, SourceProject],
    request_id: str,
    identity_hashes: list[str],
) -> ModelsErasure:
    """Rebuild the models of every source the request touched, then prove (module doc)."""
    result = ModelsErasure()
    days = touched_days(settings, request_id)
    fmt = lake_format(settings)
    for slug, (first, last) in sorted(days.items()):
        project = projects.get(slug)
        source = settings.source(slug)
        if project is None or not built_model_folders(models_root(settings, source)):
            continue  # no model was ever built: none can hold the person
        done = build_outside_dagster(
            settings,
            source,
            project,
            ["build"],
            f"forget-{request_id}",
            {"min_day": first, "max_day": last},
        )
        if done.returncode != 0:
            result.errors.append(f"{slug}: dbt build failed: {done.output[-2000:]}")
            continue
        result.rebuilt_days[slug] = (first, last)
        if fmt.keeps_versions:
            # the replaced versions still hold the person: expired now, with their files, as
            # the erasure does for the lake's tables (the proof reads every stored file)
            fmt.maintain(
                replace(tables_of(source), table_prefix=""),
                built_model_folders(models_root(settings, source)),
                retention=timedelta(0),
            )
    key = lake_key(settings.lake_root)
    wanted = set(identity_hashes)
    for slug in projects:
        source = settings.source(slug)
        checked, remaining = prove(settings, source, key, wanted)
        result.models_checked[slug] = checked
        result.rows_remaining += remaining
    return result


def built_model_folders(root: str) -> list[str]:
    """The models with a folder under ``root`` (``<lake>/models/<slug>``)."""
    from pyarrow import fs as pafs

    filesystem, path = storage.resolve(root)
    infos = filesystem.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    return sorted(
        i.base_name
        for i in infos
        if i.type == pafs.FileType.Directory and not i.base_name.startswith(("_", "."))
    )


def prove(
    settings: LakeSettings, source: SourceSettings, key: bytes, wanted: set[str]
) -> tuple[list[str], int]:
    """The source's models in the lake and how many rows of every data file stored for them
    (``TableFormat.model_files``: on Iceberg, older snapshots' files too) name a wanted
    identity in an ``ID_COLUMNS`` column."""
    import pyarrow.parquet as pq

    fmt = lake_format(settings)
    src = tables_of(source)
    models = built_model_folders(models_root(settings, source))
    remaining, hashes = 0, {}

    def named(column: str, value: str | None) -> bool:
        if value is None:
            return False
        if column == "visitor" and value.startswith(_USER_PREFIX):
            value = value[len(_USER_PREFIX) :]
        h = hashes.get(value)
        if h is None:
            h = hashes[value] = identity_hash(key, Identity(ID, value))
        return h in wanted

    for model in models:
        for location, _ in fmt.model_files(src, model, model_location(settings, source, model)):
            filesystem, path = storage.resolve(location)
            data = pq.ParquetFile(path, filesystem=filesystem)
            columns = [c for c in data.schema_arrow.names if c in ID_COLUMNS]
            if not columns:
                continue
            for row in data.read(columns=columns).to_pylist():
                remaining += any(named(c, row[c]) for c in columns)
    return models, remaining
