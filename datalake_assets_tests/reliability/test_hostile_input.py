"""The hostile-input corpus (``hostile_corpus.py``) through a real sync, case by case.

The whole corpus is written into one archive day and synced ONCE (a 24-hour batch: the
property that changes type every hour needs the whole day; everything else shares hours 10
and 11). Then every case's fate is read back from what the sync wrote (Parquet tables and the
quarantine, with pyarrow) and checked against the documented rules. Whole-corpus checks: the
report's reconciliation, the lake compared id by id with the independent oracle (the
reliability ledger), and that no file or table name escapes the lake or is not a safe
identifier.

Cases marked ``isolated`` (known to crash a sync they share) get a small sync of their own.

The corpus is synced under a tracking plan (``hostile_plan.py``: rules over the corpus's own
events that type no column, in mode keep/keep/keep, so every case's fate stands), and its
``violations`` table is held to the oracle. One more small sync (the corpus's hours 10 and 11,
driver-local) runs under a plan that quarantines unplanned events and violations.
"""

from __future__ import annotations

import base64
import gzip
import json
import math
import os
import re
import time
import traceback
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from datalake_assets.lake.plan_store import store_plan
from datalake_assets.lake.report import SyncReport
from datalake_assets.plans.plan_policy import PlanPolicy
from datalake_assets.spec import naming
from datalake_assets.spec.layout import ArchiveHour, archive_hour_dir
from datalake_assets.transform.job import SyncRequest, run_sync
from datalake_assets_tests.reliability.hostile_corpus import (
    ANY,
    BLANK,
    CASES,
    DAY_HOURS,
    DUPLICATE,
    LATE_HOUR,
    MAIN_HOUR,
    MAX_DEPTH,
    MAX_MESSAGE_BYTES,
    QUARANTINED,
    ROW,
    Case,
    Col,
    Expect,
    ValueQ,
)
from datalake_assets_tests.reliability.hostile_plan import corpus_plan
from datalake_assets_tests.support import oracle_plan
from datalake_assets_tests.support.lake_reader import VIOLATION_FIELDS, VIOLATIONS, LocalStore
from datalake_assets_tests.support.lake_reader import compare as compare_with_oracle
from datalake_assets_tests.support.lake_reader import read_lake as read_lake_files
from datalake_assets_tests.support.oracle import Oracle

pytestmark = [pytest.mark.spark, pytest.mark.reliability]

SRC = "hostile"
RUN_ID = "hostile-corpus"
STANDARD_TABLES = {"identifies", "pages", "screens", "groups", "aliases"}
TRACKS = "tracks"
SAFE_TABLE = re.compile(r"[a-z0-9_]{1,255}")
SAFE_COLUMN = re.compile(r"[a-z0-9_]{1,250}")
SAFE_PATH_PART = re.compile(r"[A-Za-z0-9_.=-]+")
COMMIT_MARKER = "_COMMITTED_BY"  # README, commit protocol: "a marker in each swapped directory"
_MID_RE = re.compile(rb'"messageId":"([^"\\]*)"')

MAIN_CASES = [c for c in CASES if not c.isolated]
ISOLATED_CASES = [c for c in CASES if c.isolated]
# The main corpus's plan, reporting only: its violations are rows of ``violations``, nothing
# else changes. The small sync's quarantines whole lines (oracle_plan.py has the rules).
PLAN = corpus_plan(MAIN_CASES)
REPORTING = PlanPolicy(PLAN)
QUARANTINING = PlanPolicy(PLAN, unplanned_events="quarantine", violations="quarantine")
# the small sync's cases: those of the main and late hours only (not the 24-hour case)
SMALL_CASES = [c for c in MAIN_CASES if {ln.hour for ln in c.lines} <= {MAIN_HOUR, LATE_HOUR}]


# ------------------------------------------------------------------------- running a corpus


@dataclass(frozen=True)
class Written:
    case: str
    index: int  # the line's position in its case
    path: str  # realpath of the archive file
    line_no: int  # 1-based, as the quarantine records it
    hour: str
    raw: bytes

    @property
    def blank(self) -> bool:
        return not self.raw.strip()  # whitespace only: "blank lines carry nothing"


