"""Benchmark: one small source-hour (issue #14), through ``datalake sync`` and as a Dagster run.

    cd /work/wt-small && PYTHONPATH=. .venv/bin/python bench/bench_small.py --events 1000
    # only the CLI part, both paths, both catalogs, 3 timed syncs each:
    PYTHONPATH=. python bench/bench_small.py --events 1000 --no-dagster --repeat 3
    # the figures before the change (a checkout without the local path):
    PYTHONPATH=. python bench/bench_small.py --repo /work/main --paths default
    # only the Dagster part, catalog none, driver-local path:
    PYTHONPATH=. python bench/bench_small.py --no-cli --catalogs none --paths local
    # where the local path stops paying (the default of [sync] local_max_bytes):
    PYTHONPATH=. python bench/bench_small.py --no-cli --no-dagster --files 4 \
        --crossover 1000,10000,20000,40000

Input: ``datalake_assets.ingest.demo.generate_archive(<out>/archive, "bench", [2026-11-21T10],
events_per_hour=--events, files_per_hour=--files, seed=7)``, as ``bench_sync.py`` makes it.

Part 1, ``datalake sync`` (a fresh process each time, as a user or cron runs it): for each
catalog (``none``; ``hive``: embedded Derby, opened by the sync's own JVM; ``hive-served``: the
same metastore held by a server, as while ``datalake dev`` runs, started before the syncs and
not timed; ``hive-off``: ``metastore_server = "off"``) and path (``local``: the driver-local path,
forced; ``spark``: ``local_max_bytes = 0``; ``default``: the setting left out), a fresh lake
and metastore, one first sync (it creates the tables) then ``--repeat`` re-syncs of the hour.
Printed per sync: **wall** (``Popen`` to exit, interpreter and JVM included), **in sync**
(the report's ``duration_mins``: ``run_sync`` from its start to its report) and the report's
phase timings (``parse_s``, ``dedup_s``, ``write_s``, ``check_s``; their sum is the issue's
"inside the sync" figure).

Part 2, a Dagster run (``--dagster``, the default): ``datalake dev`` (webserver and daemon, the
harness of ``datalake_assets_tests/orchestration/dagster_ui.py``) on a fresh home with the
sensors stopped; the hour's partition of the sync job is launched as the UI's Materialize does
(one run), ``--repeat`` + 1 times. Printed per run: **launch to success** (the
``launchPipelineExecution`` call to the first poll, every 0.2 s, that sees ``SUCCESS``) and
the run's event timeline (enqueued, dequeued by the daemon, run worker started, step start,
step end, success) with the sync's own duration from its report.

Part 3, ``--crossover``: hours of several sizes, each synced through both paths (catalog
``none``, a re-sync timed after a first sync): where the driver-local path stops paying.

Results: a Markdown table per part on stdout, everything in ``<out>/results.json``.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SOURCE = "bench"
HOUR = "2026-11-21T10"
# [sync] local_max_bytes of each path; "default" writes none (also for a checkout without it)
PATHS = {"local": 1 << 40, "spark": 0, "default": None}


def generate(out: Path, events: int, files: int) -> dict:
    from datalake_assets.ingest.demo import generate_archive
    from datalake_assets.spec.layout import ArchiveHour

    archive = out / "archive"
    shutil.rmtree(archive, ignore_errors=True)
    s = generate_archive(
        str(archive),
        SOURCE,
        [ArchiveHour.parse(HOUR)],
        events_per_hour=events,
        files_per_hour=files,
        seed=7,
    )
    size = sum(os.path.getsize(f) for f in s.files)
    return {
        "lines": s.lines,
        "files": len(s.files),
        "bytes_gz": size,
        "bytes_uncompressed": s.bytes_uncompressed,
    }


def write_settings(
    folder: Path, archive: Path, catalog: str, path: str, *, dagster: bool = False
) -> Path:
    from datalake_assets.spec.layout import ArchiveHour

    folder.mkdir(parents=True, exist_ok=True)
    backend, _, mode = catalog.partition("-")  # hive-served: a server; hive-off: never one
    text = f'archive_root = "{archive}"\nlake_root = "lake"\n[catalog]\nbackend = "{backend}"\n'
    if mode == "off":
        text += 'metastore_server = "off"\n'
    if PATHS[path] is not None:
        text += f"[sync]\nlocal_max_bytes = {PATHS[path]}\n"
    if dagster:
        text += '[automation]\nsensors = "stopped"\n'
    text += f'[[sources]]\nid = "{SOURCE}"\n'
    if dagster:
        text += f'start = "{ArchiveHour.parse(HOUR).partition_key}"\n'
    (folder / "lake.toml").write_text(text)
    return folder / "lake.toml"


def _cpu() -> tuple[float, float]:
    """(busy, total) clock ticks of the whole machine, from ``/proc/stat``."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return sum(v) - idle, sum(v)


