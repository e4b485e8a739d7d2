"""The production topology, for real on loopback: the instance of ``infra/dagster/dagster.yaml``
on a private PostgreSQL cluster (``support/postgres.py``), and the code server, the webserver
and the daemon as three processes of their own, started by the image's entry point
(``infra/docker/entrypoint.sh codeserver|webserver|daemon``: ``dagster code-server start``,
``dagster-webserver``, ``dagster-daemon run``) and checked by its health checks, the webserver
and the daemon loading the code location over gRPC (as ``infra/dagster/workspace.yaml``).

One scenario, as an operator lives it:

1. the archive sensor syncs the first hours by itself;
2. a new hour arrives and the daemon is killed (SIGKILL, its whole process group) while that
   hour's run is queued or running; a new daemon is started: the hour's run finishes (its
   worker belongs to the code server, not the daemon) or is launched again, and succeeds;
3. a backfill (a replay of the first hours) launched through the webserver's GraphQL, as the
   UI's partition dialog does, succeeds;
4. a sync from the CLI (``datalake sync``, the daemon stopped so that its sensor does not race
   it for the hour) with the same ``DAGSTER_HOME`` is recorded in the same instance: Postgres
   holds its hour's materializations;
5. a source added to the settings appears after a reload of the code location, as the UI's
   "Reload" button does it (the code server reloads; no process restarted);

then the lake holds every archive line exactly once, as the independent oracle says; the run
history is Postgres' (its ``runs`` and ``event_logs`` tables), and no SQLite storage was made.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from datalake_assets.spec.layout import ArchiveHour
from datalake_assets_tests.orchestration.dagster_ui import (
    TERMINAL_RUN,
    DagsterUI,
    GraphQL,
    free_port,
    poll,
)
from datalake_assets_tests.support import postgres
from datalake_assets_tests.support.archive_builders import msg, write_hour
from datalake_assets_tests.support.iceberg_reader import read_iceberg_lake, sql_catalog
from datalake_assets_tests.support.lake_reader import LocalStore, compare
from datalake_assets_tests.support.oracle import Oracle
from datalake_assets_tests.support.settings_files import write_lake_toml

pytestmark = [pytest.mark.dagster]

REPO = Path(__file__).resolve().parents[2]
INSTANCE_DIR = REPO / "infra" / "dagster"
ENTRYPOINT = REPO / "infra" / "docker" / "entrypoint.sh"
SOURCE = "web"
NEW_SOURCE = "mobile"  # added to the settings while the topology runs (step 5)
LOCATION = "datalake_assets.definitions"
RUN_TIMEOUT = 300.0  # a busy 2-core machine; each run worker loads the definitions


def hour_lines(hour: ArchiveHour) -> list:
    """~60 lines: pages, identifies and a track event, one duplicate delivery and two lines the
    quarantine keeps (invalid JSON, no type)."""
    h = str(hour)
    lines: list = []
    for i in range(20):
        lines.append(msg(f"{h}-p{i}", h, i, type="page", name="Home", properties={"i": i}))
        lines.append(
            msg(f"{h}-i{i}", h, i + 1, type="identify", userId=f"u-{i % 5}", traits={"n": i})
        )
        lines.append(msg(f"{h}-s{i}", h, i + 2, event="Signed Up", properties={"plan": "free"}))
    lines = [{k: v for k, v in m.items() if v is not None} for m in lines]
    lines.append(lines[3])
    lines.append(b"{not json")
    lines.append({"messageId": f"{h}-bad", "anonymousId": "a", "receivedAt": f"{hour.day}T00:00Z"})
    return lines


class Topology:
    """The three Dagster processes, each in a process group of its own (stopped as a group)."""

    def __init__(self, home: Path, env: dict[str, str]) -> None:
        self.home, self.env = home, env
        self.procs: dict[str, subprocess.Popen] = {}
        self.grpc_port = free_port()
        self.web_port = free_port()
        self.workspace = home / "workspace.yaml"
        # infra/dagster/workspace.yaml, pointed at this test's code server
        text = (INSTANCE_DIR / "workspace.yaml").read_text()
        self.workspace.write_text(
            text.replace("host: codeserver", "host: 127.0.0.1").replace(
                "port: 4000", f"port: {self.grpc_port}"
            )
        )
        self.ui = DagsterUI(GraphQL(f"http://127.0.0.1:{self.web_port}/graphql"))
        # the image's environment (infra/docker/Dockerfile), pointed at this test's folders
        self.image_env = dict(
            env,
            PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
            DATALAKE_WORKSPACE=str(self.workspace),
            DATALAKE_BIND="127.0.0.1",
            CODE_SERVER_PORT=str(self.grpc_port),
            WEBSERVER_PORT=str(self.web_port),
            DATALAKE_ROLE_FILE=str(home / "role"),
        )

    def start(self, name: str) -> None:
        """``name`` started by the image's entry point, as its container's command would."""
        log = open(self.home / f"{name}.log", "ab")  # noqa: SIM115 - the child holds it
        self.procs[name] = subprocess.Popen(
            [str(ENTRYPOINT), name], env=self.image_env, cwd=self.home, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        log.close()

    def healthy(self, name: str) -> bool:
        """The image's health check of ``name`` (``entrypoint.sh health``)."""
        check = subprocess.run(
            [str(ENTRYPOINT), "health", name], env=self.image_env, capture_output=True,
            timeout=60, check=False,
        )  # fmt: skip
        return check.returncode == 0

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        proc = self.procs.pop(name)
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)

    def stop(self) -> None:
        for name in ("daemon", "webserver", "codeserver"):
            if name in self.procs:
                self.kill(name, signal.SIGTERM)

    def logs(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
            for p in sorted(self.home.glob("*.log"))
        )