@dataclass
class TableOut:
    types: dict[str, str] = field(default_factory=dict)  # column -> bigint/double/...
    rows: dict[str, list[tuple[str, dict]]] = field(default_factory=lambda: defaultdict(list))


@dataclass
class Outcome:
    root: str
    archive_root: str
    lake_root: str
    written: dict[str, list[Written]]  # case -> its lines, in order
    result: SyncReport | None = None
    error: BaseException | None = None
    seconds: float = 0.0
    tables: dict[str, TableOut] = field(default_factory=dict)
    q_lines: dict[tuple[str, int], list[dict]] = field(default_factory=lambda: defaultdict(list))
    q_values: dict[str, list[dict]] = field(default_factory=lambda: defaultdict(list))
    violations: list[dict] = field(default_factory=list)  # the plan's table, rows with "hour"
    policy: PlanPolicy | None = None

    def all_lines(self) -> list[Written]:
        return [w for ws in self.written.values() for w in ws]


def write_archive(archive_root: str, cases: list[Case]) -> dict[str, list[Written]]:
    """Each case's lines appended, in corpus order, to the archive file of their hour."""
    files: dict[tuple[str, str], list[bytes]] = {}
    placed: dict[str, list[tuple[int, str, str, int, bytes]]] = defaultdict(list)
    for case in cases:
        for i, line in enumerate(case.lines):
            body = files.setdefault((line.hour, line.file), [])
            body.append(line.raw)
            placed[case.name].append((i, line.hour, line.file, len(body), line.raw))
    paths = {}
    for (hour, name), lines in files.items():
        directory = archive_hour_dir(archive_root, SRC, ArchiveHour.parse(hour))
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, name)
        data = b"".join(raw + b"\n" for raw in lines)
        with open(path, "wb") as f:
            f.write(gzip.compress(data, compresslevel=1) if name.endswith(".gz") else data)
        paths[(hour, name)] = os.path.realpath(path)
    return {
        case: [Written(case, i, paths[(h, f)], n, h, raw) for i, h, f, n, raw in items]
        for case, items in placed.items()
    }


def _type_name(t: pa.DataType) -> str:
    if pa.types.is_int64(t):
        return "bigint"
    if pa.types.is_float64(t):
        return "double"
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_timestamp(t):
        return "timestamp"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    return f"unexpected:{t}"


def _hour_of(path: str) -> str:
    m = re.search(r"/day=(\d{4}-\d{2}-\d{2})/hr=(\d{2})/", path)
    assert m, path
    return f"{m.group(1)}T{m.group(2)}"


def _parquet_files(directory: str) -> list[str]:
    out = []
    for dirpath, _, files in os.walk(directory):
        out += [os.path.join(dirpath, f) for f in files if f.endswith(".parquet")]
    return sorted(out)


def read_lake(out: Outcome) -> None:
    data = os.path.join(out.lake_root, "data", SRC)
    for entry in sorted(os.listdir(data)) if os.path.isdir(data) else []:
        table = entry.split("=", 1)[1]
        if table == VIOLATIONS:  # the plan's side table: its rows are no messages
            for path in _parquet_files(os.path.join(data, entry)):
                rows = pq.ParquetFile(path).read().to_pylist()
                out.violations += [{**r, "hour": _hour_of(path)} for r in rows]
            continue
        t_out = out.tables.setdefault(table, TableOut())
        for path in _parquet_files(os.path.join(data, entry)):
            t = pq.ParquetFile(path).read()
            for f in t.schema:
                t_out.types[f.name] = _type_name(f.type)
            # timestamps as microseconds: year 10000 is a valid timestamp, not a datetime
            t = pa.table(
                [c.cast(pa.int64()) if pa.types.is_timestamp(c.type) else c for c in t.columns],
                names=t.column_names,
            )
            hour = _hour_of(path)
            for r in t.to_pylist():
                t_out.rows[r["message_id"]].append((hour, r))
    for path in _parquet_files(os.path.join(out.lake_root, "quarantine", SRC)):
        for r in pq.ParquetFile(path).read().to_pylist():
            r["hour"] = _hour_of(path)
            if r["level"] == "line":
                f = os.path.realpath(r["archive_file"]) if r["archive_file"] else None
                out.q_lines[(f, r["line_number"])].append(r)
            else:
                out.q_values[r["message_id"]].append(r)


