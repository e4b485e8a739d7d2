"""Segment-archive import in Dagster, for each source with a ``segment_archive``.

* Asset ``[<slug>, segment_import]``, daily partitions (the *received* day of Segment's day
  folder), job ``<slug>_segment_import_job``: imports that day folder's new or changed files
  (``segment_import.SegmentImporter.import_day``). Its materialization lists the archive hours
  whose content changed (``hours_changed``); the check ``all_files_imported`` fails for files
  that could not be read (nothing of them is committed; re-materialize the day to retry).
* ``<slug>_segment_import_sensor`` lists Segment's day folders from its cursor (a local listing
  of the day folders at or after it; on S3 ``StartAfter`` the cursor's day), fingerprints each
  day's files (``sensors.fingerprint``: names, sizes, ETags or mtimes) and requests the import
  job for each day folder that is new or changed, oldest first, at most ``max_queued_runs``
  queued at a time. Like the archive sensor, it lists again the day folders of the last
  ``recheck_hours`` (Segment writes a day's files during that day, a few a bit later), and
  its cursor holds one fingerprint per day since then.
* ``<slug>_segment_import_sync_sensor`` (a run-status sensor) closes the loop: after each
  successful import run it requests ``<slug>_sync_job`` for the changed hours that the archive
  sensor will not see any more (those before its re-check window, ``recheck_hours``, less a
  margin of ``HANDOFF_MARGIN_HOURS``): one run per contiguous range of at most
  ``backfill_hours_per_run`` hours (range tags: one Spark job for a day). Recent hours are left
  to the archive sensor, which sees their new files itself, so they are not synced twice.

So importing years of Segment archive is: set ``segment_archive`` and ``start``, let the import
sensor work through the day folders (or backfill ``<slug>/segment_import`` in the UI), and every
imported hour is synced without a manual step.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetKey,
    AssetsDefinition,
    DagsterEventType,
    DagsterRunStatus,
    DailyPartitionsDefinition,
    DefaultSensorStatus,
    MaterializeResult,
    MetadataValue,
    RunRequest,
    RunStatusSensorContext,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    asset,
    define_asset_job,
    run_status_sensor,
    sensor,
)

from datalake_assets.orchestration import sensors as sn
from datalake_assets.ingest.segment_import import SegmentImporter, hour_ranges
from datalake_assets.ingest.segment_layout import day_ms_of, day_of, segment_source_dir
from datalake_assets.ingest.segment_listing import (
    DEFAULT_LIST_LIMIT,
    SegmentLister,
    SegmentListing,
    segment_lister_for,
)
from datalake_assets.settings import AutomationSettings, LakeSettings, SourceSettings
from datalake_assets.spec import layout
from datalake_assets.spec.layout import ArchiveHour

IMPORT_ASSET = "segment_import"
CHECK_ALL_FILES = "all_files_imported"
IMPORT_TRIGGER = "segment_import"  # TRIGGER_TAG of the syncs requested after an import run
IMPORT_RUN_TAG = "datalake/import_run"
# The run tags of a single-run backfill of a partition range (Dagster's documented tag names;
# its constants live in the private dagster._core.storage.tags).
ASSET_PARTITION_RANGE_START_TAG = "dagster/asset_partition_range_start"
ASSET_PARTITION_RANGE_END_TAG = "dagster/asset_partition_range_end"
# Imports and the syncs they lead to share the backfills' priority: the archive sensor's hourly
# syncs (priority 1) go first, and a long history interleaves imports and syncs (first come,
# first served) instead of queueing every import before the first sync.
IMPORT_PRIORITY = "0"
SYNC_PRIORITY = "0"
HANDOFF_MARGIN_HOURS = 2  # hours this close to the archive sensor's window: requested here too
CURSOR_VERSION = 1


def import_job_name(source: SourceSettings) -> str:
    return f"{source.slug}_segment_import_job"


def import_sensor_name(source: SourceSettings) -> str:
    return f"{source.slug}_segment_import_sensor"


def import_sync_sensor_name(source: SourceSettings) -> str:
    return f"{source.slug}_segment_import_sync_sensor"


def import_partitions(source: SourceSettings) -> DailyPartitionsDefinition:
    """Received days from the source's start; today included (its folder is being written)."""
    return DailyPartitionsDefinition(start_date=ArchiveHour.parse(source.start).day,
                                     timezone="UTC", end_offset=1)


def _status(auto: AutomationSettings) -> DefaultSensorStatus:
    return DefaultSensorStatus.RUNNING if auto.sensors == "running" else DefaultSensorStatus.STOPPED


# ----------------------------------------------------------------------------------- the asset


