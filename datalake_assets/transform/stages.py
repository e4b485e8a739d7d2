"""The two passes of a sync that run inside Spark's Python workers (``mapInArrow``).

Stage A (one task per archive file) reads each line once: parse, validate, flatten. Valid
messages are buffered per table and written, a few thousand rows at a time, as *work files*:
Arrow IPC files with one column per flattened column, each a plain Arrow array when its
values share a JSON type, else text plus kind (``columnar.py``). Kinds are counted per column
with Arrow kernels while the buffer is turned into columns, so the driver learns every
column's statistics without a second pass. Rejected lines go straight to the staged
quarantine. The task emits one small *key* row per message (id, receivedAt, position) for the
deduplication, and one statistics row.

Stage B (one task per group of work files of one table) drops the duplicates the driver
found, casts every column to its decided type with Arrow kernels (values that do not fit go
to quarantine with their reason), and writes one Parquet file per table and hour into the
run's staging area, plus the values' quarantine. It returns a manifest.
"""

from __future__ import annotations

import base64
import marshal
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import repeat

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from datalake_assets.lake.records import QUARANTINE_SCHEMA
from datalake_assets.spec import layout
from datalake_assets.spec.columnar import (
    ARROW_TYPES,
    NeedsRowPath,
    cast_array,
    column_array,
    columnize,
    kind_counts,
    parse_timestamps,
)
from datalake_assets.spec.conformance import CHECKED_COLUMNS, check_conformance
from datalake_assets.spec.messages import (
    Rejected,
    _child_name,
    _reparse_exact,
    decode,
    flatten_values,
    is_tracks_column,
    validate,
)
from datalake_assets.spec.naming import TRACKS_TABLE
from datalake_assets.spec.types import N_KINDS, parse_timestamp
from datalake_assets.lake import storage

ROW, STATS = 0, 2

STAGE_A_SCHEMA = (
    "kind byte, table string, hour string, message_id string, received_at long, "
    "file_idx int, line_no long, payload binary"
)
STAGE_B_TASK_SCHEMA = "task int, table string, items string"
MANIFEST_SCHEMA = (
    "entry string, table string, hour string, location string, rows long, bytes long, "
    "values_quarantined long, lines_quarantined long"
)
_MANIFEST_ARROW = pa.schema(
    [("entry", pa.string()), ("table", pa.string()), ("hour", pa.string()),
     ("location", pa.string()), ("rows", pa.int64()), ("bytes", pa.int64()),
     ("values_quarantined", pa.int64()), ("lines_quarantined", pa.int64())]
)
STANDARD_TABLES = frozenset({"identifies", "pages", "screens", "groups", "aliases"})

# Columns of a work file that are not message columns (message columns are [a-z0-9_]).
W_LINE, W_MESSAGE_ID, W_PROBLEMS = "#line", "#message_id", "#problems"



def _hour(compact: str) -> layout.ArchiveHour:
    return layout.ArchiveHour.parse(f"{compact[:4]}-{compact[4:6]}-{compact[6:8]}T{compact[8:10]}")


def _write_quarantine(root: str, hour: str, name_task: int, seq: int, run_id: str,
                      records: list[dict]) -> tuple[str, int]:
    h = _hour(hour)
    directory = layout.join(root, f"day={h.day}", f"hr={h.hr}")
    location = layout.join(directory, layout.data_file_name(h, run_id, name_task, seq))
    fs, path = storage.resolve(location)
    fs.create_dir(storage.resolve(directory)[1], recursive=True)
    pq.write_table(pa.Table.from_pylist(records, schema=QUARANTINE_SCHEMA), path, filesystem=fs,
                   compression="snappy")
    return location, fs.get_file_info(path).size


# ---------------------------------------------------------------------------------- stage A


@dataclass(frozen=True)
class StageAConfig:
    max_message_bytes: int
    max_depth: int
    source_id: str
    run_id: str
    work_root: str  # <staging>/work: the work files, by table
    quarantine_root: str  # <staging>/quarantine: mirrors <lake>/quarantine/<source_dir>
    archive_files: tuple[str, ...] = ()  # file_idx -> location (for quarantine records)
    archive_sizes: tuple[int, ...] = ()  # file_idx -> size when listed (a short read fails)
    flush_rows: int = 32_768  # rows of one table per work file
    buffered_rows: int = 131_072  # rows of all tables held by a task before everything is flushed


