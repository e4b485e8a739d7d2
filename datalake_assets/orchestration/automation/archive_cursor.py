"""What an archive sensor decides at each tick, without I/O or Dagster: its cursor and the hours
to request (``archive_sensor.py`` wires it into Dagster; ``batch_sync.py`` too, one cursor per
source).

Each tick of ``<slug>_archive_sensor``:

1. **Lists** the source's archive from the cursor's *position* (an hour, never after the
   re-check window's first one) or from where the last listing was cut (below): local folders
   list the ``day=`` folders from the position's day; S3 ``list_objects_v2(StartAfter=...)``.
2. **Fingerprints** every hour found: a short hash of its sorted (file name, size, mtime or
   ETag). Only files the sync reads count (``layout.is_archive_file``: no ``.``/``_`` names).
3. For each hour that is **due** (closed for ``settle_minutes``, not before the source's
   ``start``) and whose fingerprint is new or different from the one recorded, oldest first:
   records an ``AssetMaterialization`` of ``[<slug>, raw_archive]`` for the hour (files, bytes,
   fingerprint) and requests ``<slug>_sync_job`` for its partition with run key
   ``<source id>:<hour>:<fingerprint>``. A late file changes the fingerprint, hence a new run
   (the sync replaces the hour: no duplicates). An unchanged hour requests nothing.
4. **Moves the position** to the oldest of: the start of the re-check window (``recheck_hours``
   before the current hour), the oldest hour still waiting to settle, and the oldest due hour
   left for a later tick. Fingerprints of hours before the position are dropped.

So the cursor is bounded: the position plus one fingerprint per hour since it, about
``recheck_hours`` + 2 entries per source in steady state (~2 KB for 48 hours), whatever the
age of the archive. The bound is also the contract: a file that lands in an hour more than
``recheck_hours`` after the hour began is not seen (replay that hour with a backfill). 48 hours
covers an archive writer that retries for a day and a weekend's worth of stuck uploads, while a
tick still lists only ~50 hour folders.

Bounded ticks: while ``max_queued_runs`` of the sensor's runs of the job wait in the queue, it
requests nothing more (and does not list), and a tick lists about ``list_limit`` entries at
most, stopping at an hour boundary; the next tick goes on from there (``resume`` in the cursor,
with ``hold``, the oldest hour of the pass still waiting or deferred, so the position never
passes it). A long history (the first ticks on an old archive) is thus worked off a queue-full
at a time, instead of thousands of runs created by one tick that might exceed Dagster's 60 s
sensor timeout.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from datalake_assets.lake.listing import ArchiveFile, Listing, fingerprint
from datalake_assets.settings.orchestration_section import AutomationSettings
from datalake_assets.spec.layout import ArchiveHour

CURSOR_VERSION = 1


@dataclass
class SensorCursor:
    """``{"v": 1, "pos": "2026-11-19T10", "fp": {"2026-11-21T09": "<fingerprint>", ...}}``,
    plus ``"resume"`` and ``"hold"`` while a listing pass spans several ticks (list_limit)."""

    position: ArchiveHour | None = None  # list from this hour; None: from the source's start
    fingerprints: dict[ArchiveHour, str] = field(default_factory=dict)
    resume: ArchiveHour | None = None  # a pass cut by list_limit continues from this hour
    hold: ArchiveHour | None = None  # oldest hour of the pass so far still waiting or deferred

    @staticmethod
    def parse(text: str | None) -> SensorCursor:
        if not text:
            return SensorCursor()
        try:
            data = json.loads(text)
            if data.get("v") != CURSOR_VERSION:
                raise ValueError(f"unknown cursor version {data.get('v')!r}")

            def hour(key: str) -> ArchiveHour | None:
                return ArchiveHour.parse(data[key]) if data.get(key) else None

            return SensorCursor(
                hour("pos"),
                {ArchiveHour.parse(h): str(fp) for h, fp in data.get("fp", {}).items()},
                hour("resume"),
                hour("hold"),
            )
        except (ValueError, TypeError, AttributeError) as e:
            raise ValueError(
                f"archive sensor cursor not understood ({e}): {text[:200]!r}. Resetting it in "
                "the UI makes the sensor list the archive from the source's start again."
            ) from None

    def serialize(self) -> str:
        data: dict[str, Any] = {
            "v": CURSOR_VERSION,
            "pos": str(self.position) if self.position else None,
            "fp": {str(h): fp for h, fp in sorted(self.fingerprints.items())},
        }
        for key, value in (("resume", self.resume), ("hold", self.hold)):
            if value is not None:
                data[key] = str(value)
        return json.dumps(data, separators=(",", ":"))

    def listing_start(self, start: ArchiveHour, window: ArchiveHour) -> ArchiveHour:
        """Where this tick lists from: the cut of an unfinished pass, else the position but
        never after the re-check window's first hour (``window``), so late files of any hour
        of the window are seen, older hours too (they move an ``auto`` start back)."""
        if self.resume is not None:
            return max(self.resume, start)
        return max(min(self.position or start, window), start)


def recheck_window_start(now: datetime, automation: AutomationSettings) -> ArchiveHour:
    """The first hour of the re-check window: ``recheck_hours`` before ``now``."""
    return ArchiveHour.of(now - timedelta(hours=automation.recheck_hours))


# -------------------------------------------------------------------------------- evaluation


@dataclass(frozen=True)
class HourRequest:
    hour: ArchiveHour
    files: tuple[ArchiveFile, ...]
    fingerprint: str
    previous: str | None  # the fingerprint requested before (a late file), or None (new hour)

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)


@dataclass
class Evaluation:
    requests: list[HourRequest]
    waiting: list[tuple[ArchiveHour, datetime]]  # hours not yet due, with the time they are
    deferred: int  # due and new/changed, left for a later tick (queue full)
    unchanged: int
    cursor: SensorCursor


def due_at(hour: ArchiveHour, settle_minutes: int) -> datetime:
    return hour.start + timedelta(hours=1, minutes=settle_minutes)


def evaluate(
    listing: Listing,
    cursor: SensorCursor,
    *,
    start: ArchiveHour,
    now: datetime,
    automation: AutomationSettings,
    budget: int,
) -> Evaluation:
    """Decide what to request and the next cursor. Pure: no I/O, no Dagster.

    ``listing`` starts at ``cursor.listing_start(start)``. The position may only advance over
    hours that were listed and are settled: to the oldest of the window's start, the oldest
    hour still waiting or deferred (in this pass, which may span ticks: ``hold``), and the
    point a cut listing stopped at."""
    window_start = recheck_window_start(now, automation)
    position = max(min(cursor.position or start, window_start), start)
    since = cursor.listing_start(start, window_start)
    requests: list[HourRequest] = []
    waiting: list[tuple[ArchiveHour, datetime]] = []
    deferred: list[ArchiveHour] = []
    unchanged = 0
    fingerprints = dict(cursor.fingerprints)
    for hour in sorted(listing.hours):
        if hour < since:
            continue
        files = listing.hours[hour]
        when = due_at(hour, automation.settle_minutes)
        if now < when:
            waiting.append((hour, when))
            continue
        fp = fingerprint(files)
        previous = fingerprints.get(hour)
        if previous == fp:
            unchanged += 1
            continue
        if len(requests) >= budget:
            deferred.append(hour)
            continue
        requests.append(HourRequest(hour, tuple(files), fp, previous))
        fingerprints[hour] = fp

    blockers = [
        h
        for h in (
            cursor.hold if cursor.resume else None,
            waiting[0][0] if waiting else None,
            deferred[0] if deferred else None,
        )
        if h is not None
    ]
    hold = min(blockers) if blockers else None
    limits = [window_start, *blockers]
    if listing.truncated_at is not None:
        limits.append(listing.truncated_at)
    position = max(position, min(limits))
    kept = {h: fp for h, fp in fingerprints.items() if h >= position}
    if listing.truncated_at is not None:  # the pass goes on at the next tick
        new = SensorCursor(position, kept, listing.truncated_at, hold)
    else:
        new = SensorCursor(position, kept)
    return Evaluation(requests, waiting, len(deferred), unchanged, new)
