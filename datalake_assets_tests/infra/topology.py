"""The production topology's parts for ``test_production_instance.py``: the three Dagster
processes started by the image's entry point, the open hour's loop (``datalake batches``) beside
them, the Postgres cluster crashed and started again, the archive files as they arrive, and what
the UI shows of the runs and of the open hour."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from datalake_assets.spec.layout import ArchiveHour, archive_hour_dir
from datalake_assets_tests.orchestration.dagster_ui import (
    DagsterUI,
    GraphQL,
    GraphQLError,
    free_port,
    poll,
)
from datalake_assets_tests.orchestration.dagster_ui_queries import ASSET_PARTITION_EVENTS_QUERY
from datalake_assets_tests.support.archive_builders import msg, write_hour
from datalake_assets_tests.support.lake_reader import LocalStore
from datalake_assets_tests.support.oracle import ROW, STANDARD_TABLES, Oracle

REPO = Path(__file__).resolve().parents[2]
INSTANCE_DIR = REPO / "infra" / "dagster"
ENTRYPOINT = REPO / "infra" / "docker" / "entrypoint.sh"
SOURCE = "web"
RUN_TIMEOUT = 300.0  # a busy 2-core machine; each run worker loads the definitions


def hour_lines(hour: ArchiveHour, tag: str = "", n: int = 20) -> list:
    """``3n + 3`` lines: pages, identifies and a track event, one duplicate delivery and two
    lines the quarantine keeps (invalid JSON, no type). ``tag``: new message ids (another file
    of the hour)."""
    h, hr = f"{hour}{tag}", str(hour)
    lines: list = []
    for i in range(n):
        lines.append(msg(f"{h}-p{i}", hr, i, type="page", name="Home", properties={"i": i}))
        lines.append(
            msg(f"{h}-i{i}", hr, i + 1, type="identify", userId=f"u-{i % 5}", traits={"n": i})
        )
        lines.append(msg(f"{h}-s{i}", hr, i + 2, event="Signed Up", properties={"plan": "free"}))
    lines = [{k: v for k, v in m.items() if v is not None} for m in lines]
    lines.append(lines[3])
    lines.append(b"{not json")
    lines.append({"messageId": f"{h}-bad", "anonymousId": "a", "receivedAt": f"{hour.day}T00:00Z"})
    return lines


def arrive(archive: Path, hour: ArchiveHour, lines: list, name: str) -> None:
    """An archive file arriving whole, as the collector moves a rolled spool segment into the
    archive (a rename): a batch running meanwhile never lists it half written."""
    staged = write_hour(str(archive.parent / "incoming"), SOURCE, str(hour), lines, name)
    final = Path(archive_hour_dir(str(archive), SOURCE, hour), name)
    final.parent.mkdir(parents=True, exist_ok=True)
    os.replace(staged, final)


def messages_in(archive: Path, hour: ArchiveHour) -> int:
    """The messages a sync of the hour's files keeps, each once, as the oracle says."""
    lines = Oracle(LocalStore(), str(archive), SOURCE).sync([str(hour)]).expected().lines
    return len({ln.message_id for ln in lines if ln.fate == ROW})


def datalake(env: dict[str, str], home: Path, *args: str) -> subprocess.CompletedProcess:
    """A ``datalake`` command as an operator runs it next to the topology."""
    return subprocess.run(
        [sys.executable, "-m", "datalake_assets.cli", *args], env=env, cwd=home,
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip


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
        stop_group(self.procs.pop(name), sig)

    def stop(self) -> None:
        for name in ("daemon", "webserver", "codeserver"):
            if name in self.procs:
                self.kill(name, signal.SIGTERM)

    def logs(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
            for p in sorted(self.home.glob("*.log"))
        )


def stop_group(proc: subprocess.Popen, sig: int) -> None:
    """``sig`` to the process group of ``proc`` (started in a session of its own); SIGKILL if
    it has not exited within a minute."""
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


class BatchLoop:
    """``datalake batches``, the open hour's loop, run beside the topology as an operator runs
    it (next to the collector): its lines in ``batches.log`` of the home."""

    def __init__(self, home: Path, env: dict[str, str]) -> None:
        self.log = home / "batches.log"
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "datalake_assets.cli", "batches"], env=env, cwd=home,
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip

    def lines(self) -> list[str]:
        return self.log.read_text(errors="replace").splitlines()

    def batch_lines(self) -> list[str]:
        """One line per batch that read something, one per failure or failed record."""
        return [x for x in self.lines() if x.startswith((f"batch {SOURCE} ", f"batch {SOURCE}:"))]

    def stop(self) -> int | None:
        """SIGTERM: the batch under way ends first, then the loop exits. Its exit code."""
        if self.proc.poll() is None:
            stop_group(self.proc, signal.SIGTERM)
        return self.proc.returncode


def crash_postgres(pg) -> None:
    """The cluster goes down as in a crash: every server process quits at once, no checkpoint
    (``pg_ctl stop -m immediate``); its next start recovers from the WAL."""
    subprocess.run(
        pg._cmd("pg_ctl", "-D", str(pg.datadir), "-m", "immediate", "-w", "stop"),
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip


def start_postgres_again(pg) -> None:
    """The cluster started again, on its port with its options (``pg_ctl restart`` of a server
    that is down starts it with those it last ran with, ``postmaster.opts``)."""
    subprocess.run(
        pg._cmd("pg_ctl", "-D", str(pg.datadir), "-l", str(pg.folder / "server.log"), "-w",
                "restart"),
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    pg.sql("SELECT 1")


def answers(ui: DagsterUI) -> bool:
    """The webserver answers the UI's queries of runs and assets. Not at once after Postgres
    restarted: the webserver holds a connection of each storage open (dagster-postgres'
    ``optimize_for_webserver``) that the crash closed, so its first query fails; SQLAlchemy then
    drops the pool's connections and the next query connects anew (the UI's next refresh)."""
    try:
        ui.runs()
        open_hour_records(ui)
    except GraphQLError:
        return False
    return True


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


def loaded(ui: DagsterUI):
    def check():
        try:
            return ui.location_loaded()
        except OSError:
            return False  # not listening yet

    return check


def open_hour_records(ui: DagsterUI) -> list[dict]:
    """The materializations of ``<source>/open_hour`` the asset's page shows (the loop records
    one per batch, runless), oldest first: their metadata by label."""
    out = ui.gql(
        ASSET_PARTITION_EVENTS_QUERY,
        {"assetKey": {"path": [SOURCE, "open_hour"]}, "partitions": None},
    )["assetOrError"]
    records = []
    for event in sorted(
        out.get("assetMaterializations") or [], key=lambda e: float(e["timestamp"])
    ):
        values = {}
        for e in event["metadataEntries"]:
            for field in ("intValue", "floatValue", "text", "jsonString"):
                if field in e:
                    values[e["label"]] = e[field]
        records.append(values)
    return records


def counted(record: dict, hour: ArchiveHour) -> int:
    """The messages of ``hour`` a record of the open hour counts: its ``messages_so_far`` when
    ``hour`` is its open hour. Should the clock turn the hour during the test, ``hour`` is
    still batched (and counted in ``rows_by_table``, by table) until it closes
    (``settle_minutes`` later): each message once, in its type's table or in ``tracks``."""
    if record["open_hour"] == str(hour):
        return record["messages_so_far"]
    rows = json.loads(record["rows_by_table"]).get(str(hour), {})
    return sum(n for t, n in rows.items() if t in STANDARD_TABLES | {"tracks"})
