"""The privacy jobs in Dagster (orchestration/erasure/privacy_jobs.py): definitions, the request-file
sensor against a temp lake, the launchpad's config, the compaction job in process, and the
forget job run in process on a request file."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dagster import (
    DagsterInstance,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    SensorResult,
    build_sensor_context,
)

from datalake_assets.definitions import build_definitions
from datalake_assets.lake import storage
from datalake_assets.lake.identities import index_table
from datalake_assets.orchestration.erasure import privacy_jobs as pj
from datalake_assets.privacy import inbox, summary, summary_lookup
from datalake_assets.spec import layout
from datalake_assets_tests.support.settings_files import load_lake_toml

pytestmark = pytest.mark.dagster
SECRET = "user_id=very-secret-person-7"
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def settings_for(tmp_path, sensors: str = "running"):
    return load_lake_toml(
        tmp_path,
        f'[automation]\nsensors = "{sensors}"\n'
        '[[sources]]\nid = "web"\nstart = "2026-01-01-00:00"\n'
        '[[sources]]\nid = "ios"\nstart = "2026-01-01-00:00"\n',
    )


def drop(settings, name: str, text: str, age_s: float = 60) -> str:
    location = layout.join(layout.privacy_inbox_dir(settings.lake_root), name)
    storage.write_bytes_atomic(location, text.encode())
    when = (NOW - timedelta(seconds=age_s)).timestamp()
    os.utime(location, (when, when))
    return location


@pytest.fixture()
def env(tmp_path):
    settings = settings_for(tmp_path)
    defs = build_definitions(settings, clock=lambda: NOW)
    with DagsterInstance.ephemeral() as instance:
        yield settings, defs, instance


def evaluate(env, now: datetime = NOW) -> SensorResult:
    """One tick of the registered sensor, at ``now`` (the code location's, rebuilt)."""
    settings, _, instance = env
    defs = build_definitions(settings, clock=lambda: now)
    sensor = defs.resolve_sensor_def(pj.SENSOR_NAME)
    return sensor(build_sensor_context(instance=instance, definitions=defs))


@pytest.mark.slow
def test_the_privacy_jobs_sensor_and_schedule_are_registered(tmp_path):
    defs = build_definitions(settings_for(tmp_path, sensors="stopped"))
    assert {pj.FORGET_JOB, pj.COMPACT_JOB} <= {j.name for j in defs.jobs}
    sensor = defs.resolve_sensor_def(pj.SENSOR_NAME)
    assert sensor.job_name == pj.FORGET_JOB
    assert sensor.default_status == DefaultSensorStatus.STOPPED
    schedule = defs.resolve_schedule_def(pj.COMPACT_SCHEDULE)
    assert schedule.job_name == pj.COMPACT_JOB and schedule.cron_schedule == pj.COMPACT_CRON
    assert schedule.default_status == DefaultScheduleStatus.STOPPED
    running = build_definitions(settings_for(tmp_path))
    assert (
        running.resolve_schedule_def(pj.COMPACT_SCHEDULE).default_status
        == DefaultScheduleStatus.RUNNING
    )


@pytest.mark.slow
def test_the_sensor_requests_one_run_per_settled_file_with_its_location_only(env):
    settings, defs, instance = env
    first = evaluate(env)
    assert not first.run_requests and "no request files" in first.skip_reason.skip_message
    a = drop(settings, "ticket-1.json", json.dumps({"identities": [SECRET]}), age_s=120)
    b = drop(settings, "ticket-2.txt", SECRET + "\n", age_s=60)
    drop(settings, ".ticket-3.json.tmp", "{}")  # being written: hidden
    drop(settings, "_draft.json", "{}")
    drop(settings, "notes.md", "not a request")
    drop(settings, "ticket-4.json", "{}", age_s=1)  # still settling
    result = evaluate(env)
    assert [r.run_config for r in result.run_requests] == [
        {"ops": {pj.FORGET_OP: {"config": {"request_file": location}}}} for location in (a, b)
    ]
    assert SECRET not in repr(result.run_requests)  # the location, never the content
    keys = [r.run_key for r in result.run_requests]
    assert keys[0].startswith("ticket-1.json:") and keys[1].startswith("ticket-2.txt:")
    assert all(
        r.tags["datalake/request_file"] in ("ticket-1.json", "ticket-2.txt")
        for r in result.run_requests
    )
    # Later, the settled file is requested too; a file written again gets a new run key.
    later = evaluate(env, NOW + timedelta(seconds=30))
    assert len(later.run_requests) == 3
    drop(settings, "ticket-1.json", json.dumps({"identities": [SECRET, "email=a@b.c"]}))
    again = evaluate(env, NOW + timedelta(seconds=30))
    assert again.run_requests[0].run_key != keys[0]


@pytest.mark.slow
def test_only_settled_files_count_and_all_settling_says_so(env):
    settings, defs, instance = env
    drop(settings, "ticket-9.json", "{}", age_s=2)
    result = evaluate(env)
    assert not result.run_requests
    assert "1 request files changed in the last" in result.skip_reason.skip_message


def test_launchpad_config_becomes_the_request_shape():
    config = pj.ForgetConfig(
        identities=[SECRET, "email=A@b.com"], follow_links=True, sources=["web"]
    )
    assert pj.request_dict(config) == {
        "identities": [SECRET, "email=A@b.com"],
        "follow_links": True,
        "sources": ["web"],
    }
    assert pj.request_dict(
        pj.ForgetConfig(identities=["anonymous_id=x"], request_id="t-1", erase=False, suppress=True)
    ) == {"identities": ["anonymous_id=x"], "request_id": "t-1", "erase": False, "suppress": True}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({}, "no identities"),
        ({"identities": [SECRET], "request_file": "x.json"}, "not both"),
        ({"request_file": "/etc/passwd.json"}, "directly in"),
        ({"request_file": "{inbox}/../key.json"}, "directly in"),
        ({"request_file": "{inbox}/sub/t.json"}, "directly in"),
        ({"request_file": "{inbox}/t.exe"}, "directly in"),
    ],
)
def test_the_job_refuses_a_config_it_cannot_use(env, config, message):
    settings, defs, _ = env
    inbox_dir = layout.privacy_inbox_dir(settings.lake_root)
    config = {k: v.format(inbox=inbox_dir) if isinstance(v, str) else v for k, v in config.items()}
    result = defs.resolve_job_def(pj.FORGET_JOB).execute_in_process(
        run_config={"ops": {pj.FORGET_OP: {"config": config}}}, raise_on_error=False
    )
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    assert message in failure.step_failure_data.error.message
    assert SECRET.split("=")[1] not in str(failure.step_failure_data.error.message)


