"""The event-log alerts (orchestration/alerts/event_alerts.py, the event sensor of
alert_definitions.py) on a real Dagster instance (SQLite, sharded by run, as ``datalake dev``
has it): the events are Dagster's own runless ones (a check evaluation as ``datalake sync``
records it, a materialization, the freshness change the daemon writes), the alerts reach a
webhook and an SMTP server on loopback, and a destination that fails is logged, never
raised. Through the daemon, with a failed run: test_alerts_daemon.py."""

from __future__ import annotations

import pytest
from dagster import (
    AssetCheckEvaluation,
    AssetCheckSeverity,
    AssetKey,
    AssetMaterialization,
    build_sensor_context,
    instance_for_test,
)
from dagster._core.definitions.freshness import FreshnessState, FreshnessStateChange

from datalake_assets.definitions import build_definitions
from datalake_assets.orchestration.alerts.alert_definitions import EVENT_SENSOR
from datalake_assets.orchestration.sync.lake_state import LakeState, SourceState
from datalake_assets.spec.naming import STANDARD_TABLES
from datalake_assets_tests.orchestration.dagster_ui import free_port
from datalake_assets_tests.support.alert_receivers import MailReceiver, WebhookReceiver
from datalake_assets_tests.support.settings_files import load_lake_toml

pytestmark = [pytest.mark.dagster]

HOUR = "2026-11-27-09:00"
UI = "http://dagster.example:3000"


def settings_text(webhook: str, smtp_port: int) -> str:
    return (
        'archive_root = "archive"\nlake_root = "lake"\n'
        '[catalog]\nbackend = "none"\n'
        f'[alerts]\nwebhook_url = "{webhook}"\nsmtp_host = "127.0.0.1"\n'
        f'smtp_port = {smtp_port}\nsmtp_from = "lake@example.com"\n'
        'smtp_to = ["oncall@example.com"]\nsmtp_starttls = false\n'
        f'freshness_hours = 2\nui_url = "{UI}/"\n'
        '[[sources]]\nid = "web"\nstart = "2026-11-20-00:00"\n'
    )


def event_sensor(settings):
    state = LakeState({"web": SourceState(tuple(sorted(STANDARD_TABLES)), "2026-11-20-00:00")})
    defs = build_definitions(settings, state=state)
    return next(s for s in defs.sensors if s.name == EVENT_SENSOR)


def tick(sensor, instance, cursor):
    result = sensor(build_sensor_context(instance=instance, cursor=cursor))
    return result.cursor


def write_events(instance) -> None:
    report = AssetKey(["web", "sync_reports"])
    pages = AssetKey(["web", "pages"])
    instance.report_runless_asset_event(
        AssetCheckEvaluation(
            asset_key=report,
            check_name="completeness",
            passed=False,
            severity=AssetCheckSeverity.ERROR,
            partition=HOUR,
            description=f"FAILED for hour {HOUR}",
        )
    )
    # not alerts: a check that passed, and one that only warns
    instance.report_runless_asset_event(
        AssetCheckEvaluation(
            asset_key=pages, check_name="duplicates", passed=True, severity=AssetCheckSeverity.ERROR
        )
    )
    instance.report_runless_asset_event(
        AssetCheckEvaluation(
            asset_key=pages, check_name="type_drift", passed=False, severity=AssetCheckSeverity.WARN
        )
    )
    instance.report_runless_asset_event(AssetMaterialization(asset_key=pages, partition=HOUR))
    for key, state in ((pages, FreshnessState.FAIL), (report, FreshnessState.PASS)):
        instance.report_runless_asset_event(
            FreshnessStateChange(
                key=key,
                new_state=state,
                previous_state=FreshnessState.PASS,
                state_change_timestamp=0.0,
            )
        )


@pytest.mark.slow
def test_failed_checks_and_stale_tables_reach_both_destinations(tmp_path):
    with WebhookReceiver() as hook, MailReceiver() as mail, instance_for_test() as instance:
        sensor = event_sensor(load_lake_toml(tmp_path, settings_text(hook.url, mail.port)))
        instance.report_runless_asset_event(  # before the sensor's first tick: not news
            AssetCheckEvaluation(
                asset_key=AssetKey(["web", "sync_reports"]),
                check_name="completeness",
                passed=False,
                severity=AssetCheckSeverity.ERROR,
            )
        )
        cursor = tick(sensor, instance, None)
        assert hook.bodies == [] and mail.messages == []
        write_events(instance)
        cursor = tick(sensor, instance, cursor)
        kinds = [b["kind"] for b in hook.bodies]
        assert kinds == ["check_failed", "freshness_failed"], hook.bodies
        check, stale = hook.bodies
        assert (check["source"], check["hour"], check["run_id"]) == ("web", HOUR, "")
        assert check["what"] == "blocking check failed: sync_reports:completeness"
        assert check["link"] == f"{UI}/assets/web/sync_reports"
        assert check["text"].startswith(f"[datalake] Blocking check failed: web {HOUR}\n")
        assert f"FAILED for hour {HOUR}" in check["text"]
        assert (stale["source"], stale["hour"]) == ("web", HOUR)
        assert stale["what"] == "nothing new for more than 2 h (freshness failed): pages"
        subjects = [m["Subject"] for m in mail.messages]
        assert subjects == [
            f"[datalake] Blocking check failed: web {HOUR}",
            f"[datalake] Stopped arriving: web {HOUR}",
        ]
        assert mail.messages[0]["To"] == "oncall@example.com"
        assert mail.bodies()[0] == check["text"] + "\n"
        # each event is alerted once
        tick(sensor, instance, cursor)
        assert len(hook.bodies) == 2 and len(mail.messages) == 2


@pytest.mark.slow
def test_a_failing_destination_is_logged_and_the_sensor_goes_on(tmp_path, capfd):
    token = "T000-s3cr3t"
    with WebhookReceiver(status=500) as hook, instance_for_test() as instance:
        closed = free_port()  # nothing listens: the SMTP server is down
        text = settings_text(f"{hook.url}/{token}", closed)
        sensor = event_sensor(load_lake_toml(tmp_path, text))
        cursor = tick(sensor, instance, None)
        write_events(instance)
        capfd.readouterr()
        cursor = tick(sensor, instance, cursor)
        assert len(hook.bodies) == 2  # tried, answered 500
        # the sensor's log (what the UI shows of a tick): an error line per destination
        errors = [line for line in capfd.readouterr().err.splitlines() if " - ERROR - " in line]
        assert sum("not sent to the webhook at 127.0.0.1" in e for e in errors) == 2, errors
        assert sum(f"not sent by email through 127.0.0.1:{closed}" in e for e in errors) == 2
        assert not any(token in e for e in errors)  # the webhook's secret is never logged
        tick(sensor, instance, cursor)  # the events were read: not tried again and again
        assert len(hook.bodies) == 2
