"""The Segment import's Dagster side: the import sensor, the import job and the syncs it leads to,
on an ephemeral Dagster instance."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from dagster import (
    AssetKey,
    DagsterInstance,
    SensorResult,
    SkipReason,
    build_run_status_sensor_context,
    build_sensor_context,
)

from datalake_assets.definitions import build_definitions
from datalake_assets.ingest import segment_layout as sl
from datalake_assets.ingest import segment_listing as sls
from datalake_assets.orchestration.automation import sensor_toolkit as kit
from datalake_assets.orchestration.segment_import import import_asset as ia
from datalake_assets.orchestration.segment_import import import_day_sensor as ids
from datalake_assets.orchestration.segment_import import import_sync_sensor as iss
from datalake_assets.settings import load_settings
from datalake_assets.spec.layout import ArchiveHour
from datalake_assets_tests.support.segment_archive import (
    D1,
    D2,
    FILE_C,
    MS1,
    MS2,
    SEGMENT_ID,
    SOURCE,
    build_segment_archive,
    gz,
    output_lines,
    put,
    settings_file,
)
from datalake_assets_tests.support.settings_files import per_source_sensors


class Clock:
    def __init__(self, text: str):
        self.now = datetime.fromisoformat(text).replace(tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


class ImportHarness:
    """The code location of one source with a Segment archive, ticked like the daemon."""

    def __init__(
        self, tmp_path: Path, now: str, segment_archive: str | None = None, extra: str = ""
    ):
        self.segment_archive = segment_archive or str(tmp_path / "segment")
        self.settings = per_source_sensors(settings_file(tmp_path, self.segment_archive, extra))
        self.source = self.settings.sources[0]
        self.clock = Clock(now)
        self.defs = build_definitions(self.settings, clock=self.clock)
        sensors = {s.name: s for s in self.defs.sensors}
        self.sensor = sensors["web_prod_segment_import_sensor"]
        self.sync_sensor = sensors["web_prod_segment_import_sync_sensor"]
        self.archive_sensor = sensors["web_prod_archive_sensor"]
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

    def import_day(self, day: str):
        job = self.defs.resolve_job_def("web_prod_segment_import_job")
        result = job.execute_in_process(instance=self.instance, partition_key=day)
        assert result.success
        return result

    def syncs_after(self, result):
        ctx = build_run_status_sensor_context(
            sensor_name=self.sync_sensor.name,
            dagster_event=result.get_run_success_event(),
            dagster_instance=self.instance,
            dagster_run=result.dagster_run,
        )
        return self.sync_sensor(ctx)


def requests(result) -> list:
    return list(result.run_requests or []) if isinstance(result, SensorResult) else []


@pytest.mark.slow
def test_definitions_of_a_source_with_a_segment_archive(tmp_path):
    # the harness's settings have no models (support/settings_files.py); ``plain`` below has
    # the product's default, and with it the models' sensor
    h = ImportHarness(tmp_path, "2026-11-22T12:00")
    names = {s.name for s in h.defs.sensors}
    assert names == {
        "web_prod_archive_sensor",
        "web_prod_segment_import_sensor",
        "web_prod_segment_import_sync_sensor",
        "lake_definitions_sensor",
        "privacy_requests_sensor",
    }
    job = h.defs.resolve_job_def("web_prod_segment_import_job")
    assert job.partitions_def.get_first_partition_key() == "2026-11-01"
    assert AssetKey(["web_prod", "segment_import"]) in h.defs.resolve_all_asset_keys()
    f = tmp_path / "plain.toml"
    f.write_text('[[sources]]\nid = "web"\n')
    plain = build_definitions(per_source_sensors(load_settings(str(f), env={})))
    assert sorted(s.name for s in plain.sensors) == [
        "datalake_models_automation",
        "lake_definitions_sensor",
        "privacy_requests_sensor",
        "web_archive_sensor",
    ]
    # the batched default: the import's sensors stay per source, the archive's is shared
    batched = build_definitions(settings_file(tmp_path, h.segment_archive))
    assert {s.name for s in batched.sensors} == {
        "datalake_archive_sensor",
        "web_prod_segment_import_sensor",
        "web_prod_segment_import_sync_sensor",
        "lake_definitions_sensor",
        "privacy_requests_sensor",
    }


def test_import_sensor_requests_new_and_changed_days(tmp_path):
    h = ImportHarness(tmp_path, "2026-11-22T12:00")
    build_segment_archive(h.segment_archive)
    put(h.segment_archive, sl.day_ms_of("2026-10-31"), "old.gz", gz(FILE_C))  # before start
    put(h.segment_archive, sl.day_ms_of("2026-11-30"), "future.gz", gz(FILE_C))  # not yet
    result = h.tick()
    reqs = requests(result)
    assert [r.partition_key for r in reqs] == [D1, D2]
    fp = reqs[0].tags[kit.FINGERPRINT_TAG]
    assert reqs[0].run_key == f"{SOURCE}:segment:{D1}:{fp}"
    assert reqs[0].tags[kit.TRIGGER_TAG] == "sensor"
    # requests resolve against the import job (daily partitions, today included)
    data = h.sensor.evaluate_tick(
        build_sensor_context(instance=h.instance, cursor=None, definitions=h.defs)
    )
    assert [r.tags["dagster/partition"] for r in data.run_requests] == [D1, D2]
    # nothing new: nothing requested, and the invalid folders are named
    again = h.tick()
    assert not requests(again) and "not a day's epoch ms" in again.skip_reason.skip_message
    # a new file in day 2's folder: that day again, with a new run key
    put(h.segment_archive, MS2, "1763710000000.dddd.gz", gz(FILE_C))
    (req,) = requests(h.tick())
    assert req.partition_key == D2 and req.run_key != reqs[1].run_key
    cursor = ids.ImportCursor.parse(h.cursor)
    assert ids.ImportCursor.parse(cursor.serialize()) == cursor
    assert cursor.position == sl.day_ms_of("2026-11-20")  # 48 h before 2026-11-22T12
    # later, day 1 leaves the re-check window: a change there is not seen (replay it)
    h.clock.now = datetime(2026, 11, 24, 12, tzinfo=UTC)
    assert not requests(h.tick())
    assert ids.ImportCursor.parse(h.cursor).position == sl.day_ms_of("2026-11-22")
    put(h.segment_archive, MS1, "late.gz", gz(FILE_C))
    assert not requests(h.tick())


def test_import_sensor_works_off_a_long_history_a_queue_at_a_time(tmp_path):
    h = ImportHarness(tmp_path, "2026-11-22T12:00", extra="[automation]\nmax_queued_runs = 3\n")
    days = [f"2026-11-{d:02d}" for d in range(1, 11)]
    for day in days:
        put(h.segment_archive, sl.day_ms_of(day), "f.gz", gz(FILE_C))
    assert [r.partition_key for r in requests(h.tick())] == days[:3]
    assert ids.ImportCursor.parse(h.cursor).position == sl.day_ms_of(days[3])
    assert [r.partition_key for r in requests(h.tick())] == days[3:6]


@pytest.mark.slow
def test_import_sensor_job_and_syncs_over_s3(moto_bucket, tmp_path):
    _, bucket = moto_bucket
    h = ImportHarness(tmp_path, "2026-11-25T12:00", segment_archive=f"s3://{bucket}/exports")
    build_segment_archive(h.segment_archive)
    assert [r.partition_key for r in requests(h.tick())] == [D1, D2]
    result = h.import_day(D2)
    (req,) = h.syncs_after(result)
    assert (
        req.tags["dagster/asset_partition_range_start"],
        req.tags["dagster/asset_partition_range_end"],
    ) == ("2026-11-21-01:00", "2026-11-21-02:00")
    out = output_lines(h.settings.archive_root)
    assert sorted(out) == [
        f"day={D2}/hr=0{i}/segment-{sl.file_id(SEGMENT_ID, MS2, n)}.jsonl.gz"
        for i, n in ((1, "1763700000000.cccc.gz"), (2, "1763700000000.cccc.gz"))
    ]


def test_evaluate_days_is_pure():
    listing = sls.SegmentListing(days={MS1: [sls.SegmentObject("a.gz", 10, "e1")], MS2: []})
    ev = ids.evaluate_days(
        listing,
        ids.ImportCursor(),
        start_ms=MS1,
        now=datetime(2026, 11, 21, 5, tzinfo=UTC),
        recheck_hours=48,
        budget=5,
    )
    assert [r.day for r in ev.requests] == [D1]  # an empty folder requests nothing
    assert ev.cursor.position == MS1 and MS1 in ev.cursor.fingerprints


def test_import_run_then_syncs_of_the_old_hours(tmp_path):
    """An import run of an old day leads to syncs of exactly the hours it changed, a day per
    run; the same import of a recent day is left to the archive sensor, which requests it."""
    h = ImportHarness(tmp_path, "2026-11-25T12:00")
    build_segment_archive(h.segment_archive)
    result = h.import_day(D1)
    mat = h.instance.get_latest_materialization_event(AssetKey(["web_prod", "segment_import"]))
    md = mat.asset_materialization.metadata
    assert (md["files"].value, md["files_imported"].value, md["lines_in"].value) == (2, 2, 15)
    changed = md["hours_changed"].value
    assert changed == [
        "2026-11-19T23",
        f"{D1}T00",
        f"{D1}T05",
        f"{D1}T10",
        f"{D1}T11",
        f"{D1}T23",
        f"{D2}T00",
    ]
    (check,) = result.get_asset_check_evaluations()
    assert check.check_name == ia.CHECK_ALL_FILES and check.passed

    reqs = h.syncs_after(result)
    assert all(r.tags[kit.TRIGGER_TAG] == iss.IMPORT_TRIGGER for r in reqs)
    assert all(r.tags[iss.IMPORT_RUN_TAG] == result.run_id for r in reqs)
    spans = [
        (
            r.tags.get("dagster/asset_partition_range_start", r.partition_key),
            r.tags.get("dagster/asset_partition_range_end", r.partition_key),
        )
        for r in reqs
    ]
    assert spans == [
        ("2026-11-19-23:00", "2026-11-20-00:00"),
        ("2026-11-20-05:00",) * 2,
        ("2026-11-20-10:00", "2026-11-20-11:00"),
        ("2026-11-20-23:00", "2026-11-21-00:00"),
    ]
    assert len({r.run_key for r in reqs}) == len(reqs)

    # a second import of the same day changes nothing: nothing to sync
    assert isinstance(h.syncs_after(h.import_day(D1)), SkipReason)

    # a recent day: its hours are the archive sensor's, which requests them itself
    h.clock.now = datetime(2026, 11, 21, 6, 30, tzinfo=UTC)
    result = h.import_day(D2)
    skipped = h.syncs_after(result)
    assert isinstance(skipped, SkipReason) and "left to the archive sensor" in skipped.skip_message
    archive = h.archive_sensor(build_sensor_context(instance=h.instance, definitions=h.defs))
    assert {r.partition_key for r in requests(archive)} >= {"2026-11-21-01:00", "2026-11-21-02:00"}


def test_sync_requests_after_import_hand_off_to_the_archive_sensor(tmp_path):
    s = settings_file(tmp_path, "/seg")
    src, auto = s.sources[0], s.automation
    now = datetime(2026, 11, 22, 12, 30, tzinfo=UTC)
    hours = [
        ArchiveHour.parse(x)
        for x in (
            "2026-10-31T23",
            "2026-11-01T00",
            "2026-11-20T13",
            "2026-11-20T14",
            "2026-11-20T15",
            "2026-11-22T12",
        )
    ]
    reqs, left = iss.sync_requests_after_import(src, hours, run_id="r1", now=now, automation=auto)
    # handoff: 2026-11-22T12 - (48 - 2) h = 2026-11-20T14; before the start: no partition
    assert iss.handoff_hour(now, auto) == ArchiveHour.parse("2026-11-20T14")
    assert [r.partition_key for r in reqs] == ["2026-11-01-00:00", "2026-11-20-13:00"]
    assert [str(h) for h in left] == ["2026-11-20T14", "2026-11-20T15", "2026-11-22T12"]
