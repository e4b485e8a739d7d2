"""The oracle: what a lake must hold for an archive, from the README's rules alone.

"What a sync does to each line" restated from scratch, short enough to read in one sitting.
Nothing here imports ``datalake_assets``: the archive is read with ``zlib`` and ``json`` (boto3
for ``s3://``), so a bug in the sync's decoder, naming, dedup or reader cannot hide itself by
being shared with its reference. The lake is read back by ``lake_reader.py``.

For every non-blank archive line the oracle says one of:

- ``row``: its message is kept, in the archive hour it was received in, in these tables
  (``identify`` -> ``identifies`` ...; a ``track`` -> its event's table *and* ``tracks``);
- ``duplicate``: another line of its ``messageId`` is kept (within the batch the earliest
  ``receivedAt``, ties: first file and line; across hours: an id the lake already holds for
  another hour within the lookback window stays there);
- ``quarantined``: the line itself is in the quarantine, with one of these reasons;
- ``unsure``: a rule too intricate to restate here (odd event names folded to nothing, float
  ids, lines of a damaged gzip before its damage): kept as a row, or quarantined. Still
  accounted for exactly once.

A damaged or truncated gzip adds one ``quarantined`` entry (``unreadable_file``) for the file.

With a tracking plan (``Oracle(..., plan_policy=...)``, ``oracle_plan.py``), each line that
would be a row is judged by the plan before the dedup: its violations (``Line.violations``)
are rows of the ``violations`` table unless it loses the dedup, and the policy may quarantine
it. That part alone takes the plan's verdict from the product (``plans/plan_verdict``).

A history is modelled batch by batch (``Oracle.sync``): the lookback window spans the batch's
first hour minus the lookback to its last plus it (none at all when it is 0), a re-synced hour
replaces the lines it held, and a duplicate whose kept copy moved follows it. ``forget`` models
an erasure with suppression. ``Oracle.batch`` models an open hour's batch
(docs/concepts/freshness.md): it reads only the files of its hours that no sync or batch read
before (by name), keeps a message the lake already holds in its hours or its window where it
is, and adds to its hours instead of replacing them.
"""

from __future__ import annotations

import json
import os
import re
import zlib
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

