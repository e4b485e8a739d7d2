"""The models as a user meets them (issue #28), checked in the ``datalake dev`` session of
test_dagster_ui.py (one webserver, daemon and metastore start for both): a second source,
``demo``, with an archive of demo traffic (``ingest/demo/``, small hours) from 20:00 the day
before yesterday (day A, whose first hour is the source's first: A is complete with its last
4 hours) to 03:00 yesterday (day B, 4 of its 24 hours), driven through the UI's GraphQL:

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

from datetime import UTC, datetime, timedelta
from pathlib import Path

from datalake_assets.ingest.demo import generate_archive
from datalake_assets.orchestration.dbt.model_assets import MODELS_SENSOR
from datalake_assets.spec import layout
from datalake_assets_tests.orchestration.dagster_ui import DagsterUI, poll
from datalake_assets_tests.orchestration.dagster_ui_status import day_status

SOURCE = "demo"
DAILY = (f"{SOURCE}/daily_event_counts", f"{SOURCE}/sessions")
TIMEOUT = 360.0  # a sync, then dbt on the served metastore's Spark, on a busy 2-core machine
STANDARD = ("tracks", "pages", "screens", "identifies", "groups", "aliases")
SETTINGS = f'[[sources]]\nid = "{SOURCE}"\n'  # start = "auto": the archive's first hour


def write_demo_archive(archive: Path) -> list[str]:
    """The demo source's 8 hours (20:00 of day A to 03:00 of day B) in ``archive``; the days."""
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    first = layout.ArchiveHour.of(today - timedelta(hours=28))
    hours = layout.hour_range(first, layout.ArchiveHour.of(today - timedelta(hours=21)))
    days = sorted({h.day for h in hours})
    assert len(days) == 2 and len(hours) == 8
    generate_archive(str(archive), SOURCE, hours, events_per_hour=40, files_per_hour=1, seed=11)
    return days


class ModelsChecks:
    """The three checks (and day B's, again at the end) of one ``datalake dev`` session whose
    settings hold ``SETTINGS`` and whose archive ``write_demo_archive`` wrote."""

    def __init__(self, ui: DagsterUI, days: list[str], settings: Path, lake: Path) -> None:
        self.ui, self.days, self.settings, self.lake = ui, days, settings, lake

    def built_by_the_daemon(self) -> None:
        ui, days = self.ui, self.days

        def done():
            runs = automation_runs(ui)
            bad = [r for r in runs if r["status"] in ("FAILURE", "CANCELED")]
            assert not bad, automation_errors(ui, bad)
            status = {k: day_status(ui, k) for k in DAILY}
            return (
                all(s.get(days[0]) == "MATERIALIZED" for s in status.values())
                and runs
                and all(r["status"] == "SUCCESS" for r in runs)
            )

        poll(f"the daemon to build {days[0]} of {DAILY} by itself", done, TIMEOUT, 5.0)
        self.b_not_automated()

    def b_not_automated(self) -> None:
        asked = {r["tag"].get("dagster/partition") for r in automation_runs(self.ui)}
        assert self.days[1] not in asked, f"day {self.days[1]} built before its hours: {asked}"

    def a_range_in_one_run(self) -> None:
        ui, days = self.ui, self.days
        loaded = ui.load_for_launch(list(DAILY))
        bid = ui.launch_backfill(loaded, days)
        b = ui.wait_backfill(bid, TIMEOUT)
        assert b["status"] in ("COMPLETED", "COMPLETED_SUCCESS"), b
        assert len(b["runs"]) == 1 and b["runs"][0]["status"] == "SUCCESS", (
            f"{b['runs']}: {[ui.run_errors(r['id']) for r in b['runs']]}"
        )
        got = ui.materialized_partitions(b["runs"][0]["id"])
        assert all(got.get(k) == set(days) for k in DAILY), got

    def the_models_hold_the_lake(self) -> None:
        from datalake_assets.catalog import metastore_server
        from datalake_assets.catalog.config import config_from_settings
        from datalake_assets.settings import load_settings

        cfg = config_from_settings(load_settings(self.settings, env={}).catalog)
        try:
            session = cfg.served_session()
            assert session is not None, f"no server holds {cfg.metastore_dir}"
            counted = dict(
                session.sql(
                    f"SELECT day, sum(events) FROM {SOURCE}.daily_event_counts GROUP BY day"
                ).collect()
            )
            started = {
                r[0]
                for r in session.sql(
                    f"SELECT DISTINCT cast(session_day AS string) FROM {SOURCE}.sessions"
                ).collect()
            }
        finally:
            metastore_server.forget_decisions()  # before datalake dev stops its server
        want = lake_messages_by_day(self.lake)
        assert {d: int(n) for d, n in counted.items()} == want, (counted, want)
        assert set(self.days) <= started, started


def lake_messages_by_day(lake: Path) -> dict[str, int]:
    import duckdb

    counts: dict[str, int] = {}
    for table in STANDARD:
        files = lake / "data" / SOURCE / f"segment_type={table}"
        if not files.exists():
            continue
        for day, n in duckdb.sql(
            f"SELECT day, count(*) FROM read_parquet('{files}/*/*/*.parquet', "
            f"hive_partitioning = true) GROUP BY day"
        ).fetchall():
            counts[str(day)] = counts.get(str(day), 0) + n
    return counts


def automation_runs(ui: DagsterUI) -> list[dict]:
    """The runs the models' automation sensor (the daemon's) launched for this source's models
    (the session's other source has models of its own, which the sensor may build too)."""
    return [
        r
        for r in ui.runs()
        if r["tag"].get("dagster/sensor_name") == MODELS_SENSOR
        and (
            not r.get("assetSelection") or any(k["path"][0] == SOURCE for k in r["assetSelection"])
        )
    ]


def automation_errors(ui: DagsterUI, runs: list[dict]) -> str:
    return "; ".join(f"run {r['id']} {r['status']}: {ui.run_errors(r['id'])}" for r in runs)