class _TableBuffer:
    __slots__ = ("objs", "raws", "lines", "ids", "seq")

    def __init__(self) -> None:
        self.objs: list[dict] = []  # decoded, validated messages (flattened at flush)
        self.raws: list[bytes] = []
        self.lines: list[int] = []
        self.ids: list[str] = []
        self.seq = 0


class _StageA:
    """The state of one stage-A task: buffers, statistics, what it wrote."""

    def __init__(self, cfg: StageAConfig) -> None:
        self.cfg = cfg
        self.lines_in = 0
        self.counts: dict[str, dict[str, list[int]]] = {}
        self.messages: dict[str, int] = {}
        self.lines_quarantined: dict[str, int] = {}
        self.work_files: list[tuple[str, str, int, str, int]] = []  # table, hour, file, loc, rows
        self.quarantine_files: list[tuple[str, str, int, int]] = []  # hour, location, rows, bytes

    def read_file(self, file_idx: int, location: str, hour: str) -> Iterator[pa.RecordBatch]:
        cfg = self.cfg
        buffers: dict[str, _TableBuffer] = {}
        rejected: list[dict] = []
        buffered = 0
        line_no = 0
        try:
            sizes = self.cfg.archive_sizes
            expected = sizes[file_idx] if file_idx < len(sizes) else None
            for raw in storage.iter_lines(location, expected_size=expected):
                line_no += 1
                if not raw.strip():
                    continue  # blank lines carry nothing (not counted as input)
                self.lines_in += 1
                try:
                    obj = decode(raw, cfg.max_message_bytes)
                    _, table, message_id = validate(obj)
                except Rejected as r:
                    rejected.append(self._line_record(file_idx, line_no, raw, r.reason, r.detail))
                    continue
                buf = buffers.get(table)
                if buf is None:
                    buf = buffers[table] = _TableBuffer()
                buf.objs.append(obj)  # type: ignore[arg-type]
                buf.raws.append(raw)
                buf.lines.append(line_no)
                buf.ids.append(message_id)
                buffered += 1
                if len(buf.objs) >= cfg.flush_rows:
                    buffered -= len(buf.objs)
                    yield self._flush(table, buf, file_idx, hour)
                if buffered >= cfg.buffered_rows:
                    for t, b in buffers.items():
                        if b.objs:
                            yield self._flush(t, b, file_idx, hour)
                    buffered = 0
        except storage.ShortRead:
            raise  # a transient short read fails the sync (re-run); never a partial file
        except (OSError, zlib.error, EOFError) as e:
            # A corrupt or unreadable file: what was read stays; the rest is quarantined as
            # one entry that names the file, so a replay can pick it up once fixed.
            self.lines_in += 1
            rejected.append(self._line_record(file_idx, line_no + 1, b"", "unreadable_file",
                                              f"{type(e).__name__}: {e}"))
        for table, b in buffers.items():
            if b.objs:
                yield self._flush(table, b, file_idx, hour)
        if rejected:
            location_q, size = _write_quarantine(cfg.quarantine_root, hour, file_idx, 1,
                                                 cfg.run_id, rejected)
            self.quarantine_files.append((hour, location_q, len(rejected), size))
            self.lines_quarantined[hour] = self.lines_quarantined.get(hour, 0) + len(rejected)

    def _line_record(self, file_idx: int, line_no: int, raw: bytes, reason: str, detail: str) -> dict:
        try:
            text, b64 = raw.decode("utf-8"), None
        except UnicodeDecodeError:
            text, b64 = raw.decode("utf-8", "replace"), base64.b64encode(raw).decode("ascii")
        files = self.cfg.archive_files
        return {
            "source_id": self.cfg.source_id, "run_id": self.cfg.run_id, "level": "line",
            "reason": reason, "detail": detail,
            "archive_file": files[file_idx] if file_idx < len(files) else None,
            "line_number": line_no, "raw_line": text, "raw_line_base64": b64,
        }

    def _flush(self, table: str, buf: _TableBuffer, file_idx: int, hour: str) -> pa.RecordBatch:
        """Write the buffered messages of a table as a work file; returns their key rows."""
        objs = buf.objs
        n = len(objs)
        problems: list[bytes | None] = [None] * n
        try:
            columns = columnize(objs, self.cfg.max_depth, _child_name)
        except NeedsRowPath:  # the exact per-row rules (collisions, unusable keys, ...)
            rows = []
            for i, (obj, raw) in enumerate(zip(objs, buf.raws)):
                flat, probs, suspect = flatten_values(obj, self.cfg.max_depth)
                if suspect:
                    flat, probs, _ = flatten_values(_reparse_exact(raw), self.cfg.max_depth)
                rows.append(flat)
                if probs:
                    problems[i] = orjson.dumps(probs)
            names: dict = {}
            for r in rows:
                names.update(r)
            columns = {c: column_array(list(map(dict.get, rows, repeat(c)))) for c in names}
        counts = self.counts.setdefault(table, {})
        names_out = [W_LINE, W_MESSAGE_ID, W_PROBLEMS]
        arrays = [pa.array(buf.lines, pa.int64()), pa.array(buf.ids, pa.string()),
                  pa.array(problems, pa.binary())]
        for column in sorted(columns):
            arr = columns[column]
            names_out.append(column)
            arrays.append(arr)
            c = kind_counts(arr)
            total = counts.get(column)
            if total is None:
                counts[column] = c
            else:
                for k in range(N_KINDS):
                    total[k] += c[k]
        self.messages[table] = self.messages.get(table, 0) + n
        location = layout.join(self.cfg.work_root, table, f"{hour}-{file_idx:05d}-{buf.seq:04d}.arrow")
        fs, path = storage.resolve(location)
        fs.create_dir(storage.resolve(layout.join(self.cfg.work_root, table))[1], recursive=True)
        batch = pa.RecordBatch.from_arrays(arrays, names=names_out)
        with fs.open_output_stream(path) as sink, pa.ipc.new_file(sink, batch.schema) as w:
            w.write_batch(batch)
        self.work_files.append((table, hour, file_idx, location, n))
        keys = self._keys(table, objs, buf, file_idx, hour)
        buf.seq += 1
        buf.objs, buf.raws, buf.lines, buf.ids = [], [], [], []
        return keys

    @staticmethod
    def _keys(table: str, objs: list[dict], buf: _TableBuffer, file_idx: int,
              hour: str) -> pa.RecordBatch:
        n = len(objs)
        received = [o.get("receivedAt") for o in objs]
        try:
            micros = parse_timestamps(pa.array(received, pa.string())).cast(pa.int64())
        except (pa.ArrowInvalid, pa.ArrowTypeError):  # not all text: one by one
            micros = pa.array([parse_timestamp(v) if type(v) is str else None for v in received],
                              pa.int64())
        return pa.RecordBatch.from_arrays(
            [
                pa.array([ROW] * n, pa.int8()),
                pa.array([table] * n, pa.string()),
                pa.array([hour] * n, pa.string()),
                pa.array(buf.ids, pa.string()),
                micros,
                pa.array([file_idx] * n, pa.int32()),
                pa.array(buf.lines, pa.int64()),
                pa.nulls(n, pa.binary()),
            ],
            names=["kind", "table", "hour", "message_id", "received_at", "file_idx", "line_no",
                   "payload"],
        )

    def stats(self) -> pa.RecordBatch:
        payload = marshal.dumps({
            "lines_in": self.lines_in, "counts": self.counts, "messages": self.messages,
            "lines_quarantined": self.lines_quarantined, "work_files": self.work_files,
            "quarantine_files": self.quarantine_files,
        })
        return pa.RecordBatch.from_arrays(
            [pa.array([STATS], pa.int8()), pa.nulls(1, pa.string()), pa.nulls(1, pa.string()),
             pa.nulls(1, pa.string()), pa.nulls(1, pa.int64()), pa.array([-1], pa.int32()),
             pa.array([-1], pa.int64()), pa.array([payload], pa.binary())],
            names=["kind", "table", "hour", "message_id", "received_at", "file_idx", "line_no",
                   "payload"],
        )