@pytest.mark.slow
def test_the_compaction_job_compacts_every_source(env, tmp_path):
    settings, defs, _ = env
    for source, hours in (("web", ("2026010100", "2026020100")), ("ios", ("2026010105",))):
        for hour in hours:
            location = layout.join(
                layout.identity_index_root(settings.lake_root, source),
                f"hour={hour}",
                f"part-{hour}-r1-00000-000.parquet",
            )
            out = pa.BufferOutputStream()
            pq.write_table(index_table([("h" * 32, "pages", 1, None)]), out)
            storage.write_bytes_atomic(location, out.getvalue().to_pybytes())
    result = defs.resolve_job_def(pj.COMPACT_JOB).execute_in_process()
    assert result.success
    assert storage.exists(summary.summary_location(settings.lake_root, "web", "2026-02"))
    assert storage.exists(summary.summary_location(settings.lake_root, "ios", "2026-01"))
    found = summary_lookup.find_hours_compacted(settings.lake_root, "web", {"h" * 32})
    assert found.hours == {"2026010100", "2026020100"} and found.stale_hours == 0


@pytest.mark.slow
def test_finishing_a_file_leaves_a_receipt_and_no_clear_identity(env):
    settings, _, _ = env
    location = drop(settings, "ticket-5.json", json.dumps({"identities": [SECRET]}))
    inbox.write_receipt(settings.lake_root, "ticket-5.json", {"error": "earlier"}, failed=True)
    receipt = inbox.finish(settings.lake_root, location, {"request_id": "r-5", "rows_removed": 3})
    assert not storage.exists(location)
    assert not storage.exists(inbox.receipt_location(settings.lake_root, "ticket-5.json", True))
    assert json.loads(storage.read_bytes(receipt))["rows_removed"] == 3
    lake_text = b"".join(
        storage.read_bytes(f)
        for f, _ in storage.list_files(layout.privacy_root(settings.lake_root), True)
    )
    assert SECRET.encode() not in lake_text


@pytest.mark.slow
def test_a_request_file_is_run_and_removed(env):
    settings, defs, _ = env
    location = drop(settings, "ticket-6.json", json.dumps({"identities": [SECRET]}))
    result = defs.resolve_job_def(pj.FORGET_JOB).execute_in_process(
        run_config={"ops": {pj.FORGET_OP: {"config": {"request_file": location}}}}
    )
    assert result.success
    assert not storage.exists(location)
    receipt = json.loads(
        storage.read_bytes(inbox.receipt_location(settings.lake_root, "ticket-6.json"))
    )
    assert receipt["rows_remaining"] == 0 and SECRET not in json.dumps(receipt)
    launched = defs.resolve_job_def(pj.FORGET_JOB).execute_in_process(
        run_config={"ops": {pj.FORGET_OP: {"config": {"identities": [SECRET]}}}}
    )
    assert launched.success