def build_import_asset(settings: LakeSettings, source: SourceSettings,
                       lister: SegmentLister | None = None) -> AssetsDefinition:
    key = AssetKey([source.slug, IMPORT_ASSET])
    folder = segment_source_dir(source.segment_archive, source.segment_source_id)

    @asset(
        key=key,
        partitions_def=import_partitions(source),
        group_name=source.slug,
        kinds={"s3" if "://" in folder else "json"},
        check_specs=[AssetCheckSpec(
            CHECK_ALL_FILES, asset=key,
            description="Every file of the day folder was read to its end and imported",
        )],
        description=(
            f"Segment's S3-destination archive {folder}/<day epoch ms>/*.gz, re-partitioned "
            f"by receivedAt hour into {layout.join(settings.archive_root, source.id)}."
        ),
    )
    def segment_import(context):  # an AssetExecutionContext (a string annotation is refused)
        importer = SegmentImporter.for_source(settings.archive_root, source, lister=lister)
        report = importer.import_day(context.partition_key)
        s = report.summary()
        for f in report.failures:
            context.log.error(f"{f.day}/{f.name} not imported: {f.error}")
        context.log.info(
            f"{s['files']} files: {s['files_imported']} imported, {s['files_unchanged']} "
            f"unchanged, {s['files_failed']} failed; {s['lines_in']} lines; "
            f"{len(s['hours_changed'])} archive hours changed"
        )
        failures = MetadataValue.json(s["failures"])
        return MaterializeResult(
            metadata={
                "files": s["files"],
                "files_imported": s["files_imported"],
                "files_unchanged": s["files_unchanged"],
                "files_failed": s["files_failed"],
                "lines_in": s["lines_in"],
                "unrouted": MetadataValue.json(s["unrouted"]),
                "hours_changed": MetadataValue.json(s["hours_changed"]),
                "ignored_files": s["ignored_files"],
                "path": MetadataValue.path(f"{folder}/{day_ms_of(context.partition_key)}"),
            },
            check_results=[AssetCheckResult(
                check_name=CHECK_ALL_FILES, passed=not report.failures,
                severity=AssetCheckSeverity.ERROR, metadata={"failures": failures},
            )],
        )

    return segment_import


def build_import_job(source: SourceSettings, import_asset: AssetsDefinition) -> sn.AssetJob:
    return define_asset_job(
        import_job_name(source), selection=[import_asset.key],
        description=f"Import received days of Segment's archive into source {source.id}.",
    )


# ------------------------------------------------------------------------------ import sensor


@dataclass
class ImportCursor:
    """``{"v": 1, "pos": "2026-11-19", "fp": {"2026-11-20": "<fingerprint>", ...}}``."""

    position: int | None = None  # list from this day (epoch ms); None: from the source's start
    fingerprints: dict[int, str] = field(default_factory=dict)

    @staticmethod
    def parse(text: str | None) -> ImportCursor:
        if not text:
            return ImportCursor()
        try:
            data = json.loads(text)
            if data.get("v") != CURSOR_VERSION:
                raise ValueError(f"unknown cursor version {data.get('v')!r}")
            pos = data.get("pos")
            return ImportCursor(day_ms_of(pos) if pos else None,
                                {day_ms_of(d): str(fp) for d, fp in data.get("fp", {}).items()})
        except (ValueError, TypeError, AttributeError) as e:
            raise ValueError(
                f"import sensor cursor not understood ({e}): {text[:200]!r}. Resetting it in "
                "the UI makes the sensor list Segment's archive from the source's start again "
                "(files already imported are skipped)."
            ) from None

    def serialize(self) -> str:
        return json.dumps({
            "v": CURSOR_VERSION,
            "pos": day_of(self.position) if self.position is not None else None,
            "fp": {day_of(d): fp for d, fp in sorted(self.fingerprints.items())},
        }, separators=(",", ":"))


@dataclass(frozen=True)
class DayRequest:
    day_ms: int
    files: int
    bytes: int
    fingerprint: str
    previous: str | None  # fingerprint requested before (files added or changed), or None

    @property
    def day(self) -> str:
        return day_of(self.day_ms)


@dataclass
class DayEvaluation:
    requests: list[DayRequest]
    deferred: int
    unchanged: int
    cursor: ImportCursor


def _floor_day(ts: datetime) -> int:
    return day_ms_of(ts.strftime("%Y-%m-%d"))