def run_corpus(
    spark, root: str, cases: list[Case], policy: PlanPolicy | None = None, **kw
) -> Outcome:
    archive_root, lake_root = os.path.join(root, "archive"), os.path.join(root, "lake")
    out = Outcome(root, archive_root, lake_root, write_archive(archive_root, cases))
    out.policy = policy
    hours = sorted({line.hour for c in cases for line in c.lines})
    if policy is not None:
        kw.update(
            tracking_plan=store_plan(lake_root, SRC, policy.plan),
            unplanned_events=policy.unplanned_events,
            unplanned_properties=policy.unplanned_properties,
            violations=policy.violations,
        )
    t0 = time.monotonic()
    try:
        out.result = run_sync(
            spark,
            SyncRequest(
                lake_root,
                archive_root,
                SRC,
                tuple(hours),
                run_id=RUN_ID,
                max_message_bytes=MAX_MESSAGE_BYTES,
                max_depth=MAX_DEPTH,
                **kw,
            ),
        )
    except Exception as e:  # noqa: BLE001 - "no sync crashes" is what the cases check
        out.error = e
    out.seconds = time.monotonic() - t0
    read_lake(out)
    return out


@pytest.fixture(scope="module")
def corpus(spark, tmp_path_factory) -> Outcome:
    """The whole corpus (but the isolated cases), synced once over its day, under the plan."""
    hours = {line.hour for c in MAIN_CASES for line in c.lines}
    assert hours == set(DAY_HOURS), "the type-change case needs every hour of the day"
    return run_corpus(spark, str(tmp_path_factory.mktemp("hostile")), MAIN_CASES, REPORTING)


@pytest.fixture(scope="module")
def corpus_in_iceberg(spark, tmp_path_factory) -> Outcome:
    """The same corpus into Iceberg tables (the default table format; read back through the
    Iceberg catalog, not by ``read_lake``, which reads the Segment layout's folders)."""
    from datalake_assets.settings.formats_section import FormatConfig

    return run_corpus(
        spark,
        str(tmp_path_factory.mktemp("hostile-iceberg")),
        MAIN_CASES,
        REPORTING,
        table_format=FormatConfig(format="iceberg"),
    )


@pytest.fixture(scope="module")
def corpus_on_spark(spark, tmp_path_factory) -> Outcome:
    """The same corpus through the Spark path (``corpus`` is small: it takes the driver-local
    path, ``transform/local_path.py``)."""
    return run_corpus(
        spark,
        str(tmp_path_factory.mktemp("hostile-spark")),
        MAIN_CASES,
        REPORTING,
        local_max_bytes=0,
    )


@pytest.fixture(scope="module")
def isolated(spark, tmp_path_factory) -> dict[str, Outcome]:
    return {
        c.name: run_corpus(spark, str(tmp_path_factory.mktemp(f"hostile-{c.name}")), [c])
        for c in ISOLATED_CASES
    }


@pytest.fixture(scope="module")
def quarantining(spark, tmp_path_factory) -> Outcome:
    """The corpus's hours 10 and 11 under a plan that quarantines unplanned events and
    violations, driver-local (no Spark job: fast)."""
    return run_corpus(
        spark,
        str(tmp_path_factory.mktemp("hostile-quarantining")),
        SMALL_CASES,
        QUARANTINING,
        local_max_bytes=1 << 40,
    )


def outcome_of(case: Case, request) -> Outcome:
    if case.isolated:
        return request.getfixturevalue("isolated")[case.name]
    return request.getfixturevalue("corpus")


# --------------------------------------------------------------------------- comparisons


def same(actual: object, expected: object) -> bool:
    """Equal with JSON's types kept apart (``True`` is not ``1``, ``1`` is not ``1.0``)."""
    if expected is ANY:
        return True
    if isinstance(expected, float) and math.isnan(expected):
        return isinstance(actual, float) and math.isnan(actual)
    if type(actual) is not type(expected):
        return False
    if isinstance(expected, dict):
        return actual.keys() == expected.keys() and all(
            same(actual[k], v) for k, v in expected.items()
        )
    if isinstance(expected, list):
        return len(actual) == len(expected) and all(map(same, actual, expected))
    return actual == expected


