"""A request's progress on storage: ``_privacy/state/<request id>.json``.

It holds hashes and counts, never a clear value: the identity hashes (requested, then with
the linked ones), the needles' hashes (``matching.Needle``), and per source and hour what was
removed, with the keyed hashes of the person's message ids (so the proof of a re-run can still
check the rows that only their message id ties to the person). It is written before anything
is erased and after each hour, so a re-run of a killed request (``forget`` with the same
request, or ``resume`` from the state alone) carries on where it stopped and still reports
everything the request removed.

Counts of an hour are merged key by key with ``max``: an hour planned, partly applied and then
planned again (after a kill) finds fewer traces the second time; what was removed is the
larger count.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime

import orjson

from datalake_assets.lake import storage
from datalake_assets.privacy.matching import Needle
from datalake_assets.spec import layout

RUNNING, COMPLETED, FAILED = "running", "completed", "failed"


@dataclass
class HourRecord:
    rows: dict[str, int] = field(default_factory=dict)  # table (or "quarantine") -> rows
    archive: dict[str, int] = field(default_factory=dict)  # archive file name -> lines
    index_entries: int = 0  # id-index and identity-index entries
    files: int = 0  # files rewritten or deleted (lake partitions' files and archive files)
    message_ids: list[str] = field(default_factory=list)  # keyed hashes
    done: bool = False

    def merge(self, other: HourRecord) -> HourRecord:
        def top(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
            return {k: max(a.get(k, 0), b.get(k, 0)) for k in sorted(set(a) | set(b))}

        return HourRecord(
            top(self.rows, other.rows),
            top(self.archive, other.archive),
            max(self.index_entries, other.index_entries),
            max(self.files, other.files),
            sorted(set(self.message_ids) | set(other.message_ids)),
            self.done or other.done,
        )

    @property
    def empty(self) -> bool:
        return not (any(self.rows.values()) or any(self.archive.values()) or self.index_entries)


@dataclass
class RequestState:
    request_id: str
    requested: list[str]  # identity hashes of the request
    needles: list[Needle]
    follow_links: bool
    sources: list[str]  # () = every source
    erase: bool
    suppress: bool
    received_at: str
    hashes: list[str] = field(default_factory=list)  # requested + linked (after link following)
    status: str = RUNNING
    started_at: str = ""
    completed_at: str | None = None
    hours: dict[str, dict[str, HourRecord]] = field(default_factory=dict)  # source -> hour ->
    spool_lines_removed: int = 0
    rows_remaining: int | None = None
    remaining: dict[str, int] = field(default_factory=dict)  # the proof's counts by kind
    proof_checked_at: str | None = None
    audit_location: str | None = None
    error: str | None = None
    attempts: int = 0

    def record(self, source: str, hour: str, rec: HourRecord) -> HourRecord:
        per = self.hours.setdefault(source, {})
        merged = per[hour].merge(rec) if hour in per else rec
        per[hour] = merged
        return merged

    def to_json(self) -> bytes:
        body = asdict(self)
        body["needles"] = [[n.fold, n.length, n.digest] for n in self.needles]
        return orjson.dumps(body, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)

    @staticmethod
    def from_json(data: bytes) -> RequestState:
        body = orjson.loads(data)
        body["needles"] = [Needle(bool(f), int(n), str(d)) for f, n, d in body["needles"]]
        body["hours"] = {
            s: {h: HourRecord(**r) for h, r in hs.items()}
            for s, hs in body.get("hours", {}).items()
        }
        known = set(RequestState.__dataclass_fields__)
        return RequestState(**{k: v for k, v in body.items() if k in known})


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def state_location(lake_root: str, request_id: str) -> str:
    return layout.join(layout.privacy_state_dir(lake_root), f"{request_id}.json")


def load_state(lake_root: str, request_id: str) -> RequestState | None:
    location = state_location(lake_root, request_id)
    try:
        return RequestState.from_json(storage.read_bytes(location))
    except (FileNotFoundError, OSError):
        return None


def save_state(lake_root: str, state: RequestState) -> None:
    storage.write_bytes_atomic(state_location(lake_root, state.request_id), state.to_json())


def unfinished(lake_root: str) -> list[RequestState]:
    """The states of requests that did not complete (killed, or failed), oldest first."""
    out = []
    for location, _ in storage.list_files(layout.privacy_state_dir(lake_root)):
        name = location.rsplit("/", 1)[-1]
        if not name.endswith(".json") or name.startswith((".", "_")):
            continue
        state = RequestState.from_json(storage.read_bytes(location))
        if state.status != COMPLETED:
            out.append(state)
    return sorted(out, key=lambda s: (s.received_at, s.request_id))