def evaluate_days(listing: SegmentListing, cursor: ImportCursor, *, start_ms: int,
                  now: datetime, recheck_hours: int, budget: int) -> DayEvaluation:
    """What to request and the next cursor. Pure. The position only moves over days that
    were listed and requested: to the oldest of the re-check window's first day, the first
    day deferred (budget) and where a cut listing stopped."""
    position = max(cursor.position if cursor.position is not None else start_ms, start_ms)
    today = _floor_day(now)
    requests: list[DayRequest] = []
    deferred: list[int] = []
    unchanged = 0
    fingerprints = dict(cursor.fingerprints)
    for ms in sorted(listing.days):
        files = listing.days[ms]
        if ms < position or ms > today or not files:
            continue
        fp = sn.fingerprint(sn.ArchiveFile(f.name, f.size, f.version) for f in files)
        previous = fingerprints.get(ms)
        if previous == fp:
            unchanged += 1
            continue
        if len(requests) >= budget:
            deferred.append(ms)
            continue
        requests.append(DayRequest(ms, len(files), sum(f.size for f in files), fp, previous))
        fingerprints[ms] = fp
    limits = [_floor_day(now - timedelta(hours=recheck_hours)), *deferred[:1]]
    if listing.truncated_at is not None:
        limits.append(listing.truncated_at)
    position = max(position, min(limits))
    kept = {d: fp for d, fp in fingerprints.items() if d >= position}
    return DayEvaluation(requests, len(deferred), unchanged, ImportCursor(position, kept))


def build_import_sensor(
    settings: LakeSettings,
    source: SourceSettings,
    import_job: sn.AssetJob,
    *,
    clock: sn.Clock = sn.utc_now,
    lister: SegmentLister | None = None,
    list_limit: int = DEFAULT_LIST_LIMIT,
) -> SensorDefinition:
    auto = settings.automation
    start_ms = day_ms_of(ArchiveHour.parse(source.start).day)
    folder = segment_source_dir(source.segment_archive, source.segment_source_id)
    jname = import_job_name(source)
    listers: list[SegmentLister] = [lister] if lister is not None else []

    def get_lister() -> SegmentLister:
        if not listers:  # created at the first tick: loading the code location never lists
            listers.append(segment_lister_for(source.segment_archive))
        return listers[0]

    @sensor(
        name=import_sensor_name(source),
        job=import_job,
        minimum_interval_seconds=auto.interval_seconds,
        default_status=_status(auto),
        description=(
            f"Lists new or changed day folders of {folder} (re-checking the last "
            f"{auto.recheck_hours} h) and requests {jname} for each."
        ),
    )
    def segment_import_sensor(context: SensorEvaluationContext) -> SensorResult | SkipReason:
        cursor = ImportCursor.parse(context.cursor)
        now = sn._clock_time(clock)
        queued = sn._queued_runs(context, jname)
        budget = auto.max_queued_runs - queued
        if budget <= 0:
            return SkipReason(
                f"{queued} runs of {jname} requested by this sensor are still queued "
                f"(max_queued_runs = {auto.max_queued_runs}): listing again once they start"
            )
        since = max(cursor.position if cursor.position is not None else start_ms, start_ms)
        listing = get_lister().list_days(source.segment_archive, source.segment_source_id,
                                         since, _floor_day(now), limit=list_limit)
        result = evaluate_days(listing, cursor, start_ms=start_ms, now=now,
                               recheck_hours=auto.recheck_hours, budget=budget)
        new_cursor = result.cursor.serialize()
        seen = (f"listed {folder} from {day_of(since)} ({listing.calls} listings, "
                f"{listing.entries} entries, {len(listing.days)} day folders)")
        if listing.invalid:
            shown = ", ".join(listing.invalid[:10])
            context.log.warning(f"skipped folders that are not a day's epoch ms: {shown}")
        context.log.info(f"{seen}: {len(result.requests)} to import, {result.unchanged} "
                         f"unchanged, {result.deferred} deferred")
        if not result.requests:
            why = [f"nothing new or changed: {seen}" if listing.days
                   else f"no Segment day folders under {folder} from {day_of(since)} on"]
            if listing.invalid:
                why.append(f"{len(listing.invalid)} folders are not a day's epoch ms "
                           f"({listing.invalid[0]!r}, ...): skipped")
            return SensorResult(skip_reason="; ".join(why), cursor=new_cursor)
        return SensorResult(
            run_requests=[
                RunRequest(
                    run_key=f"{source.id}:segment:{r.day}:{r.fingerprint}",
                    partition_key=r.day,
                    tags={sn.TRIGGER_TAG: "sensor", sn.PRIORITY_TAG: IMPORT_PRIORITY,
                          sn.FINGERPRINT_TAG: r.fingerprint},
                )
                for r in result.requests
            ],
            cursor=new_cursor,
        )

    return segment_import_sensor