def run_stage_a(batches: Iterator[pa.RecordBatch], cfg: StageAConfig) -> Iterator[pa.RecordBatch]:
    """Input rows: ``file_idx, location, hour``. Output: ``STAGE_A_SCHEMA`` batches: key rows,
    then one statistics row."""
    import gc

    task = _StageA(cfg)
    # The buffers hold tens of thousands of decoded messages: Python's cycle collector would
    # scan them again and again (about 15% of the stage) for cycles that JSON cannot make.
    enabled = gc.isenabled()
    gc.disable()
    try:
        for batch in batches:
            cols = batch.to_pydict()
            for file_idx, location, hour in zip(cols["file_idx"], cols["location"], cols["hour"]):
                yield from task.read_file(file_idx, location, hour)
    finally:
        if enabled:
            gc.enable()
    yield task.stats()


@dataclass
class StageAStats:
    """Stage A's statistics of all tasks, merged on the driver."""

    lines_in: int
    counts: dict[str, dict[str, list[int]]]  # table -> column -> kind counts
    messages: dict[str, int]
    lines_quarantined: dict[str, int]  # hour -> lines
    work_files: list[tuple[str, str, int, str, int]]  # (table, hour, file_idx, location, rows)
    quarantine_files: list[tuple[str, str, int, int]]  # (hour, location, rows, bytes)