def busy_cores(seconds: float = 2.0) -> float:
    b0, t0 = _cpu()
    time.sleep(seconds)
    b1, t1 = _cpu()
    return (b1 - b0) / max(t1 - t0, 1) * os.cpu_count()


def wait_quiet(limit_s: float) -> float:
    """Wait (up to ``limit_s``) until the rest of the machine uses < 0.3 cores; returns the
    busy cores last seen."""
    deadline = time.monotonic() + limit_s
    while True:
        busy = busy_cores()
        if busy < 0.3 or time.monotonic() > deadline:
            return round(busy, 2)


QUIET_S = 0.0  # --wait-quiet


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "SPARK_LOCAL_IP": "127.0.0.1"}


# ---------------------------------------------------------------------------- datalake sync


def cli_sync(settings: Path) -> dict:
    quiet = wait_quiet(QUIET_S) if QUIET_S else None
    b0, c0 = _cpu()
    t = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "datalake_assets.cli",
            "--settings",
            str(settings),
            "sync",
            "--hours",
            HOUR,
        ],
        env=env(),
        capture_output=True,
        timeout=900,
        cwd=settings.parent,
    )
    wall = time.monotonic() - t
    b1, c1 = _cpu()
    if done.returncode:
        raise SystemExit(
            f"datalake sync failed:\n{done.stderr.decode()[-3000:]}\n{done.stdout.decode()[-2000:]}"
        )
    report = json.loads(done.stdout)
    timings = report["timings"]
    return {
        "wall_s": round(wall, 2),
        "in_sync_s": round(report["duration_mins"] * 60, 2),
        "phases_s": round(
            sum(timings.get(k, 0) for k in ("parse_s", "dedup_s", "write_s", "check_s")), 2
        ),
        "timings": timings,
        "rows": report["messages_written"],
        # the machine's busy cores before (after --wait-quiet) and during the sync
        "busy_before": quiet,
        "busy_during": round((b1 - b0) / max(c1 - c0, 1) * os.cpu_count(), 2),
        "duplicates": report["duplicates"],
        "tables": report["tables"],
    }


def run_cli(
    out: Path, archive: Path, catalogs: list[str], paths: list[str], repeat: int
) -> list[dict]:
    rows = []
    for catalog in catalogs:
        for path in paths:
            folder = out / f"cli-{catalog}-{path}"
            shutil.rmtree(folder, ignore_errors=True)
            settings = write_settings(folder, archive, catalog, path)
            served = _serve(settings) if catalog == "hive-served" else None
            try:
                for i in range(repeat + 1):
                    r = {
                        "catalog": catalog,
                        "path": path,
                        "sync": "first" if i == 0 else f"again {i}",
                        **cli_sync(settings),
                    }
                    print(json.dumps(r), file=sys.stderr, flush=True)
                    rows.append(r)
            finally:
                if served is not None:
                    from datalake_assets.catalog import metastore_server

                    metastore_server.stop(served.metastore_dir)
    return rows


def _serve(settings: Path):
    """Start the metastore server of ``settings`` (what ``datalake dev`` does) for the CLI's
    syncs; its start is not timed."""
    from datalake_assets.catalog import metastore_server
    from datalake_assets.catalog.config import config_from_settings
    from datalake_assets.settings import load_settings

    cfg = config_from_settings(load_settings(settings, env={}).catalog)
    t = time.monotonic()
    address = metastore_server.start(cfg.metastore_dir, cfg.spark_conf())
    print(
        f"metastore server {address} started in {time.monotonic() - t:.1f} s",
        file=sys.stderr,
        flush=True,
    )
    return cfg