def same_json_text(text: object, expected: object) -> bool:
    if not isinstance(text, str):
        return False
    try:
        return same(json.loads(text), expected)
    except (ValueError, RecursionError):
        return False


def same_value_text(text: object, expected: object) -> bool:
    """A quarantined value: its text, or JSON text, of the original value."""
    if expected is ANY:
        return True
    return (isinstance(expected, str) and text == expected) or same_json_text(text, expected)


def line_message_id(raw: bytes) -> str | None:
    """The line's messageId as text (a number's exact digits), read by the stdlib parser."""
    try:
        obj = json.loads(raw.decode("utf-8"))
    except RecursionError:
        m = _MID_RE.search(raw)
        return m.group(1).decode() if m else None
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    v = obj.get("messageId")
    if isinstance(v, str):
        return v
    if isinstance(v, int) and not isinstance(v, bool):
        return str(v)
    return None


def expected_id(w: Written, e: Expect) -> str | None:
    return e.message_id if e.message_id is not None else line_message_id(w.raw)


def rows_of(out: Outcome, mid: str) -> list[tuple[str, str, dict]]:
    """``(table, hour, row)`` of a message id in every table but ``tracks``."""
    return [
        (t, h, r) for t, tab in out.tables.items() if t != TRACKS for h, r in tab.rows.get(mid, [])
    ]


# --------------------------------------------------------------------------- per-line fates


def check_line(out: Outcome, w: Written, e: Expect) -> list[str]:
    where = f"line {w.index} ({os.path.basename(w.path)}:{w.line_no})"
    errs: list[str] = []
    q = out.q_lines.get((w.path, w.line_no), [])
    if e.fate == QUARANTINED:
        if len(q) != 1:
            return [f"{where}: expected quarantine '{e.reason}', found {len(q)} line records"]
        rec = q[0]
        if rec["reason"] != e.reason:
            errs.append(
                f"{where}: reason {rec['reason']!r} (detail {rec['detail']!r}), "
                f"expected {e.reason!r}"
            )
        try:
            text = w.raw.decode("utf-8")
        except UnicodeDecodeError:
            exact = rec["raw_line_base64"] and base64.b64decode(rec["raw_line_base64"])
            if exact != w.raw:
                errs.append(f"{where}: the quarantine does not keep the line's exact bytes")
        else:
            if rec["raw_line"] != text:
                errs.append(f"{where}: raw_line differs from the archived line")
        if rec["hour"] != w.hour:
            errs.append(f"{where}: quarantined under hour {rec['hour']}, archived in {w.hour}")
        return errs
    if q:
        return [
            (
                f"{where}: expected {e.fate}, but quarantined as {q[0]['reason']!r} "
                f"({q[0]['detail']!r})"
            )
        ]
    if e.fate == BLANK:
        return errs
    mid = expected_id(w, e)
    if mid is None:
        return [f"{where}: no message id to look for"]
    found = rows_of(out, mid)
    if e.fate == DUPLICATE:
        if len(found) != 1:
            errs.append(
                f"{where}: duplicate of {mid!r}: expected the kept message once in "
                f"the tables, found {[(t, h) for t, h, _ in found]}"
            )
        return errs
    assert e.fate == ROW, e.fate
    table = out.tables.get(e.table)
    if table is None:
        near = sorted(t for t in out.tables if t[:8] == e.table[:8])
        return [
            (
                f"{where}: no table {e.table!r} (found {len(out.tables)} tables; similar: "
                f"{near[:5]}); rows of {mid!r}: {[(t, h) for t, h, _ in found]}"
            )
        ]
    mine = table.rows.get(mid, [])
    if len(mine) != 1 or len(found) != 1:
        return [
            (
                f"{where}: expected one row {mid!r} in {e.table!r}, found "
                f"{[(t, h) for t, h, _ in found]}"
            )
        ]
    hour, r = mine[0]
    if hour != (e.hour or w.hour):
        errs.append(f"{where}: row in hour {hour}, expected {e.hour or w.hour}")
    for column, col in e.columns:
        errs += _check_column(where, table, column, col, r)
    for column in e.absent:
        if column in table.types:
            errs.append(
                f"{where}: column {column!r} should not exist "
                f"({table.types[column]}, value {r.get(column)!r})"
            )
    if e.column_count is not None:
        prefix, n = e.column_count
        have = sum(1 for c in table.types if c.startswith(prefix))
        if have != n:
            errs.append(f"{where}: {have} columns start with {prefix!r}, expected {n}")
    errs += _check_values_quarantined(where, out, mid, e)
    if e.table not in STANDARD_TABLES:
        tracks = out.tables.get(TRACKS)
        n = len(tracks.rows.get(mid, [])) if tracks else 0
        if n != 1:
            errs.append(f"{where}: a track message is in 'tracks' {n} times, expected once")
    return errs


