"""The models' tables in the Segment layout: Parquet folders beside the event tables.

A model's table is ``<lake>/models/<slug>/<model>/``, laid out as Spark writes a table
(the layout dbt-spark's models had): a whole table's files directly in the folder, a daily
model's in one ``<day column>=<YYYY-MM-DD>/`` folder a day, the day not inside the files
(hive partitions). The ``[catalog]`` registers them as external tables (``models/publish.py``).

A build replaces its days folder by folder with the sync's own swap (``lake/commit.py``: an
atomic directory exchange locally, a rename aside on ADLS, copy-then-delete on an object
store), the new version staged under ``<lake>/_staging/models/<run>/``, where no reader
looks. A reader of a day sees the old day or the new one, never a mix; a day that has no rows
any more becomes an empty folder (its partition reads no rows). A build killed between two
days leaves some days new and some old: the next build of those days (the automation's, or
a replay) makes them whole again.
"""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from datalake_assets.lake import commit, storage
from datalake_assets.lake.formats.format_interface import (
    CommittedTable,
    ModelRows,
    TableVersion,
)
from datalake_assets.spec import layout


def model_staging(lake_root: str, run_id: str) -> str:
    return layout.join(lake_root, "_staging", "models", run_id)


def _write(rows: pa.Table, folder: str, run_id: str) -> None:
    location = layout.join(folder, f"part-00000-{run_id}.parquet")
    fs, path = storage.resolve(location)
    fs.create_dir(path.rpartition("/")[0], recursive=True)
    pq.write_table(rows, path, filesystem=fs, compression="zstd")


def _days(out: ModelRows) -> list[str]:
    """The days the build replaces: its range, or (a build of every day) the days it holds."""
    if out.days is not None:
        from datetime import date, timedelta

        first, last = (date.fromisoformat(d) for d in out.days)
        return [(first + timedelta(days=i)).isoformat() for i in range((last - first).days + 1)]
    return sorted(set(out.rows.column(out.day_column).drop_null().to_pylist()))


def publish(lake_root: str, out: ModelRows, run_id: str) -> CommittedTable:
    staging = layout.join(model_staging(lake_root, run_id), out.model)
    try:
        if not out.day_column:
            _write(out.rows, staging, run_id)
            _swap(staging, out.location, run_id)
        else:
            if out.days is None:  # every day rebuilt: days gone from the rows go too
                _drop_days_not_in(out, set(_days(out)))
            column = out.rows.column(out.day_column)
            data = out.rows.drop_columns([out.day_column])
            for day in _days(out):
                part = data.filter(pc.equal(column, day))
                name = f"{out.day_column}={day}"
                target, staged = layout.join(out.location, name), layout.join(staging, name)
                if part.num_rows:
                    _write(part, staged, run_id)
                elif not storage.exists(target):
                    continue  # no rows, and none before
                else:
                    storage.create_dir(staged)  # swapped in empty: the day has no rows now
                _swap(staged, target, run_id)
    finally:
        storage.delete_dir(staging)
    return CommittedTable(out.model, "", out.location)


def _drop_days_not_in(out: ModelRows, keep: set[str]) -> None:
    fs, path = storage.resolve(out.location)
    prefix = f"{out.day_column}="
    for info in fs.get_file_info(pafs.FileSelector(path, allow_not_found=True)):
        if info.type == pafs.FileType.Directory and info.base_name.startswith(prefix):
            if info.base_name[len(prefix) :] not in keep:
                storage.delete_dir(storage.to_location(out.location, info.path))


def _swap(staged: str, target: str, run_id: str) -> None:
    if storage.renames_directories(target) or not storage.is_uri(target):
        if storage.exists(target) and not _is_dir(target):
            storage.delete_file(target)
        commit.apply_swap(commit.Swap(staged=staged, target=target, hours=()), run_id)
        return
    # an object store: the new files copied in under their names, then the old ones deleted
    # (commit's own object-store path deletes by hour, and a model's files have none)
    fs, staged_path = storage.resolve(staged)
    _, target_path = storage.resolve(target)
    new = set()
    for info in fs.get_file_info(pafs.FileSelector(staged_path, allow_not_found=True)):
        if info.type == pafs.FileType.File:
            new.add(info.base_name)
            fs.copy_file(info.path, f"{target_path}/{info.base_name}")
    for info in fs.get_file_info(pafs.FileSelector(target_path, allow_not_found=True)):
        if info.type == pafs.FileType.File and info.base_name not in new:
            fs.delete_file(info.path)


def _is_dir(location: str) -> bool:
    fs, path = storage.resolve(location)
    return fs.get_file_info(path).type == pafs.FileType.Directory


def parquet_files(folder: str) -> list[tuple[str, int]]:
    """``[(location, size)]``: the ``*.parquet`` files under ``folder``, at any depth."""
    fs, path = storage.resolve(folder)
    try:
        infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True, recursive=True))
    except FileNotFoundError:
        return []
    return sorted(
        (storage.to_location(folder, i.path), i.size or 0)
        for i in infos
        if i.type == pafs.FileType.File
        and i.base_name.endswith(".parquet")
        and not any(p.startswith(("_", ".")) for p in os.path.relpath(i.path, path).split("/"))
    )


def folder_version(folder: str) -> TableVersion | None:
    """A folder of Parquet files as a reader reads it; ``None`` while it holds none."""
    return TableVersion("parquet", folder) if parquet_files(folder) else None
