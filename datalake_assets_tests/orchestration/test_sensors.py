"""Archive sensors: real archives in temporary folders (and in moto's in-process S3), a real
ephemeral Dagster instance, an injected clock. No Spark."""

from __future__ import annotations

import json
import os
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from dagster import (
    AssetKey,
    DagsterInstance,
    DagsterRun,
    DagsterRunStatus,
    DefaultSensorStatus,
    SensorResult,
    SkipReason,
    build_sensor_context,
)

from datalake_assets.definitions import build_definitions
from datalake_assets.lake.listing import LocalArchiveLister, S3ArchiveLister, lister_for
from datalake_assets.orchestration.automation import archive_sensor as sn
from datalake_assets.orchestration.automation import sensor_toolkit as kit
from datalake_assets.orchestration.automation.archive_cursor import SensorCursor
from datalake_assets.spec.layout import ArchiveHour, archive_hour_dir
from datalake_assets_tests.support.archive_builders import msg, write_hour
from datalake_assets_tests.support.settings_files import load_lake_toml, per_source_sensors

pytestmark = pytest.mark.dagster

PROJECT = Path(__file__).resolve().parents[2]
SOURCE = "web-prod"
SENSOR = "web_prod_archive_sensor"
RAW = AssetKey(["web_prod", "raw_archive"])


