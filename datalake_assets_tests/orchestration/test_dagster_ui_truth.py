"""What the UI says is true (issue #27), as a user sees it: ``datalake dev`` (webserver +
daemon) on loopback with a temp home, read and driven through the UI's own GraphQL.

One session, in the order a new user meets it:

1. the archive sensor syncs three hours of different sizes in ONE batched run: every hourly
   partition of a table, of the quarantine and of the report carries that hour's own rows,
   lines and quarantined lines (compared with the lake's files and the archive);
2. ``order_completed``, found by that sync, becomes a declared asset at the reload: its checks
   then have a result for each of the three hours, without another sync;
3. *Execute all* on its Checks tab (the button's own launch) succeeds and evaluates the checks
   from the lake, per hour;
4. two older hours written later (within the re-check window) are synced by the sensor;
5. an hour whose run failed, then synced with ``datalake sync``, shows as materialized, with
   the CLI's note.

Failures are collected and reported together, so one run tells everything that is wrong.

The lake is in the default table format, Iceberg (no ``table_format`` in the settings, as a new
user has it); ``test_dagster_ui.py`` drives the UI's materializations and backfills on the
Segment layout, so the UI path runs in both formats and each session once.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from datalake_assets.orchestration.sync.sync_records import CLI_NOTE
from datalake_assets.spec.layout import ArchiveHour
from datalake_assets_tests.orchestration.dagster_ui import (
    TERMINAL_RUN,
    DagsterUI,
    datalake_dev,
    poll,
)
from datalake_assets_tests.orchestration.dagster_ui_queries import (
    LAUNCH_PIPELINE_EXECUTION_MUTATION,
)
from datalake_assets_tests.orchestration.dagster_ui_status import (
    Steps,
    check_statuses,
    latest_metadata,
    partition_status,
)
from datalake_assets_tests.orchestration.test_dagster_ui import SOURCE, wait_sensor_runs
from datalake_assets_tests.support.archive_builders import msg, write_hour
from datalake_assets_tests.support.settings_files import write_lake_toml

pytestmark = [pytest.mark.dagster, pytest.mark.spark]

TABLE = f"{SOURCE}/order_completed"
RUN_TIMEOUT = 360.0
RELOAD_TIMEOUT = 240.0
ORDERS = (5, 9, 13)  # order_completed rows of the three first hours: each hour its own figure
BAD = (1, 2, 3)  # quarantined lines of each


def hour_lines(hour: ArchiveHour, orders: int, bad: int) -> list:
    h = str(hour)
    lines: list = [
        msg(f"{h}-p{i}", h, i, type="page", name="Home", event=None, properties={"path": f"/p/{i}"})
        for i in range(20)
    ]
    lines += [
        msg(f"{h}-o{i}", h, i, properties={"revenue": 10.5 + i, "order_id": f"o{i}"})
        for i in range(orders)
    ]
    lines += [b"{not json"] * bad
    return [
        {k: v for k, v in m.items() if v is not None} if isinstance(m, dict) else m for m in lines
    ]


def settings_file(home: Path) -> Path:
    return write_lake_toml(
        home,
        'archive_root = "archive"\nlake_root = "lake"\n'
        '[spark]\nmaster = "local[2]"\ndriver_memory = "1g"\nshuffle_partitions = 2\n'
        "[automation]\ninterval_seconds = 10\nsettle_minutes = 0\n"
        "definitions_interval_seconds = 10\n"  # the reload waited on: the least the settings take
        '[catalog]\nbackend = "none"\n'
        f'[[sources]]\nid = "{SOURCE}"\n',  # start = "auto": the archive's first hour
        table_format=None,  # the default: Iceberg
    )


def execute_all_checks(ui: DagsterUI, node: dict) -> str:
    """ExecuteChecksButton.onClick: the launchable checks, the job common to them, no assets,
    no partition, config '{}'."""
    checks = node["assetChecksOrError"]["checks"]
    launchable = [c for c in checks if c["canExecuteIndividually"] == "CAN_EXECUTE"]
    assert launchable, f"no check can execute alone: {checks}"
    common = [j for j in checks[0]["jobNames"] if all(j in c["jobNames"] for c in checks)]
    job = common[0] if common else node["jobNames"][0]
    repo = node["repository"]
    params = {
        "mode": "default",
        "executionMetadata": {},
        "runConfigData": "{}",
        "selector": {
            "jobName": job,
            "repositoryLocationName": repo["location"]["name"],
            "repositoryName": repo["name"],
            "assetSelection": [],
            "assetCheckSelection": [
                {"assetKey": {"path": node["assetKey"]["path"]}, "name": c["name"]}
                for c in launchable
            ],
        },
    }
    out = ui.gql(LAUNCH_PIPELINE_EXECUTION_MUTATION, {"executionParams": params})[
        "launchPipelineExecution"
    ]
    assert out["__typename"] == "LaunchRunSuccess", f"checks not launched: {out}"
    return out["run"]["id"]


def wait_terminal(ui: DagsterUI, run_id: str) -> dict:
    return poll(
        f"run {run_id} to end",
        lambda: next(
            (r for r in ui.runs() if r["id"] == run_id and r["status"] in TERMINAL_RUN), None
        ),
        RUN_TIMEOUT,
    )


# ------------------------------------------------------------------------------------- the test


@pytest.mark.slow
def test_what_the_ui_says_is_true(tmp_path):
    t0 = time.monotonic()
    now = datetime.now(UTC)
    hours = [ArchiveHour.of(now - timedelta(hours=n)) for n in (7, 6, 5)]
    older = [ArchiveHour.of(now - timedelta(hours=n)) for n in (9, 8)]
    home = tmp_path / "home"
    home.mkdir()
    settings = settings_file(home)
    archive, lake = home / "archive", home / "lake"
    for h, orders, bad in zip(hours, ORDERS, BAD):
        write_hour(str(archive), SOURCE, str(h), hour_lines(h, orders, bad))
    step = Steps(t0)

    with datalake_dev(home, settings) as dev:
        ui = dev.ui
        wait_sensor_runs(ui, hours)
        poll(
            f"{TABLE} to become a declared asset (reload)",
            lambda: TABLE in ui.asset_nodes() and ui.location_loaded(),
            RELOAD_TIMEOUT,
            5.0,
        )

        def per_hour_figures():
            for h, orders, bad in zip(hours, ORDERS, BAD):
                k = h.partition_key
                md = latest_metadata(ui, TABLE, k)
                assert (md["rows"], md["dagster/row_count"]) == (orders, orders), (k, md)
                assert md["files"] == 1 and md["bytes"] == lake_bytes(lake, h), (k, md)
                assert md["batch_hours"] == 3, (k, md)  # one batched run, said as such
                q = latest_metadata(ui, f"{SOURCE}/quarantine", k)
                assert q["lines_quarantined"] == bad, (k, q)
                r = latest_metadata(ui, f"{SOURCE}/sync_reports", k)
                assert r["lines_in"] == 20 + orders + bad, (k, r)
                assert r["messages_written"] == 20 + orders and r["lines_quarantined"] == bad

        def checks_of_every_synced_hour():
            want = {h.partition_key for h in hours}

            def evaluated():
                _, statuses = check_statuses(ui, TABLE)
                ok = {
                    n: {k for k, s in st.items() if s == "SUCCEEDED"} for n, st in statuses.items()
                }
                return statuses if ok and all(want <= v for v in ok.values()) else None

            poll(
                f"the checks of {TABLE} to have succeeded for {sorted(want)} "
                f"(now: {check_statuses(ui, TABLE)[1]})",
                evaluated,
                60,
                3.0,
            )

        def execute_all():
            node, _ = check_statuses(ui, TABLE)
            run_id = execute_all_checks(ui, node)
            run = wait_terminal(ui, run_id)
            assert run["status"] == "SUCCESS", f"Execute all: {ui.run_errors(run_id)}"
            got = check_events(ui, run_id)
            want = {
                (c, h.partition_key)
                for c in ("duplicates", "type_drift", "schema_conformance")
                for h in hours
            }
            assert want <= {(c, p) for c, p, ok in got if ok}, f"evaluated: {sorted(got)}"

        def older_hours():
            for h in older:
                write_hour(str(archive), SOURCE, str(h), hour_lines(h, 2, 0))
            wait_sensor_runs(ui, older)
            status = partition_status(ui, f"{SOURCE}/pages")
            assert all(status.get(h.partition_key) == "MATERIALIZED" for h in [*older, *hours]), (
                status
            )

        def cli_sync_after_a_failed_run():
            h = hours[1]
            locks = lake / "_locks"
            shutil.move(locks, tmp_path / "locks-aside")
            locks.write_text("not a folder: the next sync fails")
            try:
                loaded = ui.load_for_launch([f"{SOURCE}/pages"])
                run = wait_terminal(ui, ui.launch_partition_run(loaded, h.partition_key))
                assert run["status"] == "FAILURE", run
                assert partition_status(ui, f"{SOURCE}/pages")[h.partition_key] == "FAILED"
            finally:
                locks.unlink()
                shutil.move(tmp_path / "locks-aside", locks)
            env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
            env.update(
                DATALAKE_HOME=str(home), DATALAKE_SETTINGS=str(settings), SPARK_LOCAL_IP="127.0.0.1"
            )
            done = subprocess.run(
                [sys.executable, "-m", "datalake_assets.cli", "sync", "--hours", str(h)],
                check=False,
                env=env,
                capture_output=True,
                text=True,
                timeout=RUN_TIMEOUT,
            )
            assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
            assert partition_status(ui, f"{SOURCE}/pages")[h.partition_key] == "MATERIALIZED"
            md = latest_metadata(ui, TABLE, h.partition_key)
            assert md["description"] == CLI_NOTE and md["rows"] == ORDERS[1], md

        def materialize_and_backfill():
            """The Materialize button on the Iceberg lake: one hour of one table, then the
            three first hours as a backfill (a replay). Each hour's rows are in the Iceberg
            table once: replaced, never duplicated."""
            from datalake_assets_tests.support.iceberg_reader import sql_catalog

            one = ui.load_for_launch([TABLE])
            run_id = ui.launch_partition_run(one, hours[0].partition_key)
            run = wait_terminal(ui, run_id)
            assert run["status"] == "SUCCESS", ui.run_errors(run_id)
            assert ui.materialized_partitions(run_id).get(TABLE) == {hours[0].partition_key}
            bid = ui.launch_backfill(one, [h.partition_key for h in hours])
            b = ui.wait_backfill(bid, RUN_TIMEOUT)
            failed = [r for r in b["runs"] if r["status"] != "SUCCESS"]
            assert b["status"] in ("COMPLETED", "COMPLETED_SUCCESS") and b["runs"], b
            assert not failed, [ui.run_errors(r["id"]) for r in failed]
            table = sql_catalog(str(lake)).load_table(f"{SOURCE}.order_completed")
            rows = table.scan(selected_fields=("day", "hr")).to_arrow().to_pylist()
            per_hour = {(h.day, h.hr): 0 for h in hours}
            for r in rows:
                if (r["day"], r["hr"]) in per_hour:
                    per_hour[(r["day"], r["hr"])] += 1
            assert list(per_hour.values()) == list(ORDERS), per_hour

        step("1 per-hour figures", per_hour_figures)
        step("2 checks of a table found by the sync", checks_of_every_synced_hour)
        step("3 execute all checks", execute_all)
        step("4 older hours written later", older_hours)
        step("5 a CLI sync after a failed run", cli_sync_after_a_failed_run)
        step("6 materialize and backfill from the UI", materialize_and_backfill)
    step.assert_all_passed()


def lake_bytes(lake: Path, hour: ArchiveHour) -> int:
    """The bytes of the hour's data files, as stage B named them in the Iceberg table's data
    folder (each of these hours is synced once: no replaced file is left beside them)."""
    assert (lake / "_table_format.json").read_text().count('"iceberg"') == 1
    files = (lake / "iceberg" / SOURCE / "order_completed" / "data").rglob(
        f"part-{hour.compact}-*.parquet"
    )
    return sum(f.stat().st_size for f in files)


CHECK_EVENTS_QUERY = """
query RunCheckEventsForTest($runId: ID!, $cursor: String) {
  logsForRun(runId: $runId, afterCursor: $cursor, limit: 1000) {
    ... on EventConnection { cursor events { __typename
      ... on AssetCheckEvaluationEvent { evaluation { checkName partition success } } } }
  }
}"""


def check_events(ui: DagsterUI, run_id: str) -> set[tuple[str, str, bool]]:
    """(check, partition, passed) of every check evaluation a run logged."""
    out, cursor = set(), None
    while True:
        conn = ui.gql(CHECK_EVENTS_QUERY, {"runId": run_id, "cursor": cursor})["logsForRun"]
        for e in conn.get("events", []):
            if e["__typename"] == "AssetCheckEvaluationEvent":
                ev = e["evaluation"]
                out.add((ev["checkName"], ev["partition"], ev["success"]))
        if not conn.get("events"):
            return out
        cursor = conn["cursor"]
