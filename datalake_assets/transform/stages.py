"""The two passes of a sync that run inside Spark's Python workers (``mapInArrow``).

Stage A (one task per archive file) reads each line once: parse, validate, flatten, classify
every value's kind. It emits one row per line (a message, or a quarantined line) and, last,
one statistics row: for each table, how often each *signature* (its columns and their kinds)
was seen. The driver turns those into column types without another pass over the data.

Stage B (one task per cached stage-A partition, duplicates already removed by an anti-join in
the JVM) casts the messages to the decided types and writes one Parquet file per table and
hour into the run's staging area, plus the hour's quarantine file. It returns a manifest.
"""

from __future__ import annotations

import base64
import marshal
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq

from datalake_assets.spec import layout
from datalake_assets.spec.messages import Rejected, is_tracks_column, parse_line
from datalake_assets.spec.naming import TRACKS_TABLE
from datalake_assets.spec.types import (
    BIGINT,
    BOOLEAN,
    DOUBLE,
    STRING,
    TIMESTAMP,
    CastError,
    cast,
    value_text,
)
from datalake_assets.transform import storage

ROW, QUARANTINED_LINE, STATS = 0, 1, 2

STAGE_A_SCHEMA = (
    "kind byte, table string, hour string, message_id string, received_at long, "
    "file_idx int, line_no long, payload binary, reason string"
)
MANIFEST_SCHEMA = (
    "entry string, table string, hour string, location string, rows long, bytes long, "
    "values_quarantined long, lines_quarantined long"
)

ARROW_TYPES = {
    BIGINT: pa.int64(),
    DOUBLE: pa.float64(),
    BOOLEAN: pa.bool_(),
    STRING: pa.string(),
    TIMESTAMP: pa.timestamp("us", tz="UTC"),
}
_STANDARD_TABLES = frozenset({"identifies", "pages", "screens", "groups", "aliases"})

QUARANTINE_SCHEMA = pa.schema(
    [
        ("source_id", pa.string()),
        ("run_id", pa.string()),
        ("level", pa.string()),  # "line": the whole line; "value": one value of a written row
        ("reason", pa.string()),
        ("detail", pa.string()),
        ("table_name", pa.string()),
        ("column_name", pa.string()),
        ("value", pa.string()),
        ("message_id", pa.string()),
        ("archive_file", pa.string()),
        ("line_number", pa.int64()),
        ("raw_line", pa.string()),  # the line as text (invalid UTF-8 replaced by U+FFFD)
        ("raw_line_base64", pa.string()),  # the exact bytes, when the line is not valid UTF-8
    ]
)


# ---------------------------------------------------------------------------------- stage A


@dataclass(frozen=True)
class StageAConfig:
    max_message_bytes: int
    max_depth: int
    signature_limit: int = 4096  # distinct signatures per table before counting per column


def run_stage_a(batches: Iterator[pa.RecordBatch], cfg: StageAConfig) -> Iterator[pa.RecordBatch]:
    """Input rows: ``file_idx, location, hour``. Output: ``STAGE_A_SCHEMA`` batches."""
    out = _StageAOut()
    sigs: dict[str, dict[tuple, int]] = {}
    # Tables with too many distinct signatures (keys that vary per event) are counted per column
    # instead, so memory stays bounded whatever the traffic looks like.
    folded: dict[str, dict[str, list[int]]] = {}
    folded_messages: dict[str, int] = {}
    lines_in = 0
    for batch in batches:
        cols = batch.to_pydict()
        for file_idx, location, hour in zip(cols["file_idx"], cols["location"], cols["hour"]):
            line_no = 0
            try:
                for raw in storage.iter_lines(location):
                    line_no += 1
                    if not raw.strip():
                        continue  # blank lines carry nothing (not counted as input)
                    lines_in += 1
                    try:
                        m = parse_line(raw, cfg.max_message_bytes, cfg.max_depth)
                    except Rejected as r:
                        out.add(QUARANTINED_LINE, None, hour, None, None, file_idx, line_no,
                                raw, f"{r.reason}\t{r.detail}")
                    else:
                        per_table = sigs.get(m.table)
                        if per_table is None:
                            if m.table in folded:
                                _count_columns(folded[m.table], m.flat, m.kinds, 1)
                                folded_messages[m.table] += 1
                                per_table = None
                            else:
                                per_table = sigs[m.table] = {}
                        if per_table is not None:
                            sig = (tuple(m.flat), tuple(m.kinds))
                            per_table[sig] = per_table.get(sig, 0) + 1
                            if len(per_table) > cfg.signature_limit:
                                _fold(m.table, sigs, folded, folded_messages)
                        out.add(ROW, m.table, hour, m.message_id, m.received_at, file_idx,
                                line_no, marshal.dumps((m.flat, m.problems)), None)
                    if out.full():
                        yield out.flush()
            except (OSError, zlib.error, EOFError) as e:
                # A corrupt or unreadable file: what was read stays; the rest is quarantined
                # as one entry that names the file, so a replay can pick it up once fixed.
                lines_in += 1
                out.add(QUARANTINED_LINE, None, hour, None, None, file_idx, line_no + 1,
                        b"", f"unreadable_file\t{type(e).__name__}: {e}")
    stats = {"lines_in": lines_in, "signatures": sigs, "columns": folded,
             "column_messages": folded_messages}
    out.add(STATS, None, None, None, None, -1, -1, marshal.dumps(stats), None)
    yield out.flush()