def _check_column(where: str, table: TableOut, column: str, col: Col, r: dict) -> list[str]:
    if column not in table.types:
        similar = sorted(c for c in table.types if c[:12] == column[:12])[:5]
        return [f"{where}: no column {column!r} (similar: {similar})"]
    errs = []
    if table.types[column] != col.type:
        errs.append(f"{where}: column {column!r} is {table.types[column]}, expected {col.type}")
    actual = r.get(column)
    ok = (
        same_json_text(actual, col.value)
        if col.json and col.value is not ANY
        else same(actual, col.value)
    )
    if not ok:
        shown = actual if not isinstance(actual, str) or len(actual) < 300 else actual[:300]
        errs.append(
            f"{where}: {column!r} = {shown!r}, expected {col.value!r}"
            f"{' (as JSON text)' if col.json else ''}"
        )
    return errs


def _check_values_quarantined(where: str, out: Outcome, mid: str, e: Expect) -> list[str]:
    actual = [q for q in out.q_values.get(mid, []) if q["table_name"] == e.table]
    left = list(actual)
    errs = []
    for vq in e.values_quarantined:
        match = next((q for q in left if _value_q_matches(q, vq)), None)
        if match is None:
            errs.append(
                f"{where}: no quarantined value {vq} for {mid!r}; found "
                f"{[(q['reason'], q['column_name'], q['value']) for q in actual]}"
            )
        else:
            left.remove(match)
    for q in left:
        errs.append(
            f"{where}: unexpected quarantined value {q['reason']!r} "
            f"{q['column_name']!r} {q['value']!r} ({q['detail']!r})"
        )
    return errs


def _value_q_matches(q: dict, vq: ValueQ) -> bool:
    return (
        q["reason"] == vq.reason
        and (vq.column is None or q["column_name"] == vq.column)
        and same_value_text(q["value"], vq.value)
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            c, id=c.name, marks=[pytest.mark.xfail(strict=True, reason=c.bug)] if c.bug else []
        )
        for c in CASES
    ],
)
def test_case_lands_where_the_rules_say(case: Case, request) -> None:
    out = outcome_of(case, request)
    if out.error is not None:
        pytest.fail(f"the sync crashed: {type(out.error).__name__}: {str(out.error)[:2000]}")
    errs = []
    for w, e in zip(out.written[case.name], case.expect):
        errs += check_line(out, w, e)
    assert not errs, "\n".join(errs)


# ---------------------------------------------------------------------- whole-corpus checks


@pytest.mark.slow
def test_the_sync_does_not_crash(corpus: Outcome) -> None:
    assert corpus.error is None, f"{type(corpus.error).__name__}: {corpus.error}"
    assert corpus.result.source.status == "finished"


def test_report_reconciles_the_whole_corpus(corpus: Outcome) -> None:
    src = corpus.result.source
    lines = [w for w in corpus.all_lines() if not w.blank]
    assert src.lines_in == src.messages_written + src.duplicates + src.lines_quarantined
    assert src.lines_in == len(lines), "lines_in counts every non-blank archived line"
    # ... and each term is what the lake holds
    assert src.messages_written == sum(
        len(rs) for t, tab in corpus.tables.items() if t != TRACKS for rs in tab.rows.values()
    )
    assert src.lines_quarantined == sum(len(v) for v in corpus.q_lines.values())
    assert src.values_quarantined == sum(len(v) for v in corpus.q_values.values())


