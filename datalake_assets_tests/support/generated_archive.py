"""A generated archive and its model: what the raw archive holds after a history of late files,
Segment imports and erasures, as the test wrote it, never as the sync or the importer read it.

The history tests (``reliability/test_any_order.py``) describe an archive as plain data
(``Archive``, ``ArchiveFile``, ``SegmentFile``: reprs that paste back into a regression test)
and ``ArchiveModel`` writes it and keeps its own copy of every file's lines. The oracle reads
the hours from that copy (``ArchiveModel.hour_lines``), so a late file the sync did not list,
a Segment line the importer misrouted or a line an erasure blanked by mistake shows up as a
difference between the lake and the oracle, or between the archive and its model
(``ArchiveModel.differences``).

The model restates three documented rules: Segment's files are routed to the hour of each
line's ``receivedAt`` into ``segment-<file id>.jsonl.gz`` (file id: 16 hex digits of SHA-256
over ``<segment source id>/<day ms>/<name>``; docs/concepts/segment-import.md), and an erasure replaces
each of the person's lines by an empty line and deletes a file left with no other line
(docs/concepts/privacy.md).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime

from datalake_assets_tests.reliability.hostile_corpus import CASES
from datalake_assets_tests.support.oracle import Line, file_lines, line_identities

# Six hours over three days, pairs 24 h apart (the edge of a one-day lookback), 23, 25, 47
# and 48 h; and an hour that never gets a file (syncs of it change nothing but finish a cut
# commit).
HOURS = (
    "2026-11-21T10",
    "2026-11-21T11",
    "2026-11-22T10",
    "2026-11-22T11",
    "2026-11-23T10",
    "2026-11-23T11",
)
EMPTY_HOUR = "2026-11-24T00"
DAYS = tuple(sorted({h[:10] for h in HOURS}))
CALLS = ("Order Completed", "Signed Up", "identify", "page")  # track events, or a call type
PERSONS = 3  # userId "person-<n>"; the others are anonymous ("anon-1")
# Hostile lines the corpus gives a fate to, small enough to keep a history quick (over the
# default 32 KiB limit they are "oversize"): (case, line number in the case) -> bytes.
HOSTILE = {
    (c.name, i): ln.raw
    for c in CASES
    if not c.isolated and not c.bug
    for i, ln in enumerate(c.lines)
    if len(ln.raw) <= 40_000
}


@dataclass(frozen=True)
class Message:
    """One message: its id is ``m<index in Archive.messages>``. ``value`` goes to
    ``properties.value`` (``traits.value`` of an identify): its JSON kind changes from one
    message to another, so the columns' types widen and misfits are quarantined."""

    call: str
    person: int  # -1: anonymous
    value: object = None


@dataclass(frozen=True)
class Copy:
    """A delivery of ``messages[message % len(messages)]``, received at ``minute`` of
    ``HOURS[received]``: copies of one message differ only in ``receivedAt``."""

    message: int
    received: int
    minute: int = 0


@dataclass(frozen=True)
class Hostile:
    """Line ``line`` of the hostile corpus's case ``case`` (``HOSTILE``)."""

    case: str
    line: int = 0


@dataclass(frozen=True)
class ArchiveFile:
    hour: int  # index into HOURS
    name: str
    lines: tuple[Copy | Hostile, ...]


@dataclass(frozen=True)
class SegmentFile:
    """A file of Segment's S3 destination, in the day folder of ``DAYS[day]``."""

    day: int
    name: str
    lines: tuple[Copy, ...]


@dataclass(frozen=True)
class Archive:
    messages: tuple[Message, ...]
    files: tuple[ArchiveFile, ...] = ()


def message_id(archive: Archive, copy: Copy) -> str:
    return f"m{copy.message % len(archive.messages)}"


def received_at(copy: Copy) -> str:
    return f"{HOURS[copy.received % len(HOURS)]}:{copy.minute % 60:02d}:00.000Z"


def person_id(person: int) -> str:
    return f"person-{person}"


def render(archive: Archive, line: Copy | Hostile) -> bytes:
    """A line's bytes (one JSON object, or the corpus's hostile bytes)."""
    if isinstance(line, Hostile):
        return HOSTILE[(line.case, line.line)]
    m = archive.messages[line.message % len(archive.messages)]
    obj: dict = {
        "messageId": message_id(archive, line),
        "receivedAt": received_at(line),
        "timestamp": received_at(line),
    }
    obj.update({"userId": person_id(m.person)} if m.person >= 0 else {"anonymousId": "anon-1"})
    if m.call == "identify":
        obj.update(type="identify", traits={"value": m.value})
    elif m.call == "page":
        obj.update(type="page", name="Home", properties={"value": m.value})
    else:
        obj.update(type="track", event=m.call, properties={"value": m.value})
    return json.dumps(obj, separators=(",", ":")).encode()


def segment_day_ms(day: str) -> int:
    midnight = datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=UTC)
    return int(midnight.timestamp()) * 1000


def _write(location: str, lines: list[bytes]) -> None:
    os.makedirs(os.path.dirname(location), exist_ok=True)
    body = b"".join(ln + b"\n" for ln in lines)
    with open(location, "wb") as f:
        f.write(gzip.compress(body, mtime=0) if location.endswith(".gz") else body)