def sensor_runs(ui: DagsterUI, hour: ArchiveHour) -> list[dict]:
    """The archive sensor's runs that synced ``hour`` of the source (the batched default names
    its source-hours in a tag; a per-source run carries the hour as its partition)."""
    out = []
    for r in ui.runs({"datalake/trigger": "sensor"}):
        tags = r["tag"]
        hours = set(tags.get("datalake/source_hours", "").split())
        if f"{SOURCE}:{hour}" in hours or tags.get("dagster/partition") == hour.partition_key:
            out.append(r)
    return out


def wait_synced(ui: DagsterUI, hours: list[ArchiveHour]) -> None:
    def done():
        ok = True
        for h in hours:
            runs = sensor_runs(ui, h)
            ok &= any(r["status"] == "SUCCESS" for r in runs)
        return ok

    poll(f"sensor runs of {[str(h) for h in hours]} to succeed", done, RUN_TIMEOUT, 3.0)


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
    last = ArchiveHour.of(datetime.now(UTC) - timedelta(hours=3))
    hours = [ArchiveHour.of(last.start - timedelta(hours=n)) for n in (3, 2, 1, 0)]
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
        "[automation]\ninterval_seconds = 10\nsettle_minutes = 0\n"
        "definitions_interval_seconds = 10\n"  # the reload waited on: the least the settings take
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
    try:
        top.start("codeserver")  # first: the others load the code location from it
        poll("the code server's health check", lambda: top.healthy("codeserver"), 240, 2.0)
        top.start("webserver")
        top.start("daemon")
        poll("the code location, loaded over gRPC", _loaded(ui), 240, 2.0)
        poll("the webserver's health check", lambda: top.healthy("webserver"), 60, 2.0)
        poll("the daemon's health check", lambda: top.healthy("daemon"), 120, 2.0)

        # 1. the sensor syncs the first hours by itself
        wait_synced(ui, hours[:2])

        # 2. a new hour; the daemon killed while its run is queued or running, then restarted
        write_hour(str(archive), SOURCE, str(hours[2]), hour_lines(hours[2]))
        seen = poll(
            "the new hour's run to be requested",
            lambda: [r["status"] for r in sensor_runs(ui, hours[2])],
            RUN_TIMEOUT,
            0.3,
        )
        top.kill("daemon")
        print(f"daemon killed with the new hour's run {seen}")
        top.start("daemon")
        wait_synced(ui, hours[2:3])

        # 3. a replay of the first two hours, launched as the UI's partition dialog does: the
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

        # 4. a CLI sync, recorded in the same instance. The daemon is stopped first: its
        # sensor would otherwise race the CLI for the new hour, and the loser of the source's
        # lock fails by design (one sync of a source at a time)
        top.kill("daemon", signal.SIGTERM)
        write_hour(str(archive), SOURCE, str(hours[3]), hour_lines(hours[3]))
        cli = subprocess.run(
            [sys.executable, "-m", "datalake_assets.cli", "sync", "--source", SOURCE,
             "--hours", str(hours[3])],
            env=env, cwd=home, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
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
    except BaseException:
        print(top.logs())
        raise
    finally:
        top.stop()

    # the lake: every line once, as the oracle says (the replay replaced its hours)
    oracle = Oracle(LocalStore(), str(archive), SOURCE)
    h = [str(x) for x in hours]
    expected = oracle.sync(h[:2]).sync(h[2:3]).sync(h[:2]).sync(h[3:]).expected()
    lake = str(home / "lake")
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


def _loaded(ui: DagsterUI):
    def check():
        try:
            return ui.location_loaded()
        except OSError:
            return False  # not listening yet

    return check
