"""What the code location's sensors and schedules share: the run tags they set, the clock
they read (``clock``: tests and benchmarks pass their own), their default status (one switch,
``[automation] sensors``), how many of their runs wait in the queue, and a lister made at the
first tick (loading the code location never lists).

Used by the archive sensors (``archive_sensor.py``, ``batch_sync.py``), the Segment import's
sensors (``segment_import/``), the privacy jobs (``erasure/``), the models' sensor (``dbt/``)
and the table maintenance schedule (``maintenance/``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from dagster import (
    DagsterRunStatus,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    RunsFilter,
    SensorEvaluationContext,
)

from datalake_assets.settings.orchestration_section import AutomationSettings

TRIGGER_TAG = "datalake/trigger"
FINGERPRINT_TAG = "datalake/archive_fingerprint"
PRIORITY_TAG = "dagster/priority"  # the run queue launches higher priorities first

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