class Clock:
    def __init__(self, text: str):
        self.now = datetime.fromisoformat(text).replace(tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def set(self, text: str) -> None:
        self.now = datetime.fromisoformat(text).replace(tzinfo=UTC)


def make_settings(tmp_path: Path, extra: str = "", archive_root: str = "archive"):
    """One source, a sensor and a job per source (``sensor_runs = "per_source"``)."""
    return per_source_sensors(
        load_lake_toml(
            tmp_path,
            f'archive_root = "{archive_root}"\nlake_root = "lake"\n{extra}'
            f'[[sources]]\nid = "{SOURCE}"\nslug = "web_prod"\nstart = "2026-11-01-00:00"\n',
        )
    )


class Harness:
    """One source's sensor, ticked like the daemon does: the cursor of a tick feeds the next."""

    def __init__(self, settings, clock: Clock, lister=None):
        self.settings = settings
        self.clock = clock
        self.defs = build_definitions(settings, clock=clock, lister=lister)
        self.sensor = next(s for s in self.defs.sensors if s.name == SENSOR)
        self.instance = DagsterInstance.ephemeral()
        self.cursor: str | None = None

    def tick(self):
        ctx = build_sensor_context(
            instance=self.instance, cursor=self.cursor, definitions=self.defs
        )
        result = self.sensor(ctx)
        if isinstance(result, SensorResult) and result.cursor is not None:
            self.cursor = result.cursor
        return result

    def write(self, hour: str, name: str = "part-0000.jsonl.gz", n: int = 1) -> str:
        return write_hour(
            self.settings.archive_root,
            SOURCE,
            hour,
            [msg(f"{hour}-{name}-{i}", hour) for i in range(n)],
            name=name,
        )


def requests(result) -> list:
    return list(result.run_requests or []) if isinstance(result, SensorResult) else []


def skipped(result) -> str | None:
    if isinstance(result, SkipReason):
        return result.skip_message
    if isinstance(result, SensorResult) and not result.run_requests:
        assert not result.asset_events
        return result.skip_reason.skip_message if result.skip_reason else ""
    return None


@pytest.fixture()
def harness(tmp_path):
    return Harness(make_settings(tmp_path), Clock("2026-11-21T11:06"))


# ------------------------------------------------------------------------------ local archive


def test_new_settled_hour_requests_one_sync_and_records_the_raw_hour(harness):
    a = harness.write("2026-11-21T10", "part-0000.jsonl.gz", n=3)
    b = harness.write("2026-11-21T10", "part-0001.jsonl.gz", n=2)
    result = harness.tick()
    (req,) = requests(result)
    assert req.partition_key == "2026-11-21-10:00"
    fp = req.tags[kit.FINGERPRINT_TAG]
    assert req.run_key == f"{SOURCE}:2026-11-21T10:{fp}"
    assert req.tags[kit.TRIGGER_TAG] == "sensor" and req.tags["dagster/priority"] == "1"
    (event,) = result.asset_events
    assert event.asset_key == RAW and event.partition == "2026-11-21-10:00"
    md = event.metadata
    assert md["files"].value == 2
    assert md["bytes"].value == os.path.getsize(a) + os.path.getsize(b)
    assert md["fingerprint"].value == fp
    assert "lines" not in md  # counting lines would mean reading every gzip
    # the request resolves against the job: partition and sensor tags as the daemon adds them
    data = harness.sensor.evaluate_tick(
        build_sensor_context(instance=harness.instance, cursor=None, definitions=harness.defs)
    )
    (resolved,) = data.run_requests
    assert resolved.tags["dagster/partition"] == "2026-11-21-10:00"
    assert resolved.tags["dagster/sensor_name"] == SENSOR


def test_open_and_settling_hours_wait(harness):
    harness.write("2026-11-21T11")
    harness.clock.set("2026-11-21T11:40")  # the hour is still open
    assert "due at 2026-11-21 12:05 UTC" in skipped(harness.tick())
    harness.clock.set("2026-11-21T12:04")  # closed, but within the 5 settle minutes
    assert skipped(harness.tick()) is not None
    harness.clock.set("2026-11-21T12:05")
    (req,) = requests(harness.tick())
    assert req.partition_key == "2026-11-21-11:00"


def test_settle_minutes_is_a_setting(tmp_path):
    h = Harness(
        make_settings(tmp_path, "[automation]\nsettle_minutes = 30\n"), Clock("2026-11-21T11:20")
    )
    h.write("2026-11-21T10")
    assert "settle_minutes = 30" in skipped(h.tick())
    h.clock.set("2026-11-21T11:30")
    assert len(requests(h.tick())) == 1


def test_unchanged_hours_request_nothing(harness):
    harness.write("2026-11-21T09")
    harness.write("2026-11-21T10")
    assert len(requests(harness.tick())) == 2
    message = skipped(harness.tick())
    assert message.startswith("nothing new or changed")
    harness.clock.now += timedelta(minutes=30)
    assert skipped(harness.tick()) is not None


def test_a_late_file_requests_the_hour_again(harness):
    harness.write("2026-11-21T10")
    (first,) = requests(harness.tick())
    harness.clock.set("2026-11-22T03:00")  # 17 hours later: within the re-check window
    harness.write("2026-11-21T10", "part-0001.jsonl.gz")
    result = harness.tick()
    (again,) = requests(result)
    assert again.partition_key == first.partition_key
    assert again.run_key != first.run_key
    (event,) = result.asset_events
    assert event.metadata["files"].value == 2
    assert event.metadata["previous_fingerprint"].value == first.tags[kit.FINGERPRINT_TAG]
    # in-progress files ('.' or '_' names) are invisible, as they are to the sync
    hour_dir = archive_hour_dir(
        harness.settings.archive_root, SOURCE, ArchiveHour.parse("2026-11-21T10")
    )
    Path(hour_dir, ".part-0002.jsonl.gz.tmp").write_bytes(b"x")
    Path(hour_dir, "_part-0003.jsonl.gz").write_bytes(b"x")
    assert skipped(harness.tick()) is not None
    # a file rewritten in place (same name, new content) changes the fingerprint too
    harness.write("2026-11-21T10", "part-0001.jsonl.gz", n=5)
    (third,) = requests(harness.tick())
    assert third.run_key not in (first.run_key, again.run_key)


def test_hours_before_the_source_start_are_ignored(harness):
    harness.write("2026-10-31T23")
    harness.write("2026-11-01T00")
    assert [r.partition_key for r in requests(harness.tick())] == ["2026-11-01-00:00"]


def test_empty_hours_and_foreign_folders_are_ignored(harness):
    root = Path(harness.settings.archive_root, SOURCE)
    (root / "day=2026-11-21" / "hr=08").mkdir(parents=True)  # no files
    (root / "day=2026-11-21" / "hr=99").mkdir(parents=True)
    (root / "day=2026-13-01" / "hr=01").mkdir(parents=True)
    (root / "notes").mkdir()
    harness.write("2026-11-21T09")
    assert [r.partition_key for r in requests(harness.tick())] == ["2026-11-21-09:00"]


def test_no_archive_yet(harness):
    assert "no archive files under" in skipped(harness.tick())


@pytest.mark.slow
def test_cursor_round_trips_and_stays_bounded(tmp_path, monkeypatch):
    """Three days of an archive written hour by hour, the sensor ticking twice an hour, with a
    12-hour re-check window: one request per hour, the cursor never holds more than the
    window, and a tick lists only the days since the window's start."""
    harness = Harness(
        make_settings(tmp_path, "[automation]\nrecheck_hours = 12\n"), Clock("2026-11-10T00:00")
    )
    listed: list[str] = []
    real_scandir = os.scandir

    def scandir(path):
        listed.append(os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    harness.clock.set("2026-11-10T00:00")
    hour = ArchiveHour.parse("2026-11-10T00")
    requested, sizes = [], []
    for _ in range(24 * 3):
        harness.write(str(hour))
        for minute in (40, 66):  # a tick within the hour, one past its settle delay
            harness.clock.now = hour.start + timedelta(minutes=minute)
            listed.clear()
            result = harness.tick()
            requested += [r.partition_key for r in requests(result)]
        days = {p.split("day=")[1][:10] for p in listed if "day=" in p}
        assert len(days) <= 2, days  # the window's 12 hours span at most 2 days
        cursor = SensorCursor.parse(harness.cursor)
        assert SensorCursor.parse(cursor.serialize()) == cursor
        assert cursor.serialize() == harness.cursor
        assert len(cursor.fingerprints) <= 12 + 1
        sizes.append(len(harness.cursor))
        hour = hour.next()
    assert len(requested) == 72 and len(set(requested)) == 72
    assert max(sizes) < 12 * 45 + 60  # bytes: ~40 per hour of the window
    # The bound is also the contract: a file landing in an hour that began more than
    # recheck_hours ago is not seen (replay it with a backfill); a recent one is.
    recent = ArchiveHour.of(harness.clock.now - timedelta(hours=10))
    harness.write(str(ArchiveHour.of(harness.clock.now - timedelta(hours=14))), "late.jsonl.gz")
    harness.write(str(recent), "late.jsonl.gz")
    (req,) = requests(harness.tick())
    assert req.partition_key == recent.partition_key


def test_a_long_history_is_requested_a_queue_at_a_time(tmp_path):
    h = Harness(
        make_settings(tmp_path, "[automation]\nmax_queued_runs = 5\n"), Clock("2026-11-21T12:00")
    )
    hours = [ArchiveHour.parse("2026-11-01T00")]
    while len(hours) < 200:
        hours.append(hours[-1].next())
    for hour in hours:
        h.write(str(hour))
    first = [r.partition_key for r in requests(h.tick())]
    assert first == [x.partition_key for x in hours[:5]]  # oldest first
    assert SensorCursor.parse(h.cursor).position == hours[5]  # listed again from the 6th hour

    def queue(n: int, status=DagsterRunStatus.NOT_STARTED) -> None:  # created, not launched
        for _ in range(n):
            h.instance.add_run(
                DagsterRun(
                    job_name="web_prod_sync_job", status=status, tags={kit.TRIGGER_TAG: "sensor"}
                )
            )

    queue(5)
    message = skipped(h.tick())
    assert "5 runs of web_prod_sync_job" in message and "still queued" in message
    for run in h.instance.get_runs():
        h.instance.delete_run(run.run_id)
    queue(3)
    queue(9, DagsterRunStatus.STARTED)  # running ones leave the queue: they do not count
    assert [r.partition_key for r in requests(h.tick())] == [x.partition_key for x in hours[5:7]]


@pytest.mark.parametrize("where", ["old", "in_window"])
def test_a_cut_listing_goes_on_at_the_next_tick(tmp_path, where):
    """list_limit cuts a tick's listing; the next tick continues from the cut (inside the
    re-check window too, where the position cannot move), then a new pass starts."""
    day = "2026-11-05" if where == "old" else "2026-11-21"
    h = Harness(make_settings(tmp_path), Clock("2026-11-21T12:00"))
    hours = [f"{day}T0{i}" for i in range(1, 9)]
    for hour in hours:
        h.write(hour)
    h.sensor = sn.build_archive_sensor(
        h.settings, h.settings.sources[0], h.defs.jobs[0], clock=h.clock, list_limit=6
    )
    seen, ticks = [], 0
    while True:  # a pass: until the listing is no longer cut
        seen += [r.partition_key for r in requests(h.tick())]
        ticks += 1
        if SensorCursor.parse(h.cursor).resume is None:
            break
        assert ticks < 20
    assert seen == [ArchiveHour.parse(x).partition_key for x in hours]
    assert ticks > 2  # ~one hour folder a tick with this limit
    for _ in range(ticks + 1):  # the next pass finds nothing new
        assert skipped(h.tick()) is not None


def test_a_cursor_it_cannot_read_is_an_error(harness):
    harness.cursor = '{"v": 99}'
    with pytest.raises(Exception, match="cursor not understood"):
        harness.tick()


@pytest.mark.slow
def test_one_job_and_one_sensor_per_source(tmp_path):
    defs = build_definitions(
        load_lake_toml(
            tmp_path,
            '[[sources]]\nid = "web"\n[[sources]]\nid = "ios"\nstart = "2026-11-21-09:00"\n'
            '[automation]\nsensors = "stopped"\ninterval_seconds = 300\n'
            'sensor_runs = "per_source"\n',
            models=True,
        )
    )
    # one job and sensor per source, plus the code location's definitions sensor and its job,
    # the privacy jobs and request sensor (test_privacy_jobs.py), the models' automation sensor
    assert sorted(j.name for j in defs.jobs) == [
        "compact_identity_summaries",
        "datalake_reload_definitions",
        "forget_person",
        "ios_sync_job",
        "web_sync_job",
    ]
    by_name = {s.name: s for s in defs.sensors}
    assert sorted(by_name) == [
        "datalake_models_automation",
        "ios_archive_sensor",
        "lake_definitions_sensor",
        "privacy_requests_sensor",
        "web_archive_sensor",
    ]
    ios = by_name["ios_archive_sensor"]
    assert ios.job_name == "ios_sync_job"
    assert ios.default_status == DefaultSensorStatus.STOPPED
    assert ios.minimum_interval_seconds == 300
    job = defs.resolve_job_def("ios_sync_job")
    assert job.partitions_def.get_first_partition_key() == "2026-11-21-09:00"
    assert {k.to_user_string() for k in job.asset_layer.executable_asset_keys} >= {
        "ios/tracks",
        "ios/sync_reports",
        "ios/quarantine",
    }
    assert by_name["lake_definitions_sensor"].default_status == DefaultSensorStatus.STOPPED
    assert {s.name: s.default_status for s in build_definitions(make_settings(tmp_path)).sensors}[
        "web_prod_archive_sensor"
    ] == DefaultSensorStatus.RUNNING


# ------------------------------------------------------------------------------------------ S3


@pytest.fixture()
def s3(mocked_aws):
    import boto3

    client = boto3.client("s3", region_name="us-east-1")
    client.create_bucket(Bucket="segment")
    return client


def put_hour(
    client,
    hour: ArchiveHour,
    names=("part-0000.jsonl.gz", "part-0001.jsonl.gz"),
    body: bytes = b"{}\n",
    seed: bool = False,
) -> None:
    """Write an hour's objects. ``seed``: straight into moto's in-memory bucket, 100x faster
    than a PUT through botocore (for the 1,000+ keys of the pagination test); the sensor
    always lists through the real boto3 client."""
    for name in names:
        key = f"raw/{SOURCE}/day={hour.day}/hr={hour.hr}/{name}"
        if seed:
            from moto.core import DEFAULT_ACCOUNT_ID
            from moto.s3.models import s3_backends

            s3_backends[DEFAULT_ACCOUNT_ID]["global"].put_object("segment", key, body)
        else:
            client.put_object(Bucket="segment", Key=key, Body=body)


@pytest.mark.slow
def test_s3_listing_pages_and_starts_after_the_cursor(tmp_path, s3):
    calls: list[dict] = []

    def record(params, **_):
        calls.append({"StartAfter": params.get("StartAfter"), "keys": []})

    def returned(parsed, **_):
        calls[-1]["keys"] = [o["Key"] for o in parsed.get("Contents", [])]

    s3.meta.events.register("before-parameter-build.s3.ListObjectsV2", record)
    s3.meta.events.register("after-call.s3.ListObjectsV2", returned)

    hours = [ArchiveHour.parse("2026-11-01T00")]
    while len(hours) < 510:  # 1,020 keys
        hours.append(hours[-1].next())
    for hour in hours:
        put_hour(s3, hour, seed=True)
    put_hour(s3, ArchiveHour.parse("2026-10-31T23"))  # before the source's start
    s3.put_object(Bucket="segment", Key=f"raw/{SOURCE}/day=2026-11-02/hr=05/", Body=b"")
    s3.put_object(Bucket="segment", Key=f"raw/{SOURCE}/day=2026-11-02/hr=05/_tmp.gz", Body=b"x")

    settings = make_settings(
        tmp_path, "[automation]\nmax_queued_runs = 10000\n", archive_root="s3://segment/raw"
    )
    clock = Clock("2026-11-22T09:00")  # all 510 hours (up to 2026-11-22T05) are due
    h = Harness(settings, clock, lister=S3ArchiveLister(client=s3, page_size=100))
    result = h.tick()
    reqs = requests(result)
    assert [r.partition_key for r in reqs] == [x.partition_key for x in hours]
    assert len(result.asset_events) == 510
    assert all(e.metadata["files"].value == 2 for e in result.asset_events)
    first_tick = list(calls)
    assert len(first_tick) == 11  # 1,022 keys at 100 a page
    assert first_tick[0]["StartAfter"] == f"raw/{SOURCE}/day=2026-11-01/hr=00"
    # 1,020 archive keys + a folder marker + an in-progress file; the hour before the source's
    # start sorts before StartAfter and is never returned
    assert sum(len(c["keys"]) for c in first_tick) == 1022

    # Steady state: the next tick starts after the re-check window's first key.
    calls.clear()
    assert skipped(h.tick()) is not None
    position = SensorCursor.parse(h.cursor).position
    assert position == ArchiveHour.parse("2026-11-20T09")  # 09:00 minus 48 hours
    assert [c["StartAfter"] for c in calls] == [f"raw/{SOURCE}/day=2026-11-20/hr=09"]
    keys = [k for c in calls for k in c["keys"]]
    assert len(keys) == 2 * 45  # 2026-11-20T09 .. 2026-11-22T05: 45 hours, 2 files each
    assert min(keys) >= f"raw/{SOURCE}/day=2026-11-20/hr=09/"

    # A late file (new ETag) in a recent hour: a new run for that hour only.
    put_hour(s3, hours[-3], names=("part-0001.jsonl.gz",), body=b'{"late": 1}\n')
    (req,) = requests(h.tick())
    assert req.partition_key == hours[-3].partition_key
    assert req.run_key != next(r.run_key for r in reqs if r.partition_key == req.partition_key)


def test_s3_listing_limit_stops_at_an_hour_boundary(s3):
    h00, h01, h02 = (ArchiveHour.parse(f"2026-11-01T0{i}") for i in range(3))
    for hour in (h00, h01, h02):
        put_hour(s3, hour, names=[f"p{i}.jsonl.gz" for i in range(3)])
    lister = S3ArchiveLister(client=s3, page_size=2)
    listing = lister.list_hours("s3://segment/raw", SOURCE, h00, limit=4)
    # the limit is reached within hour 01 (4th key): that hour is finished, the next one is not
    # started; the next tick lists again from hour 02
    assert list(listing.hours) == [h00, h01]
    assert listing.truncated_at == h02
    assert [f.name for f in listing.hours[h01]] == ["p0.jsonl.gz", "p1.jsonl.gz", "p2.jsonl.gz"]
    # one hour larger than the limit is still listed whole: every tick makes progress
    listing = lister.list_hours("s3://segment/raw", SOURCE, h00, limit=1)
    assert list(listing.hours) == [h00] and listing.truncated_at == h01


def test_archive_roots_the_sensor_can_list():
    assert isinstance(lister_for("/data/archive"), LocalArchiveLister)
    assert isinstance(lister_for("s3://b/p"), S3ArchiveLister)
    assert S3ArchiveLister.split("s3://b/p/q", "web") == ("b", "p/q/web/")
    assert S3ArchiveLister.split("s3://b", "web") == ("b", "web/")
    with pytest.raises(ValueError, match="gs://"):
        lister_for("gs://b/p")


# ------------------------------------------------------------------------------- dagster.yaml


def test_dagster_yaml_loads_with_the_run_queue_lanes(tmp_path):
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(PROJECT / "dagster.yaml", home / "dagster.yaml")
    with DagsterInstance.from_config(str(home)) as instance:
        config = instance.get_concurrency_config()
        queue = config.run_queue_config
        assert queue.max_concurrent_runs == 1  # one Spark JVM at a time (embedded metastore)
        limits = {
            (lim["key"], lim.get("value")): lim["limit"] for lim in queue.tag_concurrency_limits
        }
        assert limits == {("dagster/backfill", None): 1, (kit.TRIGGER_TAG, "sensor"): 3}
        assert config.pool_config.default_pool_limit == 1
        assert config.pool_config.pool_granularity.value == "run"
        assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
        assert instance.get_settings("telemetry") == {"enabled": False}


def test_cursor_format_is_small_json():
    c = SensorCursor(
        ArchiveHour.parse("2026-11-19T10"), {ArchiveHour.parse("2026-11-21T09"): "0123456789abcdef"}
    )
    assert json.loads(c.serialize()) == {
        "v": 1,
        "pos": "2026-11-19T10",
        "fp": {"2026-11-21T09": "0123456789abcdef"},
    }
    assert SensorCursor.parse(None) == SensorCursor()


@pytest.mark.parametrize("mode", ["per_source", "batched"])
def test_older_hours_written_later_are_synced(tmp_path, mode):
    """Issue #27.4: with ``start = "auto"`` the partitions start at the archive's first hour.
    Hours written later *before* it, within the re-check window, move the start back (the
    code location reloads) and must then be synced by the sensor, not left Missing."""
    settings = load_lake_toml(
        tmp_path,
        'archive_root = "archive"\nlake_root = "lake"\n'
        f'[automation]\nsensor_runs = "{mode}"\n'
        f'[[sources]]\nid = "{SOURCE}"\nslug = "web_prod"\n',
    )
    clock = Clock("2026-11-21T11:06")
    name = SENSOR if mode == "per_source" else "datalake_archive_sensor"

    def tick(cursor):
        defs = build_definitions(settings, clock=clock)  # each load reads the start anew
        ctx = build_sensor_context(instance=instance, cursor=cursor, definitions=defs)
        result = defs.get_sensor_def(name)(ctx)
        return result, result.cursor if isinstance(result, SensorResult) else cursor

    def hours(result) -> list[str]:
        out = []
        for r in requests(result):
            if r.partition_key:
                out.append(str(ArchiveHour.parse(r.partition_key)))
            else:
                out += [
                    h
                    for item in r.run_config["ops"]["sync_due_hours"]["config"]["items"]
                    for h in item["hours"]
                ]
        return sorted(out)

    instance = DagsterInstance.ephemeral()
    for h in ("2026-11-21T05", "2026-11-21T06", "2026-11-21T07"):
        write_hour(settings.archive_root, SOURCE, h, [msg(f"{h}-0", h)])
    result, cursor = tick(None)
    assert hours(result) == ["2026-11-21T05", "2026-11-21T06", "2026-11-21T07"]
    result, cursor = tick(cursor)
    assert hours(result) == []  # nothing new
    for h in ("2026-11-21T03", "2026-11-21T04"):  # older hours, written later
        write_hour(settings.archive_root, SOURCE, h, [msg(f"{h}-0", h)])
    result, cursor = tick(cursor)
    assert hours(result) == ["2026-11-21T03", "2026-11-21T04"]
    result, cursor = tick(cursor)
    assert hours(result) == []
    # Outside the window (more than recheck_hours old) an hour is still not listed: the
    # README's contract, a backfill replays it.
    write_hour(settings.archive_root, SOURCE, "2026-11-19T01", [msg("old-0", "2026-11-19T01")])
    result, cursor = tick(cursor)
    assert hours(result) == []
