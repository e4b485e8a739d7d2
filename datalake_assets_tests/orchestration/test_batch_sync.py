"""The batched sensor runs (``[automation] sensor_runs``, default "auto" = batched locally):
``datalake_archive_sensor`` requests ONE ``datalake_sync_job`` run a tick for the due hours of
every source, and that run syncs them all and records each source's assets and checks as the
source's own job would. Through the real sensor and job (Dagster in process, the sync for real
on the driver-local path; catalog none); the daemon drives it in test_dagster_ui.py."""

from __future__ import annotations

import json
import os
from collections import Counter
from datetime import UTC, datetime
from types import SimpleNamespace

import pyarrow.dataset as ds
import pytest
from dagster import (
    AssetKey,
    DagsterEventType,
    DagsterInstance,
    DagsterRun,
    DagsterRunStatus,
    SensorResult,
    SkipReason,
    build_sensor_context,
    instance_for_test,
)

from datalake_assets.definitions import build_definitions
from datalake_assets.orchestration.automation import batch_sync as bs
from datalake_assets.orchestration.automation import sensor_toolkit as kit
from datalake_assets.settings.orchestration_section import archive_sensor_name, sensor_runs_batched
from datalake_assets.spec import layout
from datalake_assets_tests.support.archive_builders import msg, write_hour
from datalake_assets_tests.support.settings_files import load_lake_toml, per_source_sensors

pytestmark = [pytest.mark.dagster]

SOURCES = ("web", "ios", "android")
H9, H10, H11 = "2026-11-21T09", "2026-11-21T10", "2026-11-21T11"


