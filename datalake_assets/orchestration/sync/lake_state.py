"""The lake state that shapes the Dagster asset graph, read once per code-location load.

Dagster fixes a code location's asset graph when the location loads, but event tables are
discovered at runtime by the syncs. So the few facts that shape the graph, per source:

* ``tables``: the event tables the lake's schema record knows (beyond the standard ones);
* ``start``: the first hourly partition (``start = "auto"`` resolves to the archive's first
  hour),

are read here, ONCE, by the process that loads the definitions for the webserver and the
daemon (the code server), and carried to every run launched from that load through
``Definitions.with_reconstruction_metadata`` (``definitions.py``). A run worker never reads
the lake to build its graph, so it cannot see a different graph than the UI that launched it.

When the lake has moved on (a sync created a table, the archive's first hour changed), the
definitions sensor (``reload.py``) notices that this state differs from the loaded one and
has the code location reloaded.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from datalake_assets.lake.listing import lister_for
from datalake_assets.lake.records import source_tables
from datalake_assets.settings import AUTO_START, LakeSettings, SourceSettings
from datalake_assets.spec.layout import ArchiveHour
from datalake_assets.spec.naming import STANDARD_TABLES

STATE_VERSION = 1
_EPOCH = ArchiveHour(datetime(1970, 1, 1, tzinfo=UTC))


@dataclass(frozen=True)
class SourceState:
    tables: tuple[str, ...]  # every table of the source's graph, sorted (standard ones included)
    start: str  # first hourly partition key, 'YYYY-MM-DD-HH:00'


@dataclass(frozen=True)
class LakeState:
    """What the graph was built from, by source id."""

    sources: dict[str, SourceState] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(
            {
                "v": STATE_VERSION,
                "sources": {
                    sid: {"tables": list(s.tables), "start": s.start}
                    for sid, s in sorted(self.sources.items())
                },
            },
            separators=(",", ":"),
            sort_keys=True,
        )

    @staticmethod
    def from_json(text: str) -> LakeState:
        data = json.loads(text)
        if data.get("v") != STATE_VERSION:
            raise ValueError(f"unknown lake state version {data.get('v')!r}")
        return LakeState(
            {sid: SourceState(tuple(s["tables"]), s["start"]) for sid, s in data["sources"].items()}
        )

    def source(self, source: SourceSettings) -> SourceState:
        return self.sources[source.id]

    def effective(self, source: SourceSettings) -> SourceSettings:
        """The source's settings with ``start`` resolved (``auto`` becomes an hour)."""
        return replace(source, start=self.sources[source.id].start)

    def changes_since(self, loaded: LakeState) -> list[str]:
        """What differs from ``loaded``, one phrase per change, for logs and skip reasons."""
        out = []
        for sid, now in sorted(self.sources.items()):
            was = loaded.sources.get(sid)
            if was is None:
                out.append(f"source {sid} is new")
                continue
            new_tables = sorted(set(now.tables) - set(was.tables))
            if new_tables:
                out.append(f"{sid}: new tables {', '.join(new_tables)}")
            gone = sorted(set(was.tables) - set(now.tables))
            if gone:
                out.append(f"{sid}: tables no longer recorded {', '.join(gone)}")
            if now.start != was.start:
                out.append(f"{sid}: partitions start at {now.start} (was {was.start})")
        return out


def first_archive_hour(settings: LakeSettings, source: SourceSettings) -> ArchiveHour | None:
    """The oldest hour folder holding archive files, listing as little as possible (one
    folder listing per level locally; one page of keys on S3). A listing cut after an hour
    without archive files (only in-progress ``.``/``_`` names) goes on from the cut."""
    lister = lister_for(settings.archive_root)
    since = _EPOCH
    while True:
        listing = lister.list_hours(settings.archive_root, source.id, since, limit=1)
        if listing.hours:
            return min(listing.hours)
        if listing.truncated_at is None:
            return None
        since = listing.truncated_at


def _utc_now() -> datetime:
    return datetime.now(UTC)


def read_source_state(
    settings: LakeSettings,
    source: SourceSettings,
    now: Callable[[], datetime] = _utc_now,
    previous: SourceState | None = None,
) -> SourceState:
    """``previous``: the state loaded before, whose start an empty archive keeps (so that the
    start does not follow the clock while a source has sent nothing yet)."""
    try:
        tables = source_tables(settings.lake_root, source.lake_dir)
    except Exception:  # an unreadable record must not take the code location down
        tables = sorted(STANDARD_TABLES)
    start = source.start
    if start == AUTO_START:
        first = first_archive_hour(settings, source)
        # An empty archive starts at the current hour: nothing older exists yet. When older
        # hours arrive (an import), the state changes and the code location is reloaded.
        if first is not None:
            start = first.partition_key
        else:
            start = previous.start if previous else ArchiveHour.of(now()).partition_key
    return SourceState(tuple(tables), start)


def read_lake_state(
    settings: LakeSettings,
    now: Callable[[], datetime] = _utc_now,
    previous: LakeState | None = None,
) -> LakeState:
    """The state now; ``previous`` (the loaded state) keeps the start of empty archives."""
    before = previous.sources if previous else {}
    return LakeState(
        {s.id: read_source_state(settings, s, now, before.get(s.id)) for s in settings.sources}
    )