@pytest.mark.slow
def test_the_lake_holds_what_the_oracle_says(
    corpus: Outcome, corpus_on_spark: Outcome, corpus_in_iceberg: Outcome, isolated, reliability
) -> None:
    """Records the reliability ledger: the lake, read back from its Parquet files, compared id
    by id with the independent oracle (``oracle.py``) over the same archive. Each case is one
    hostile input (one fault). The corpus's lake through each path (driver-local, Spark) and
    into Iceberg tables (read through their catalog)."""
    from datalake_assets_tests.support.iceberg_reader import (
        read_iceberg_lake,
        sql_catalog,
        tables,
    )

    def segment(out: Outcome):
        return read_lake_files(LocalStore(), out.lake_root, SRC)

    def iceberg(out: Outcome):
        catalog = sql_catalog(out.lake_root)
        lake = read_iceberg_lake(LocalStore(), catalog, out.lake_root, SRC, SRC)
        # the plan's side table: read apart, its rows are violations, not messages
        for mid, where in list(lake.rows.items()):
            for key in [k for k in where if k[0] == VIOLATIONS]:
                del where[key]
            if not where:
                del lake.rows[mid]
        side = tables(catalog, SRC).get(VIOLATIONS)
        if side is not None:
            rows = side.scan(selected_fields=(*VIOLATION_FIELDS, "day", "hr")).to_arrow()
            lake.add_violations({**r, "hour": f"{r['day']}T{r['hr']}"} for r in rows.to_pylist())
        return lake

    err = corpus_in_iceberg.error
    assert err is None, "".join(traceback.format_exception(err))[-4000:]
    reliability.cases = len(CASES)
    reliability.fault(len(CASES))
    runs = [
        (corpus, MAIN_CASES, segment),
        (corpus_on_spark, MAIN_CASES, segment),
        (corpus_in_iceberg, MAIN_CASES, iceberg),
        *((isolated[c.name], [c], segment) for c in ISOLATED_CASES),
    ]
    for out, cases, reader in runs:
        expected = oracle_of(out, cases)
        assert expected.planned == (out.policy is not None)
        reliability.expect(expected, lambda out=out, reader=reader: reader(out))
    found = reliability.compare()
    assert found.lines == sum(1 for c in CASES for line in c.lines if line.raw.strip()) + 2 * sum(
        1 for c in MAIN_CASES for line in c.lines if line.raw.strip()
    )
    assert found.ok, str(found)


def oracle_of(out: Outcome, cases: list[Case]):
    """What the oracle says the lake of ``out`` holds (under its plan, if it had one)."""
    hours = sorted({line.hour for c in cases for line in c.lines})
    return (
        Oracle(
            LocalStore(),
            out.archive_root,
            SRC,
            max_message_bytes=MAX_MESSAGE_BYTES,
            plan_policy=out.policy,
        )
        .sync(hours)
        .expected()
    )


def _violation_keys(out: Outcome) -> Counter:
    """The ``violations`` table as ``(message id, hour, type, field, action)``: n."""
    return Counter(
        (r["message_id"], r["hour"], r["violation_type"], r["violation_field"], r["action"])
        for r in out.violations
    )


def _oracle_violation_keys(expected) -> Counter:
    sure, maybe = oracle_plan.expected_violations(expected.lines)
    assert not maybe, f"the corpus has unsure lines with violations: {sorted(maybe)[:5]}"
    return Counter({(mid, *key): n for mid, counts in sure.items() for key, n in counts.items()})


