"""The production topology, for real on loopback: the instance of ``infra/dagster/dagster.yaml``
on a private PostgreSQL cluster (``support/postgres.py``), and the code server, the webserver
and the daemon as three processes of their own, started by the image's entry point
(``infra/docker/entrypoint.sh codeserver|webserver|daemon``: ``dagster code-server start``,
``dagster-webserver``, ``dagster-daemon run``) and checked by its health checks, the webserver
and the daemon loading the code location over gRPC (as ``infra/dagster/workspace.yaml``);
beside them, the open hour's batches (``datalake batches``, docs/concepts/freshness.md) with the
same ``DAGSTER_HOME``. The parts are ``topology.py``'s.

One scenario, as an operator lives it:

1. while the code server starts, an hour takes open hour batches from the CLI (``datalake sync
   --batch --hours``, twice: the second reads nothing, and the lake holds each row once, as a
   sync of the file would), then a late file. The webserver, the daemon and the loop start;
   the daemon's archive sensor closes that hour and the two before it, and the daemon is killed
   (SIGKILL, its whole process group) while that run is queued or running; a new daemon is
   started: the run finishes (its worker belongs to the code server, not the daemon) or is
   launched again, and succeeds. Meanwhile the loop batches the current hour's first file and
   records it on ``web/open_hour``: the asset's page (GraphQL, from Postgres) counts its
   messages (``messages_so_far``);
2. a backfill (a replay of the first hours) launched through the webserver's GraphQL, as the
   UI's partition dialog does, succeeds;
3. Postgres crashes (``pg_ctl stop -m immediate``) while the loop runs: its next batch takes a
   new file of the current hour, its record in Dagster fails (one line) and the loop goes on;
   Postgres is started again, and the webserver answers again;
4. a sync from the CLI (``datalake sync``, the daemon stopped so that its sensor does not race
   it for the hour) with the same ``DAGSTER_HOME`` is recorded in the same instance: Postgres
   holds its hour's materializations;
5. a source added to the settings appears after a reload of the code location, as the UI's
   "Reload" button does it (the code server reloads; no process restarted);
6. the loop's batch of one more file of the current hour is recorded in Postgres, its count
   taken from the tables: each message of the hour once, the crash's batch included;

then the lake holds every archive line exactly once, as the independent oracle says (the closed
hours as a sync of their archive, the current hour as its batches took its files in); the run
history is Postgres' (its ``runs`` and ``event_logs`` tables), and no SQLite storage was made.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
from datetime import UTC, datetime, timedelta

import pytest

from datalake_assets.spec.layout import ArchiveHour
from datalake_assets_tests.infra.topology import (
    INSTANCE_DIR,
    RUN_TIMEOUT,
    SOURCE,
    BatchLoop,
    Topology,
    answers,
    arrive,
    counted,
    crash_postgres,
    datalake,
    hour_lines,
    loaded,
    messages_in,
    open_hour_records,
    sensor_runs,
    start_postgres_again,
    wait_synced,
)
from datalake_assets_tests.orchestration.dagster_ui import TERMINAL_RUN, DagsterUI, poll
from datalake_assets_tests.support import postgres
from datalake_assets_tests.support.archive_builders import write_hour
from datalake_assets_tests.support.iceberg_reader import read_iceberg_lake, sql_catalog
from datalake_assets_tests.support.lake_reader import LocalStore, compare
from datalake_assets_tests.support.oracle import Oracle
from datalake_assets_tests.support.settings_files import write_lake_toml

pytestmark = [pytest.mark.dagster]

NEW_SOURCE = "mobile"  # added to the settings while the topology runs (step 5)


@pytest.fixture
def pg():
    if lacking := postgres.missing():
        if os.environ.get("CI"):
            pytest.fail(f"missing: {lacking} (.ci/run installs postgresql-15)")
        pytest.skip(f"missing: {lacking} (apt-get install postgresql-15)")
    server = postgres.Postgres()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.slow
def test_the_production_topology_on_postgres(tmp_path, pg):
    db = pg.create_database("dagster")
    now = datetime.now(UTC)
    last = ArchiveHour.of(now - timedelta(hours=3))
    hours = [ArchiveHour.of(last.start - timedelta(hours=n)) for n in (3, 2, 1, 0)]
    current = ArchiveHour.of(now)  # the open hour, batched by the loop
    home = tmp_path / "home"
    dagster_home = home / "dagster_home"
    dagster_home.mkdir(parents=True)
    shutil.copy(INSTANCE_DIR / "dagster.yaml", dagster_home / "dagster.yaml")
    archive = home / "archive"
    for h in hours[:2]:
        write_hour(str(archive), SOURCE, str(h), hour_lines(h))
    settings = write_lake_toml(
        home,
        'archive_root = "archive"\nlake_root = "lake"\n'
        # the past hours are due at once; the current one stays open (batched, not closed)
        # for the whole test, even if the clock turns the hour meanwhile
        "[automation]\ninterval_seconds = 10\nsettle_minutes = 20\n"
        "definitions_interval_seconds = 10\n"  # the reload waited on: the least the settings take
        "[freshness]\ninterval_minutes = 1\n"  # the loop batches every 30 s (batch_period)
        '[catalog]\nbackend = "none"\n'
        f'[[sources]]\nid = "{SOURCE}"\nstart = "{hours[0].partition_key}"\n',
        table_format=None,  # the default, Iceberg: production as a new user gets it
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAGSTER_", "DATALAKE_"))}
    env.update(
        pg.env(db),
        DAGSTER_HOME=str(dagster_home),
        DATALAKE_HOME=str(home),
        DATALAKE_SETTINGS=str(settings),
        DATALAKE_WEBSERVER_URL="",  # set below, once the port is known
        SPARK_LOCAL_IP="127.0.0.1",
        PYTHONUNBUFFERED="1",
    )
    top = Topology(home, env)
    env["DATALAKE_WEBSERVER_URL"] = f"http://127.0.0.1:{top.web_port}"
    ui = top.ui
    lake = str(home / "lake")
    loop = None
    try:
        top.start("codeserver")  # first: the others load the code location from it

        # 1. while the code server starts, an hour batched twice from the CLI (the same batch
        # again reads nothing), then a late file; the daemon's sensor closes the hour, and the
        # daemon is killed meanwhile
        write_hour(str(archive), SOURCE, str(hours[2]), hour_lines(hours[2]))
        for lines_in in (len(hour_lines(hours[2])), 0):
            batch = datalake(env, home, "sync", "--batch", "--hours", str(hours[2]))
            assert batch.returncode == 0, batch.stdout[-2000:] + batch.stderr[-3000:]
            report = json.loads(batch.stdout)
            assert report["lines_in"] == lines_in, report
            assert lines_in or report["warning"] == "no_archive_files", report
        once = Oracle(LocalStore(), str(archive), SOURCE).sync([str(hours[2])]).expected()
        found = compare(
            once, read_iceberg_lake(LocalStore(), sql_catalog(lake), lake, SOURCE, SOURCE)
        )
        assert found.ok, str(found)
        late = [*hour_lines(hours[2], "-late", 5), hour_lines(hours[2])[0]]  # and a message again
        write_hour(str(archive), SOURCE, str(hours[2]), late, name="part-0001.jsonl.gz")
        # the current hour's first file, taken in by the loop
        first_file = hour_lines(current, "-a", 5)
        arrive(archive, current, first_file, "part-0000.jsonl.gz")
        poll("the code server's health check", lambda: top.healthy("codeserver"), 240, 2.0)
        top.start("webserver")
        top.start("daemon")
        loop = BatchLoop(home, env)
        poll("the code location, loaded over gRPC", loaded(ui), 240, 2.0)
        poll("the webserver's health check", lambda: top.healthy("webserver"), 60, 2.0)
        poll("the daemon's health check", lambda: top.healthy("daemon"), 120, 2.0)
        seen = poll(
            "the batched hour's close to be requested",
            lambda: [r["status"] for r in sensor_runs(ui, hours[2])],
            RUN_TIMEOUT,
            0.3,
        )
        top.kill("daemon")
        print(f"daemon killed with the batched hour's close {seen}")
        top.start("daemon")
        wait_synced(ui, hours[:3])
        wait_counted(ui, current, messages_in(archive, current))

        # 2. a replay of the first two hours, launched as the UI's partition dialog does: the
        # group's materializable assets (not the raw archive or the open hour: external)
        keys = sorted(
            k
            for k, n in ui.asset_nodes().items()
            if k.startswith(f"{SOURCE}/") and n["isExecutable"] and n["groupName"] == SOURCE
        )
        backfill = ui.launch_backfill(
            ui.load_for_launch(keys), [h.partition_key for h in hours[:2]]
        )
        done = ui.wait_backfill(backfill, RUN_TIMEOUT)
        assert done["status"] in ("COMPLETED", "COMPLETED_SUCCESS"), done
        assert all(r["status"] == "SUCCESS" for r in done["runs"]), done["runs"]
        # every run the UI showed succeed: the sensor's and the replay's
        shown = {r["id"] for h in hours[:3] for r in sensor_runs(ui, h) if r["status"] == "SUCCESS"}
        shown |= {r["id"] for r in done["runs"]}

        # 3. Postgres crashes while the loop runs: its next batch takes a new file (new
        # messages and one of the first file's again), and its record fails; then Postgres is
        # started again
        before = len(loop.batch_lines())
        crash_postgres(pg)
        crash_file = [*hour_lines(current, "-b", 5), first_file[0]]
        arrive(archive, current, crash_file, "part-0001.jsonl.gz")

        def unrecorded_batch():
            new = loop.batch_lines()[before:]
            read = [i for i, line in enumerate(new) if f": {len(crash_file)} lines," in line]
            return read and [line for line in new[read[0] :] if "not recorded in Dagster" in line]

        failed = poll("the loop's batch with Postgres down", unrecorded_batch, 120, 0.5)
        print(f"with Postgres down: {failed}")
        start_postgres_again(pg)
        poll("the webserver to answer again", lambda: answers(ui), 60, 1.0)
        arrive(archive, current, hour_lines(current, "-c", 5), "part-0002.jsonl.gz")

        # 4. a CLI sync, recorded in the same instance. The daemon is stopped first: its
        # sensor would otherwise race the CLI for the new hour, and the loser of the source's
        # lock fails by design (one sync of a source at a time)
        top.kill("daemon", signal.SIGTERM)
        write_hour(str(archive), SOURCE, str(hours[3]), hour_lines(hours[3]))
        cli = datalake(env, home, "sync", "--source", SOURCE, "--hours", str(hours[3]))
        assert cli.returncode == 0, cli.stdout[-2000:] + cli.stderr[-3000:]
        assert "recorded in the Dagster instance" in cli.stderr, cli.stderr[-2000:]

        # 5. a new source in the settings, picked up by a reload of the code location (the
        # UI's "Reload": the code server loads the code again; nothing restarted)
        settings.write_text(
            settings.read_text() + f'[[sources]]\nid = "{NEW_SOURCE}"\n', encoding="utf-8"
        )
        assert not any(k.startswith(f"{NEW_SOURCE}/") for k in ui.asset_nodes())
        ui.reload_locations()
        poll(
            "the new source's assets after the reload",
            lambda: any(k.startswith(f"{NEW_SOURCE}/") for k in ui.asset_nodes()),
            240,
            2.0,
        )

        # 6. the loop went on: its batch after the restart took the last file, and its record
        # in Postgres counts the hour's messages from the tables, each once
        wait_counted(ui, current, messages_in(archive, current))
        assert loop.proc.poll() is None, "the loop exited"
        assert loop.stop() == 0
        assert not [x for x in loop.batch_lines() if x.startswith(f"batch {SOURCE} failed")]
    except BaseException:
        print(top.logs())
        if loop is not None:
            print("--- the loop's lines", *loop.batch_lines(), sep="\n")
        raise
    finally:
        if loop is not None:
            loop.stop()
        top.stop()

    # the lake: every line once, as the oracle says (the replay replaced its hours; the
    # current hour holds what a sync of its files gives)
    oracle = Oracle(LocalStore(), str(archive), SOURCE)
    h = [str(x) for x in hours]
    expected = oracle.sync(h[:3]).sync(h[:2]).sync(h[3:]).sync([str(current)]).expected()
    found = compare(
        expected, read_iceberg_lake(LocalStore(), sql_catalog(lake), lake, SOURCE, SOURCE)
    )
    assert found.ok, str(found)

    # the instance: Postgres holds the runs and the events; no SQLite storage was made
    stored = dict(pg.sql("SELECT run_id, status FROM runs", db))
    assert {run: stored.get(run) for run in shown} == dict.fromkeys(shown, "SUCCESS"), stored
    assert set(stored.values()) <= TERMINAL_RUN, stored
    materialized_hours = {
        row[0]
        for row in pg.sql(
            "SELECT DISTINCT partition FROM event_logs "
            "WHERE dagster_event_type = 'ASSET_MATERIALIZATION' "
            f'AND asset_key = \'["{SOURCE}", "pages"]\'',
            db,
        )
    }
    assert {h.partition_key for h in hours} <= materialized_hours, materialized_hours
    assert not list(dagster_home.rglob("*.db")), list(dagster_home.rglob("*.db"))


def wait_counted(ui: DagsterUI, hour: ArchiveHour, messages: int) -> None:
    """Until the newest record of the open hour counts ``messages`` in ``hour`` (never more)."""

    def check():
        records = open_hour_records(ui)
        n = counted(records[-1], hour) if records else 0
        assert n <= messages, f"{hour}: {n} messages counted, {messages} in its files"
        return n == messages

    poll(f"the open hour's record of {messages} messages in {hour}", check, RUN_TIMEOUT, 2.0)