def _count_columns(per_column: dict[str, list[int]], columns, kinds, n: int) -> None:
    from datalake_assets.spec.types import N_KINDS

    for col, k in zip(columns, kinds):
        c = per_column.get(col)
        if c is None:
            c = per_column[col] = [0] * N_KINDS
        c[k] += n


def _fold(table: str, sigs: dict, folded: dict, folded_messages: dict) -> None:
    per_column: dict[str, list[int]] = {}
    total = 0
    for (columns, kinds), n in sigs.pop(table).items():
        _count_columns(per_column, columns, kinds, n)
        total += n
    folded[table] = per_column
    folded_messages[table] = total


class _StageAOut:
    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self.cols: list[list] = [[] for _ in range(9)]

    def add(self, *values: object) -> None:
        for col, v in zip(self.cols, values):
            col.append(v)

    def full(self) -> bool:
        return len(self.cols[0]) >= self.size

    def flush(self) -> pa.RecordBatch:
        c = self.cols
        batch = pa.RecordBatch.from_arrays(
            [
                pa.array(c[0], pa.int8()),
                pa.array(c[1], pa.string()),
                pa.array(c[2], pa.string()),
                pa.array(c[3], pa.string()),
                pa.array(c[4], pa.int64()),
                pa.array(c[5], pa.int32()),
                pa.array(c[6], pa.int64()),
                pa.array(c[7], pa.binary()),
                pa.array(c[8], pa.string()),
            ],
            names=["kind", "table", "hour", "message_id", "received_at", "file_idx",
                   "line_no", "payload", "reason"],
        )
        self.cols = [[] for _ in range(9)]
        return batch


def merge_signature_stats(
    stats_payloads: list[bytes],
) -> tuple[int, dict[str, dict[str, list[int]]], dict[str, int]]:
    """``(lines_in, {table: {column: kind counts}}, {table: messages})`` from stage A's stats
    rows. The ``tracks`` table is derived here from the track tables' signatures."""
    from datalake_assets.spec.types import N_KINDS

    lines_in = 0
    counts: dict[str, dict[str, list[int]]] = {}
    messages: dict[str, int] = {}

    def add(table: str, columns: tuple, kinds: tuple, n: int, keep=None) -> None:
        per = counts.setdefault(table, {})
        for col, k in zip(columns, kinds):
            if keep is not None and not keep(col):
                continue
            c = per.get(col)
            if c is None:
                c = per[col] = [0] * N_KINDS
            c[k] += n
        messages[table] = messages.get(table, 0) + n

    for payload in stats_payloads:
        stats = marshal.loads(payload)
        lines_in += stats["lines_in"]
        for table, sigs in stats["signatures"].items():
            track = table not in _STANDARD_TABLES
            for (columns, kinds), n in sigs.items():
                add(table, columns, kinds, n)
                if track:
                    add(TRACKS_TABLE, columns, kinds, n, keep=is_tracks_column)
        for table, per_column in stats["columns"].items():
            targets = [(table, None)]
            if table not in _STANDARD_TABLES:
                targets.append((TRACKS_TABLE, is_tracks_column))
            for target, keep in targets:
                per = counts.setdefault(target, {})
                for col, kind_counts in per_column.items():
                    if keep is not None and not keep(col):
                        continue
                    c = per.setdefault(col, [0] * len(kind_counts))
                    for k, n in enumerate(kind_counts):
                        c[k] += n
                messages[target] = messages.get(target, 0) + stats["column_messages"][table]
    return lines_in, counts, messages


# ---------------------------------------------------------------------------------- stage B


