"""Alerts end to end, through the real daemon (``datalake dev``: webserver + ``dagster-daemon``,
the harness of dagster_ui.py), to a webhook receiver and an SMTP server on loopback
(support/alert_receivers.py), from a ``lake.toml`` whose ``[alerts]`` points at them:

* a sync fails for real: the catalog (Glue, at an endpoint nothing listens on) is down, so
  the archive sensor's batched run fails, and its blocking check ``completeness`` with it;
  both alerts arrive, by webhook and by email (the SMTP login's password from the
  environment variable ``smtp_password_env`` names), linking the run;
* a table stops arriving: its latest hour landed two hours ago (a materialization Dagster
  records with that timestamp) and ``freshness_hours = 1``: the daemon's freshness
  evaluation turns it to FAIL and the alert names the table and that hour.

One ``datalake dev`` for all cases; each waits for what it expects (a timeout is only the
failure's limit, nothing is timed).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from dagster import AssetKey, AssetMaterialization, DagsterInstance
from dagster._core.events import DagsterEvent, DagsterEventType, StepMaterializationData

from datalake_assets.spec.layout import ArchiveHour
from datalake_assets_tests.orchestration.dagster_ui import datalake_dev, free_port, poll
from datalake_assets_tests.support.alert_receivers import MailReceiver, WebhookReceiver
from datalake_assets_tests.support.archive_builders import msg, write_hour
from datalake_assets_tests.support.settings_files import write_lake_toml

pytestmark = [pytest.mark.dagster]

SOURCE = "web"
UI = "http://dagster.example:3000"
PASSWORD_ENV = "LAKE_ALERTS_SMTP_PASSWORD"
WAIT = 240.0  # the run starts a process and loads the code location on a busy 2-core machine


def write_settings(folder: Path, start: ArchiveHour, hook: str, smtp_port: int) -> Path:
    return write_lake_toml(
        folder,
        f'archive_root = "archive"\nlake_root = "lake"\n'
        "[automation]\ninterval_seconds = 10\nsettle_minutes = 0\n"
        '[catalog]\nbackend = "glue"\nglue_region = "us-east-1"\n'
        f'glue_endpoint_url = "http://127.0.0.1:{free_port()}"\n'  # down: nothing listens
        f'[alerts]\nwebhook_url = "{hook}"\nsmtp_host = "127.0.0.1"\nsmtp_port = {smtp_port}\n'
        'smtp_from = "lake@example.com"\nsmtp_to = ["oncall@example.com"]\n'
        f'smtp_user = "lake"\nsmtp_password_env = "{PASSWORD_ENV}"\nsmtp_starttls = false\n'
        f'freshness_hours = 1\nui_url = "{UI}"\n'
        f'[[sources]]\nid = "{SOURCE}"\nstart = "{start.partition_key}"\n',
    )


def landed_long_ago(home: Path, key: AssetKey, partition: str, hours_ago: float) -> None:
    """A materialization of ``key`` as Dagster records one, with the timestamp of
    ``hours_ago``: what the instance holds of a table whose last hour landed then."""
    with DagsterInstance.from_config(str(home / "dagster_home")) as instance:
        instance.report_dagster_event(
            DagsterEvent(
                event_type_value=DagsterEventType.ASSET_MATERIALIZATION.value,
                job_name="",
                event_specific_data=StepMaterializationData(
                    AssetMaterialization(asset_key=key, partition=partition)
                ),
            ),
            run_id="",
            timestamp=time.time() - hours_ago * 3600,
        )


def of_kind(hook: WebhookReceiver, kind: str) -> list[dict]:
    return [b for b in hook.bodies if b["kind"] == kind]


@pytest.mark.slow
def test_alerts_of_a_failed_sync_and_a_stale_table_arrive(
    tmp_path, monkeypatch, fake_aws_credentials
):
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    hour = ArchiveHour.parse((now - timedelta(hours=3)).strftime("%Y-%m-%dT%H"))
    write_hour(
        str(tmp_path / "archive"),
        SOURCE,
        str(hour),
        [msg(f"m{i}", str(hour), i, type="page", event=None) for i in range(5)],
    )
    monkeypatch.setenv(PASSWORD_ENV, "pw-from-the-environment")
    # the daemon's freshness evaluation every 5 s instead of 30 (Dagster's own variable)
    monkeypatch.setenv("FRESHNESS_DAEMON_INTERVAL_SECONDS", "5")
    with (
        WebhookReceiver() as hook,
        MailReceiver(login=("lake", "pw-from-the-environment")) as mail,
    ):
        settings = write_settings(tmp_path, hour, hook.url, mail.port)
        with datalake_dev(tmp_path, settings) as dev:
            # (1) the sync fails: the catalog is down
            poll("the run failure's alert", lambda: of_kind(hook, "run_failed"), WAIT, 0.5)
            poll("the failed check's alert", lambda: of_kind(hook, "check_failed"), 60, 0.5)
            failed = [r for r in dev.ui.runs() if r["status"] == "FAILURE"]
            assert len(failed) == 1, failed
            run_id = failed[0]["id"]
            (run,) = of_kind(hook, "run_failed")
            assert (run["source"], run["hour"], run["run_id"]) == (SOURCE, str(hour), run_id)
            assert run["link"] == f"{UI}/runs/{run_id}"
            assert run["what"].startswith(f"run {run_id[:8]} of datalake_sync_job failed")
            assert "glue" in run["text"].lower(), run["text"]  # the error says what is down
            (check,) = of_kind(hook, "check_failed")
            assert (check["source"], check["hour"]) == (SOURCE, hour.partition_key)
            assert check["what"] == "blocking check failed: sync_reports:completeness"
            assert (check["run_id"], check["link"]) == (run_id, f"{UI}/runs/{run_id}")
            poll("two emails", lambda: len(mail.messages) >= 2, 30, 0.5)
            subjects = sorted(m["Subject"] for m in mail.messages)
            assert subjects == [
                f"[datalake] Blocking check failed: {SOURCE} {hour.partition_key}",
                f"[datalake] Run failed: {SOURCE} {hour}",
            ]
            assert set(mail.logins) == {"lake"}  # with the password from the environment
            assert sorted(mail.bodies()) == sorted(b["text"] + "\n" for b in hook.bodies)

            # (2) a table stopped arriving: its latest hour landed two hours ago
            stale_hour = ArchiveHour.parse((now - timedelta(hours=2)).strftime("%Y-%m-%dT%H"))
            landed_long_ago(tmp_path, AssetKey([SOURCE, "pages"]), stale_hour.partition_key, 2)
            (stale,) = poll(
                "the freshness alert", lambda: of_kind(hook, "freshness_failed"), 90, 0.5
            )
            assert (stale["source"], stale["hour"]) == (SOURCE, stale_hour.partition_key)
            assert stale["what"] == "nothing new for more than 1 h (freshness failed): pages"
            poll("the freshness email", lambda: len(mail.messages) >= 3, 30, 0.5)
            assert mail.messages[-1]["Subject"] == (
                f"[datalake] Stopped arriving: {SOURCE} {stale_hour.partition_key}"
            )
        # nothing else was alerted: one failed run, its check, one stale table
        assert sorted(b["kind"] for b in hook.bodies) == [
            "check_failed",
            "freshness_failed",
            "run_failed",
        ]
