"""End to end, as a user drives Dagster: ``datalake dev`` (webserver + daemon) on loopback with
a temp home, the archive sensor syncing hours that introduce new event types, then through the
UI's own GraphQL calls (datalake_assets_tests/orchestration/dagster_ui.py):

(c) the new event tables become declared, materializable assets of the source without anyone
    reloading the code location;
(a) a backfill of a range of hours with the asset selection the UI held *before* those tables
    existed completes, every run succeeding;
(b) a materialization of one event table for one hour succeeds;
(e) every run registered its tables through the embedded metastore's server that
    ``datalake dev`` starts: they read, through it, as many rows as the lake's files hold;
(f) the catalog asset of each hour is materialized and its check in step;
(g) the models (issue #28) of a second source, ``demo``, whose archive of demo traffic the
    sensor syncs in phase 1 (two days, the first complete): the daemon builds the complete day
    by itself and not the other, a range of both days materializes in one run, and the models
    read through the served metastore hold the lake's messages per day
    (``dagster_ui_models.py``; in this session to spare a ``datalake dev`` start);

and the lake then equals a clean sync of the same archive (``datalake sync`` into a fresh
lake); then

(d) the job ``forget_person`` launched from the launchpad with a user's config erases that
    person (and nobody else) and records the request in ``privacy_requests``;
(h) ``datalake dev``'s output holds what the syncs did and none of Dagster's noise (the queue
    daemon's line every second, superseded-command, stray-dagster.yaml and beta warnings, a
    line per materialization and check evaluation of a run).

Failures of (c), (a), (b), (e), (f), (g), the comparison, (d) and (h) are collected and reported
together (``Steps``), so one run tells everything that is wrong.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from datalake_assets.orchestration.automation.batch_sync import SOURCE_HOURS_TAG
from datalake_assets.spec.layout import ArchiveHour
from datalake_assets_tests.orchestration import dagster_ui_models as models
from datalake_assets_tests.orchestration.dagster_ui import DagsterUI, datalake_dev, poll
from datalake_assets_tests.orchestration.dagster_ui_status import Steps
from datalake_assets_tests.support.archive_builders import msg, write_hour
from datalake_assets_tests.support.settings_files import write_lake_toml

pytestmark = [pytest.mark.dagster, pytest.mark.spark]

SOURCE = "web"
NEW_TABLES = ("order_completed", "cart_viewed")
RUN_TIMEOUT = 360.0  # per phase: a sync run starts a JVM and Spark on a busy 2-core machine
RELOAD_TIMEOUT = 240.0  # (c): "within a couple of minutes of the sync that first saw it"


def archive_lines(hour: ArchiveHour, new_events: bool) -> list:
    """About 120 lines of one hour: page, identify, a track event every hour has, and (hours
    2) two event names never seen before; one duplicate delivery and two bad lines, so the
    dedup and the quarantine are part of the comparison."""
    h = str(hour)
    lines: list = []
    for i in range(30):
        lines.append(
            msg(
                f"{h}-p{i}",
                h,
                i % 60,
                type="page",
                name="Home",
                event=None,
                properties={"path": f"/p/{i % 7}", "title": "Home"},
            )
        )
        lines.append(
            msg(
                f"{h}-i{i}",
                h,
                (i + 3) % 60,
                type="identify",
                event=None,
                userId=f"u-{i % 11}",
                traits={"email": f"u{i}@example.com", "plan": "pro" if i % 2 else "free"},
            )
        )
        lines.append(
            msg(
                f"{h}-s{i}",
                h,
                (i + 5) % 60,
                event="Signed Up",
                properties={"plan": "free", "referrer": f"ad-{i % 3}"},
            )
        )
        if new_events:
            lines.append(
                msg(
                    f"{h}-o{i}",
                    h,
                    (i + 7) % 60,
                    event="Order Completed",
                    properties={"revenue": 10.5 + i, "order_id": f"o-{i}", "currency": "USD"},
                )
            )
            if i % 2:
                lines.append(
                    msg(
                        f"{h}-c{i}",
                        h,
                        (i + 9) % 60,
                        event="Cart Viewed",
                        properties={"cart_id": f"c-{i}", "items": i % 5},
                    )
                )
    lines = [{k: v for k, v in m.items() if v is not None} for m in lines]
    lines.append(lines[4])  # a duplicate delivery
    lines.append(b"{not json")  # quarantined: invalid_json
    lines.append(
        {
            "messageId": f"{h}-bad",
            "anonymousId": "a",
            "receivedAt": f"{hour.day}T{hour.hr}:30:00.000Z",
        }
    )  # quarantined: missing_type
    return lines


def write_settings(
    folder: Path,
    start: ArchiveHour,
    archive_root: str = "archive",
    catalog: str = "hive",
    extra: str = "",
    models: bool = False,
) -> Path:
    """``datalake dev``'s settings: the default catalog, the embedded metastore that
    ``datalake dev`` serves (every run registers through its server), and the models' source
    (``extra``, with ``models``); the clean sync to compare with registers nothing (``catalog =
    "none"``)."""
    return write_lake_toml(
        folder,
        f'archive_root = "{archive_root}"\nlake_root = "lake"\n'
        '[spark]\nmaster = "local[2]"\ndriver_memory = "1g"\nshuffle_partitions = 2\n'
        "[automation]\ninterval_seconds = 10\nsettle_minutes = 0\n"
        "definitions_interval_seconds = 10\n"  # the reload waited on: the least the settings take
        f'[catalog]\nbackend = "{catalog}"\n'
        f'[[sources]]\nid = "{SOURCE}"\nstart = "{start.partition_key}"\n{extra}',
        models=models,
    )


def wait_sensor_runs(ui: DagsterUI, hours: list[ArchiveHour]) -> None:
    """Until the archive sensor's runs of every hour succeeded; fails at the first failed one.
    By default one run per tick syncs every due source-hour (``datalake_sync_job``, its hours
    in the tag ``datalake/source_hours``); a run per hour (``sensor_runs = "per_source"``)
    carries the hour as its partition."""
    wanted = {str(h) for h in hours}

    def covered(run) -> set[str]:
        tags = run["tag"]
        if "dagster/partition" in tags:
            return {str(ArchiveHour.parse(tags["dagster/partition"]))}
        return {
            item.split(":", 1)[1]
            for item in tags.get(SOURCE_HOURS_TAG, "").split()
            if item.startswith(f"{SOURCE}:")
        }

    def done():
        runs = [r for r in ui.runs({"datalake/trigger": "sensor"}) if covered(r) & wanted]
        for r in runs:
            assert r["status"] not in ("FAILURE", "CANCELED"), (
                f"sensor run {r['id']} of {sorted(covered(r))} ended {r['status']}:"
                f"\n{ui.run_errors(r['id'])}"
            )
        return wanted <= {h for r in runs if r["status"] == "SUCCESS" for h in covered(r)}

    poll(f"the archive sensor's runs of {sorted(wanted)} to succeed", done, RUN_TIMEOUT, 3.0)


def source_keys(ui: DagsterUI) -> list[str]:
    """Every materializable asset of the source's group (not the raw archive: external): what
    the Materialize dialog selects from one lake table (it adds the sync's siblings; the
    source's dbt models are a group of their own, daily-partitioned, built after the hours)."""
    return sorted(
        k
        for k, n in ui.asset_nodes().items()
        if k.startswith(f"{SOURCE}/") and n["isExecutable"] and n["groupName"] == SOURCE
    )


def new_tables_declared(ui: DagsterUI) -> dict | None:
    nodes = ui.asset_nodes()
    ok = {}
    for t in NEW_TABLES:
        n = nodes.get(f"{SOURCE}/{t}")
        deps = {"/".join(d["path"]) for d in (n or {}).get("dependencyKeys", [])}
        if not (
            n
            and n["groupName"] == SOURCE
            and n["isMaterializable"]
            and n["isExecutable"]
            and not n["isObservable"]
            and f"{SOURCE}/raw_archive" in deps
        ):
            return None
        ok[t] = n
    return ok


@pytest.mark.slow
def test_ui_backfills_and_new_event_tables(tmp_path):
    t0 = time.monotonic()
    # Two closed hours within the sensor's recheck window: the first has only known event
    # types, the second brings new ones; the backfill then replays both (a range).
    last = ArchiveHour.of(datetime.now(UTC) - timedelta(hours=3))
    hours = [ArchiveHour.of(last.start - timedelta(hours=1)), last]
    home = tmp_path / "home"
    home.mkdir()
    plan = write_plan(tmp_path / "plan.json")
    settings = write_settings(home, hours[0], extra=plan + models.SETTINGS, models=True)
    archive = home / "archive"
    for h in hours[:1]:
        write_hour(str(archive), SOURCE, str(h), archive_lines(h, new_events=False))
    days = models.write_demo_archive(archive)  # (g): the models' source, synced in phase 1
    step = Steps(t0)

    with datalake_dev(home, settings) as dev:
        ui = dev.ui
        print(f"datalake dev ready at {dev.url} after {time.monotonic() - t0:.0f} s")
        # Phase 1: the sensor syncs hour 1; the UI's selection is taken now.
        wait_sensor_runs(ui, hours[:1])
        # A reload may be under way (new tables): take the selection from a loaded location.
        poll("the code location to be loaded", ui.location_loaded, 120)
        held_keys = source_keys(ui)
        held = ui.load_for_launch(held_keys)
        assert {f"{SOURCE}/pages", f"{SOURCE}/sync_reports"} <= set(held_keys), held_keys
        print(
            f"phase 1 done at {time.monotonic() - t0:.0f} s; held selection ({held['job']}, "
            f"{len(held['nodes'])} assets): {held_keys}"
        )

        # Phase 2: hours with event types never seen before.
        for h in hours[1:]:
            write_hour(str(archive), SOURCE, str(h), archive_lines(h, new_events=True))
        clean = start_clean_sync(tmp_path / "clean", archive, hours, plan)
        wait_sensor_runs(ui, hours[1:])
        print(f"phase 2 done at {time.monotonic() - t0:.0f} s")

        def new_tables_by_themselves():  # (c): no reload mutation here
            try:
                poll(
                    f"{NEW_TABLES} to become declared, materializable assets of group "
                    f"{SOURCE!r} downstream of {SOURCE}/raw_archive, without a manual reload "
                    f"(catalog now: {describe_new_tables(ui)})",
                    lambda: new_tables_declared(ui),
                    RELOAD_TIMEOUT,
                    5.0,
                )
            except AssertionError as e:
                raise AssertionError(
                    f"{e}; catalog at the end: {describe_new_tables(ui)}"
                ) from None

        def backfill_with_the_held_selection():  # (a): both hours
            bid = ui.launch_backfill(held, [h.partition_key for h in hours])
            b = ui.wait_backfill(bid, RUN_TIMEOUT)
            failed = "".join(
                f"\nrun {r['id']} {r['status']}:\n{ui.run_errors(r['id'])}"
                for r in b["runs"]
                if r["status"] != "SUCCESS"
            )
            ok = b["status"] in ("COMPLETED", "COMPLETED_SUCCESS")
            assert ok and b["runs"] and not failed, (
                f"backfill {bid} ended {b['status']} with {len(b['runs'])} runs:{failed}"
            )

        def one_table_one_hour():  # (b): as the asset page's Materialize does
            one = ui.load_for_launch([f"{SOURCE}/order_completed"])
            run_id = ui.launch_partition_run(one, hours[1].partition_key)
            ui.wait_run(run_id, RUN_TIMEOUT)
            got = ui.materialized_partitions(run_id).get(f"{SOURCE}/order_completed")
            assert got == {hours[1].partition_key}, f"run {run_id} materialized {got}"

        step("c", new_tables_by_themselves)
        step("a", backfill_with_the_held_selection)
        step("b", one_table_one_hour)
        # (e) every run registered its tables through the metastore's server: query them
        # through it (the lake's files are the truth; a run that opened Derby itself fails).
        step("e", lambda: check_served_tables(dev, settings, home / "lake"))
        # (f) the catalog asset: each synced hour materialized, its in_step check passed
        step("f", lambda: check_catalog_asset(ui, hours))
        # (i) the tracking plan's check of each table and hour, as the UI shows it (the
        # violations table itself is compared with the clean sync's below)
        step("i", lambda: check_tracking_plan(ui, hours))
        # (g) the demo source's daily models (dagster_ui_models.py)
        daily = models.ModelsChecks(ui, days, settings, home / "lake")
        step("g1 models: automation", daily.built_by_the_daemon)
        step("g2 models: range", daily.a_range_in_one_run)
        step("g3 models: contents", daily.the_models_hold_the_lake)
        step("g4 models: B still waits", daily.b_not_automated)
        step(
            "lake vs clean sync",
            lambda: compare_lakes(home / "lake", finish_clean_sync(clean), SOURCE),
        )
        # (d) forget a person from the launchpad: the job forget_person with the config a
        # user types; afterwards none of their rows remain and nobody else's went.
        step("d", lambda: forget_from_launchpad(ui, home / "lake"))
        # (h) the terminal a newcomer reads: what the syncs did, none of Dagster's noise
        step("h", lambda: check_quiet_log(dev.log.read_text(errors="replace")))
    step.assert_all_passed()


# What `datalake dev` used to print that tells a newcomer nothing: the queue's daemon every
# second while a run is in progress, `dagster dev`'s supersession warning, the warning about
# the project's dagster.yaml beside another DAGSTER_HOME, and a beta warning for a sensor
# parameter Dagster passes itself.
NOISE = (
    "won't launch more",
    "is superseded",
    "Found a dagster instance configuration value",
    "BetaWarning",
    # a line per event of a run (every table's and check's hour): in the run's log in the UI
    "ASSET_MATERIALIZATION",
    "ASSET_CHECK_EVALUATION",
    "STEP_START",
    "RUN_START",
    # dbt's events, a line each (dagster-dbt prints them): in the models run's log in the UI
    "Running with dbt=",
    "Concurrency: ",
)


def check_quiet_log(log: str) -> None:
    found = {n: sum(n in line for line in log.splitlines()) for n in NOISE}
    assert not any(found.values()), f"noise in datalake dev's output: {found}"
    # ... while what the syncs did is still there: the sensor's summary, the hours each run
    # syncs and what it synced, with its figures
    for told in (" to sync, ", "syncing ", f"synced {SOURCE} hours "):
        assert told in log, f"{told!r} missing from datalake dev's output"
    # the sensor's line is a tick that requested a run, not every idle tick (every 10 s here)
    idle = [
        ln
        for ln in log.splitlines()
        if " to sync, " in ln and not re.search(r": [1-9]\d* to sync", ln)
    ]
    assert not idle, f"idle sensor ticks in datalake dev's output: {idle[:3]}"


def forget_from_launchpad(ui: DagsterUI, lake: Path) -> None:
    import duckdb

    identifies = f"{lake}/data/{SOURCE}/segment_type=identifies/*/*/*.parquet"

    def count(where: str) -> int:
        return duckdb.sql(
            f"SELECT count(*) FROM read_parquet('{identifies}') WHERE {where}"
        ).fetchall()[0][0]

    theirs, everyone = count("user_id = 'u-3'"), count("true")
    assert theirs > 0, "the person to forget is not in the lake"
    repository = ui.load_for_launch([f"{SOURCE}/pages"])["nodes"][0]["repository"]
    run_id = ui.launch_job(
        repository,
        "forget_person",
        {"ops": {"forget": {"config": {"identities": ["user_id=u-3"], "request_id": "ui-forget"}}}},
    )
    ui.wait_run(run_id, RUN_TIMEOUT)
    assert (count("user_id = 'u-3'"), count("true")) == (0, everyone - theirs)
    audit = duckdb.sql(
        f"SELECT status, rows_remaining FROM read_parquet("
        f"'{lake}/privacy_requests/*/*.parquet') WHERE request_id = 'ui-forget'"
    ).fetchall()
    assert audit == [("completed", 0)], audit


def check_served_tables(dev, settings: Path, lake: Path) -> None:
    import duckdb

    from datalake_assets.catalog import metastore_server
    from datalake_assets.catalog.config import config_from_settings
    from datalake_assets.settings import load_settings

    assert "metastore served at" in dev.log.read_text(errors="replace"), dev.log_tail()
    cfg = config_from_settings(load_settings(settings, env={}).catalog)
    try:
        session = cfg.served_session()
        assert session is not None, f"no server holds {cfg.metastore_dir}"
        for table in ("pages", *NEW_TABLES):
            files = f"{lake}/data/{SOURCE}/segment_type={table}/*/*/*.parquet"
            want = duckdb.sql(f"SELECT count(*) FROM read_parquet('{files}')").fetchall()[0][0]
            got = session.sql(f"SELECT count(*) FROM {SOURCE}.{table}").collect()[0][0]
            assert got == want > 0, f"{SOURCE}.{table}: {got} rows in the catalog, {want} files'"
    finally:
        metastore_server.forget_decisions()  # before datalake dev stops its server


def check_catalog_asset(ui: DagsterUI, hours: list[ArchiveHour]) -> None:
    """Issue #34: ``web/catalog`` is downstream of the tables, each hour materialized with
    what was registered (the embedded Hive metastore), and its blocking check in step."""
    from datalake_assets_tests.orchestration.dagster_ui_status import (
        check_statuses,
        latest_metadata,
        partition_status,
    )

    key = f"{SOURCE}/catalog"
    node = ui.asset_nodes().get(key)
    assert node, f"no {key} asset"
    deps = {"/".join(d["path"]) for d in node["dependencyKeys"]}
    assert {f"{SOURCE}/pages", f"{SOURCE}/order_completed"} <= deps, deps
    status = partition_status(ui, key)
    assert all(status.get(h.partition_key) == "MATERIALIZED" for h in hours), status
    md = latest_metadata(ui, key, hours[1].partition_key)
    assert md["catalog"] == "hive" and md["database"] == SOURCE, md
    assert "order_completed" in md["tables"] and md["partitions_registered"] >= 5, md
    _, checks = check_statuses(ui, key)
    assert all(checks["in_step"].get(h.partition_key) == "SUCCEEDED" for h in hours), checks


def write_plan(path: Path) -> str:
    """A tracking plan of the source's events (no ``type``: the columns stay as inferred, so
    the models and the comparisons are those of a lake without one): every page breaks it
    (``referrer`` is required and never sent), half the orders too (``revenue`` above 20);
    identifies have no rule (planned by absence). Its settings line."""

    def track(event: str, schema: dict) -> dict:
        wrapper = {"properties": {"properties": {"type": "object", **schema}}}
        return {"key": event, "type": "TRACK", "version": 1, "jsonSchema": wrapper}

    plan = {
        "rules": [
            track("Signed Up", {"properties": {"plan": {"enum": ["free", "pro"]}}}),
            track("Order Completed", {"required": ["order_id"], "properties": {"revenue": {"maximum": 20}}}),  # fmt: skip
            track("Cart Viewed", {"required": ["cart_id"]}),
            {"key": "Home", "type": "PAGE", "version": 1, "jsonSchema": {"properties": {
                "properties": {"type": "object", "required": ["path", "title", "referrer"]}}}},
        ]
    }  # fmt: skip
    path.write_text(json.dumps(plan))
    return f'tracking_plan = "{path}"\n'


def check_tracking_plan(ui: DagsterUI, hours: list[ArchiveHour]) -> None:
    from datalake_assets_tests.orchestration.dagster_ui_status import check_statuses

    for table, expected in (("pages", "FAILED"), ("identifies", "SUCCEEDED")):
        _, checks = check_statuses(ui, f"{SOURCE}/{table}")
        got = {h.partition_key: checks.get("tracking_plan", {}).get(h.partition_key) for h in hours}
        assert got == {h.partition_key: expected for h in hours}, (table, got, sorted(checks))


def describe_new_tables(ui: DagsterUI) -> dict:
    catalog = ui.catalog_keys()
    return {t: catalog.get(f"{SOURCE}/{t}", "absent") for t in NEW_TABLES}


# ------------------------------------------------------------------- the clean sync to compare


def start_clean_sync(folder: Path, archive: Path, hours: list[ArchiveHour], extra: str = ""):
    """``datalake sync`` of all hours into a fresh lake (own metastore), in the background: it
    overlaps the waits for Dagster instead of adding to the wall time."""
    folder.mkdir()
    settings = write_settings(
        folder, hours[0], archive_root=str(archive), catalog="none", extra=extra
    )
    env = dict(os.environ, DATALAKE_HOME=str(folder), SPARK_LOCAL_IP="127.0.0.1")
    env.pop("DAGSTER_HOME", None)
    log = open(folder / "sync.log", "wb")  # noqa: SIM115 - closed by finish_clean_sync
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "datalake_assets.cli",
            "--settings",
            str(settings),
            "sync",
            "--hours",
            *map(str, hours),
        ],
        cwd=folder,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    return proc, folder, log


