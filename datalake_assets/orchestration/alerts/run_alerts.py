"""The alert of a failed run: which source and hours it synced, what failed, its link. Read
from the run's tags (a batched sync names its source-hours, ``batch_sync.SOURCE_HOURS_TAG``;
a partitioned run its partition) and its asset selection."""

from __future__ import annotations

from collections.abc import Sequence

from dagster import DagsterRun

from datalake_assets.orchestration.alerts.alert_message import RUN_FAILED, Alert, run_link
from datalake_assets.orchestration.automation.batch_sync import SOURCE_HOURS_TAG

PARTITION_TAG = "dagster/partition"
RANGE_TAGS = ("dagster/asset_partition_range_start", "dagster/asset_partition_range_end")


def run_source_hours(run: DagsterRun) -> tuple[str, str]:
    """(sources, hours) of a run, each as text ("" when the run does not say)."""
    listed = run.tags.get(SOURCE_HOURS_TAG, "")
    if listed and ":" in listed:  # "web:2026-11-27T09 app:2026-11-27T09", else a summary
        pairs = [item.split(":", 1) for item in listed.split()]
        sources = sorted({s for s, _ in pairs})
        hours = sorted({h for _, h in pairs})
        return ", ".join(sources), " ".join(hours)
    if listed:
        return "", listed
    sources = sorted({key.path[0] for key in run.asset_selection or ()})
    if run.tags.get(PARTITION_TAG):
        hours = run.tags[PARTITION_TAG]
    elif all(run.tags.get(t) for t in RANGE_TAGS):
        hours = f"{run.tags[RANGE_TAGS[0]]} .. {run.tags[RANGE_TAGS[1]]}"
    else:
        hours = ""
    return ", ".join(sources), hours


def run_failure_alert(run: DagsterRun, errors: Sequence[str], ui_url: str) -> Alert:
    sources, hours = run_source_hours(run)
    first = next((e.strip().splitlines()[0] for e in errors if e.strip()), "")
    return Alert(
        kind=RUN_FAILED,
        source=sources or run.job_name,
        hour=hours,
        what=f"run {run.run_id[:8]} of {run.job_name} failed" + (f": {first}" if first else ""),
        run_id=run.run_id,
        link=run_link(ui_url, run.run_id),
        details="\n".join(e.strip() for e in errors if e.strip()),
    )
