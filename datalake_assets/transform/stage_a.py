"""Stage A of a sync, in Spark's Python workers (``mapInArrow``): one task per archive file.

It reads each line once: parse, validate, flatten. Lines go in chunks to the native parser
(``native_parse.py``: DuckDB, column by column), which returns each table's columns and leaves
the lines it cannot vouch for to the reference rules (``spec.messages``), line by line,
buffered per table. Rows are written as *work files*: Arrow IPC files with one column per
flattened column, a plain Arrow array when its values share a JSON type, else text plus kind
(``columnar.py``), each column's kinds counted so the driver learns every column's statistics
without a second pass. Rejected lines go straight to the staged quarantine. The task emits the
*keys* of its messages (``keys.py``) for the deduplication, its identity index entries
(``identity_tally.py``) and one statistics row, which the driver merges (``merge_stats``).
Messages of suppressed identities are dropped here, before anything is written, and counted.
"""

from __future__ import annotations

import base64
import gc
import marshal
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import repeat

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from datalake_assets.lake import storage
from datalake_assets.lake.records import write_quarantine
from datalake_assets.plans.plan_gate import Judged, without
from datalake_assets.plans.plan_policy import PlanPolicy
from datalake_assets.spec import layout
from datalake_assets.spec.columnar import (
    NeedsRowPath,
    column_array,
    columnize,
    kind_counts_of,
    parse_timestamps,
)
from datalake_assets.spec.messages import (
    Rejected,
    child_name,
    decode,
    flatten_values,
    reparse_exact,
    validate,
)
from datalake_assets.spec.naming import (
    VIOLATIONS,
)
from datalake_assets.spec.types import N_KINDS, parse_timestamp
from datalake_assets.transform import keys, native_parse
from datalake_assets.transform.identity_tally import IdentityTally
from datalake_assets.transform.keys import KEY_SCHEMA, KEYS
from datalake_assets.transform.stage_a_plan import PlanLines, ViolationRows

STATS = 2  # and KEYS (1: a flush's key rows, keys.py), IDENTITY (3: index entries)

# Every output row is a kind and an opaque payload: a few rows per task, never one per message.
STAGE_A_SCHEMA = "kind byte, payload binary"

_OUT_NAMES = ["kind", "payload"]
NATIVE_CHUNK_BYTES = 128 << 20  # a chunk of lines for the native parser: at most this much text

# Columns of a work file that are not message columns (message columns are [a-z0-9_]).
W_LINE, W_MESSAGE_ID, W_PROBLEMS = "#line", "#message_id", "#problems"


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
    identity_key: bytes = b""  # the lake's key (lake_key); empty: no identity index, no suppression
    identity_traits: tuple[str, ...] = ()  # the traits that identify a person ([privacy])
    suppressed: frozenset[str] = frozenset()  # identity hashes whose messages are dropped
    plan: PlanPolicy | None = None  # the source's tracking plan (plans/plan_gate.py)


class _TableBuffer:
    __slots__ = ("objs", "raws", "lines", "ids", "seq", "omitted")

    def __init__(self) -> None:
        self.objs: list[dict] = []  # decoded, validated messages (flattened at flush)
        self.raws: list[bytes] = []
        self.lines: list[int] = []
        self.ids: list[str] = []
        self.seq = 0
        self.omitted: dict[int, Judged] = {}  # position -> a message the plan's gate changed


@dataclass
class _File:
    """What a task holds while it reads one archive file."""

    file_idx: int
    hour: str
    buffers: dict[str, _TableBuffer] = field(default_factory=dict)
    rejected: list[dict] = field(default_factory=list)
    buffered: int = 0
    line_no: int = 0
    # the plan's: lines of the current native chunk that take the Python path (chunk index ->
    # line; an empty line holds their place), and the violations' rows and lines
    diverted: dict[int, bytes] = field(default_factory=dict)
    violations: ViolationRows = field(default_factory=ViolationRows)
    violation_buffer: _TableBuffer = field(default_factory=_TableBuffer)


