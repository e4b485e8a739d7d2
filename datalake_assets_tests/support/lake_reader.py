"""The lake read back from its Parquet files, and compared with the oracle id by id.

A reader's view, not the sync's: every ``*.parquet`` under ``data/<source>/`` and
``quarantine/<source>/`` (names starting with ``.`` or ``_`` are in-flight files, which
Spark, Hive and Athena skip too), the partition hour from the path. On ``s3://`` through S3
itself (boto3 at the tests' moto endpoint), never through the sync's storage layer.

A lake synced under a tracking plan has a side table, ``violations`` (its rows are no
messages): read apart (``Lake.violations``) and compared, message id by message id, with the
violations the oracle expects (``oracle_plan.py``): each violation's type, field, action and
hour, as a multiset. A lake without a plan has no such table, and compares as it always did.
"""

from __future__ import annotations

import base64
import io
import os
import re
from collections import Counter
from dataclasses import dataclass, field

import pyarrow.parquet as pq

from datalake_assets_tests.support.oracle import (
    ANY_TRACK_TABLE,
    DUPLICATE,
    QUARANTINED,
    ROW,
    STANDARD_TABLES,
    UNSURE,
    Expected,
)

_PART = re.compile(r"segment_type=([^/]+)/(?:year=\d+/month=\d+/)?day=([\d-]+)/hr=(\d\d)/")
VIOLATIONS = "violations"  # the tracking plan's side table (its rows are violations)
VIOLATION_FIELDS = ("message_id", "violation_type", "violation_field", "action")
_HOUR = re.compile(r"/(?:year=\d+/month=\d+/)?day=([\d-]+)/hr=(\d\d)/")


class LocalStore:
    def list(self, prefix: str) -> list[str]:
        return sorted(os.path.join(d, f) for d, _, fs in os.walk(prefix) for f in fs)

    def read(self, location: str) -> bytes:
        with open(location, "rb") as f:
            return f.read()


class S3Store:
    """``s3://bucket/key`` locations through boto3 (moto's fake credentials only)."""

    def __init__(self, endpoint: str) -> None:
        import boto3

        self.s3 = boto3.client(
            "s3",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )

    def list(self, prefix: str) -> list[str]:
        bucket, _, key = prefix.removeprefix("s3://").partition("/")
        out = []
        for page in self.s3.get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix=key.rstrip("/") + "/"
        ):
            out += [f"s3://{bucket}/{o['Key']}" for o in page.get("Contents", [])]
        return sorted(out)

    def read(self, location: str) -> bytes:
        bucket, _, key = location.removeprefix("s3://").partition("/")
        return self.s3.get_object(Bucket=bucket, Key=key)["Body"].read()


def store_for(root: str, endpoint: str | None = None):
    return S3Store(endpoint) if root.startswith("s3://") else LocalStore()


@dataclass
class Lake:
    rows: dict[str, Counter] = field(default_factory=dict)  # message id -> (table, hour): n
    lines_q: list[dict] = field(default_factory=list)  # quarantined lines
    # message id -> (hour, violation type, field, action): n (the ``violations`` table)
    violations: dict[str, Counter] = field(default_factory=dict)

    def add_violations(self, rows, hour: str | None = None) -> None:
        """Rows of the ``violations`` table (dicts of ``VIOLATION_FIELDS``, and ``hour``
        unless given)."""
        for r in rows:
            key = (hour or r["hour"], r["violation_type"], r["violation_field"], r["action"])
            self.violations.setdefault(r["message_id"], Counter())[key] += 1


def _visible(location: str, base: str) -> bool:
    return not any(p.startswith((".", "_")) for p in location[len(base) :].split("/") if p)


def read_lake(store, lake_root: str, source_dir: str) -> Lake:
    lake = Lake()
    data = f"{lake_root.rstrip('/')}/data/{source_dir}"
    for loc in store.list(data):
        m = _PART.search(loc)
        if not loc.endswith(".parquet") or not _visible(loc, data) or not m:
            continue
        hour = f"{m.group(2)}T{m.group(3)}"
        if m.group(1) == VIOLATIONS:
            t = pq.read_table(io.BytesIO(store.read(loc)), columns=list(VIOLATION_FIELDS))
            lake.add_violations(t.to_pylist(), hour)
            continue
        t = pq.read_table(io.BytesIO(store.read(loc)), columns=["message_id"])
        for mid in t.column(0).to_pylist():
            lake.rows.setdefault(mid, Counter())[(m.group(1), hour)] += 1
    quarantine = f"{lake_root.rstrip('/')}/quarantine/{source_dir}"
    for loc in store.list(quarantine):
        m = _HOUR.search(loc)
        if not loc.endswith(".parquet") or not _visible(loc, quarantine) or not m:
            continue
        t = pq.read_table(
            io.BytesIO(store.read(loc)),
            columns=[
                "level",
                "reason",
                "archive_file",
                "line_number",
                "raw_line",
                "raw_line_base64",
            ],
        )
        for r in t.to_pylist():
            if r["level"] == "line":
                raw = (
                    base64.b64decode(r["raw_line_base64"])
                    if r["raw_line_base64"]
                    else (r["raw_line"] or "").encode("utf-8")
                )
                lake.lines_q.append({**r, "hour": f"{m.group(1)}T{m.group(2)}", "raw": raw})
    return lake


# ------------------------------------------------------------------------------ comparison