def run_crossover(out: Path, sizes: list[int], files: int) -> list[dict]:
    """Where the driver-local path stops paying: hours of ``sizes`` events (``files`` files),
    catalog none, each path, a re-sync (after a first sync) timed."""
    rows = []
    for events in sizes:
        sub = out / f"crossover-{events}"
        shutil.rmtree(sub, ignore_errors=True)
        info = generate(sub, events, files)
        for path in ("local", "spark"):
            settings = write_settings(sub / path, sub / "archive", "none", path)
            cli_sync(settings)
            r = {
                "events": events,
                "files": files,
                "mb_gz": round(info["bytes_gz"] / 2**20, 2),
                "path": path,
                **cli_sync(settings),
            }
            print(json.dumps(r), file=sys.stderr, flush=True)
            rows.append(r)
        shutil.rmtree(sub, ignore_errors=True)
    return rows


# ------------------------------------------------------------------------------- Dagster run

RUN_TIMES = """
query RunTimes($runId: ID!) {
  runOrError(runId: $runId) { ... on Run { id status creationTime startTime endTime } }
  logsForRun(runId: $runId, limit: 1000) {
    ... on EventConnection { events { __typename ... on MessageEvent { timestamp message } } }
  }
}"""
MILESTONES = {
    "RunEnqueuedEvent": "enqueued",
    "RunDequeuedEvent": "dequeued",
    "RunStartingEvent": "starting",
    "RunStartEvent": "worker_started",
    "ExecutionStepStartEvent": "step_start",
    "ExecutionStepSuccessEvent": "step_end",
    "RunSuccessEvent": "success",
}


def dagster_run(dev, partition: str, lake: Path) -> dict:
    ui = dev.ui
    loaded = ui.load_for_launch([f"{SOURCE}/pages"])
    quiet = wait_quiet(QUIET_S) if QUIET_S else None
    b0, c0 = _cpu()
    t = time.time()
    run_id = ui.launch_partition_run(loaded, partition)
    while True:
        runs = [r for r in ui.runs() if r["id"] == run_id]
        if runs and runs[0]["status"] in ("SUCCESS", "FAILURE", "CANCELED"):
            break
        time.sleep(0.2)
    total = time.time() - t
    b1, c1 = _cpu()
    if runs[0]["status"] != "SUCCESS":
        raise SystemExit(f"run {run_id} {runs[0]['status']}:\n{ui.run_errors(run_id)}")
    data = ui.gql(RUN_TIMES, {"runId": run_id})
    marks: dict[str, float] = {}
    for e in data["logsForRun"]["events"]:
        name = MILESTONES.get(e["__typename"])
        if name and name not in marks:
            marks[name] = round(int(e["timestamp"]) / 1000 - t, 2)
    reports = sorted(
        glob.glob(str(lake / "reports" / "**" / "report.json"), recursive=True),
        key=os.path.getmtime,
    )
    with open(reports[-1]) as f:
        source = json.loads([x for x in f if x.strip()][-1])  # tables, then the source's
    return {
        "run_id": run_id,
        "launch_to_success_s": round(total, 2),
        **marks,
        "busy_before": quiet,
        "busy_during": round((b1 - b0) / max(c1 - c0, 1) * os.cpu_count(), 2),
        "in_sync_s": round(source["duration_mins"] * 60, 2),
        "timings": source["timings"],
    }