def merge_stats(payloads: list[bytes]) -> StageAStats:
    """Merge the statistics rows of every stage-A task. The ``tracks`` table's statistics are
    derived here from the track tables' (their columns without ``properties_*``)."""
    out = StageAStats(0, {}, {}, {}, [], [])

    def add(table: str, per_column: dict[str, list[int]], n: int, keep=None) -> None:
        per = out.counts.setdefault(table, {})
        for col, kinds in per_column.items():
            if keep is not None and not keep(col):
                continue
            c = per.get(col)
            if c is None:
                per[col] = list(kinds)
            else:
                for k, v in enumerate(kinds):
                    c[k] += v
        out.messages[table] = out.messages.get(table, 0) + n

    for payload in payloads:
        s = marshal.loads(payload)
        out.lines_in += s["lines_in"]
        for table, per_column in s["counts"].items():
            n = s["messages"][table]
            add(table, per_column, n)
            if table not in STANDARD_TABLES:
                add(TRACKS_TABLE, per_column, n, keep=is_tracks_column)
        for hour, n in s["lines_quarantined"].items():
            out.lines_quarantined[hour] = out.lines_quarantined.get(hour, 0) + n
        out.work_files.extend(tuple(w) for w in s["work_files"])
        out.quarantine_files.extend(tuple(q) for q in s["quarantine_files"])
    return out


# ---------------------------------------------------------------------------------- stage B


@dataclass(frozen=True)
class StageBConfig:
    source_id: str
    run_id: str
    staging_root: str  # <staging>/data: mirrors <lake>/data/<source_dir>
    quarantine_staging_root: str  # <staging>/quarantine: mirrors <lake>/quarantine/<source_dir>
    date_layout: str
    tables: dict[str, tuple[tuple[str, str], ...]]  # table -> columns and types, in order
    index_staging_root: str = ""  # <staging>/_index: the kept message ids per hour