@dataclass
class Comparison:
    lines: int = 0  # lines the lake must account for
    accounted: int = 0  # ... found again: a row, a duplicate of a kept row, a quarantined line
    lost: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)  # rows or quarantined lines no line explains
    duplicated: int = 0  # rows beyond the one expected (same id twice in a table-hour, ...)
    misplaced: list[str] = field(default_factory=list)  # found, but in the wrong table/hour/reason

    @property
    def ok(self) -> bool:
        return not (self.lost or self.extra or self.duplicated or self.misplaced)

    def __str__(self) -> str:
        return (
            f"{self.lines} lines, {self.accounted} accounted for, {len(self.lost)} lost "
            f"{self.lost[:8]}, {len(self.extra)} extra {self.extra[:8]}, {self.duplicated} "
            f"duplicated, {len(self.misplaced)} misplaced {self.misplaced[:8]}"
        )


def _norm(key: tuple) -> tuple:
    f = key[0]
    if isinstance(f, str) and f.startswith("/"):
        return (os.path.realpath(f), *key[1:])
    return key


def _placement_ok(where: Counter, tables: tuple[str, ...], hour: str) -> bool:
    if set(where) != {(t, hour) for t in tables} and ANY_TRACK_TABLE not in tables:
        return False
    if ANY_TRACK_TABLE in tables:  # one row in some event table, one in tracks
        event = [t for t, h in where if t not in STANDARD_TABLES and t != "tracks" and h == hour]
        return len(where) == 2 and len(event) == 1 and ("tracks", hour) in where
    return True


def compare(expected: Expected, lake: Lake) -> Comparison:
    c = Comparison(lines=len(expected.lines))
    by_key: dict[tuple, list[dict]] = {}
    for r in lake.lines_q:
        f = r["archive_file"]
        by_key.setdefault(_norm((f, r["line_number"])), []).append(r)
        by_key.setdefault(_norm((f, "*")), []).append(r)
        by_key.setdefault(("raw", r["raw"]), []).append(r)
    used: set[int] = set()

    def take(key: tuple) -> dict | None:
        for r in by_key.get(_norm(key), []):
            if id(r) not in used:
                used.add(id(r))
                return r
        return None

    # The hours each id is expected in: one, unless the same id is kept again outside the
    # lookback window of an earlier copy (or with no lookback at all).
    hours_of: dict[str, set[str]] = {}
    for ln in expected.lines:
        if ln.message_id and ln.fate in (ROW, DUPLICATE, UNSURE):
            hours_of.setdefault(ln.message_id, set()).add(
                ln.kept_hour if ln.fate == DUPLICATE else ln.hour
            )
    explained = set()
    for ln in expected.lines:
        where = lake.rows.get(ln.message_id, Counter()) if ln.message_id else Counter()
        if ln.message_id not in explained:
            c.duplicated += sum(n - 1 for n in where.values())
            explained.add(ln.message_id)
            stray = sorted(k for k in where if k[1] not in hours_of.get(ln.message_id, ()))
            if stray and len(hours_of.get(ln.message_id, ())) > 1:
                c.misplaced.append(
                    f"row {ln.message_id!r} also in {stray}, expected only in "
                    f"hours {sorted(hours_of[ln.message_id])}"
                )
        desc = f"{ln.key[0]}:{ln.key[1]!r:.40} ({ln.fate} {ln.message_id!r:.40})"
        if ln.fate == QUARANTINED or (ln.fate == UNSURE and not where):
            r = take(ln.key)
            if r is None and ln.fate == UNSURE and isinstance(ln.key[1], int):
                r = take((ln.key[0], "*"))  # a damaged file: the lines after the last good read
            if r is None:
                c.lost.append(desc)
                continue
            c.accounted += 1
            if ln.reasons and r["reason"] not in ln.reasons:
                c.misplaced.append(f"{desc}: reason {r['reason']!r}, expected {set(ln.reasons)}")
            continue
        if not where:
            c.lost.append(desc)
            continue
        c.accounted += 1
        hour = ln.kept_hour if ln.fate == DUPLICATE else ln.hour
        if len(hours_of.get(ln.message_id, ())) > 1:  # its rows of this hour only
            where = Counter({k: n for k, n in where.items() if k[1] == hour})
        if ln.fate in (ROW, DUPLICATE) and not _placement_ok(where, ln.tables, hour):
            c.misplaced.append(f"{desc}: found in {sorted(where)}, expected {ln.tables} {hour}")
    for mid, where in lake.rows.items():
        if mid not in explained:
            c.extra.append(f"row {mid!r} in {sorted(where)}")
    c.extra += [
        f"quarantined line {r['archive_file']}:{r['line_number']} {r['reason']}"
        for r in lake.lines_q
        if id(r) not in used
    ]
    _compare_violations(expected, lake, c)
    return c


def _compare_violations(expected: Expected, lake: Lake, c: Comparison) -> None:
    """The ``violations`` table, id by id: exactly the oracle's violations (those of unsure
    lines may be there or not); without a plan, none at all."""
    if not expected.planned:
        c.extra += [f"violations of {mid!r}: {sorted(v)[:4]}" for mid, v in lake.violations.items()]
        return
    from datalake_assets_tests.support.oracle_plan import expected_violations

    sure, maybe = expected_violations(expected.lines)
    for mid in sorted(set(sure) | set(maybe) | set(lake.violations), key=repr):
        want, found = sure.get(mid, Counter()), lake.violations.get(mid, Counter())
        missing, unexpected = want - found, (found - want) - maybe.get(mid, Counter())
        if not missing and not unexpected:
            continue
        if not want and mid not in maybe:
            c.extra.append(f"violations of {mid!r}, no line's: {sorted(found)[:4]}")
        else:
            c.misplaced.append(
                f"violations of {mid!r}: missing {sorted(missing)[:4]}, "
                f"unexpected {sorted(unexpected)[:4]}"
            )


def check_lake(expected: Expected, store, lake_root: str, source_dir: str) -> Comparison:
    return compare(expected, read_lake(store, lake_root, source_dir))