class _StageA:
    """The state of one stage-A task: buffers, statistics, what it wrote."""

    def __init__(self, cfg: StageAConfig) -> None:
        self.cfg = cfg
        self.lines_in = 0
        self.lines_by_hour: dict[str, int] = {}  # hour -> lines in (per-hour figures, checks)
        self.counts: dict[str, dict[str, list[int]]] = {}
        self.messages: dict[str, int] = {}
        self.lines_quarantined: dict[str, int] = {}
        self.work_files: list[tuple[str, str, int, str, int]] = []  # table, hour, file, loc, rows
        self.quarantine_files: list[tuple[str, str, int, int]] = []  # hour, location, rows, bytes
        self.identities = IdentityTally(cfg.identity_key, cfg.identity_traits, cfg.suppressed)
        # The one seam of the native parse: without DuckDB, every line takes the Python path.
        self.native = native_parse.parser_for(cfg.source_id, cfg.max_message_bytes, cfg.max_depth)
        self.plan = PlanLines(cfg.plan) if cfg.plan is not None else None

    def read_file(self, file_idx: int, location: str, hour: str) -> Iterator[pa.RecordBatch]:
        """The file's lines: in chunks through the native parser (``native_parse``) when the
        task has one, the lines it leaves (and every line without it) one by one."""
        cfg = self.cfg
        f = _File(file_idx, hour)
        chunk = native_parse.Chunk()
        error = None
        try:
            expected = cfg.archive_sizes[file_idx] if file_idx < len(cfg.archive_sizes) else None
            for raw in storage.iter_lines(location, expected_size=expected):
                f.line_no += 1
                if self.native is None:
                    yield from self._python_line(f, raw, f.line_no)
                    continue
                if self.plan is not None and self.plan.diverts(raw):
                    # the plan reports or changes it: the Python path takes the line
                    f.diverted[len(chunk)] = raw
                    raw = b""
                chunk.add(raw)
                if len(chunk) >= cfg.buffered_rows or len(chunk.data) >= NATIVE_CHUNK_BYTES:
                    yield from self._native_chunk(f, chunk, f.line_no - len(chunk) + 1)
                    chunk = native_parse.Chunk()
                    f.diverted = {}
        except storage.ShortRead:
            raise  # a transient short read fails the sync (re-run); never a partial file
        except (OSError, zlib.error, EOFError) as e:
            error = e
        if len(chunk):
            yield from self._native_chunk(f, chunk, f.line_no - len(chunk) + 1)
        if error is not None:
            # A corrupt or unreadable file: what was read stays; the rest is quarantined as
            # one entry that names the file, so a replay can pick it up once fixed.
            self.lines_in += 1
            f.rejected.append(
                self._line_record(
                    file_idx,
                    f.line_no + 1,
                    b"",
                    "unreadable_file",
                    f"{type(error).__name__}: {error}",
                )
            )
        for table, b in f.buffers.items():
            if b.objs:
                yield self._flush(table, b, file_idx, hour)
        if len(f.violations):
            self._write_violations(f)
        if f.rejected:
            location_q, size = write_quarantine(
                cfg.quarantine_root, hour, file_idx, 1, cfg.run_id, f.rejected
            )
            self.quarantine_files.append((hour, location_q, len(f.rejected), size))
            self.lines_quarantined[hour] = self.lines_quarantined.get(hour, 0) + len(f.rejected)

    def _native_chunk(
        self, f: _File, chunk: native_parse.Chunk, first: int
    ) -> Iterator[pa.RecordBatch]:
        """A chunk of lines through the native parser, a table at a time: its rows written as
        work files; the lines it leaves through ``_python_line``."""
        handled = np.zeros(len(chunk), bool)
        step = self.cfg.flush_rows
        for result in self.native.parse(chunk, self.identities, f.hour):
            handled[result.handled] = True
            rows = result.rows
            if rows is None:
                continue
            buf = f.buffers.setdefault(result.table, _TableBuffer())
            lines = pc.add(rows.lines, first)
            for a in range(0, len(lines), step):
                n = min(step, len(lines) - a)
                columns = {c: v.slice(a, n) for c, v in rows.columns.items()}
                yield self._write(
                    result.table,
                    buf,
                    f.file_idx,
                    f.hour,  # no all-null columns
                    {c: v for c, v in columns.items() if v.null_count < n},
                    lines.slice(a, n),
                    rows.ids.slice(a, n),
                    pa.nulls(n, pa.binary()),
                    rows.received.slice(a, n),
                )
        left = np.flatnonzero(~handled)
        self.lines_in += len(chunk) - len(left)
        diverted = f.diverted
        for i in left.tolist():
            raw = diverted.get(i)
            yield from self._python_line(f, chunk.line(i) if raw is None else raw, first + i)

    def _python_line(self, f: _File, raw: bytes, line_no: int) -> Iterator[pa.RecordBatch]:
        """One line by the reference rules (``spec.messages``), buffered per table."""
        if not raw.strip():
            return  # blank lines carry nothing (not counted as input)
        self.lines_in += 1
        obj = None
        identities = self.identities
        try:
            obj = decode(raw, self.cfg.max_message_bytes)
            _, table, message_id = validate(obj)
        except Rejected as r:
            if identities.keep_rejected(obj, raw, r.reason, f.hour):
                f.rejected.append(self._line_record(f.file_idx, line_no, raw, r.reason, r.detail))
            return
        judged = self.plan.gate.judge(obj) if self.plan is not None else None
        if judged is not None and judged.quarantine is not None:
            reason, detail = judged.quarantine
            if identities.keep_rejected(obj, raw, reason, f.hour):
                f.rejected.append(self._line_record(f.file_idx, line_no, raw, reason, detail))
                self._violations(f, obj, table, judged, line_no)
            return
        if not identities.keep(obj, table, f.hour):
            return  # suppressed: stored nowhere, counted
        buffers = f.buffers
        buf = buffers.get(table)
        if buf is None:
            buf = buffers[table] = _TableBuffer()
        if judged is not None:
            self._violations(f, obj, table, judged, line_no)
            if judged.omitted:
                buf.omitted[len(buf.objs)] = judged
            obj = judged.obj
        buf.objs.append(obj)  # type: ignore[arg-type]
        buf.raws.append(raw)
        buf.lines.append(line_no)
        buf.ids.append(message_id)
        f.buffered += 1
        if len(buf.objs) >= self.cfg.flush_rows:
            f.buffered -= len(buf.objs)
            yield self._flush(table, buf, f.file_idx, f.hour)
        if f.buffered >= self.cfg.buffered_rows:
            for t, b in buffers.items():
                if b.objs:
                    yield self._flush(t, b, f.file_idx, f.hour)
            f.buffered = 0

    def _violations(self, f: _File, obj: dict, table: str, judged: Judged, line_no: int) -> None:
        """The violations' rows of a judged message, written with the file's others."""
        f.violations.add(self.plan.gate, obj, table, judged, line_no)  # type: ignore[union-attr]
        if len(f.violations) >= self.cfg.flush_rows:
            self._write_violations(f)

    def _write_violations(self, f: _File) -> None:
        """The violations' rows as a work file of the ``violations`` table (stage_a_plan.py)."""
        columns, lines = f.violations.take()
        n = len(lines)
        ids = columns["message_id"]
        problems = pa.nulls(n, pa.binary())
        self._store(
            VIOLATIONS, f.violation_buffer, f.file_idx, f.hour, columns, lines, ids, problems
        )

    def _line_record(
        self, file_idx: int, line_no: int, raw: bytes, reason: str, detail: str
    ) -> dict:
        try:
            text, b64 = raw.decode("utf-8"), None
        except UnicodeDecodeError:
            text, b64 = raw.decode("utf-8", "replace"), base64.b64encode(raw).decode("ascii")
        files = self.cfg.archive_files
        return {
            "source_id": self.cfg.source_id,
            "run_id": self.cfg.run_id,
            "level": "line",
            "reason": reason,
            "detail": detail,
            "archive_file": files[file_idx] if file_idx < len(files) else None,
            "line_number": line_no,
            "raw_line": text,
            "raw_line_base64": b64,
        }

    def _flush(self, table: str, buf: _TableBuffer, file_idx: int, hour: str) -> pa.RecordBatch:
        """Write the buffered messages of a table as a work file; returns their key rows."""
        objs = buf.objs
        n = len(objs)
        problems: list[bytes | None] = [None] * n
        omitted, buf.omitted = buf.omitted, {}
        try:
            columns = columnize(objs, self.cfg.max_depth, child_name)
        except NeedsRowPath:  # the exact per-row rules (collisions, unusable keys, ...)
            rows = []
            for i, (obj, raw) in enumerate(zip(objs, buf.raws)):
                flat, probs, suspect = flatten_values(obj, self.cfg.max_depth)
                if suspect:
                    exact = reparse_exact(raw)
                    if i in omitted:  # the line as sent: without what the plan omitted
                        exact = without(exact, omitted[i].removed)
                    flat, probs, _ = flatten_values(exact, self.cfg.max_depth)
                rows.append(flat)
                if probs:
                    problems[i] = orjson.dumps(probs)
            names: dict = {}
            for r in rows:
                names.update(r)
            columns = {c: column_array(list(map(dict.get, rows, repeat(c)))) for c in names}
        for i, judged in omitted.items():  # the plan's omitted values, with flattening's
            before = orjson.loads(problems[i]) if problems[i] else []
            problems[i] = orjson.dumps(before + judged.omitted)
        received = [o.get("receivedAt") for o in objs]
        try:
            micros = parse_timestamps(pa.array(received, pa.string())).cast(pa.int64())
        except (pa.ArrowInvalid, pa.ArrowTypeError):  # not all text: one by one
            micros = pa.array(
                [parse_timestamp(v) if type(v) is str else None for v in received], pa.int64()
            )
        keys = self._write(
            table,
            buf,
            file_idx,
            hour,
            columns,
            pa.array(buf.lines, pa.int64()),
            pa.array(buf.ids, pa.string()),
            pa.array(problems, pa.binary()),
            micros,
        )
        buf.objs, buf.raws, buf.lines, buf.ids = [], [], [], []
        return keys

    def _write(
        self,
        table: str,
        buf: _TableBuffer,
        file_idx: int,
        hour: str,
        columns: dict[str, pa.Array],
        lines: pa.Array,
        ids: pa.Array,
        problems: pa.Array,
        micros: pa.Array,
    ) -> pa.RecordBatch:
        """Write one table's rows as a work file, counting each column's kinds; returns their
        key rows (one ``KEYS`` row, ``keys.py``)."""
        n = len(lines)
        self._store(table, buf, file_idx, hour, columns, lines, ids, problems)
        self.messages[table] = self.messages.get(table, 0) + n
        rows = pa.RecordBatch.from_arrays(
            [
                pa.array([table] * n, pa.string()),
                pa.array([hour] * n, pa.string()),
                ids,
                micros,
                pa.array([file_idx] * n, pa.int32()),
                lines,
            ],
            schema=KEY_SCHEMA,
        )
        return _one_row(KEYS, keys.encode(rows))

    def _store(
        self,
        table: str,
        buf: _TableBuffer,
        file_idx: int,
        hour: str,
        columns: dict[str, pa.Array],
        lines: pa.Array,
        ids: pa.Array,
        problems: pa.Array,
    ) -> None:
        """A work file of ``table``'s rows, each column's kinds counted."""
        n = len(lines)
        counts = self.counts.setdefault(table, {})
        names_out = [W_LINE, W_MESSAGE_ID, W_PROBLEMS]
        arrays = [lines, ids, problems]
        for column, c in kind_counts_of(columns).items():
            total = counts.get(column)
            if total is None:
                counts[column] = c
            else:
                for k in range(N_KINDS):
                    total[k] += c[k]
        for column in sorted(columns):
            names_out.append(column)
            arrays.append(columns[column])
        location = layout.join(
            self.cfg.work_root, table, f"{hour}-{file_idx:05d}-{buf.seq:04d}.arrow"
        )
        fs, path = storage.resolve(location)
        storage.create_dir(layout.join(self.cfg.work_root, table))
        batch = pa.RecordBatch.from_arrays(arrays, names=names_out)
        with fs.open_output_stream(path) as sink, pa.ipc.new_file(sink, batch.schema) as w:
            w.write_batch(batch)
        self.work_files.append((table, hour, file_idx, location, n))
        buf.seq += 1

    def stats(self) -> pa.RecordBatch:
        payload = marshal.dumps(
            {
                "lines_in": self.lines_in,
                "lines_by_hour": self.lines_by_hour,
                "counts": self.counts,
                "messages": self.messages,
                "lines_quarantined": self.lines_quarantined,
                "work_files": self.work_files,
                "quarantine_files": self.quarantine_files,
                "suppressed": self.identities.suppressed_counts,
            }
        )
        return _one_row(STATS, payload)


