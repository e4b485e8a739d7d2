"""Archive sensors: one per source, they turn new or changed raw-archive hours into syncs.

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from dagster import (
    AssetKey,
    AssetMaterialization,
    AssetsDefinition,
    AssetSelection,
    DagsterRunStatus,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    MetadataValue,
    RunRequest,
    RunsFilter,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    define_asset_job,
    in_process_executor,
    sensor,
)

from datalake_assets.lake.listing import (
    DEFAULT_LIST_LIMIT,
    ArchiveFile,
    ArchiveLister,
    Listing,
    LocalArchiveLister,
    S3ArchiveLister,
    fingerprint,
    lister_for,
)
from datalake_assets.settings import LakeSettings, SourceSettings
from datalake_assets.settings.orchestration_section import AutomationSettings
from datalake_assets.spec import layout
from datalake_assets.spec.layout import ArchiveHour

TRIGGER_TAG = "datalake/trigger"
FINGERPRINT_TAG = "datalake/archive_fingerprint"
PRIORITY_TAG = "dagster/priority"  # the run queue launches higher priorities first
SENSOR_PRIORITY = "1"  # hourly syncs go before queued backfill runs (priority 0)
RAW_ARCHIVE = "raw_archive"  # same key as assets.RAW_ARCHIVE
CURSOR_VERSION = 1

Clock = Callable[[], datetime]
AssetJob = Any  # what define_asset_job returns (its class is not exported by dagster)


def utc_now() -> datetime:
    return datetime.now(UTC)


def sensor_status(auto: AutomationSettings) -> DefaultSensorStatus:
    """Every sensor's default status: ``[automation] sensors``."""
    return DefaultSensorStatus.RUNNING if auto.sensors == "running" else DefaultSensorStatus.STOPPED


def schedule_status(auto: AutomationSettings) -> DefaultScheduleStatus:
    """Every schedule's default status: ``[automation] sensors`` too (one switch for all
    automation)."""
    return (
        DefaultScheduleStatus.RUNNING
        if auto.sensors == "running"
        else DefaultScheduleStatus.STOPPED
    )


def job_name(source: SourceSettings) -> str:
    return f"{source.slug}_sync_job"


def sensor_name(source: SourceSettings) -> str:
    return f"{source.slug}_archive_sensor"


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


# ------------------------------------------------------------------------------ Dagster wiring


def find_lake_sync(source: SourceSettings, assets: Sequence[Any]) -> AssetsDefinition:
    """The source's ``<slug>_lake_sync`` multi-asset among ``build_source_assets``' result."""
    name = f"{source.slug}_lake_sync"
    for a in assets:
        if isinstance(a, AssetsDefinition) and a.node_def is not None and a.node_def.name == name:
            return a
    raise ValueError(f"no multi-asset named {name!r} among the assets of source {source.id!r}")


def build_sync_job(source: SourceSettings, lake_sync: AssetsDefinition) -> AssetJob:
    """``<slug>_sync_job``: the source's lake-sync multi-asset; its partitions (the source's
    hourly partitions) are inferred from the asset (passing them is deprecated in 1.13)."""
    return define_asset_job(
        job_name(source),
        selection=AssetSelection.assets(lake_sync),
        description=f"Sync hours of source {source.id} from the raw archive to the lake.",
        executor_def=in_process_executor,  # one step: no step process (~2.5 s; bench/README)
    )


def raw_archive_event(
    settings: LakeSettings, source: SourceSettings, r: HourRequest
) -> AssetMaterialization:
    """The ``[<slug>, raw_archive]`` materialization of a requested hour: its files, bytes and
    fingerprint (and the fingerprint it replaces, for late files)."""
    metadata: dict[str, Any] = {
        "files": len(r.files),
        "bytes": r.bytes,
        "fingerprint": r.fingerprint,
        "path": MetadataValue.path(
            layout.archive_hour_dir(settings.archive_root, source.id, r.hour)
        ),
    }
    if r.previous:
        metadata["previous_fingerprint"] = r.previous
    return AssetMaterialization(
        asset_key=AssetKey([source.slug, RAW_ARCHIVE]),
        partition=r.hour.partition_key,
        metadata=metadata,
        description=(
            "files changed after the hour was requested (late files): synced again"
            if r.previous
            else "new archive hour"
        ),
    )