def plan_stage_b_tasks(
    work_files: list[tuple[str, str, int, str, int]],
    drop: dict[tuple[str, int], list[int]],
    target_rows: int = 250_000,
) -> list[tuple[int, str, str]]:
    """Group work files into stage-B tasks: ``(task, table, items JSON)``. A task writes one
    table; big tables are split so no task gets much more than ``target_rows``. The ``tracks``
    table reads every track table's work files. ``drop`` holds the duplicate lines to skip, by
    ``(table, file_idx)``."""
    by_table: dict[str, list[tuple[str, int, str, int, str]]] = {}
    for table, hour, file_idx, location, rows in work_files:
        entry = (hour, file_idx, location, rows, table)
        by_table.setdefault(table, []).append(entry)
        if table not in STANDARD_TABLES:
            by_table.setdefault(TRACKS_TABLE, []).append(entry)
    groups: list[tuple[int, str, list]] = []
    for table in sorted(by_table):
        current: list[dict] = []
        size = 0
        for hour, file_idx, location, rows, src in sorted(by_table[table]):
            current.append({"hour": hour, "file_idx": file_idx, "location": location,
                            "drop": drop.get((src, file_idx), [])})
            size += rows
            if size >= target_rows:
                groups.append((size, table, current))
                current, size = [], 0
        if current:
            groups.append((size, table, current))
    groups.sort(key=lambda g: -g[0])  # biggest first: better packing on few cores
    return [(i, table, orjson.dumps(items).decode()) for i, (_, table, items) in enumerate(groups)]


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
        self.writers: dict[str, tuple[pq.ParquetWriter, str, list[int]]] = {}
        self.values_quarantined: dict[str, int] = {}
        self.misfits: dict[tuple[str, str], int] = {}  # (hour, column) -> values
        self.quarantine: dict[str, list[dict]] = {}
        self.checked = [c for c, _ in self.columns if c in CHECKED_COLUMNS]
        self.checked_data: dict[str, list[pa.Table]] = {}  # hour -> fixed columns written
        self.kept_ids: dict[str, list[pa.Array]] = {}  # hour -> message ids written

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
            keep = pc.invert(pc.is_in(data.column(W_LINE), value_set=pa.array(item["drop"], pa.int64())))
            data = data.filter(keep)
        n = data.num_rows
        if n == 0:
            return
        ids = data.column(W_MESSAGE_ID).combine_chunks()
        if self.table != TRACKS_TABLE and self.cfg.index_staging_root:
            self.kept_ids.setdefault(hour, []).append(ids)
        present = set(data.column_names)
        arrays = []
        for column, typ in self.columns:
            if column not in present:
                arrays.append(pa.nulls(n, ARROW_TYPES[typ]))
                continue
            out, misfits = cast_array(data.column(column).combine_chunks(), typ)
            arrays.append(out)
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
        self._writer(hour).write_table(written)
        self.writers[hour][2][0] += n
        self.checked_data.setdefault(hour, []).append(written.select(self.checked))

    def _writer(self, hour: str) -> pq.ParquetWriter:
        entry = self.writers.get(hour)
        if entry is None:
            h = _hour(hour)
            directory = layout.join(self.cfg.staging_root, f"segment_type={self.table}",
                                    layout.date_partition_path(self.cfg.date_layout, h))
            location = layout.join(directory, layout.data_file_name(h, self.cfg.run_id, self.task, 0))
            fs, path = storage.resolve(location)
            fs.create_dir(storage.resolve(directory)[1], recursive=True)
            w = pq.ParquetWriter(path, self.schema, filesystem=fs, compression="snappy")
            entry = self.writers[hour] = (w, location, [0])
        return entry[0]

    def _value(self, hour: str, column: str, value: str, reason: str, detail: str,
               message_id: str | None) -> None:
        self.quarantine.setdefault(hour, []).append({
            "source_id": self.cfg.source_id, "run_id": self.cfg.run_id, "level": "value",
            "reason": reason, "detail": detail, "table_name": self.table, "column_name": column,
            "value": value, "message_id": message_id,
        })
        self.values_quarantined[hour] = self.values_quarantined.get(hour, 0) + 1

    def _close(self) -> pa.RecordBatch:
        manifest: list[dict] = []
        for hour, (w, location, n) in self.writers.items():
            w.close()
            fs, path = storage.resolve(location)
            manifest.append({"entry": "file", "table": self.table, "hour": hour,
                             "location": location, "rows": n[0],
                             "bytes": fs.get_file_info(path).size,
                             "values_quarantined": self.values_quarantined.get(hour, 0),
                             "lines_quarantined": 0})
        for hour, n in self.values_quarantined.items():
            if hour not in self.writers:  # values quarantined from rows never written
                manifest.append({"entry": "file", "table": self.table, "hour": hour,
                                 "location": None, "rows": 0, "bytes": 0,
                                 "values_quarantined": n, "lines_quarantined": 0})
        for (hour, column), n in self.misfits.items():
            manifest.append({"entry": "misfits", "table": self.table, "hour": hour,
                             "location": column, "rows": n, "bytes": 0,
                             "values_quarantined": 0, "lines_quarantined": 0})
        for hour, parts in self.checked_data.items():  # schema conformance (pandera)
            failures = check_conformance(self.table, pa.concat_tables(parts))
            if failures:
                manifest.append({"entry": "conformance", "table": self.table, "hour": hour,
                                 "location": orjson.dumps(failures).decode(),
                                 "rows": sum(f["failures"] for f in failures), "bytes": 0,
                                 "values_quarantined": 0, "lines_quarantined": 0})
        for hour, parts in self.kept_ids.items():  # the id index of the hour (this task's part)
            kept = pa.concat_arrays(parts)
            h = _hour(hour)
            directory = layout.join(self.cfg.index_staging_root, f"hour={hour}")
            location = layout.join(directory, layout.data_file_name(h, self.cfg.run_id, self.task, 0))
            fs, path = storage.resolve(location)
            fs.create_dir(storage.resolve(directory)[1], recursive=True)
            pq.write_table(pa.table({"message_id": pc.array_take(kept, pc.array_sort_indices(kept))}),
                           path, filesystem=fs, compression="zstd")
            manifest.append({"entry": "index", "table": self.table, "hour": hour,
                             "location": location, "rows": len(kept), "bytes": 0,
                             "values_quarantined": 0, "lines_quarantined": 0})
        for hour, records in self.quarantine.items():
            location, size = _write_quarantine(self.cfg.quarantine_staging_root, hour, self.task,
                                               0, self.cfg.run_id, records)
            manifest.append({"entry": "quarantine", "table": self.table, "hour": hour,
                             "location": location, "rows": len(records), "bytes": size,
                             "values_quarantined": len(records), "lines_quarantined": 0})
        return pa.RecordBatch.from_pylist(manifest, schema=_MANIFEST_ARROW)
