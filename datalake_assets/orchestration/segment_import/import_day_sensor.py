"""The import sensor ``<slug>_segment_import_sensor``: lists Segment's day folders from its
cursor, fingerprints each day's files and requests the import job for each new or changed day
(``evaluate_days``, pure, decides; ``build_import_sensor`` wires it to Dagster)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from dagster import (
    RunRequest,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from datalake_assets.ingest.segment_layout import day_ms_of, day_of, segment_source_dir
from datalake_assets.ingest.segment_listing import (
    DEFAULT_LIST_LIMIT,
    SegmentLister,
    SegmentListing,
    segment_lister_for,
)
from datalake_assets.lake.listing import ArchiveFile, fingerprint
from datalake_assets.orchestration.automation import sensor_toolkit as kit
from datalake_assets.orchestration.segment_import.import_asset import (
    IMPORT_PRIORITY,
    import_job_name,
    import_sensor_name,
)
from datalake_assets.settings import LakeSettings, SourceSettings
from datalake_assets.spec.layout import ArchiveHour

CURSOR_VERSION = 1


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
            return ImportCursor(
                day_ms_of(pos) if pos else None,
                {day_ms_of(d): str(fp) for d, fp in data.get("fp", {}).items()},
            )
        except (ValueError, TypeError, AttributeError) as e:
            raise ValueError(
                f"import sensor cursor not understood ({e}): {text[:200]!r}. Resetting it in "
                "the UI makes the sensor list Segment's archive from the source's start again "
                "(files already imported are skipped)."
            ) from None

    def serialize(self) -> str:
        return json.dumps(
            {
                "v": CURSOR_VERSION,
                "pos": day_of(self.position) if self.position is not None else None,
                "fp": {day_of(d): fp for d, fp in sorted(self.fingerprints.items())},
            },
            separators=(",", ":"),
        )


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


def evaluate_days(
    listing: SegmentListing,
    cursor: ImportCursor,
    *,
    start_ms: int,
    now: datetime,
    recheck_hours: int,
    budget: int,
) -> DayEvaluation:
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
        fp = fingerprint(ArchiveFile(f.name, f.size, f.version) for f in files)
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
    import_job: kit.AssetJob,
    *,
    clock: kit.Clock = kit.utc_now,
    lister: SegmentLister | None = None,
    list_limit: int = DEFAULT_LIST_LIMIT,
) -> SensorDefinition:
    auto = settings.automation
    start_ms = day_ms_of(ArchiveHour.parse(source.start).day)
    folder = segment_source_dir(source.segment_archive, source.segment_source_id)
    jname = import_job_name(source)
    get_lister = kit.lazy_lister(lister, lambda: segment_lister_for(source.segment_archive))

    @sensor(
        name=import_sensor_name(source),
        job=import_job,
        minimum_interval_seconds=auto.interval_seconds,
        default_status=kit.sensor_status(auto),
        description=(
            f"Lists new or changed day folders of {folder} (re-checking the last "
            f"{auto.recheck_hours} h) and requests {jname} for each."
        ),
    )
    def segment_import_sensor(context: SensorEvaluationContext) -> SensorResult | SkipReason:
        cursor = ImportCursor.parse(context.cursor)
        now = kit.clock_time(clock)
        queued = kit.queued_runs(context, jname)
        budget = auto.max_queued_runs - queued
        if budget <= 0:
            return SkipReason(
                f"{queued} runs of {jname} requested by this sensor are still queued "
                f"(max_queued_runs = {auto.max_queued_runs}): listing again once they start"
            )
        since = max(cursor.position if cursor.position is not None else start_ms, start_ms)
        listing = get_lister().list_days(
            source.segment_archive,
            source.segment_source_id,
            since,
            _floor_day(now),
            limit=list_limit,
        )
        result = evaluate_days(
            listing,
            cursor,
            start_ms=start_ms,
            now=now,
            recheck_hours=auto.recheck_hours,
            budget=budget,
        )
        new_cursor = result.cursor.serialize()
        seen = (
            f"listed {folder} from {day_of(since)} ({listing.calls} listings, "
            f"{listing.entries} entries, {len(listing.days)} day folders)"
        )
        if listing.invalid:
            shown = ", ".join(listing.invalid[:10])
            context.log.warning(f"skipped folders that are not a day's epoch ms: {shown}")
        context.log.info(
            f"{seen}: {len(result.requests)} to import, {result.unchanged} "
            f"unchanged, {result.deferred} deferred"
        )
        if not result.requests:
            why = [
                f"nothing new or changed: {seen}"
                if listing.days
                else f"no Segment day folders under {folder} from {day_of(since)} on"
            ]
            if listing.invalid:
                why.append(
                    f"{len(listing.invalid)} folders are not a day's epoch ms "
                    f"({listing.invalid[0]!r}, ...): skipped"
                )
            return SensorResult(skip_reason="; ".join(why), cursor=new_cursor)
        return SensorResult(
            run_requests=[
                RunRequest(
                    run_key=f"{source.id}:segment:{r.day}:{r.fingerprint}",
                    partition_key=r.day,
                    tags={
                        kit.TRIGGER_TAG: "sensor",
                        kit.PRIORITY_TAG: IMPORT_PRIORITY,
                        kit.FINGERPRINT_TAG: r.fingerprint,
                    },
                )
                for r in result.requests
            ],
            cursor=new_cursor,
        )

    return segment_import_sensor
