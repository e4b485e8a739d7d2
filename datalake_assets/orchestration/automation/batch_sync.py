"""Batched sensor runs: ONE run per sensor tick syncs every due source-hour (``[automation]
sensor_runs = "batched"``, the default with local compute).

Why: locally a run is a process, a JVM and, with the embedded Hive metastore, Derby's boot:
~20-30 s before the first row, whatever the hour's size, and one run at a time (Derby admits one
JVM). With one run per source-hour, 20 small sources took ~10 minutes of every hour; with one
run per tick they share one Spark session and one metastore, ~4 s a source
(``bench/bench_sources.py``, bench/README.md).

``datalake_archive_sensor`` lists every source's archive as the per-source sensors do
(``archive_cursor.evaluate``, one cursor per source inside its own), and requests
``datalake_sync_job`` with the due hours of every source as run config. Its op syncs source
after source with the run's one ``SparkCompute`` along the path of every sync in Dagster
(``sync/sync_hours.py``), which records what the source's own job would: the tables,
quarantine and report of each source-hour as materializations of the source's assets (their
partitions), and the checks' evaluations. A source whose
sync fails does not stop the others; the run fails at the end, naming it. Materializing from
the UI, backfills and replays still run the source's own ``<slug>_sync_job``.
"""

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dagster import (
    Config,
    Failure,
    MetadataValue,
    OpExecutionContext,
    RunRequest,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    in_process_executor,
    job,
    op,
    sensor,
)

from datalake_assets.lake.listing import DEFAULT_LIST_LIMIT, ArchiveLister, lister_for
from datalake_assets.orchestration.automation import archive_cursor as ac
from datalake_assets.orchestration.automation import archive_sensor as sn
from datalake_assets.orchestration.automation import sensor_toolkit as kit
from datalake_assets.orchestration.compute.spark_compute import SparkCompute
from datalake_assets.orchestration.sync.sync_hours import SyncFailed, sync_hours
from datalake_assets.settings import LakeSettings, SourceSettings
from datalake_assets.settings.orchestration_section import BATCH_SENSOR
from datalake_assets.spec.layout import ArchiveHour

BATCH_JOB = "datalake_sync_job"
SOURCE_HOURS_TAG = "datalake/source_hours"  # "<source>:<hour> ..." of a batched run
_TAG_MAX = 1000  # longer lists are summarized in the tag (the run config has them all)


class SourceHours(Config):
    source: str  # a source id of the settings
    hours: list[str]  # YYYY-MM-DDTHH, oldest first
    fingerprints: list[str] = []  # the archive fingerprint of each hour when requested


class DueHours(Config):
    items: list[SourceHours]


@dataclass(frozen=True)
class BatchSource:
    """What the batched job and sensor need of a source: its settings (start resolved) and its
    tables when the code location was loaded."""

    source: SourceSettings
    tables: tuple[str, ...]


def build_batch_job(settings: LakeSettings, sources: Sequence[BatchSource]) -> Any:
    """``datalake_sync_job``: one op that syncs the source-hours of its run config."""
    by_id = {s.source.id: s for s in sources}

    @op(
        name="sync_due_hours",
        pool="spark_local",
        out={},
        description="Syncs each source's due hours in turn with the run's one Spark session.",
    )
    def sync_due_hours(context: OpExecutionContext, config: DueHours, compute: SparkCompute):
        failed: list[str] = []
        for item in config.items:
            entry = by_id.get(item.source)
            if entry is None:
                failed.append(f"{item.source}: not a source of the settings any more")
                context.log.error(failed[-1])
                continue
            keys = [ArchiveHour.parse(h).partition_key for h in item.hours]
            try:
                # yielded source by source: what is synced is recorded even if a later fails
                yield from sync_hours(
                    context, settings, entry.source, list(entry.tables), keys, compute, replay=False
                )
            except SyncFailed as e:  # recorded; one source's failure must not stop the rest
                failed.append(str(e))
                context.log.exception(f"sync of {item.source} failed; going on with the rest")
        if failed:
            raise Failure(
                description=f"{len(failed)} of {len(config.items)} sources failed to sync "
                "(the others are synced; re-execute the run, or materialize the "
                "failed hours from their source's assets): " + "; ".join(failed),
                metadata={"failed": MetadataValue.json(failed)},
            )

    @job(
        name=BATCH_JOB,
        executor_def=in_process_executor,
        description="Syncs the due hours of every source that has some, in one run "
        "(requested by datalake_archive_sensor).",
    )
    def datalake_sync_job():
        sync_due_hours()

    return datalake_sync_job


# ---------------------------------------------------------------------------------- the sensor


def parse_cursor(text: str | None) -> dict[str, ac.SensorCursor]:
    """``{"v": 1, "sources": {<source id>: <a per-source sensor's cursor, as an object>}}``."""
    if not text:
        return {}
    try:
        data = json.loads(text)
        if data.get("v") != ac.CURSOR_VERSION:
            raise ValueError(f"unknown cursor version {data.get('v')!r}")
        return {k: ac.SensorCursor.parse(json.dumps(v)) for k, v in data["sources"].items()}
    except (ValueError, TypeError, AttributeError, KeyError) as e:
        raise ValueError(
            f"{BATCH_SENSOR} cursor not understood ({e}): {text[:200]!r}. Resetting it in the "
            "UI makes the sensor list every archive from its source's start again."
        ) from None


