"""The models as a user meets them (issue #28): ``datalake dev`` (webserver + daemon) on
loopback with a temp home and an archive of demo traffic (``ingest/demo.py``, small hours)
from 20:00 the day before yesterday (day A, whose first hour is the source's first: A is
complete with its last 4 hours) to 03:00 yesterday (day B, 4 of its 24 hours), driven through
the UI's GraphQL:

1. the archive sensor syncs the hours; then the models' automation sensor, run by the daemon,
   builds day A of the daily models by itself, in a run that succeeds, and not day B (its
   other 20 hours are not synced);
2. both days selected as a range in the partitions dialog (a backfill) materialize, in ONE
   run (``BackfillPolicy.single_run``: one ``dbt build``);
3. read through the metastore's server that ``datalake dev`` runs, ``daily_event_counts``
   holds each day's messages of the lake (counted by DuckDB from the lake's files) and
   ``sessions`` has sessions starting on both days.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from datalake_assets.ingest.demo import generate_archive
from datalake_assets.orchestration.models import MODELS_SENSOR
from datalake_assets.spec import layout
from datalake_assets_tests.orchestration.dagster_ui import (
    DagsterUI,
    datalake_dev,
    key_input,
    poll,
)
from datalake_assets_tests.orchestration.dagster_ui_queries import (
    ASSET_PARTITION_STATUSES_QUERY,
)
from datalake_assets_tests.support.settings_files import write_lake_toml

pytestmark = [pytest.mark.dagster, pytest.mark.spark]

SOURCE = "demo"
DAILY = (f"{SOURCE}/daily_event_counts", f"{SOURCE}/sessions")
TIMEOUT = 360.0  # a sync, then dbt on the served metastore's Spark, on a busy 2-core machine
STANDARD = ("tracks", "pages", "screens", "identifies", "groups", "aliases")


def day_status(ui: DagsterUI, key: str) -> dict[str, str]:
    """Day -> MATERIALIZED / FAILED / ... as the partition bar of a daily asset shows it."""
    node = ui.gql(ASSET_PARTITION_STATUSES_QUERY, {"assetKeys": [key_input(key)]})["assetNodes"]
    assert node, f"{key} is not a declared asset"
    out = {}
    for r in node[0]["assetPartitionStatuses"].get("ranges") or []:
        day = datetime.strptime(r["startKey"], "%Y-%m-%d")
        while day.strftime("%Y-%m-%d") <= r["endKey"]:
            out[day.strftime("%Y-%m-%d")] = r["status"]
            day += timedelta(days=1)
    return out


def lake_messages_by_day(lake: Path) -> dict[str, int]:
    import duckdb

    counts: dict[str, int] = {}
    for table in STANDARD:
        files = lake / "data" / SOURCE / f"segment_type={table}"
        if not files.exists():
            continue
        for day, n in duckdb.sql(
                f"SELECT day, count(*) FROM read_parquet('{files}/*/*/*.parquet', "
                f"hive_partitioning = true) GROUP BY day").fetchall():
            counts[str(day)] = counts.get(str(day), 0) + n
    return counts


def test_daily_models_build_by_themselves_and_a_range_in_one_run(tmp_path):
    t0 = time.monotonic()
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    first = layout.ArchiveHour.of(today - timedelta(hours=28))
    hours = layout.hour_range(first, layout.ArchiveHour.of(today - timedelta(hours=21)))
    days = sorted({h.day for h in hours})
    assert len(days) == 2 and len(hours) == 8
    home = tmp_path / "home"
    home.mkdir()
    generate_archive(str(home / "archive"), SOURCE, hours, events_per_hour=40,
                     files_per_hour=1, seed=11)
    settings = write_lake_toml(
        home,
        'archive_root = "archive"\nlake_root = "lake"\n'
        '[spark]\nmaster = "local[2]"\ndriver_memory = "1g"\nshuffle_partitions = 2\n'
        '[automation]\ninterval_seconds = 10\nsettle_minutes = 0\n'
        f'[[sources]]\nid = "{SOURCE}"\n')  # start = "auto": the archive's first hour
    failures: list[str] = []

    def step(name: str, fn) -> None:
        try:
            fn()
        except (AssertionError, OSError) as e:
            failures.append(f"({name}) {e}")
        print(f"({name}) done at {time.monotonic() - t0:.0f} s")

    with datalake_dev(home, settings) as dev:
        ui = dev.ui

        def built_by_the_daemon():
            def done():
                runs = automation_runs(ui)
                bad = [r for r in runs if r["status"] in ("FAILURE", "CANCELED")]
                assert not bad, automation_errors(ui, bad)
                status = {k: day_status(ui, k) for k in DAILY}
                return (all(s.get(days[0]) == "MATERIALIZED" for s in status.values())
                        and runs and all(r["status"] == "SUCCESS" for r in runs))

            poll(f"the daemon to build {days[0]} of {DAILY} by itself", done, TIMEOUT, 5.0)
            assert_b_not_automated()

        def assert_b_not_automated():
            asked = {r["tag"].get("dagster/partition") for r in automation_runs(ui)}
            assert days[1] not in asked, f"day {days[1]} built before its hours: {asked}"

        def a_range_in_one_run():
            loaded = ui.load_for_launch(list(DAILY))
            bid = ui.launch_backfill(loaded, days)
            b = ui.wait_backfill(bid, TIMEOUT)
            assert b["status"] in ("COMPLETED", "COMPLETED_SUCCESS"), b
            assert len(b["runs"]) == 1 and b["runs"][0]["status"] == "SUCCESS", (
                f"{b['runs']}: {[ui.run_errors(r['id']) for r in b['runs']]}")
            got = ui.materialized_partitions(b["runs"][0]["id"])
            assert all(got.get(k) == set(days) for k in DAILY), got

        def the_models_hold_the_lake():
            from datalake_assets.catalog import metastore_server
            from datalake_assets.catalog.config import config_from_settings
            from datalake_assets.settings import load_settings

            cfg = config_from_settings(load_settings(settings, env={}).catalog)
            try:
                session = cfg.served_session()
                assert session is not None, f"no server holds {cfg.metastore_dir}"
                counted = dict(session.sql(
                    f"SELECT day, sum(events) FROM {SOURCE}.daily_event_counts GROUP BY day"
                ).collect())
                started = {r[0] for r in session.sql(
                    f"SELECT DISTINCT cast(session_day AS string) FROM {SOURCE}.sessions"
                ).collect()}
            finally:
                metastore_server.forget_decisions()  # before datalake dev stops its server
            want = lake_messages_by_day(home / "lake")
            assert {d: int(n) for d, n in counted.items()} == want, (counted, want)
            assert set(days) <= started, started

        step("automation", built_by_the_daemon)
        step("range", a_range_in_one_run)
        step("contents", the_models_hold_the_lake)
        step("B still waits", assert_b_not_automated)
    print(f"test wall time {time.monotonic() - t0:.0f} s")
    assert not failures, "\n\n".join(failures)


def automation_runs(ui: DagsterUI) -> list[dict]:
    """The runs the models' automation sensor launched (the daemon's)."""
    return [r for r in ui.runs() if r["tag"].get("dagster/sensor_name") == MODELS_SENSOR]


def automation_errors(ui: DagsterUI, runs: list[dict]) -> str:
    return "; ".join(f"run {r['id']} {r['status']}: {ui.run_errors(r['id'])}" for r in runs)
