"""Archive sensors: one per source, they turn new or changed raw-archive hours into syncs
(``<slug>_archive_sensor``, requesting ``<slug>_sync_job``). What a tick decides, and why the
cursor stays bounded, is ``archive_cursor.py``; here, the Dagster sensor around it: list, decide,
record each requested hour's ``[<slug>, raw_archive]`` materialization, request the runs.
"""

from __future__ import annotations

from typing import Any

from dagster import (
    AssetKey,
    AssetMaterialization,
    MetadataValue,
    RunRequest,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from datalake_assets.lake.listing import DEFAULT_LIST_LIMIT, ArchiveLister, lister_for
from datalake_assets.orchestration.automation.archive_cursor import (
    HourRequest,
    SensorCursor,
    evaluate,
    recheck_window_start,
)
from datalake_assets.orchestration.automation.sensor_toolkit import (
    FINGERPRINT_TAG,
    PRIORITY_TAG,
    TRIGGER_TAG,
    AssetJob,
    Clock,
    clock_time,
    lazy_lister,
    queued_runs,
    sensor_status,
    utc_now,
)
from datalake_assets.orchestration.sync.sync_job import job_name
from datalake_assets.settings import LakeSettings, SourceSettings
from datalake_assets.spec import layout
from datalake_assets.spec.layout import ArchiveHour
from datalake_assets.spec.naming import RAW_ARCHIVE

SENSOR_PRIORITY = "1"  # hourly syncs go before queued backfill runs (priority 0)


def sensor_name(source: SourceSettings) -> str:
    return f"{source.slug}_archive_sensor"


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
        # a line in the terminal when it requests runs; an idle tick's reason is in the UI
        (context.log.info if result.requests else context.log.debug)(
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