# ------------------------------------------------------------------- syncs after an import run


def changed_hours_of_run(instance: Any, run_id: str, key: AssetKey) -> list[ArchiveHour]:
    """The ``hours_changed`` that a run's materializations of ``key`` recorded."""
    conn = instance.get_records_for_run(run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION)
    hours: set[ArchiveHour] = set()
    for record in conn.records:
        mat = record.event_log_entry.asset_materialization
        if mat is None or mat.asset_key != key or "hours_changed" not in mat.metadata:
            continue
        hours.update(ArchiveHour.parse(h) for h in mat.metadata["hours_changed"].value)
    return sorted(hours)


def handoff_hour(now: datetime, automation: AutomationSettings) -> ArchiveHour:
    """The archive sensor sees (again) every hour from about here on; the import path syncs
    the hours before it (with a margin of overlap, never a gap)."""
    return ArchiveHour.of(now - timedelta(hours=automation.recheck_hours - HANDOFF_MARGIN_HOURS))


def sync_requests_after_import(
    source: SourceSettings,
    hours: Sequence[ArchiveHour],
    *,
    run_id: str,
    now: datetime,
    automation: AutomationSettings,
) -> tuple[list[RunRequest], list[ArchiveHour]]:
    """``(run requests of <slug>_sync_job, hours left to the archive sensor)`` for the hours an
    import run changed. Hours before the source's start (no partition) are not requested."""
    start = ArchiveHour.parse(source.start)
    limit = min(handoff_hour(now, automation), ArchiveHour.of(now))  # the open hour: not yet
    wanted = [h for h in hours if start <= h < limit]
    left = [h for h in hours if h >= limit]
    tags = {sn.TRIGGER_TAG: IMPORT_TRIGGER, sn.PRIORITY_TAG: SYNC_PRIORITY,
            IMPORT_RUN_TAG: run_id}
    requests = []
    for first, last in hour_ranges(wanted, automation.backfill_hours_per_run):
        run_key = f"{source.id}:import:{run_id}:{first}"
        if first == last:
            requests.append(RunRequest(run_key=run_key, partition_key=first.partition_key,
                                       tags=tags))
        else:
            requests.append(RunRequest(run_key=run_key, tags={
                **tags, ASSET_PARTITION_RANGE_START_TAG: first.partition_key,
                ASSET_PARTITION_RANGE_END_TAG: last.partition_key}))
    return requests, left


def build_import_sync_sensor(
    settings: LakeSettings,
    source: SourceSettings,
    import_job: sn.AssetJob,
    sync_job: sn.AssetJob,
    *,
    clock: sn.Clock = sn.utc_now,
) -> SensorDefinition:
    auto = settings.automation
    key = AssetKey([source.slug, IMPORT_ASSET])

    @run_status_sensor(
        name=import_sync_sensor_name(source),
        run_status=DagsterRunStatus.SUCCESS,
        monitored_jobs=[import_job],
        request_job=sync_job,
        minimum_interval_seconds=auto.interval_seconds,
        default_status=_status(auto),
        description=(
            f"After each successful {import_job_name(source)} run, requests "
            f"{sn.job_name(source)} for the hours it changed that are older than the archive "
            f"sensor's re-check window ({auto.recheck_hours} h)."
        ),
    )
    def import_sync_sensor(context: RunStatusSensorContext):
        run = context.dagster_run
        hours = changed_hours_of_run(context.instance, run.run_id, key)
        requests, left = sync_requests_after_import(
            source, hours, run_id=run.run_id, now=sn._clock_time(clock), automation=auto)
        context.log.info(
            f"import run {run.run_id} changed {len(hours)} hours: {len(requests)} sync runs "
            f"requested, {len(left)} recent hours left to {sn.sensor_name(source)}"
        )
        if not requests:
            return SkipReason(f"import run {run.run_id}: no hour to sync here "
                              f"({len(hours)} changed, {len(left)} left to the archive sensor)")
        return requests

    return import_sync_sensor


def build_import_automation(
    settings: LakeSettings,
    source: SourceSettings,
    sync_job: sn.AssetJob,
    *,
    clock: sn.Clock = sn.utc_now,
    lister: SegmentLister | None = None,
) -> tuple[list[AssetsDefinition], list[sn.AssetJob], list[SensorDefinition]]:
    """The import asset, its job and both sensors of a source with a ``segment_archive``."""
    import_asset = build_import_asset(settings, source, lister)
    job = build_import_job(source, import_asset)
    return [import_asset], [job], [
        build_import_sensor(settings, source, job, clock=clock, lister=lister),
        build_import_sync_sensor(settings, source, job, sync_job, clock=clock),
    ]