class Clock:
    def __init__(self, text: str):
        self.now = datetime.fromisoformat(text).replace(tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def make_settings(tmp_path, extra: str = ""):
    return load_lake_toml(
        tmp_path,
        'archive_root = "archive"\nlake_root = "lake"\n[catalog]\nbackend = "none"\n'
        f"[automation]\nsettle_minutes = 5\n{extra}"
        + "".join(f'[[sources]]\nid = "{s}"\nstart = "2026-11-21-00:00"\n' for s in SOURCES),
    )


class Harness:
    def __init__(self, tmp_path, now: str = "2026-11-21T11:10", extra: str = ""):
        self.settings = make_settings(tmp_path, extra)
        self.clock = Clock(now)
        self.defs = build_definitions(self.settings, clock=self.clock)
        self.sensor = self.defs.get_sensor_def(bs.BATCH_SENSOR)
        self.instance = DagsterInstance.ephemeral()
        self.cursor: str | None = None

    def tick(self):
        result = self.sensor(
            build_sensor_context(instance=self.instance, cursor=self.cursor, definitions=self.defs)
        )
        if isinstance(result, SensorResult) and result.cursor is not None:
            self.cursor = result.cursor
        return result

    def write(self, source: str, hour: str, n: int = 20, name: str = "part-0000.jsonl.gz"):
        lines = [
            msg(
                f"{source}-{hour}-{name}-{i}",
                hour,
                i % 60,
                **(
                    {"type": "page", "name": "Home", "event": None}
                    if i % 3 == 0
                    else {"event": "Signed Up", "properties": {"plan": f"p{i % 2}"}}
                ),
            )
            for i in range(n)
        ]
        lines = [{k: v for k, v in m.items() if v is not None} for m in lines]
        lines.append(b"{not json")  # quarantined, counted
        return write_hour(self.settings.archive_root, source, hour, lines, name=name)

    def run(self, request):
        job = self.defs.resolve_job_def(bs.BATCH_JOB)
        return job.execute_in_process(
            run_config=request.run_config,
            instance=self.instance,
            tags=request.tags,
            raise_on_error=False,
        )


def items(request) -> dict[str, list[str]]:
    return {
        i["source"]: i["hours"]
        for i in request.run_config["ops"]["sync_due_hours"]["config"]["items"]
    }


@pytest.mark.slow
def test_batched_by_default_with_local_compute(tmp_path):
    h = Harness(tmp_path)
    sensors = {s.name for s in h.defs.sensors}
    assert bs.BATCH_SENSOR in sensors
    assert not any(
        name.endswith("_archive_sensor") and name != bs.BATCH_SENSOR for name in sensors
    ), sensors
    jobs = {j.name for j in h.defs.jobs}
    # the sources' own jobs stay: the UI's Materialize and backfills run them
    assert {bs.BATCH_JOB, "web_sync_job", "ios_sync_job", "android_sync_job"} <= jobs
    assert h.sensor.job_name == bs.BATCH_JOB
    (tmp_path / "p").mkdir()
    per_source = make_settings(tmp_path / "p", 'sensor_runs = "per_source"\n')
    assert not sensor_runs_batched(per_source.automation, per_source.compute)
    assert (
        archive_sensor_name(per_source.automation, per_source.compute, "web")
        == "web_archive_sensor"
    )
    assert archive_sensor_name(h.settings.automation, h.settings.compute, "web") == bs.BATCH_SENSOR
    names = {s.name for s in build_definitions(per_source).sensors}
    assert {"web_archive_sensor", "ios_archive_sensor"} <= names and bs.BATCH_SENSOR not in names

    # "auto" batches only where every run pays a JVM: remote compute runs per source-hour
    def mode(sensor_runs: str, backend: str) -> bool:
        return sensor_runs_batched(
            SimpleNamespace(sensor_runs=sensor_runs), SimpleNamespace(backend=backend)
        )

    assert sensor_runs_batched(h.settings.automation, h.settings.compute)
    assert [
        mode("auto", "emr"),
        mode("auto", "databricks"),
        mode("batched", "emr"),
        mode("per_source", "local"),
    ] == [False, False, True, False]


@pytest.mark.slow
def test_one_run_per_tick_for_every_due_source_hour(tmp_path):
    h = Harness(tmp_path)
    for s in SOURCES[:2]:
        h.write(s, H9)
        h.write(s, H10)
    h.write("web", H11)  # not due before 12:05
    first = h.tick()
    (request,) = first.run_requests
    assert items(request) == {"web": [H9, H10], "ios": [H9, H10]}  # android has no files
    assert request.tags[kit.TRIGGER_TAG] == "sensor"
    assert request.tags[bs.SOURCE_HOURS_TAG] == f"web:{H9} web:{H10} ios:{H9} ios:{H10}"
    raw = Counter((tuple(e.asset_key.path), e.partition) for e in first.asset_events)
    assert raw == {
        (("web", "raw_archive"), "2026-11-21-09:00"): 1,
        (("web", "raw_archive"), "2026-11-21-10:00"): 1,
        (("ios", "raw_archive"), "2026-11-21-09:00"): 1,
        (("ios", "raw_archive"), "2026-11-21-10:00"): 1,
    }
    cursors = bs.parse_cursor(h.cursor)
    assert set(cursors) == set(SOURCES)

    again = h.tick()  # nothing new: nothing requested
    assert not again.run_requests and "nothing new" in again.skip_reason.skip_message

    # a late file in one hour of one source and a newly due hour: one run with just those
    h.write("ios", H10, name="late.jsonl.gz")
    h.clock.now = datetime(2026, 11, 21, 12, 6, tzinfo=UTC)
    (later,) = h.tick().run_requests
    assert items(later) == {"web": [H11], "ios": [H10]}
    assert later.run_key != request.run_key

    # while a run of the job requested by the sensor waits in the queue, nothing is listed
    h.instance.add_run(
        DagsterRun(
            job_name=bs.BATCH_JOB,
            status=DagsterRunStatus.NOT_STARTED,
            tags={kit.TRIGGER_TAG: "sensor"},
        )
    )
    h.write("android", H11)
    queued = h.tick()
    assert isinstance(queued, SkipReason) and "still queued" in queued.skip_message


@pytest.mark.slow
def test_a_cursor_it_cannot_read_is_an_error(tmp_path):
    h = Harness(tmp_path)
    h.cursor = json.dumps({"v": 99})
    with pytest.raises(Exception, match="cursor not understood"):
        h.tick()


def _events(result, kind: DagsterEventType) -> list:
    return [e for e in result.all_events if e.event_type == kind]


@pytest.mark.slow
def test_the_run_syncs_every_source_and_records_their_assets_and_checks(tmp_path):
    h = Harness(tmp_path)
    for s in SOURCES:
        h.write(s, H10, n=30)
    (request,) = h.tick().run_requests
    result = h.run(request)
    assert result.success
    mats = {
        (tuple(e.asset_key.path), e.partition)
        for e in _events(result, DagsterEventType.ASSET_MATERIALIZATION)
    }
    checks = [
        e.event_specific_data for e in _events(result, DagsterEventType.ASSET_CHECK_EVALUATION)
    ]
    for s in SOURCES:
        # every asset of the source for the hour, as its own job's run would record them
        for asset in ("pages", "signed_up", "tracks", "identifies", "quarantine", "sync_reports"):
            assert ((s, asset), "2026-11-21-10:00") in mats, (s, asset)
        # the rows are in the lake, and the checks say so per source
        pages = ds.dataset(layout.table_root(h.settings.lake_root, s, "pages")).count_rows()
        assert pages == 10
        mine = [c for c in checks if c.asset_key.path[0] == s]
        assert mine and all(c.passed for c in mine), [c for c in mine if not c.passed]
        (complete,) = [c for c in mine if c.check_name == "completeness"]
        assert complete.metadata["lines_in"].value == 31  # 30 messages and the bad line
        assert complete.metadata["lines_quarantined"].value == 1
    # the UI's partition status of each source's tables follows these events
    for s in SOURCES:
        status = h.instance.get_materialized_partitions(AssetKey([s, "pages"]))
        assert status == {"2026-11-21-10:00"}


@pytest.mark.slow
def test_a_source_that_fails_does_not_stop_the_others(tmp_path):
    h = Harness(tmp_path)
    for s in SOURCES:
        h.write(s, H10)
    # ios's folder of tables is a file: its sync cannot write and fails
    folder = layout.table_root(h.settings.lake_root, "ios", "pages").rsplit("/", 1)[0]
    os.makedirs(os.path.dirname(folder), exist_ok=True)
    with open(folder, "w") as f:
        f.write("not a folder")
    (request,) = h.tick().run_requests
    result = h.run(request)
    assert not result.success
    failure = _events(result, DagsterEventType.STEP_FAILURE)[0].event_specific_data.error
    assert (
        "1 of 3 sources failed to sync" in failure.message
        and "ios 2026-11-21T10" in failure.message
    )
    synced = {e.asset_key.path[0] for e in _events(result, DagsterEventType.ASSET_MATERIALIZATION)}
    assert synced == {"web", "android"}
    (ios_complete,) = [
        e.event_specific_data
        for e in _events(result, DagsterEventType.ASSET_CHECK_EVALUATION)
        if e.event_specific_data.asset_key.path[0] == "ios"
    ]
    assert not ios_complete.passed and ios_complete.check_name == "completeness"


def remember_sensor_cursor(instance: DagsterInstance, name: str, cursor: str) -> None:
    """What the daemon stores for a sensor that ticked: its state, with its cursor."""
    from dagster._core.remote_origin import (
        RegisteredCodeLocationOrigin,
        RemoteInstigatorOrigin,
        RemoteRepositoryOrigin,
    )
    from dagster._core.scheduler.instigation import (
        InstigatorState,
        InstigatorStatus,
        InstigatorType,
        SensorInstigatorData,
    )

    origin = RemoteInstigatorOrigin(
        RemoteRepositoryOrigin(RegisteredCodeLocationOrigin("datalake_assets"), "__repository__"),
        name,
    )
    instance.add_instigator_state(
        InstigatorState(
            origin,
            InstigatorType.SENSOR,
            InstigatorStatus.RUNNING,
            SensorInstigatorData(cursor=cursor),
        )
    )


@pytest.mark.slow
def test_a_switch_from_per_source_sensors_goes_on_where_they_stopped(tmp_path):
    """Upgrading, or setting sensor_runs back to batched: a source whose own sensor had synced
    its hours is not synced again from its start."""
    h = Harness(tmp_path)
    with instance_for_test() as instance:  # with schedule storage, as the daemon's
        h.instance = instance
        _switch_from_per_source(h)


def _switch_from_per_source(h: Harness) -> None:
    for s in ("web", "ios"):
        h.write(s, H9)
        h.write(s, H10)
    per_source = build_definitions(per_source_sensors(h.settings), clock=h.clock)
    ran = per_source.get_sensor_def("web_archive_sensor")(
        build_sensor_context(instance=h.instance, definitions=per_source)
    )
    assert len(ran.run_requests) == 2
    remember_sensor_cursor(h.instance, "web_archive_sensor", ran.cursor)
    (request,) = h.tick().run_requests
    assert items(request) == {"ios": [H9, H10]}  # web's hours were its own sensor's
    h.write("web", H10, name="late.jsonl.gz")  # and web goes on from there: a late file
    (late,) = h.tick().run_requests
    assert items(late) == {"web": [H10]}