def finish_clean_sync(clean) -> Path:
    proc, folder, log = clean
    try:
        code = proc.wait(timeout=RUN_TIMEOUT)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait()
        log.close()
    out = (folder / "sync.log").read_text(errors="replace")
    assert code == 0, f"clean sync failed ({code}):\n{out[-3000:]}"
    return folder / "lake"


def read_rows(pattern: str, drop: tuple[str, ...]) -> tuple[list[str], set[tuple]]:
    import duckdb

    con = duckdb.connect()
    source = f"read_parquet('{pattern}', hive_partitioning = true, union_by_name = true)"
    cols = sorted(c for c in con.sql(f"SELECT * FROM {source} LIMIT 0").columns if c not in drop)
    select = ", ".join(f'CAST("{c}" AS VARCHAR)' for c in cols)
    return cols, set(con.sql(f"SELECT {select} FROM {source}").fetchall())


def compare_lakes(lake: Path, clean: Path, source: str) -> None:
    """Same tables, same columns and the same set of rows in each; same quarantine."""

    def tables(root: Path) -> set[str]:
        return {p.name.split("=", 1)[1] for p in (root / "data" / source).glob("segment_type=*")}

    ours, theirs = tables(lake), tables(clean)
    assert ours == theirs and set(NEW_TABLES) <= ours, f"tables: lake {ours}, clean {theirs}"
    for t in sorted(ours):
        pattern = f"data/{source}/segment_type={t}/*/*/*.parquet"
        c1, r1 = read_rows(str(lake / pattern), ())
        c2, r2 = read_rows(str(clean / pattern), ())
        assert c1 == c2, f"table {t}: columns {c1} != clean {c2}"
        assert r1 == r2, (
            f"table {t}: {len(r1 - r2)} rows only in the lake, {len(r2 - r1)} "
            f"only in the clean sync, e.g. {sorted(r1 ^ r2)[:3]}"
        )
    q = f"quarantine/{source}/*/*/*.parquet"
    c1, r1 = read_rows(str(lake / q), ("run_id",))
    c2, r2 = read_rows(str(clean / q), ("run_id",))
    assert c1 == c2 and r1 == r2 and r1, (
        f"quarantine differs: {len(r1)} vs {len(r2)} rows, e.g. {sorted(r1 ^ r2)[:3]}"
    )