@pytest.mark.slow
def test_the_violations_table_holds_the_oracles_violations(corpus: Outcome) -> None:
    """Under the reporting plan: one row of ``violations`` per violation of each kept message
    (none of a duplicate's), as the plan's reference verdict has them, in its message's hour,
    each naming the plan, its message and the table its message is in; and no line's fate
    changed (the per-case and oracle tests above hold every row where it was)."""
    assert corpus.error is None, corpus.error
    want = _oracle_violation_keys(oracle_of(corpus, MAIN_CASES))
    types = {k[2] for k in want}
    assert {"Unplanned-Event", "Required-Missing", "Additional-Properties"} < types, types
    assert len(types) >= 6 and {k[4] for k in want} == {"kept"}, types
    have = _violation_keys(corpus)
    assert have == want, (
        f"missing {sorted(want - have, key=repr)[:6]}, unexpected "
        f"{sorted(have - want, key=repr)[:6]}"
    )
    by_hour = Counter(r["hour"] for r in corpus.violations)
    for entry in corpus.result.source.by_hour:
        assert entry.figures.violations == by_hour.get(entry.hour, 0), entry.hour
    errs = []
    for r in corpus.violations:
        mid = r["message_id"]
        homes = {(t, h) for t, h, _ in rows_of(corpus, mid)}
        if (r["event_table"], r["hour"]) not in homes:
            errs.append(f"{mid!r}: event_table {r['event_table']!r}, its rows {sorted(homes)}")
        rule_version = r["tracking_plan_version"]
        if (rule_version is None) != (r["violation_type"] == "Unplanned-Event"):
            errs.append(f"{mid!r}: {r['violation_type']} of rule version {rule_version}")
        if (r["tracking_plan_id"], r["tracking_plan_hash"]) != (PLAN.id, PLAN.hash):
            errs.append(f"{mid!r}: plan {r['tracking_plan_id']} {r['tracking_plan_hash']}")
    assert not errs, "\n".join(errs[:20])


@pytest.mark.slow
def test_a_quarantining_plan_holds_to_the_oracle(quarantining: Outcome) -> None:
    """Hours 10 and 11 under a plan that quarantines unplanned events and violations: the lake
    (rows, quarantined lines and their reasons, violations) is what the oracle says, the
    plan's quarantined lines keep their violations (action ``quarantined``), and the report
    still reconciles."""
    out = quarantining
    assert out.error is None, "".join(traceback.format_exception(out.error))[-4000:]
    expected = oracle_of(out, SMALL_CASES)
    found = compare_with_oracle(expected, read_lake_files(LocalStore(), out.lake_root, SRC))
    assert found.ok, str(found)
    reasons = Counter(r for ln in expected.lines if ln.fate == QUARANTINED for r in ln.reasons)
    assert reasons[oracle_plan.REASON_UNPLANNED_EVENT] and reasons[oracle_plan.REASON_VIOLATION], (
        reasons
    )
    want = _oracle_violation_keys(expected)
    assert want and {k[4] for k in want} == {"quarantined"}
    assert _violation_keys(out) == want
    src = out.result.source
    assert src.lines_in == src.messages_written + src.duplicates + src.lines_quarantined
    assert src.lines_quarantined == sum(len(v) for v in out.q_lines.values())
    assert src.messages_written == sum(
        len(rs) for t, tab in out.tables.items() if t != TRACKS for rs in tab.rows.values()
    )


def _lake_view(out: Outcome) -> str:
    """Everything ``read_lake`` read back (types, rows, quarantine), archive paths relative to
    the outcome's archive, as one canonical text (NaN compares equal to NaN there)."""
    archive = os.path.realpath(out.archive_root)

    def rel(value):
        return (
            os.path.relpath(value, archive)
            if isinstance(value, str) and value.startswith(archive)
            else value
        )

    tables = {
        t: (
            dict(sorted(tab.types.items())),
            {mid: sorted(map(repr, rows)) for mid, rows in sorted(tab.rows.items())},
        )
        for t, tab in sorted(out.tables.items())
    }
    q_lines = sorted(
        repr((rel(f), n, sorted(repr({k: rel(v) for k, v in r.items()}) for r in rows)))
        for (f, n), rows in out.q_lines.items()
    )
    q_values = sorted(repr((mid, sorted(map(repr, rows)))) for mid, rows in out.q_values.items())
    violations = sorted(repr(sorted(r.items())) for r in out.violations)
    return repr((tables, q_lines, q_values, violations))