def queued_runs(context: SensorEvaluationContext, job: str) -> int:
    """The runs of ``job`` requested by a sensor that wait in the queue."""
    return context.instance.get_runs_count(
        RunsFilter(
            job_name=job,
            statuses=[DagsterRunStatus.QUEUED, DagsterRunStatus.NOT_STARTED],
            tags={TRIGGER_TAG: "sensor"},
        )
    )


def lazy_lister(given: Any, make: Callable[[], Any]) -> Callable[[], Any]:
    """``given`` (tests, benchmarks), else ``make()`` at the first call: loading the code
    location never lists, only a tick does."""
    made = [given] if given is not None else []

    def get() -> Any:
        if not made:
            made.append(make())
        return made[0]

    return get


def clock_time(clock: Clock) -> datetime:
    now = clock()
    return now.astimezone(UTC) if now.tzinfo else now.replace(tzinfo=UTC)


def build_archive_sensor(
    settings: LakeSettings,
    source: SourceSettings,
    job: AssetJob,
    *,
    clock: Clock = utc_now,
    lister: ArchiveLister | None = None,
    list_limit: int = DEFAULT_LIST_LIMIT,
) -> SensorDefinition:
    """The sensor of one source (see the module docstring). ``clock`` and ``lister`` are for
    tests and benchmarks: the current time, and how the archive is listed."""
    auto = settings.automation
    start = ArchiveHour.parse(source.start)
    source_dir = layout.join(settings.archive_root, source.id)
    jname = job_name(source)
    get_lister = lazy_lister(lister, lambda: lister_for(settings.archive_root))

    @sensor(
        name=sensor_name(source),
        job=job,
        minimum_interval_seconds=auto.interval_seconds,
        default_status=sensor_status(auto),
        description=(
            f"Lists new or changed hours of {source_dir} (re-checking the last "
            f"{auto.recheck_hours} h for late files) and requests {jname} for each hour "
            f"{auto.settle_minutes} min after it closes."
        ),
    )
    def archive_sensor(context: SensorEvaluationContext) -> SensorResult | SkipReason:
        cursor = SensorCursor.parse(context.cursor)
        now = clock_time(clock)
        queued = queued_runs(context, jname)
        budget = auto.max_queued_runs - queued
        if budget <= 0:
            return SkipReason(
                f"{queued} runs of {jname} requested by this sensor are still queued "
                f"(max_queued_runs = {auto.max_queued_runs}): listing again once they start"
            )
        since = cursor.listing_start(start, recheck_window_start(now, auto))
        listing = get_lister().list_hours(settings.archive_root, source.id, since, list_limit)
        result = evaluate(listing, cursor, start=start, now=now, automation=auto, budget=budget)
        new_cursor = result.cursor.serialize()
        seen = (
            f"listed {source_dir} from {since} ({listing.calls} listings, "
            f"{listing.entries} entries, {len(listing.hours)} hours with files)"
        )
        context.log.info(
            f"{seen}: {len(result.requests)} to sync, {result.unchanged} unchanged, "
            f"{len(result.waiting)} waiting to settle, {result.deferred} deferred; "
            "next listing from "
            f"{result.cursor.listing_start(start, recheck_window_start(now, auto))}"
        )
        if not result.requests:
            why = [
                f"nothing new or changed: {seen}"
                if listing.hours
                else f"no archive files under {source_dir} from {since} on"
            ]
            if result.waiting:
                hour, when = result.waiting[0]
                why.append(
                    f"hour {hour} is due at {when:%Y-%m-%d %H:%M} UTC "
                    f"(closed + settle_minutes = {auto.settle_minutes})"
                )
            if listing.truncated_at is not None:
                why.append(
                    f"listing stopped at {listing.truncated_at} (list limit "
                    f"{list_limit} entries a tick): the next tick goes on from there"
                )
            return SensorResult(skip_reason="; ".join(why), cursor=new_cursor)

        run_requests, events = [], []
        for r in result.requests:
            events.append(raw_archive_event(settings, source, r))
            run_requests.append(
                RunRequest(
                    run_key=f"{source.id}:{r.hour}:{r.fingerprint}",
                    partition_key=r.hour.partition_key,
                    tags={
                        TRIGGER_TAG: "sensor",
                        PRIORITY_TAG: SENSOR_PRIORITY,
                        FINGERPRINT_TAG: r.fingerprint,
                    },
                )
            )
        return SensorResult(run_requests=run_requests, asset_events=events, cursor=new_cursor)

    return archive_sensor
