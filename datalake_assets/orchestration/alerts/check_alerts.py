"""The alert of failed blocking checks: evaluations not passed with severity ERROR (a sync's
``completeness`` and ``duplicates``, the catalog's ``in_step``, a dbt test), one alert per
source and run, naming each check, its asset and hour. A run's come from its event log when
it fails (Dagster fails the step of a failed blocking check); runless ones (``datalake sync``
from the command line) from the event sensor (``event_alerts.py``)."""

from __future__ import annotations

from collections.abc import Iterable

from dagster import AssetCheckEvaluation, DagsterEventType, DagsterInstance

from datalake_assets.orchestration.alerts.alert_message import (
    CHECK_FAILED,
    Alert,
    asset_link,
    run_link,
)

_SHOWN = 10  # checks named in the alert's line; the details list them all


def failed_blocking(evaluation: AssetCheckEvaluation) -> bool:
    return not evaluation.passed and evaluation.severity.value == "ERROR"


def run_check_evaluations(instance: DagsterInstance, run_id: str) -> list[AssetCheckEvaluation]:
    """The check evaluations a run logged."""
    entries = instance.all_logs(run_id, of_type=DagsterEventType.ASSET_CHECK_EVALUATION)
    return [e.dagster_event.event_specific_data for e in entries if e.dagster_event]


def check_alerts(
    evaluations: Iterable[AssetCheckEvaluation], run_id: str, ui_url: str
) -> list[Alert]:
    """One alert per source with failed blocking checks among ``evaluations`` (of run
    ``run_id``; "" for runless ones)."""
    by_source: dict[str, list[AssetCheckEvaluation]] = {}
    for e in evaluations:
        if failed_blocking(e):
            by_source.setdefault(e.asset_key.path[0], []).append(e)
    out = []
    for source, failed in sorted(by_source.items()):
        names = sorted({f"{'/'.join(e.asset_key.path[1:])}:{e.check_name}" for e in failed})
        hours = sorted({e.partition for e in failed if e.partition})
        path = list(failed[0].asset_key.path)
        shown = ", ".join(names[:_SHOWN]) + (
            f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else ""
        )
        out.append(
            Alert(
                kind=CHECK_FAILED,
                source=source,
                hour=" ".join(hours),
                what=f"blocking check failed: {shown}",
                run_id=run_id,
                link=run_link(ui_url, run_id) if run_id else asset_link(ui_url, path),
                details="\n".join(
                    f"{'/'.join(e.asset_key.path)}:{e.check_name}"
                    + (f" [{e.partition}]" if e.partition else "")
                    + (f": {e.description}" if e.description else "")
                    for e in failed
                ),
            )
        )
    return out
