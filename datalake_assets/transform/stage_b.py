"""Stage B of a sync, in Spark's Python workers: one task per group of one table's work files.

It drops the duplicates the driver found, casts every column to its decided type with Arrow
kernels (values that do not fit go to quarantine with their reason), and writes each table-hour
as Parquet files of at most the target size (``hour_files.py``) into the run's staging area,
plus the values' quarantine and the hour's id index (``spec/id_index.py``: the ids and their
hashes). It returns a manifest (``manifest.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from datalake_assets.lake import storage
from datalake_assets.lake.formats.format_interface import TableWrite
from datalake_assets.lake.records import write_quarantine
from datalake_assets.spec import layout
from datalake_assets.spec.columnar import ARROW_TYPES, cast_array
from datalake_assets.spec.conformance import CHECKED_COLUMNS, check_conformance
from datalake_assets.spec.id_index import index_table
from datalake_assets.spec.naming import (
    TRACKS_TABLE,
    VIOLATIONS,
    holds_messages,
    is_event_table,
)
from datalake_assets.transform.hour_files import DEFAULT_TARGET_FILE_BYTES, HourFiles
from datalake_assets.transform.manifest import (
    CONFORMANCE,
    FILE,
    INDEX,
    MISFITS,
    QUARANTINE,
    VIOLATION,
    ManifestEntry,
    manifest_batch,
)
from datalake_assets.transform.stage_a import W_LINE, W_MESSAGE_ID, W_PROBLEMS

STAGE_B_TASK_SCHEMA = "task int, table string, items string"


@dataclass(frozen=True)
class StageBConfig:
    source_id: str
    run_id: str
    staging_root: str  # <staging>/data: mirrors <lake>/data/<source_dir>
    quarantine_staging_root: str  # <staging>/quarantine: mirrors <lake>/quarantine/<source_dir>
    date_layout: str
    tables: dict[str, tuple[tuple[str, str], ...]]  # table -> columns and types, in order
    index_staging_root: str = ""  # <staging>/_index: the kept message ids per hour
    target_file_bytes: int = DEFAULT_TARGET_FILE_BYTES  # a table-hour's files roll over here
    # tables written in place, not into staging (``TableFormat.write_targets``: Iceberg)
    targets: dict[str, TableWrite] = field(default_factory=dict)


def plan_stage_b_tasks(
    work_files: list[tuple[str, str, int, str, int]],
    drop: dict[tuple[str, int], list[int]],
    target_rows: int = 250_000,
) -> list[tuple[int, str, str]]:
    """Group work files into stage-B tasks: ``(task, table, items JSON)``. A task writes one
    table; big tables are split so no task gets much more than ``target_rows``. The ``tracks``
    table reads every track table's work files. ``drop`` holds the duplicate lines to skip, by
    ``(table, file_idx)``.

    Each task writes its own files of each hour it holds, so the split follows the hours: an
    hour of up to ``target_rows`` stays whole in one task (small hours are packed together:
    one file each), and a bigger hour is cut into ``ceil(rows / target_rows)`` tasks of about
    equal rows, so no task writes a tail of a few rows of it (the split keeps the cores busy
    on a large hour; its files are cut at the target size by the writer, ``hour_files.py``)."""
    by_table: dict[str, list[tuple[str, int, str, int, str]]] = {}
    for table, hour, file_idx, location, rows in work_files:
        entry = (hour, file_idx, location, rows, table)
        by_table.setdefault(table, []).append(entry)
        if is_event_table(table):
            by_table.setdefault(TRACKS_TABLE, []).append(entry)
    if VIOLATIONS in by_table:
        # a message's violations go where it goes: a duplicate's are dropped with it
        drop = {**drop, **_drop_by_file(drop, by_table[VIOLATIONS])}
    groups: list[tuple[int, str, list]] = []
    for table in sorted(by_table):
        by_hour: dict[str, list[tuple[str, int, str, int, str]]] = {}
        for e in sorted(by_table[table]):
            by_hour.setdefault(e[0], []).append(e)
        current: list[dict] = []
        size = 0
        for hour_files in by_hour.values():
            rows = sum(e[3] for e in hour_files)
            if rows > target_rows:
                groups.extend(
                    (n, table, [_item(e, drop) for e in part])
                    for n, part in _balanced(hour_files, target_rows)
                )
                continue
            current.extend(_item(e, drop) for e in hour_files)
            size += rows
            if size >= target_rows:
                groups.append((size, table, current))
                current, size = [], 0
        if current:
            groups.append((size, table, current))
    groups.sort(key=lambda g: -g[0])  # biggest first: better packing on few cores
    return [(i, table, orjson.dumps(items).decode()) for i, (_, table, items) in enumerate(groups)]


def _drop_by_file(
    drop: dict[tuple[str, int], list[int]], violations: list[tuple[str, int, str, int, str]]
) -> dict[tuple[str, int], list[int]]:
    """The violations' lines to drop in each archive file: every table's there."""
    files = {e[1] for e in violations}
    out: dict[tuple[str, int], list[int]] = {}
    for (_, file_idx), lines in drop.items():
        if file_idx in files:
            out.setdefault((VIOLATIONS, file_idx), []).extend(lines)
    return out


def _item(entry: tuple[str, int, str, int, str], drop: dict[tuple[str, int], list[int]]) -> dict:
    hour, file_idx, location, _, src = entry
    return {
        "hour": hour,
        "file_idx": file_idx,
        "location": location,
        "drop": drop.get((src, file_idx), []),
    }


def _balanced(
    files: list[tuple[str, int, str, int, str]], target_rows: int
) -> list[tuple[int, list[tuple[str, int, str, int, str]]]]:
    """One hour's work files in ``ceil(rows / target_rows)`` runs of about equal rows (cut at
    the file nearest each share's boundary; a work file is never split)."""
    total = sum(f[3] for f in files)
    parts = -(-total // target_rows)
    out: list[tuple[int, list]] = []
    current: list = []
    done = size = 0
    for f in files:
        boundary = total * (len(out) + 1) / parts
        if current and len(out) < parts - 1 and done + f[3] / 2 > boundary:
            out.append((size, current))
            current, size = [], 0
        current.append(f)
        size += f[3]
        done += f[3]
    out.append((size, current))
    return out


def run_stage_b(batches: Iterator[pa.RecordBatch], cfg: StageBConfig) -> Iterator[pa.RecordBatch]:
    """Input: ``STAGE_B_TASK_SCHEMA`` rows. Output: the manifest of what was written."""
    for batch in batches:
        d = batch.to_pydict()
        for task, table, items in zip(d["task"], d["table"], d["items"]):
            yield from _StageBTask(cfg, task, table).run(orjson.loads(items))


class _StageBTask:
    def __init__(self, cfg: StageBConfig, task: int, table: str) -> None:
        self.cfg = cfg
        self.task = task
        self.table = table
        self.columns = cfg.tables[table]
        self.schema = pa.schema([(c, ARROW_TYPES[t]) for c, t in self.columns])
        self.target = cfg.targets.get(table)
        self.writers: dict[str, HourFiles] = {}
        self.open_hour: str | None = None  # the hour whose rows are being buffered
        self.values_quarantined: dict[str, int] = {}
        self.misfits: dict[tuple[str, str], int] = {}  # (hour, column) -> values
        self.quarantine: dict[str, list[dict]] = {}
        # a side table's rows are not messages: the messages' rules do not apply to them
        self.checked = [
            c for c, _ in self.columns if c in CHECKED_COLUMNS and holds_messages(table)
        ]
        self.checked_data: dict[str, list[pa.Table]] = {}  # hour -> fixed columns written
        self.kept_ids: dict[str, list[pa.Array]] = {}  # hour -> message ids written
        self.valued: dict[str, set[str]] = {}  # hour -> columns holding a value in its rows
        self.violations: dict[tuple[str, str, str], int] = {}  # (hour, table, type) -> rows

    def run(self, items: list[dict]) -> Iterator[pa.RecordBatch]:
        for item in items:
            self._one(item)
        yield self._close()

    def _one(self, item: dict) -> None:
        hour = item["hour"]
        # One whole-object read, not the IPC reader's tiny footer reads: on S3 a throttled
        # ranged GET smaller than the error body fails inside the AWS SDK without a retry.
        data = pa.ipc.open_file(pa.py_buffer(storage.read_bytes(item["location"]))).read_all()
        if item["drop"]:
            keep = pc.invert(
                pc.is_in(data.column(W_LINE), value_set=pa.array(item["drop"], pa.int64()))
            )
            data = data.filter(keep)
        n = data.num_rows
        if n == 0:
            return
        ids = data.column(W_MESSAGE_ID).combine_chunks()
        if self.table == VIOLATIONS:  # the checks' figures: each table's violations by type
            by = data.group_by(["event_table", "violation_type"]).aggregate([(W_LINE, "count")])
            counted = zip(*(by.column(c).to_pylist() for c in ("event_table", "violation_type")))
            for (table, vtype), count in zip(counted, by.column(f"{W_LINE}_count").to_pylist()):
                key = (hour, table, vtype)
                self.violations[key] = self.violations.get(key, 0) + count
        if (
            self.table != TRACKS_TABLE
            and holds_messages(self.table)
            and self.cfg.index_staging_root
        ):
            self.kept_ids.setdefault(hour, []).append(ids)
        present = set(data.column_names)
        valued = self.valued.setdefault(hour, set())
        arrays = []
        for column, typ in self.columns:
            if column not in present:
                arrays.append(pa.nulls(n, ARROW_TYPES[typ]))
                continue
            out, misfits = cast_array(data.column(column).combine_chunks(), typ)
            arrays.append(out)
            if out.null_count < n:
                valued.add(column)
            for row, value, reason in misfits:
                self._value(hour, column, value, "type_mismatch", reason, ids[row].as_py())
            if misfits:
                self.misfits[(hour, column)] = self.misfits.get((hour, column), 0) + len(misfits)
        if self.table != TRACKS_TABLE:  # flatten's problems, once per message (not in tracks)
            problems = data.column(W_PROBLEMS).combine_chunks()
            if problems.null_count < n:
                for row in pc.indices_nonzero(pc.is_valid(problems)).to_pylist():
                    for column, value, why in orjson.loads(problems[row].as_py()):
                        reason, _, detail = why.partition(": ")
                        if reason == "column_name_collision":
                            detail = f"lost key path: {detail}"
                        self._value(hour, column, value, reason, detail, ids[row].as_py())
        written = pa.Table.from_arrays(arrays, schema=self.schema)
        if self.open_hour not in (None, hour):
            # the plan gives a task its items hour by hour: the last hour's rows are all
            # there, so its buffered row group is written now rather than held to the end
            self.writers[self.open_hour].close()
        self.open_hour = hour
        self._writer(hour).write(self._as_written(written, hour))
        self.checked_data.setdefault(hour, []).append(written.select(self.checked))

    def _as_written(self, rows: pa.Table, hour: str) -> pa.Table:
        """The rows as the files hold them: in place, with the format's schema (its field
        ids) and the hour's ``day``/``hr`` as columns; in staging, as they are."""
        if self.target is None:
            return rows
        h = layout.ArchiveHour.parse(hour)
        n = rows.num_rows
        hour_values = {"day": h.day, "hr": h.hr}
        return pa.Table.from_arrays(
            [
                pa.array([hour_values[f.name]] * n, f.type)
                if f.name in hour_values
                else rows.column(f.name)
                for f in self.target.schema
            ],
            schema=self.target.schema,
        )

    def _writer(self, hour: str) -> HourFiles:
        files = self.writers.get(hour)
        if files is None:
            h = layout.ArchiveHour.parse(hour)
            if self.target is not None:
                directory, schema = self.target.directories[hour], self.target.schema
            else:
                directory = layout.join(
                    self.cfg.staging_root,
                    f"segment_type={self.table}",
                    layout.date_partition_path(self.cfg.date_layout, h),
                )
                schema = self.schema
            files = self.writers[hour] = HourFiles(
                directory, h, self.cfg.run_id, self.task, schema, self.cfg.target_file_bytes
            )
        return files

    def _value(
        self, hour: str, column: str, value: str, reason: str, detail: str, message_id: str | None
    ) -> None:
        self.quarantine.setdefault(hour, []).append(
            {
                "source_id": self.cfg.source_id,
                "run_id": self.cfg.run_id,
                "level": "value",
                "reason": reason,
                "detail": detail,
                "table_name": self.table,
                "column_name": column,
                "value": value,
                "message_id": message_id,
            }
        )
        self.values_quarantined[hour] = self.values_quarantined.get(hour, 0) + 1

    def _close(self) -> pa.RecordBatch:
        t = self.table
        manifest: list[ManifestEntry] = []
        for hour, files in self.writers.items():
            for i, f in enumerate(files.close()):
                # the hour's counts once, on its first file: the driver adds entries up
                first = i == 0
                manifest.append(
                    ManifestEntry(
                        FILE,
                        t,
                        hour,
                        location=f.location,
                        rows=f.rows,
                        bytes=f.bytes,
                        values_quarantined=self.values_quarantined.get(hour, 0) if first else 0,
                        columns=sorted(self.valued.get(hour, ())) if first else [],
                    )
                )
        for hour, n in self.values_quarantined.items():
            if hour not in self.writers:  # values quarantined from rows never written
                manifest.append(ManifestEntry(FILE, t, hour, values_quarantined=n))
        for (hour, column), n in self.misfits.items():
            manifest.append(ManifestEntry(MISFITS, t, hour, column=column, rows=n))
        for (hour, table, vtype), n in self.violations.items():
            manifest.append(ManifestEntry(VIOLATION, table, hour, column=vtype, rows=n))
        # schema conformance (pandera); a side table has none
        for hour, parts in self.checked_data.items() if self.checked else ():
            failures = check_conformance(t, pa.concat_tables(parts))
            if failures:
                manifest.append(
                    ManifestEntry(
                        CONFORMANCE,
                        t,
                        hour,
                        failures=failures,
                        rows=sum(f["failures"] for f in failures),
                    )
                )
        for hour, parts in self.kept_ids.items():  # the id index of the hour (this task's part)
            kept = pa.concat_arrays(parts)
            h = layout.ArchiveHour.parse(hour)
            directory = layout.join(self.cfg.index_staging_root, layout.index_partition_path(h))
            location = layout.join(
                directory, layout.data_file_name(h, self.cfg.run_id, self.task, 0)
            )
            fs, path = storage.resolve(location)
            storage.create_dir(directory)
            pq.write_table(index_table(kept), path, filesystem=fs, compression="zstd")
            manifest.append(ManifestEntry(INDEX, t, hour, location=location, rows=len(kept)))
        for hour, records in self.quarantine.items():
            location, size = write_quarantine(
                self.cfg.quarantine_staging_root, hour, self.task, 0, self.cfg.run_id, records
            )
            manifest.append(
                ManifestEntry(
                    QUARANTINE,
                    t,
                    hour,
                    location=location,
                    rows=len(records),
                    bytes=size,
                    values_quarantined=len(records),
                )
            )
        return manifest_batch(manifest)