@pytest.mark.slow
def test_the_spark_path_writes_what_the_local_path_writes(
    corpus: Outcome, corpus_on_spark: Outcome
) -> None:
    assert corpus_on_spark.error is None, corpus_on_spark.error
    assert _lake_view(corpus) == _lake_view(corpus_on_spark)
    skip = ("timings", "start_time", "finish_time", "duration_mins")
    assert {k: v for k, v in corpus.result.source.to_dict().items() if k not in skip} == {
        k: v for k, v in corpus_on_spark.result.source.to_dict().items() if k not in skip
    }


def test_nothing_escapes_the_lake(corpus: Outcome) -> None:
    lake = os.path.realpath(corpus.lake_root)
    for dirpath, dirnames, filenames in os.walk(lake):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            assert not os.path.islink(path), path
            assert os.path.realpath(path).startswith(lake + os.sep), path
            assert SAFE_PATH_PART.fullmatch(name) and name not in (".", ".."), path
    # Around the lake: the sync wrote nothing outside it (no "etc/passwd", no "a/b").
    root = os.path.realpath(corpus.root)
    archive = os.path.realpath(corpus.archive_root)
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            path = os.path.realpath(os.path.join(dirpath, name))
            assert path.startswith((lake + os.sep, archive + os.sep)), path
    # The data layout: segment_type=<safe name>/day=YYYY-MM-DD/hr=HH/part-*.parquet
    data = os.path.join(lake, "data", SRC)
    for entry in os.listdir(data):
        m = re.fullmatch(r"segment_type=(.+)", entry)
        assert m and SAFE_TABLE.fullmatch(m.group(1)) and naming.is_valid_name(m.group(1)), entry
        for dirpath, _dirnames, filenames in os.walk(os.path.join(data, entry)):
            rel = os.path.relpath(dirpath, os.path.join(data, entry))
            assert rel == "." or re.fullmatch(r"day=\d{4}-\d{2}-\d{2}(/hr=\d{2})?", rel), rel
            for name in filenames:  # data files, or the commit protocol's swap marker
                assert name == COMMIT_MARKER or re.fullmatch(
                    r"part-\d{10}-[A-Za-z0-9-]+-\d{5}-\d{3}\.parquet", name
                ), name


def test_table_and_column_names_are_safe_identifiers(corpus: Outcome) -> None:
    assert corpus.tables, "the corpus wrote tables"
    for table, t in corpus.tables.items():
        assert SAFE_TABLE.fullmatch(table) and naming.is_valid_name(table), table
        for column in t.types:
            if column not in ("day", "hr"):  # not stored in the files; checked for the paths
                assert SAFE_COLUMN.fullmatch(column), (table, column)
    reports = [r.to_dict() for r in corpus.result.tables.values()]
    for r in reports:
        assert SAFE_TABLE.fullmatch(r["table_name"]), r["table_name"]
        for c in r["columns"]:
            assert SAFE_COLUMN.fullmatch(c["name"]), (r["table_name"], c["name"])
    # A table whose only messages were duplicates is reported with 0 rows and has no files.
    # (The plan's ``violations`` is a table too, read apart.)
    assert corpus.violations, "the corpus's plan reports violations"
    assert {r["table_name"] for r in reports if r["row_count"]} == set(corpus.tables) | {VIOLATIONS}
    with open(os.path.join(corpus.lake_root, "_schemas", SRC, "tables.json"), "rb") as f:
        record = json.load(f)["tables"]
    assert set(record) == {r["table_name"] for r in reports}
    for table, spec in record.items():
        for column, typ in spec["columns"]:
            assert SAFE_COLUMN.fullmatch(column), (table, column)
            assert typ in ("bigint", "double", "boolean", "timestamp", "string"), (table, typ)


def test_tracks_holds_the_common_columns_only(corpus: Outcome) -> None:
    """README rule 3: ``tracks`` holds every track event's columns except ``properties_*``."""
    columns = corpus.tables[TRACKS].types
    assert not [c for c in columns if c == "properties" or c.startswith("properties_")]
    track_tables = [t for t in corpus.tables if t not in STANDARD_TABLES and t != TRACKS]
    assert sum(len(rs) for rs in corpus.tables[TRACKS].rows.values()) == sum(
        len(rs) for t in track_tables for rs in corpus.tables[t].rows.values()
    )
