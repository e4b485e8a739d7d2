"""The alert sensors (``docs/guides/alerts.md``): ``datalake_run_failure_alerts`` (a failed
run of this code location, and its failed blocking checks) and ``datalake_event_alerts`` (a
table whose freshness failed, a failed blocking check recorded outside a run:
``event_alerts.py``). None when ``[alerts]`` has no destination.
They tick every ``[automation] interval_seconds`` and start as ``[automation] sensors`` says."""

from __future__ import annotations

from dagster import (
    Definitions,
    RunFailureSensorContext,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    run_failure_sensor,
    sensor,
)

from datalake_assets.orchestration.alerts.alert_senders import send_alert
from datalake_assets.orchestration.alerts.check_alerts import check_alerts, run_check_evaluations
from datalake_assets.orchestration.alerts.event_alerts import (
    EventCursor,
    read_events,
    stale_alerts,
)
from datalake_assets.orchestration.alerts.run_alerts import run_failure_alert
from datalake_assets.orchestration.automation.sensor_toolkit import sensor_status
from datalake_assets.settings import LakeSettings

RUN_FAILURE_SENSOR = "datalake_run_failure_alerts"
EVENT_SENSOR = "datalake_event_alerts"


def build_alert_definitions(settings: LakeSettings) -> Definitions:
    alerts = settings.alerts
    if not alerts.enabled:
        return Definitions()
    status = sensor_status(settings.automation)
    interval = settings.automation.interval_seconds

    @run_failure_sensor(
        name=RUN_FAILURE_SENSOR,
        minimum_interval_seconds=interval,
        default_status=status,
        description="Sends an alert for each failed run of this code location, and one for "
        "its failed blocking checks ([alerts]).",
    )
    def run_failure_alerts(context: RunFailureSensorContext):
        errors = [context.failure_event.message or ""] + [
            e.event_specific_data.error.message
            for e in context.get_step_failure_events()
            if e.event_specific_data is not None and e.event_specific_data.error is not None
        ]
        run = context.dagster_run
        outgoing = [run_failure_alert(run, errors, alerts.ui_url)]
        evaluations = run_check_evaluations(context.instance, run.run_id)
        outgoing += check_alerts(evaluations, run.run_id, alerts.ui_url)
        for alert in outgoing:
            sent = send_alert(alert, alerts, context.log)
            context.log.info(f"alert {alert.title!r} sent to {', '.join(sent) or 'nowhere'}")

    @sensor(
        name=EVENT_SENSOR,
        minimum_interval_seconds=interval,
        default_status=status,
        description="Sends an alert for each source whose tables' freshness failed ([alerts] "
        "freshness_hours), and for failed blocking checks recorded outside a run.",
    )
    def event_alerts(context: SensorEvaluationContext):
        first = not context.cursor
        cursor = EventCursor.parse(context.cursor, context.instance)
        if first:
            return SensorResult(cursor=cursor.to_text())
        checks, freshness = [], []
        for kind, record in read_events(context.instance, cursor):
            (checks if kind == "checks" else freshness).append(record)
        evaluations = [r.event_log_entry.dagster_event.event_specific_data for r in checks]
        outgoing = check_alerts(evaluations, "", alerts.ui_url)
        outgoing += stale_alerts(context.instance, freshness, alerts)
        for alert in outgoing:
            sent = send_alert(alert, alerts, context.log)
            context.log.info(f"alert {alert.title!r} sent to {', '.join(sent) or 'nowhere'}")
        if not outgoing:
            return SensorResult(skip_reason=SkipReason("nothing to alert"), cursor=cursor.to_text())
        return SensorResult(cursor=cursor.to_text())

    return Definitions(sensors=[run_failure_alerts, event_alerts])