ROW, DUPLICATE, QUARANTINED, UNSURE = "row", "duplicate", "quarantined", "unsure"
ANY_TRACK_TABLE = "<a track event's table>"  # exact name not restated (odd event names)
TYPE_TABLES = {
    "identify": "identifies",
    "page": "pages",
    "screen": "screens",
    "group": "groups",
    "alias": "aliases",
    "track": None,
}
STANDARD_TABLES = frozenset(t for t in TYPE_TABLES.values() if t)
# Names a table cannot take (prefixed instead): the exact list is the naming module's
RESERVED = STANDARD_TABLES | {
    "tracks",
    "quarantine",
    "sync_reports",
    "raw_archive",
    "catalog",
    "open_hour",
    "violations",  # the tracking plan's side table
}
MAX_NESTING = 200
MAX_ID_CHARS = 255  # schema conformance: message_id is 1-255 characters
DEFAULT_MAX_BYTES = 32 * 1024
_ISO = re.compile(
    r"(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}(?::\d{2}(?:\.(\d+))?)?)"
    r"(Z|z|[-+]\d{2}(?::?\d{2})?)?"
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SIMPLE_EVENT = re.compile(r"[A-Za-z]+(?:[ _-][A-Za-z]+)*")


@dataclass
class Line:
    key: tuple  # how the quarantine names the line: (file, line number) or ("raw", bytes)
    hour: str  # archive hour, "YYYY-MM-DDTHH"
    raw: bytes
    fate: str = ROW
    message_id: str | None = None
    tables: tuple[str, ...] = ()  # for rows (and duplicates: where the kept one is)
    reasons: frozenset[str] = frozenset()  # accepted quarantine reasons
    received_us: int | None = None
    order: tuple = ()  # (file rank, line number): the tie-break of the dedup
    kept_hour: str = ""  # a duplicate's: the hour its kept message is in
    file: str = ""  # the archive file's location (an open hour's batch reads files by name)
    violations: tuple[tuple[str, str, str], ...] = ()  # the plan's (type, field, action)


@dataclass
class Expected:
    """What the lake must hold now: every line of every hour, as last synced."""

    lines: list[Line] = field(default_factory=list)
    required_ids: set[str] = field(default_factory=set)  # see ``require``
    planned: bool = False  # synced under a tracking plan: its ``violations`` table is compared

    def require(self, ids) -> Expected:
        """Ids that must be kept (e.g. messages a collector acknowledged). One the archive
        does not hold becomes an expected row in an unknown place: lost, when compared."""
        have = {ln.message_id for ln in self.lines}
        for mid in sorted(set(ids) - have):
            self.lines.append(Line(("required", mid), "", b"", ROW, mid, ("<never archived>",)))
        self.required_ids |= set(ids)
        return self


# ------------------------------------------------------------------------------ one line


def parse_iso(text: str) -> int | None:
    """Microseconds since the epoch of an ISO-8601 date-time (no zone: UTC), else None."""
    m = _ISO.fullmatch(text)
    if not m:
        return None
    date, clock, frac, zone = m.groups()
    if frac:  # fractions beyond microseconds are cut, not rounded
        clock = clock.replace("." + frac, "." + (frac + "000000")[:6])
    zone = "+00:00" if not zone or zone in "Zz" else zone
    if len(zone) == 3:
        zone += ":00"
    elif ":" not in zone:
        zone = zone[:3] + ":" + zone[3:]
    try:
        dt = datetime.fromisoformat(f"{date}T{clock}{zone}")
    except ValueError:
        return None
    delta = dt - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _depth(obj: object) -> int:
    deepest, stack = 0, [(obj, 1)]
    while stack:
        o, d = stack.pop()
        if isinstance(o, dict | list):
            deepest = max(deepest, d)
            stack += [(v, d + 1) for v in (o.values() if isinstance(o, dict) else o)]
    return deepest


def event_table(event: str) -> tuple[str, str]:
    """``(fate, table)`` of a track event's name, by the naming rules (exact for plain names)."""
    if _SIMPLE_EVENT.fullmatch(event) and len(event) <= 100:
        split = re.sub(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", event)
        name = re.sub(r"[^a-z0-9]+", "_", split.lower()).strip("_")
        return ROW, (ANY_TRACK_TABLE if name in RESERVED else name)
    if any(c.isascii() and c.isalnum() for c in event):
        return ROW, ANY_TRACK_TABLE
    if event.isascii():  # nothing usable, and nothing to fold into letters
        return QUARANTINED, ""
    return UNSURE, ANY_TRACK_TABLE  # "Café"-like folding: letters may or may not come out


def classify(line: Line, max_bytes: int = DEFAULT_MAX_BYTES) -> Line:
    """The line's fate before dedup: a row (with its tables), quarantined, or unsure."""
    raw = line.raw

    def q(*reasons):
        return _set(line, QUARANTINED, reasons=frozenset(reasons))

    if len(raw) > max_bytes:
        return q("oversize")
    try:
        obj = json.loads(raw)  # NaN / Infinity are numbers, as documented
        json.dumps(obj, ensure_ascii=False).encode("utf-8")  # "\ud800": not Unicode text
    except RecursionError:
        return q("nesting_too_deep", "invalid_json")
    except ValueError:  # also invalid UTF-8 and lone surrogates
        return q("invalid_json")
    reasons = {"nesting_too_deep"} if _depth(obj) > MAX_NESTING else set()
    if not isinstance(obj, dict):
        return q(*reasons, "not_an_object")
    mtype, mid = obj.get("type"), obj.get("messageId")
    if mtype is None:
        reasons.add("missing_type")
    elif not isinstance(mtype, str) or mtype not in TYPE_TABLES:
        reasons.add("unknown_type")
    unsure = False
    if mid is None or mid == "":
        reasons.add("missing_message_id")
    elif isinstance(mid, bool) or not isinstance(mid, str | int | float):
        reasons.add("invalid_message_id")
    elif isinstance(mid, str):
        reasons |= {"invalid_message_id"} if len(mid) > MAX_ID_CHARS else set()
    elif isinstance(mid, int) and abs(mid) >= 2**64:  # beyond 64-bit precision
        reasons.add("invalid_message_id")
    else:  # a float, or an integer near the 64-bit edge: its exact id text is not restated
        unsure = isinstance(mid, float) or abs(mid) >= 2**63
        mid = str(mid)
    if obj.get("userId") in (None, "") and obj.get("anonymousId") in (None, ""):
        reasons.add("missing_user_id")
    received = obj.get("receivedAt")
    micros = parse_iso(received) if isinstance(received, str) else None
    if received is None or received == "":
        reasons.add("missing_received_at")
    elif micros is None:
        reasons.add("invalid_received_at")
    tables: tuple[str, ...] = (TYPE_TABLES.get(mtype),) if isinstance(mtype, str) else ()
    if mtype == "track":
        event = obj.get("event")
        if not isinstance(event, str) or not event.strip():
            reasons.add("missing_event")
        else:
            fate, table = event_table(event)
            if fate == QUARANTINED:
                reasons.add("unusable_event_name")
            unsure = unsure or fate == UNSURE
            tables = (table, "tracks")
    if reasons:
        return q(*reasons)
    if not isinstance(mid, str):
        mid = str(mid)
    return _set(line, UNSURE if unsure else ROW, message_id=mid, tables=tables, received_us=micros)


def _set(line: Line, fate: str, **kw) -> Line:
    line.fate = fate
    for k, v in kw.items():
        setattr(line, k, v)
    return line


# ------------------------------------------------------------------------- reading archives


def file_lines(data: bytes) -> tuple[list[bytes], bool]:
    """``(lines, damaged)`` of a file's bytes: gzip (any number of members, recognised by its
    magic bytes) or plain; ``damaged``: the gzip breaks or stops before its end."""
    if data[:2] != b"\x1f\x8b":
        text, damaged = data, False
    else:
        out, rest, damaged = [], data, False
        while rest:
            d = zlib.decompressobj(wbits=31)
            try:
                out.append(d.decompress(rest))
            except zlib.error:
                damaged = True
                break
            if not d.eof:
                damaged = True
                break
            rest = d.unused_data
        text = b"".join(out)
    lines = text.split(b"\n")
    if damaged or not lines[-1]:
        lines.pop()  # after damage, the last piece may be cut anywhere
    return lines, damaged


def lines_of_file(location: str, rank: int, hour: str, data: bytes, key_by_raw=False):
    """The archive file's lines, each keyed as the quarantine names it."""
    lines, damaged = file_lines(data)
    out = []
    for n, raw in enumerate(lines, 1):
        if raw.strip():  # blank lines carry nothing
            key = ("raw", raw) if key_by_raw else (location, n)
            out.append(Line(key, hour, raw, order=(rank, n), file=location))
    if damaged:
        for ln in out:
            ln.fate = UNSURE  # kept up to "the last good 64 KiB read": not restated here
        out.append(
            Line(
                (location, "*"),
                hour,
                b"",
                QUARANTINED,
                reasons=frozenset({"unreadable_file"}),
                order=(rank, 1 << 62),
                file=location,
            )
        )
    return out


def archive_hour_files(store, archive_root: str, source_id: str, hour: str) -> list[str]:
    """The locations of the hour's archive files, in the sync's order (by name)."""
    day, hr = hour.split("T")
    folder = f"{archive_root.rstrip('/')}/{source_id}/day={day}/hr={hr}"
    return [
        location
        for location in sorted(store.list(folder))
        if not os.path.basename(location).startswith((".", "_"))  # in progress: ignored
    ]


def archive_hour_lines(store, archive_root: str, source_id: str, hour: str) -> list[Line]:
    out = []
    for rank, location in enumerate(archive_hour_files(store, archive_root, source_id, hour)):
        out += lines_of_file(location, rank, hour, store.read(location))
    return out


class Oracle:
    """A model of one source's lake, synced batch by batch: ``Oracle(...).sync(hours)``."""

    def __init__(
        self,
        store,
        archive_root: str,
        source_id: str,
        *,
        max_message_bytes: int = DEFAULT_MAX_BYTES,
        lookback_hours: int = 7 * 24,
        hour_lines=None,
        hour_files=None,
        plan_policy=None,
    ) -> None:
        self.max_bytes = max_message_bytes
        self.plan_policy = plan_policy  # a ``PlanPolicy``: see ``oracle_plan.py``
        self.lookback = timedelta(hours=lookback_hours)
        self.hour_lines = hour_lines or (
            lambda h: archive_hour_lines(store, archive_root, source_id, h)
        )
        # the names of an hour's files: a file of blank lines only is a file of the hour too
        # (the hour is synced, and its window counts), though it gives no line
        if hour_files is None and hour_lines is not None:
            hour_files = lambda h: _names(self.hour_lines(h))  # noqa: E731
        self.hour_files = hour_files or (
            lambda h: {
                os.path.basename(loc)
                for loc in archive_hour_files(store, archive_root, source_id, h)
            }
        )
        self.hours: dict[str, list[Line]] = {}  # what the lake holds, by hour
        self.forgotten: set[str] = set()  # identities erased and suppressed (``forget``)
        self.taken: dict[str, set[str]] = {}  # hour -> names of the files a run read

    def sync(self, hours) -> Oracle:
        """One successful sync of ``hours`` (one batch): each hour with files is replaced
        (hours without files are left alone), and the window spans those hours."""
        files = {h: self.hour_files(h) for h in hours}
        for h in hours:  # a sync reads every file of its hours
            self.taken.setdefault(h, set()).update(files[h])
        batch = {
            h: self._classify(
                ln for ln in self.hour_lines(h) if not self._forgotten(ln)
            )  # suppressed: stored nowhere, not deduped
            for h in sorted(hours)
            if files[h]
        }
        if not batch:
            return self
        lo = _hour_dt(min(batch)) - self.lookback
        hi = _hour_dt(max(batch)) + self.lookback
        held = {
            ln.message_id: ln
            for h, lines in self.hours.items()
            if h not in batch and lo <= _hour_dt(h) <= hi and self.lookback
            for ln in lines
            if ln.fate == ROW
        }  # no lookback: within the batch only
        _dedup(batch, held)
        self.hours.update(batch)
        self._rehome(batch)
        return self

    def batch(self, hours) -> Oracle:
        """One open hour's batch of ``hours`` that committed as a batch: the files of each hour
        that no run read yet, deduped against what the lake holds in the batch's hours and
        (lookback) in its window, appended. Nothing is replaced, so no duplicate moves."""
        fresh: dict[str, list[Line]] = {}
        for h in sorted(set(hours)):
            taken = self.taken.setdefault(h, set())
            untaken = self.hour_files(h) - taken
            if untaken:  # the hour is one of the batch's, lines or not
                taken.update(untaken)
                fresh[h] = self._classify(
                    ln
                    for ln in self.hour_lines(h)
                    if os.path.basename(ln.file) in untaken and not self._forgotten(ln)
                )
        if not fresh:
            return self
        lo = _hour_dt(min(fresh)) - self.lookback
        hi = _hour_dt(max(fresh)) + self.lookback
        held = {
            ln.message_id: ln
            for h, lines in self.hours.items()
            if h in fresh or (self.lookback and lo <= _hour_dt(h) <= hi)
            for ln in lines
            if ln.fate == ROW
        }
        _dedup(fresh, held)
        for h, lines in fresh.items():
            self.hours[h] = self.hours.get(h, []) + lines
        return self

    def _classify(self, lines) -> list[Line]:
        """Each line's fate before the dedup, the plan's word included."""
        out = [classify(ln, self.max_bytes) for ln in lines]
        if self.plan_policy is not None:
            from datalake_assets_tests.support.oracle_plan import judge

            for ln in out:
                judge(self.plan_policy, ln)
        return out

    def _rehome(self, batch: dict[str, list[Line]]) -> None:
        """A duplicate of an earlier sync whose kept copy was in a re-synced hour: its message
        is now wherever the lake keeps that id (the re-sync may have moved it to another hour
        of the batch, or found it held by an hour of its window). If the lake keeps it
        nowhere, the duplicate keeps its old place, and the comparison reports the loss."""
        kept: dict[str, list[Line]] = {}
        for h in sorted(self.hours):
            for ln in self.hours[h]:
                if ln.fate == ROW:
                    kept.setdefault(ln.message_id, []).append(ln)
        for h, lines in self.hours.items():
            for ln in lines:
                homes = kept.get(ln.message_id, [])
                if h not in batch and ln.fate == DUPLICATE and ln.kept_hour in batch and homes:
                    home = min(
                        homes,
                        key=lambda k: (k.hour != ln.kept_hour, abs(_hour_dt(k.hour) - _hour_dt(h))),
                    )
                    ln.kept_hour, ln.tables = home.hour, home.tables

    def forget(self, identities) -> Oracle:
        """An erasure with suppression of ``identities`` (README "Forget a person", without
        links): every line of a message naming one of them as ``userId``, ``anonymousId`` or
        ``previousId`` leaves the lake (its rows, its duplicates, its quarantined line), and
        later syncs store such lines nowhere. Message ids are taken to be one person's
        (Segment's contract, which the erasure relies on too)."""
        self.forgotten |= set(identities)
        for h, lines in self.hours.items():
            self.hours[h] = [ln for ln in lines if not self._forgotten(ln)]
        return self

    def _forgotten(self, line: Line) -> bool:
        return bool(self.forgotten) and not self.forgotten.isdisjoint(line_identities(line.raw))

    def expected(self) -> Expected:
        return Expected(
            [ln for h in sorted(self.hours) for ln in self.hours[h]],
            planned=self.plan_policy is not None,
        )


def line_identities(raw: bytes) -> set[str]:
    """The ids a decoded line names its person by (``userId``, ``anonymousId``,
    ``previousId``; text or numbers, as text); none for a line that is not a JSON object."""
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return set()
    if not isinstance(obj, dict):
        return set()
    return {
        str(v)
        for k in ("userId", "anonymousId", "previousId")
        if isinstance(v := obj.get(k), str | int) and not isinstance(v, bool) and v != ""
    }


def segment_archive_lines(store, segment_root: str, segment_id: str):
    """Segment's S3-destination archive (``segment-logs/<id>/<day ms>/*.gz``) as the importer
    must file it: each line in the hour of its ``receivedAt``, else in hour 00 of its folder's
    day. Returns ``hour_lines`` for ``Oracle``; lines are keyed by their bytes (the quarantine
    names the importer's output file, which the oracle does not restate)."""
    base = f"{segment_root.rstrip('/')}/segment-logs/{segment_id}"
    by_hour: dict[str, list[Line]] = {}
    for rank, location in enumerate(sorted(store.list(base))):
        folder, name = location[len(base) + 1 :].split("/")[-2:]
        if (
            not (
                folder.isdigit()
                and folder == str(int(folder))
                and int(folder) % 86_400_000 == 0
                and int(folder) < 253402300800000
            )
            or not name.endswith(".gz")
            or name.startswith((".", "_"))
        ):
            continue
        day = datetime.fromtimestamp(int(folder) / 1000, UTC).strftime("%Y-%m-%d")
        for ln in lines_of_file(location, rank, "", store.read(location), key_by_raw=True):
            try:
                received = json.loads(ln.raw).get("receivedAt")
                micros = parse_iso(received) if isinstance(received, str) else None
            except (ValueError, RecursionError, AttributeError):
                micros = None
            ln.hour = (
                f"{day}T00"
                if micros is None
                else (_EPOCH + timedelta(microseconds=micros)).strftime("%Y-%m-%dT%H")
            )
            by_hour.setdefault(ln.hour, []).append(ln)

    def hour_lines(hour: str) -> list[Line]:  # fresh lines: a sync classifies them in place
        return [
            Line(ln.key, ln.hour, ln.raw, order=ln.order, file=ln.file)
            for ln in by_hour.get(hour, [])
        ]

    hour_lines.hours = sorted(by_hour)  # type: ignore[attr-defined]
    return hour_lines


def _dedup(lines_by_hour: dict[str, list[Line]], held: dict[str, Line]) -> None:
    """The README's dedup of a run's lines: a message the lake holds (``held``) stays where it
    is, else the earliest ``receivedAt`` is kept (ties: the first hour, file and line); every
    other line of its id is a duplicate pointing at the kept one."""
    candidates: dict[str, list[Line]] = {}
    for h in sorted(lines_by_hour):
        for ln in lines_by_hour[h]:
            if ln.fate == ROW:
                candidates.setdefault(ln.message_id, []).append(ln)
    for mid, lines in candidates.items():
        kept = held.get(mid) or min(lines, key=lambda x: (x.received_us, x.hour, x.order))
        for ln in lines:
            if ln is not kept:
                ln.fate, ln.tables, ln.kept_hour = DUPLICATE, kept.tables, kept.hour


def _names(lines: list[Line]) -> set[str]:
    return {os.path.basename(ln.file) for ln in lines}


def _hour_dt(hour: str) -> datetime:
    return datetime.strptime(hour, "%Y-%m-%dT%H")
