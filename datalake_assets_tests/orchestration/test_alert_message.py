"""What an alert says (orchestration/alerts/: alert_message.py, run_alerts.py,
check_alerts.py), from Dagster's own run and check records: pure, table-driven. Delivery
through the daemon: test_alerts_daemon.py."""

from __future__ import annotations

import pytest
from dagster import AssetCheckEvaluation, AssetCheckSeverity, AssetKey, DagsterRun

from datalake_assets.orchestration.alerts.alert_message import (
    RUN_FAILED,
    Alert,
    alert_text,
    email_message,
    webhook_payload,
)
from datalake_assets.orchestration.alerts.check_alerts import check_alerts
from datalake_assets.orchestration.alerts.run_alerts import run_failure_alert, run_source_hours
from datalake_assets.orchestration.automation.batch_sync import SOURCE_HOURS_TAG

UI = "http://dagster.example:3000"


@pytest.mark.parametrize(
    "tags, selection, expected",
    [
        # a batched sync names its source-hours
        (
            {SOURCE_HOURS_TAG: "web:2026-11-27T09 app:2026-11-27T09 web:2026-11-27T10"},
            None,
            ("app, web", "2026-11-27T09 2026-11-27T10"),
        ),
        # ... or summarizes a long list
        ({SOURCE_HOURS_TAG: "72 hours of 3 sources"}, None, ("", "72 hours of 3 sources")),
        # a run of a source's assets for one hour (the UI, a per-source sensor)
        ({"dagster/partition": "2026-11-27-09:00"}, ["web"], ("web", "2026-11-27-09:00")),
        # a backfill's range in one run
        (
            {
                "dagster/asset_partition_range_start": "2026-11-27-00:00",
                "dagster/asset_partition_range_end": "2026-11-27-23:00",
            },
            ["web"],
            ("web", "2026-11-27-00:00 .. 2026-11-27-23:00"),
        ),
        ({}, None, ("", "")),  # forget_person: no source, no hour
    ],
)
def test_a_runs_source_and_hours(tags, selection, expected):
    keys = {AssetKey([s, "pages"]) for s in selection} if selection else None
    run = DagsterRun(job_name="datalake_sync_job", tags=tags, asset_selection=keys)
    assert run_source_hours(run) == expected


def test_the_run_failure_alert():
    run = DagsterRun(
        job_name="forget_person", run_id="0123456789abcdef-run", tags={}, asset_selection=None
    )
    alert = run_failure_alert(run, ["", "Execution failed\n  Traceback ...", "other"], UI)
    assert alert == Alert(
        kind=RUN_FAILED,
        source="forget_person",  # no source: the job
        hour="",
        what="run 01234567 of forget_person failed: Execution failed",
        run_id="0123456789abcdef-run",
        link=f"{UI}/runs/0123456789abcdef-run",
        details="Execution failed\n  Traceback ...\nother",
    )
    assert alert_text(alert) == (
        "[datalake] Run failed: forget_person\n"
        "run 01234567 of forget_person failed: Execution failed\n"
        "Execution failed\n  Traceback ...\nother\n"
        f"{UI}/runs/0123456789abcdef-run"
    )
    payload = webhook_payload(alert)
    assert payload["text"] == alert_text(alert)
    assert {k: payload[k] for k in ("kind", "source", "hour", "run_id", "link")} == {
        "kind": "run_failed",
        "source": "forget_person",
        "hour": "",
        "run_id": "0123456789abcdef-run",
        "link": f"{UI}/runs/0123456789abcdef-run",
    }
    mail = email_message(alert, "lake@example.com", ("a@example.com", "b@example.com"))
    assert (mail["Subject"], mail["To"]) == (alert.title, "a@example.com, b@example.com")
    assert mail.get_content() == alert_text(alert) + "\n"


def evaluation(slug, asset, name, passed, severity, hour=None):
    return AssetCheckEvaluation(
        asset_key=AssetKey([slug, asset]),
        check_name=name,
        passed=passed,
        severity=severity,
        partition=hour,
        description=None if passed else f"FAILED for hour {hour}",
    )


def test_failed_blocking_checks_make_one_alert_per_source():
    err, warn = AssetCheckSeverity.ERROR, AssetCheckSeverity.WARN
    h9, h10 = "2026-11-27-09:00", "2026-11-27-10:00"
    alerts = check_alerts(
        [
            evaluation("web", "sync_reports", "completeness", False, err, h9),
            evaluation("web", "sync_reports", "completeness", False, err, h10),
            evaluation("web", "catalog", "in_step", False, err, h10),
            evaluation("web", "pages", "type_drift", False, warn, h9),  # warns only
            evaluation("app", "pages", "duplicates", True, err, h9),  # passed
        ],
        "run-1",
        UI,
    )
    (alert,) = alerts
    assert (alert.source, alert.hour, alert.link) == ("web", f"{h9} {h10}", f"{UI}/runs/run-1")
    assert alert.what == "blocking check failed: catalog:in_step, sync_reports:completeness"
    assert alert.details.splitlines() == [
        f"web/sync_reports:completeness [{h9}]: FAILED for hour {h9}",
        f"web/sync_reports:completeness [{h10}]: FAILED for hour {h10}",
        f"web/catalog:in_step [{h10}]: FAILED for hour {h10}",
    ]
    assert check_alerts([evaluation("app", "pages", "duplicates", True, err)], "", UI) == []
