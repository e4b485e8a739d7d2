"""The open hour's batches run by themselves (``orchestration/freshness/open_hour_loader.py``,
``datalake batches``) and their setting (``[freshness] interval_minutes``, a source's
``freshness_minutes``)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from dagster import DagsterInstance

from datalake_assets.orchestration.freshness.open_hour_asset import dagster_reporter, open_hour_key
from datalake_assets.orchestration.freshness.open_hour_loader import (
    batched_sources,
    open_hours,
    run_loop,
)
from datalake_assets.settings.fields import SettingsError
from datalake_assets.spec.layout import ArchiveHour
from datalake_assets_tests.support.archive_builders import msg, write_hour
from datalake_assets_tests.support.iceberg_reader import sql_catalog, tables
from datalake_assets_tests.support.settings_files import load_lake_toml, write_lake_toml

SRC = "web"


def settings_text(extra: str = "", source_extra: str = "") -> str:
    return (
        f'archive_root = "archive"\nlake_root = "lake"\n{extra}\n'
        f'[[sources]]\nid = "{SRC}"\n{source_extra}\n[[sources]]\nid = "app"\n'
    )


def test_the_interval_defaults_to_5_minutes_and_a_source_may_override_it(tmp_path):
    s = load_lake_toml(tmp_path, settings_text(), table_format="iceberg")
    assert [s.freshness_minutes(x) for x in s.sources] == [5, 5]
    s = load_lake_toml(
        tmp_path,
        settings_text("[freshness]\ninterval_minutes = 0", "freshness_minutes = 1"),
        table_format="iceberg",
    )
    assert [s.freshness_minutes(x) for x in s.sources] == [1, 0]
    with pytest.raises(SettingsError) as e:
        load_lake_toml(tmp_path, settings_text(source_extra="freshness_minutes = 90"))
    assert "sources[0].freshness_minutes" in str(e.value)
    assert "an integer from 0 to 60 (0: hourly syncs only), got 90" in str(e.value)
    with pytest.raises(SettingsError) as e:
        load_lake_toml(tmp_path, settings_text("[freshness]\ninterval_minutes = -1"))
    assert "freshness.interval_minutes" in str(e.value)


def test_batches_come_often_enough_that_the_interval_bounds_an_events_wait(tmp_path):
    """An event waits for its spool segment to roll (up to the collector's segment age), then
    for the next batch: the batches come every interval less that age (at least every half
    interval), so the interval bounds the wait from the event's arrival."""
    text = settings_text("[collector]\nsegment_max_age_seconds = 60", "freshness_minutes = 1")
    s = load_lake_toml(tmp_path, text, table_format="iceberg")
    got = {b.source.id: (b.minutes, b.period_s) for b in batched_sources(s, print)}
    assert got == {SRC: (1, 30), "app": (5, 240)}
    text = settings_text(
        "[collector]\nsegment_max_age_seconds = 600\n[freshness]\ninterval_minutes = 60"
    )
    s = load_lake_toml(tmp_path, text, table_format="iceberg")
    assert [b.period_s for b in batched_sources(s, print)] == [3000, 3000]
    text = settings_text("[collector]\nsegment_max_age_seconds = 3600")
    s = load_lake_toml(tmp_path, text, table_format="iceberg")
    assert [b.period_s for b in batched_sources(s, print)] == [150, 150]


@pytest.mark.parametrize(
    ("now", "hours"),
    [
        ("2026-11-21T10:03:00", ["2026-11-21T09", "2026-11-21T10"]),  # 09 not closed yet
        ("2026-11-21T10:05:00", ["2026-11-21T10"]),  # settle_minutes = 5 after 09's end
        ("2026-11-21T10:59:59", ["2026-11-21T10"]),
    ],
)
def test_a_batch_looks_at_the_open_hour_and_the_one_before_until_it_closes(now, hours):
    assert open_hours(datetime.fromisoformat(now).replace(tzinfo=UTC), 5) == hours


def test_the_loader_appends_new_files_one_line_a_batch_and_records_nothing_new(tmp_path):
    """One line per batch that read something; in Dagster, every batch a materialization of
    the source's open hour: its rows so far by table (counted from the tables), when."""
    settings = load_lake_toml(tmp_path, settings_text(), table_format="iceberg")
    instance = DagsterInstance.ephemeral()
    now = datetime.now(UTC)
    hour = str(ArchiveHour.of(now))
    write_hour(settings.archive_root, SRC, hour, [msg("n1", hour, 0), msg("n2", hour, 0)])
    lines: list[str] = []

    def batches(at: datetime) -> None:
        lines.clear()
        reporter = dagster_reporter(instance, settings)
        run_loop(
            settings, threading.Event(), lines.append, lambda: at, once=True, reporter=reporter
        )

    def open_hour(source: str) -> dict:
        event = instance.get_latest_materialization_event(open_hour_key(source))
        return {k: v.value for k, v in event.asset_materialization.metadata.items()}

    batches(now)
    assert lines[0] == (
        "freshness: the open hour's events in their tables within "
        "5 min (web: a batch every 240 s), 5 min (app: a batch every 240 s)"
    )
    assert len(lines) == 2 and lines[1].startswith(f"batch web {hour}: 2 lines, 2 rows, ")
    ids = tables(sql_catalog(settings.lake_root), SRC)["tracks"].scan().to_arrow()
    assert sorted(ids["message_id"].to_pylist()) == ["n1", "n2"]
    web = open_hour(SRC)
    assert web["open_hour"] == hour and web["messages_so_far"] == 2 and web["rows_added"] == 2
    assert web["rows_by_table"][hour] == {"tracks": 2, "order_completed": 2}
    assert web["last_batch"] == now.timestamp() and web["new_files"] == 1
    assert open_hour("app")["messages_so_far"] == 0  # a quiet source's batch says so too

    later = now + timedelta(seconds=1)
    write_hour(settings.archive_root, SRC, hour, [msg("n3", hour, 0)], name="part-0001.jsonl.gz")
    batches(later)
    web = open_hour(SRC)
    assert web["rows_by_table"][hour] == {"tracks": 3, "order_completed": 3}
    assert web["messages_so_far"] == 3 and web["rows_added"] == 1 and web["new_files"] == 1
    reports = sorted(Path(settings.lake_root, "reports").rglob("report.json"))

    batches(later + timedelta(seconds=1))
    # nothing new: no line but the start's, and no report (a batch runs every few minutes);
    # in Dagster, the batch that ran: as fresh as then, the same rows
    assert len(lines) == 1
    assert sorted(Path(settings.lake_root, "reports").rglob("report.json")) == reports
    web = open_hour(SRC)
    assert web["messages_so_far"] == 3 and web["new_files"] == 0
    assert web["last_batch"] == (later + timedelta(seconds=1)).timestamp()


def test_the_segment_layout_says_in_one_line_that_it_takes_no_batches(tmp_path):
    settings = load_lake_toml(tmp_path, settings_text(), table_format="segment")
    lines: list[str] = []
    run_loop(settings, threading.Event(), say=lines.append, once=True)
    assert len(lines) == 1 and "segment table format replaces whole hours" in lines[0]
    assert 'table_format = "iceberg"' in lines[0]


def test_a_failing_batch_is_one_line_and_the_loop_goes_on(tmp_path):
    settings = load_lake_toml(tmp_path, settings_text(), table_format="iceberg")
    now = datetime.now(UTC)
    hour = str(ArchiveHour.of(now))
    write_hour(settings.archive_root, SRC, hour, [msg("f1", hour, 0)])
    write_hour(settings.archive_root, "app", hour, [msg("a1", hour, 0)])
    lock = Path(settings.lake_root, "_locks")  # a lake whose lock folder is a file: no sync
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("not a folder")
    lines: list[str] = []
    run_loop(settings, threading.Event(), say=lines.append, clock=lambda: now, once=True)
    failed = [line for line in lines if "failed" in line]
    assert [line.split(":")[0] for line in failed] == ["batch web failed", "batch app failed"]
    assert all("\n" not in line for line in lines)


def test_a_batch_gives_way_to_a_run_holding_its_source_in_one_line(tmp_path):
    """The hour's close (or a backfill, an erasure) holds the source: its batch waits
    ``LOCK_WAIT_S``, not the sync's 10 minutes, says so, and the other sources' batches go on."""
    from datalake_assets.lake.lock import SourceLock

    settings = load_lake_toml(tmp_path, settings_text(), table_format="iceberg")
    now = datetime.now(UTC)
    hour = str(ArchiveHour.of(now))
    write_hour(settings.archive_root, SRC, hour, [msg("g1", hour, 0)])
    write_hour(settings.archive_root, "app", hour, [msg("g2", hour, 0)])
    lines: list[str] = []
    with SourceLock(settings.lake_root, SRC, "the-hours-close"):
        run_loop(settings, threading.Event(), say=lines.append, clock=lambda: now, once=True)
    busy = [line for line in lines if line.startswith(f"batch {SRC} ")]
    assert len(busy) == 1 and "waits for the run holding the source" in busy[0], lines
    assert "run the-hours-close" in busy[0] and "failed" not in busy[0]
    assert any(line.startswith(f"batch app {hour}: 1 lines, 1 rows") for line in lines), lines
    run_loop(settings, threading.Event(), say=lines.append, clock=lambda: now, once=True)
    assert any(line.startswith(f"batch {SRC} {hour}: 1 lines, 1 rows") for line in lines), lines


def test_an_instance_that_cannot_be_opened_yet_is_opened_at_a_later_batch(tmp_path, monkeypatch):
    """``datalake batches`` started while the instance's database is down: each batch says in
    one line that it was not recorded, and the first batch after the instance opens records
    the open hour with every row so far (before, the loop ran unrecorded for good)."""
    from datalake_assets.cli_batches import _reporter_opening_instance

    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(
        "storage:\n  postgres: {postgres_url: 'postgresql://x@127.0.0.1:1/none'}\n"
    )
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    settings = load_lake_toml(tmp_path, settings_text(), table_format="iceberg")
    now = datetime.now(UTC)
    hour = str(ArchiveHour.of(now))
    write_hour(settings.archive_root, SRC, hour, [msg("h1", hour, 0)])
    reporter = _reporter_opening_instance(settings)
    lines: list[str] = []
    loop = dict(say=lines.append, clock=lambda: now, once=True, reporter=reporter)
    run_loop(settings, threading.Event(), **loop)
    assert any(ln.startswith(f"batch {SRC}: not recorded in Dagster: ") for ln in lines), lines
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")  # the database is back
    write_hour(settings.archive_root, SRC, hour, [msg("h2", hour, 1)], name="part-0001.jsonl")
    run_loop(settings, threading.Event(), **loop)
    with DagsterInstance.from_config(str(home)) as instance:
        event = instance.get_latest_materialization_event(open_hour_key(SRC))
    assert event is not None
    meta = event.asset_materialization.metadata
    assert meta["messages_so_far"].value == 2  # the unrecorded batch's row counted too


def test_datalake_batches_once_as_a_user_runs_it(tmp_path):
    from datalake_assets_tests.test_cli import run_datalake

    write_lake_toml(tmp_path, settings_text(), table_format="iceberg")
    hour = str(ArchiveHour.of(datetime.now(UTC)))
    write_hour(str(tmp_path / "archive"), "app", hour, [msg("c1", hour, 0)])
    done = run_datalake(tmp_path, "batches", "--once")
    assert done.returncode == 0, done.stderr
    assert f"batch app {hour}: 1 lines, 1 rows" in done.stdout, done.stdout
