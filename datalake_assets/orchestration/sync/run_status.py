"""A source's failed sync runs, as the Dagster instance records them (``datalake status``).

A run syncs a source's hours in one of two jobs: the source's own ``<slug>_sync_job`` (its
archive sensor, a backfill, the UI) or the batched ``datalake_sync_job``, whose
``datalake/source_hours`` tag lists ``<source id>:<hour>`` for each hour it syncs (or, past
the tag's length, only how many hours of how many sources: such a run is counted for every
source, as it may have been any of them).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from dagster import DagsterInstance, DagsterRunStatus, RunsFilter

from datalake_assets.orchestration.automation.batch_sync import BATCH_JOB, SOURCE_HOURS_TAG
from datalake_assets.orchestration.sync.sync_job import job_name
from datalake_assets.settings import SourceSettings

FAILED_WINDOW = timedelta(hours=24)


def _batch_run_is_of(source: SourceSettings, tags: dict[str, str]) -> bool:
    listed = tags.get(SOURCE_HOURS_TAG, "")
    if ":" not in listed:  # summarized (or missing): which sources is not known
        return True
    return any(item.rsplit(":", 1)[0] == source.id for item in listed.split())


def failed_runs(
    instance: DagsterInstance, source: SourceSettings, now: datetime | None = None
) -> list[str]:
    """The ids of the source's sync runs that failed in the 24 hours before ``now``, newest
    first."""
    now = (now or datetime.now(UTC)).astimezone(UTC)
    since = now - FAILED_WINDOW
    found: list[tuple[float, str]] = []
    for job in (job_name(source), BATCH_JOB):
        records = instance.get_run_records(
            RunsFilter(job_name=job, statuses=[DagsterRunStatus.FAILURE], updated_after=since)
        )
        for r in records:
            ended = r.end_time
            if ended is not None and not since.timestamp() <= ended <= now.timestamp():
                continue
            if job == BATCH_JOB and not _batch_run_is_of(source, r.dagster_run.tags):
                continue
            found.append((ended or r.update_timestamp.timestamp(), r.dagster_run.run_id))
    return [run_id for _, run_id in sorted(found, reverse=True)]