class ArchiveModel:
    """The archive of one source as the test wrote it, with Segment's folder beside it."""

    def __init__(
        self,
        archive: Archive,
        archive_root: str,
        source_id: str,
        segment_root: str,
        segment_id: str,
    ) -> None:
        self.archive = archive
        self.archive_root, self.source_id = archive_root, source_id
        self.segment_root, self.segment_id = segment_root, segment_id
        self.files: dict[str, list[bytes]] = {}  # archive location -> its lines (b"": blank)
        self.hour_of: dict[str, str] = {}  # archive location -> its hour
        self.imported: set[str] = set()  # archive locations the importer wrote
        self.segment: dict[int, list[SegmentFile]] = {}  # by day: written, not yet imported
        self.segment_names: set[tuple[str, str]] = set()  # (day, name) of every Segment file
        for f in archive.files:
            self.add_file(f)

    def hour_dir(self, hour: str) -> str:
        day, hr = hour.split("T")
        return f"{self.archive_root}/{self.source_id}/day={day}/hr={hr}"

    def add_file(self, f: ArchiveFile) -> str:
        """Writes ``f`` (a late file when its hour was synced); its location. A name the
        hour already has gets a suffix: a late file is a new file."""
        hour = HOURS[f.hour % len(HOURS)]
        stem, dot, ext = f.name.partition(".")
        location = f"{self.hour_dir(hour)}/{f.name}"
        while location in self.files:
            stem += "b"
            location = f"{self.hour_dir(hour)}/{stem}{dot}{ext}"
        lines = [render(self.archive, ln) for ln in f.lines]
        _write(location, lines)
        self.files[location], self.hour_of[location] = lines, hour
        return location

    def add_segment_file(self, f: SegmentFile) -> None:
        """Writes ``f`` into Segment's day folder (the importer reads it at ``imported``)."""
        day = DAYS[f.day % len(DAYS)]
        name = f.name
        while (day, name) in self.segment_names:  # a new file, never a changed one
            name = f"b{name}"
        self.segment_names.add((day, name))
        folder = f"{self.segment_root}/segment-logs/{self.segment_id}/{segment_day_ms(day)}"
        _write(f"{folder}/{name}", [render(self.archive, ln) for ln in f.lines])
        self.segment.setdefault(f.day % len(DAYS), []).append(SegmentFile(f.day, name, f.lines))

    def import_day(self, day: int) -> None:
        """What importing a day folder adds: each new file's lines routed by ``receivedAt``
        hour, in their order, into that hour's ``segment-<file id>.jsonl.gz``."""
        day_ms = segment_day_ms(DAYS[day % len(DAYS)])
        for f in self.segment.pop(day % len(DAYS), []):
            fid = hashlib.sha256(f"{self.segment_id}/{day_ms}/{f.name}".encode()).hexdigest()
            for copy in f.lines:
                hour = HOURS[copy.received % len(HOURS)]
                location = f"{self.hour_dir(hour)}/segment-{fid[:16]}.jsonl.gz"
                self.files.setdefault(location, []).append(render(self.archive, copy))
                self.hour_of[location] = hour
                self.imported.add(location)

    def forget(self, identities: set[str]) -> None:
        """The erasure's archive rewrite: each line of theirs blanked, emptied files gone."""
        for location in list(self.files):
            lines = [
                b"" if ln and not identities.isdisjoint(line_identities(ln)) else ln
                for ln in self.files[location]
            ]
            if lines == self.files[location]:
                continue  # none of theirs: left as it is
            if not any(ln.strip() for ln in lines):
                del self.files[location]
                self.imported.discard(location)
            else:
                self.files[location] = lines

    # ------------------------------------------------------------------------- reading it

    def hour_lines(self, hour: str) -> list[Line]:
        """The hour's lines for the oracle, in the sync's order (files by name, then line);
        an imported line keyed by its bytes (the importer numbers its output's lines)."""
        out = []
        names = sorted(loc for loc, h in self.hour_of.items() if h == hour and loc in self.files)
        for rank, location in enumerate(names):
            for n, raw in enumerate(self.files[location], 1):
                if raw.strip():
                    key = ("raw", raw) if location in self.imported else (location, n)
                    out.append(Line(key, hour, raw, order=(rank, n), file=location))
        return out

    def hour_files(self, hour: str) -> set[str]:
        """The names of the hour's files, a file of blank lines only included."""
        return {
            os.path.basename(loc)
            for loc, h in self.hour_of.items()
            if h == hour and loc in self.files
        }

    def differences(self) -> list[str]:
        """Where the archive on disk differs from the model: files, or their non-blank lines
        and line numbers."""
        seen, out = {}, []
        for hour in HOURS:
            folder = self.hour_dir(hour)
            for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
                if not name.startswith((".", "_")):
                    with open(f"{folder}/{name}", "rb") as f:
                        seen[f"{folder}/{name}"] = file_lines(f.read())[0]
        for location in sorted(set(seen) | set(self.files)):
            if location not in seen or location not in self.files:
                out.append(f"{location}: {'missing' if location in self.files else 'unexpected'}")
                continue
            got = [(n, ln) for n, ln in enumerate(seen[location], 1) if ln.strip()]
            want = [(n, ln) for n, ln in enumerate(self.files[location], 1) if ln.strip()]
            if got != want:
                out.append(f"{location}: lines {got[:3]}... != model {want[:3]}...")
        return out