@dataclass(frozen=True)
class TablePlan:
    """How stage B writes one table: its columns in order, their types, which need casting."""

    columns: tuple[tuple[str, str], ...]
    cast_columns: frozenset[str] = field(default_factory=frozenset)

    def arrow_schema(self) -> pa.Schema:
        return pa.schema([(c, ARROW_TYPES[t]) for c, t in self.columns])


@dataclass(frozen=True)
class StageBConfig:
    source_id: str
    run_id: str
    staging_root: str  # <staging>/<source_dir>: mirrors <lake>/data/<source_dir>
    quarantine_staging_root: str  # mirrors <lake>/quarantine/<source_dir>
    date_layout: str
    tables: dict[str, TablePlan]
    archive_files: tuple[str, ...]  # file_idx -> location
    rows_per_group: int = 100_000


def run_stage_b(
    batches: Iterator[pa.RecordBatch], cfg: StageBConfig, task: int
) -> Iterator[pa.RecordBatch]:
    writer = _StageBWriter(cfg, task)
    for batch in batches:
        d = batch.to_pydict()
        for kind, table, hour, mid, file_idx, line_no, payload, reason in zip(
            d["kind"], d["table"], d["hour"], d["message_id"], d["file_idx"], d["line_no"],
            d["payload"], d["reason"],
        ):
            if kind == ROW:
                flat, problems = marshal.loads(payload)
                writer.add_row(table, hour, flat)
                for column, value, why in problems:
                    writer.quarantine_value(hour, table, column, value, why, mid)
            elif kind == QUARANTINED_LINE:
                writer.quarantine_line(hour, file_idx, line_no, payload, reason)
    yield from writer.close()