def run_dagster(
    out: Path, archive: Path, catalogs: list[str], paths: list[str], repeat: int
) -> list[dict]:
    sys.path.insert(0, str(REPO))
    from datalake_assets.spec.layout import ArchiveHour
    from datalake_assets_tests.orchestration.dagster_ui import datalake_dev

    os.environ["PYTHONPATH"] = str(REPO)
    os.chdir(REPO)  # `python -m datalake_assets.cli dev` imports from the working directory
    partition = ArchiveHour.parse(HOUR).partition_key
    rows = []
    for catalog in catalogs:
        for path in paths:
            home = out / f"dagster-{catalog}-{path}"
            shutil.rmtree(home, ignore_errors=True)
            settings = write_settings(home, archive, catalog, path, dagster=True)
            t = time.monotonic()
            with datalake_dev(home, settings) as dev:
                started = round(time.monotonic() - t, 1)
                for i in range(repeat + 1):
                    r = {
                        "catalog": catalog,
                        "path": path,
                        "dev_start_s": started,
                        "run": "first" if i == 0 else f"again {i}",
                        **dagster_run(dev, partition, home / "lake"),
                    }
                    print(json.dumps(r), file=sys.stderr, flush=True)
                    rows.append(r)
                    if i == 0:  # new tables reload the code location: let it settle
                        time.sleep(5)
    return rows


# ------------------------------------------------------------------------------------- main


def table(rows: list[dict], cols: list[str]) -> str:
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join(str(r.get(c, "")) for c in cols) + " |")
    return "\n".join(lines)


def main() -> int:
    global REPO, QUIET_S
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--events", type=int, default=1000)
    p.add_argument("--files", type=int, default=2)
    p.add_argument("--out", default=str(REPO / "bench" / "out" / "small"))
    p.add_argument("--repeat", type=int, default=2, help="timed re-syncs after the first")
    p.add_argument("--catalogs", default="none,hive")
    p.add_argument("--paths", default="local,spark")
    p.add_argument("--no-cli", action="store_true")
    p.add_argument(
        "--repo",
        default=str(REPO),
        help="the checkout whose code runs (e.g. one before the change, with --paths default)",
    )
    p.add_argument("--no-dagster", action="store_true")
    p.add_argument(
        "--wait-quiet",
        type=float,
        default=0.0,
        help="before each timed sync or run, wait up to this many seconds until the "
        "rest of the machine uses < 0.3 cores (busy_before/busy_during report it)",
    )
    p.add_argument(
        "--crossover",
        default="",
        help="comma-separated event counts: time both paths on each (catalog none)",
    )
    a = p.parse_args()
    REPO = Path(a.repo).resolve()
    QUIET_S = a.wait_quiet
    out = Path(a.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    catalogs, paths = a.catalogs.split(","), a.paths.split(",")
    results = {"input": generate(out, a.events, a.files), "load_before": os.getloadavg()}
    print(f"input: {results['input']}")
    archive = out / "archive"
    if not a.no_cli:
        results["cli"] = run_cli(out, archive, catalogs, paths, a.repeat)
        for r in results["cli"]:
            r.update({k: r["timings"].get(k) for k in ("parse_s", "dedup_s", "write_s")})
        print("\n`datalake sync`\n")
        print(
            table(
                results["cli"],
                [
                    "catalog",
                    "path",
                    "sync",
                    "wall_s",
                    "in_sync_s",
                    "phases_s",
                    "parse_s",
                    "dedup_s",
                    "write_s",
                    "tables",
                    "busy_before",
                    "busy_during",
                ],
            )
        )
    if not a.no_dagster:
        results["dagster"] = run_dagster(out, archive, catalogs, paths, a.repeat)
        print("\nDagster run (seconds from the launch)\n")
        print(
            table(
                results["dagster"],
                [
                    "catalog",
                    "path",
                    "run",
                    "launch_to_success_s",
                    "enqueued",
                    "dequeued",
                    "worker_started",
                    "step_start",
                    "step_end",
                    "success",
                    "in_sync_s",
                    "busy_before",
                    "busy_during",
                ],
            )
        )
    if a.crossover:
        results["crossover"] = run_crossover(out, [int(x) for x in a.crossover.split(",")], a.files)
        print("\nCrossover (catalog none, a re-sync)\n")
        print(
            table(
                results["crossover"],
                [
                    "events",
                    "files",
                    "mb_gz",
                    "path",
                    "wall_s",
                    "in_sync_s",
                    "phases_s",
                    "busy_during",
                ],
            )
        )
    results["load_after"] = os.getloadavg()
    (out / "results.json").write_text(json.dumps(results, indent=2))
    print(f"\nload average before {results['load_before']}, after {results['load_after']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