def serialize_cursor(cursors: dict[str, ac.SensorCursor]) -> str:
    sources = {k: json.loads(c.serialize()) for k, c in sorted(cursors.items())}
    return json.dumps({"v": ac.CURSOR_VERSION, "sources": sources}, separators=(",", ":"))


def build_batch_sensor(
    settings: LakeSettings,
    sources: Sequence[BatchSource],
    job_def: Any,
    *,
    clock: kit.Clock = kit.utc_now,
    lister: ArchiveLister | None = None,
    list_limit: int = DEFAULT_LIST_LIMIT,
) -> SensorDefinition:
    """``datalake_archive_sensor`` (module docstring). ``clock`` and ``lister``: as for
    ``archive_sensor.build_archive_sensor``."""
    auto = settings.automation
    get_lister = kit.lazy_lister(lister, lambda: lister_for(settings.archive_root))

    @sensor(
        name=BATCH_SENSOR,
        job=job_def,
        minimum_interval_seconds=auto.interval_seconds,
        default_status=kit.sensor_status(auto),
        description=(
            f"Lists new or changed hours of every source's archive under "
            f"{settings.archive_root} (re-checking the last {auto.recheck_hours} h "
            f"for late files) and requests ONE {BATCH_JOB} run for all hours due "
            f"({auto.settle_minutes} min after they close)."
        ),
    )
    def datalake_archive_sensor(context: SensorEvaluationContext) -> SensorResult | SkipReason:
        queued = kit.queued_runs(context, BATCH_JOB)
        if queued:
            return SkipReason(
                f"a {BATCH_JOB} run requested by this sensor is still queued: "
                "listing again once it starts"
            )
        previous = parse_cursor(context.cursor)
        cursors: dict[str, ac.SensorCursor] = {}  # sources gone from the settings are dropped
        now = kit.clock_time(clock)
        items, events, notes = [], [], []
        for entry in sources:
            source = entry.source
            start = ArchiveHour.parse(source.start)
            cursor = previous.get(source.id) or own_sensor_cursor(context, source)
            since = cursor.listing_start(start, ac.recheck_window_start(now, auto))
            listing = get_lister().list_hours(settings.archive_root, source.id, since, list_limit)
            result = ac.evaluate(
                listing,
                cursor,
                start=start,
                now=now,
                automation=auto,
                budget=auto.backfill_hours_per_run,
            )
            cursors[source.id] = result.cursor
            notes.append(
                f"{source.id}: {len(result.requests)} to sync, {result.unchanged} "
                f"unchanged, {len(result.waiting)} waiting, {result.deferred} deferred"
            )
            if result.requests:
                items.append(
                    {
                        "source": source.id,
                        "hours": [str(r.hour) for r in result.requests],
                        "fingerprints": [r.fingerprint for r in result.requests],
                    }
                )
                events += [sn.raw_archive_event(settings, source, r) for r in result.requests]
        cursor_text = serialize_cursor(cursors)
        if not items:  # an idle tick says so in the UI (the skip reason), not in the terminal
            return SensorResult(
                skip_reason="nothing new or changed and due: " + "; ".join(notes),
                cursor=cursor_text,
            )
        context.log.info("; ".join(notes))
        return SensorResult(
            run_requests=[batch_run_request(items)], asset_events=events, cursor=cursor_text
        )

    return datalake_archive_sensor


def own_sensor_cursor(context: SensorEvaluationContext, source: SourceSettings) -> ac.SensorCursor:
    """Where a source's own sensor (``sensor_runs = "per_source"``, before a switch to batched
    runs) stopped, if the instance remembers it: the batched sensor goes on from there instead
    of listing, and syncing again, every hour since the source's start. Else a new cursor."""
    name = sn.sensor_name(source)
    try:
        states = context.instance.all_instigator_state()
    except Exception:  # noqa: BLE001 - an instance without schedule storage: nothing to go on
        return ac.SensorCursor()
    for state in states:
        cursor = getattr(state.instigator_data, "cursor", None)
        if state.instigator_name == name and cursor:
            try:
                return ac.SensorCursor.parse(cursor)
            except ValueError:
                break
    return ac.SensorCursor()


def batch_run_request(items: list[dict]) -> RunRequest:
    """The run of ``items`` (``SourceHours`` as dicts); its key names the hours and their
    fingerprints, so a tick that sees nothing new never requests the same run twice."""
    key = hashlib.sha256(json.dumps(items, sort_keys=True).encode()).hexdigest()[:24]
    listed = " ".join(f"{i['source']}:{h}" for i in items for h in i["hours"])
    if len(listed) > _TAG_MAX:
        listed = f"{sum(len(i['hours']) for i in items)} hours of {len(items)} sources"
    return RunRequest(
        run_key=f"batch:{key}",
        run_config={"ops": {"sync_due_hours": {"config": {"items": items}}}},
        tags={
            kit.TRIGGER_TAG: "sensor",
            kit.PRIORITY_TAG: sn.SENSOR_PRIORITY,
            SOURCE_HOURS_TAG: listed,
        },
    )