class _StageBWriter:
    def __init__(self, cfg: StageBConfig, task: int) -> None:
        self.cfg = cfg
        self.task = task
        self.buffers: dict[tuple[str, str], list[dict]] = {}
        self.writers: dict[tuple[str, str], tuple[pq.ParquetWriter, str, list[int]]] = {}
        self.values_quarantined: dict[tuple[str, str], int] = {}
        self.quarantine: dict[str, list[dict]] = {}
        self.lines_quarantined: dict[str, int] = {}

    # rows ----------------------------------------------------------------------------
    def add_row(self, table: str, hour: str, flat: dict) -> None:
        self._buffer(table, hour).append(flat)
        if table not in _STANDARD_TABLES:
            self._buffer(TRACKS_TABLE, hour).append(flat)

    def _buffer(self, table: str, hour: str) -> list[dict]:
        key = (table, hour)
        buf = self.buffers.get(key)
        if buf is None:
            buf = self.buffers[key] = []
        elif len(buf) >= self.cfg.rows_per_group:
            self._write(key, buf)
            buf = self.buffers[key] = []
        return buf

    def _write(self, key: tuple[str, str], rows: list[dict]) -> None:
        table, hour = key
        plan = self.cfg.tables[table]
        arrow_table = self._to_arrow(table, hour, plan, rows)
        entry = self.writers.get(key)
        if entry is None:
            h = layout.ArchiveHour.parse(f"{hour[:4]}-{hour[4:6]}-{hour[6:8]}T{hour[8:10]}")
            directory = layout.join(
                self.cfg.staging_root,
                f"segment_type={table}",
                layout.date_partition_path(self.cfg.date_layout, h),
            )
            location = layout.join(
                directory, layout.data_file_name(h, self.cfg.run_id, self.task, 0)
            )
            fs, path = storage.resolve(location)
            fs.create_dir(storage.resolve(directory)[1], recursive=True)
            pq_writer = pq.ParquetWriter(
                path, plan.arrow_schema(), filesystem=fs, compression="snappy"
            )
            entry = self.writers[key] = (pq_writer, location, [0])
        entry[0].write_table(arrow_table)
        entry[2][0] += len(rows)

    def _to_arrow(self, table: str, hour: str, plan: TablePlan, rows: list[dict]) -> pa.Table:
        plain = [(c, t) for c, t in plan.columns if c not in plan.cast_columns]
        base = pa.Table.from_pylist(rows, schema=pa.schema([(c, ARROW_TYPES[t]) for c, t in plain]))
        arrays = []
        for column, typ in plan.columns:
            if column not in plan.cast_columns:
                arrays.append(base.column(column))
                continue
            arrays.append(self._cast_column(table, hour, column, typ, rows))
        return pa.Table.from_arrays(arrays, schema=plan.arrow_schema())

    def _cast_column(self, table: str, hour: str, column: str, typ: str, rows: list[dict]):
        values = [r.get(column) for r in rows]
        if typ == TIMESTAMP:
            try:  # vectorised fast path: Arrow parses strict ISO-8601 with a zone
                return pa.array(values, pa.string()).cast(ARROW_TYPES[TIMESTAMP])
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
                pass
        out = []
        for r, v in zip(rows, values):
            if v is None:
                out.append(None)
                continue
            try:
                out.append(cast(v, typ))
            except CastError as e:
                out.append(None)
                self.quarantine_value(
                    hour, table, column, value_text(v), f"type_mismatch\t{e}",
                    r.get("message_id"),
                )
        return pa.array(out, ARROW_TYPES[typ]) if typ != TIMESTAMP else pa.array(
            out, pa.int64()
        ).cast(ARROW_TYPES[TIMESTAMP])

    # quarantine --------------------------------------------------------------------------
    def quarantine_value(
        self, hour: str, table: str, column: str, value: str, why: str, message_id
    ) -> None:
        reason, _, detail = why.partition("\t")
        if reason.startswith("column_name_collision"):
            reason, _, detail = why.partition(": ")
            detail = f"lost key path: {detail}"
        self.quarantine.setdefault(hour, []).append(
            {
                "source_id": self.cfg.source_id, "run_id": self.cfg.run_id, "level": "value",
                "reason": reason, "detail": detail, "table_name": table, "column_name": column,
                "value": value, "message_id": message_id,
            }
        )
        key = (table, hour)
        self.values_quarantined[key] = self.values_quarantined.get(key, 0) + 1

    def quarantine_line(self, hour: str, file_idx: int, line_no: int, raw: bytes, why: str) -> None:
        reason, _, detail = why.partition("\t")
        try:
            text, b64 = raw.decode("utf-8"), None
        except UnicodeDecodeError:
            text, b64 = raw.decode("utf-8", "replace"), base64.b64encode(raw).decode("ascii")
        self.quarantine.setdefault(hour, []).append(
            {
                "source_id": self.cfg.source_id, "run_id": self.cfg.run_id, "level": "line",
                "reason": reason, "detail": detail,
                "archive_file": self.cfg.archive_files[file_idx], "line_number": line_no,
                "raw_line": text, "raw_line_base64": b64,
            }
        )
        self.lines_quarantined[hour] = self.lines_quarantined.get(hour, 0) + 1

    # close -----------------------------------------------------------------------------------
    def close(self) -> Iterator[pa.RecordBatch]:
        for key, rows in list(self.buffers.items()):
            if rows:
                self._write(key, rows)
        manifest: list[dict] = []
        for (table, hour), (pq_writer, location, n) in self.writers.items():
            pq_writer.close()
            fs, path = storage.resolve(location)
            manifest.append(
                {
                    "entry": "file", "table": table, "hour": hour, "location": location,
                    "rows": n[0], "bytes": fs.get_file_info(path).size,
                    "values_quarantined": self.values_quarantined.get((table, hour), 0),
                    "lines_quarantined": 0,
                }
            )
        for (table, hour), n in self.values_quarantined.items():
            if (table, hour) not in self.writers:  # values quarantined from rows never written
                manifest.append(
                    {"entry": "file", "table": table, "hour": hour, "location": None, "rows": 0,
                     "bytes": 0, "values_quarantined": n, "lines_quarantined": 0}
                )
        for hour, records in self.quarantine.items():
            h = layout.ArchiveHour.parse(f"{hour[:4]}-{hour[4:6]}-{hour[6:8]}T{hour[8:10]}")
            directory = layout.join(
                self.cfg.quarantine_staging_root, f"day={h.day}", f"hr={h.hr}"
            )
            location = layout.join(directory, layout.data_file_name(h, self.cfg.run_id, self.task, 0))
            fs, path = storage.resolve(location)
            fs.create_dir(storage.resolve(directory)[1], recursive=True)
            pq.write_table(
                pa.Table.from_pylist(records, schema=QUARANTINE_SCHEMA), path, filesystem=fs,
                compression="snappy",
            )
            manifest.append(
                {"entry": "quarantine", "table": None, "hour": hour, "location": location,
                 "rows": len(records), "bytes": fs.get_file_info(path).size,
                 "values_quarantined": sum(1 for r in records if r["level"] == "value"),
                 "lines_quarantined": self.lines_quarantined.get(hour, 0)}
            )
        if manifest:
            yield pa.RecordBatch.from_pylist(
                manifest,
                schema=pa.schema(
                    [("entry", pa.string()), ("table", pa.string()), ("hour", pa.string()),
                     ("location", pa.string()), ("rows", pa.int64()), ("bytes", pa.int64()),
                     ("values_quarantined", pa.int64()), ("lines_quarantined", pa.int64())]
                ),
            )