def _one_row(kind: int, payload: bytes) -> pa.RecordBatch:
    """A stage-A output row that carries only a payload (``KEYS``, ``STATS``)."""
    return pa.RecordBatch.from_arrays(
        [pa.array([kind], pa.int8()), pa.array([payload], pa.binary())], names=_OUT_NAMES
    )


def run_stage_a(batches: Iterator[pa.RecordBatch], cfg: StageAConfig) -> Iterator[pa.RecordBatch]:
    """Input rows: ``file_idx, location, hour``. Output: ``STAGE_A_SCHEMA`` rows: ``KEYS``
    (one per flush), the identity index entries (``IDENTITY``), then one ``STATS`` row."""
    task = _StageA(cfg)
    # The buffers hold tens of thousands of decoded messages: Python's cycle collector would
    # scan them again and again (about 15% of the stage) for cycles that JSON cannot make.
    enabled = gc.isenabled()
    gc.disable()
    try:
        for batch in batches:
            cols = batch.to_pydict()
            for file_idx, location, hour in zip(cols["file_idx"], cols["location"], cols["hour"]):
                before = task.lines_in
                yield from task.read_file(file_idx, location, hour)
                task.lines_by_hour[hour] = task.lines_by_hour.get(hour, 0) + task.lines_in - before
    finally:
        if enabled:
            gc.enable()
        # An idle worker between tasks (and in stage B) holds what it gives back here: the
        # parser's DuckDB caches and the Arrow pool's freed pages (mimalloc keeps them).
        if task.native is not None:
            task.native.release()
        pa.default_memory_pool().release_unused()
    yield from task.identities.batches(_OUT_NAMES)
    yield task.stats()
