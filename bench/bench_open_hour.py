"""An open hour's batches against the hourly sync of the same events (issue #55).

    python bench/bench_open_hour.py [--events 12000] [--files 12] [--out DIR]

One demo hour (``generate_archive``: messy traffic, duplicates, malformed lines) cut into
``--files`` consecutive slices of its received time, as the collector's spool segments reach
the archive. Each contender runs ``datalake sync`` as a user does, a fresh process each time,
on an Iceberg lake (the default format) with the default settings:

* ``batches``: the slices arrive one by one; after each, ``datalake sync --batch``. Per batch:
  wall time, CPU-seconds of the whole process (interpreter, imports, sync: ``RUSAGE_CHILDREN``),
  the commit's own wall time (the report's ``timings.commit_s``), lines read. This is what a
  runner that starts a process per batch pays at least (a Dagster run adds its own start and
  its event writes on top).
* ``loader``: the same slices and batches in one long-running process (imports paid once), as
  a loader beside the collector would run them: per batch, wall and CPU (``process_time``),
  and then the batch's record in a Dagster instance (the open hour's materialization, its
  rows counted from the tables: ``open_hour_asset.py``), timed apart.
* ``close``: then the hour's sync (``datalake sync``), which replaces the batches;
* ``sync``: the same hour synced once into a fresh lake, no batch before it (today's path).

Reported: each batch's figures (median and max), and the ratio of the close to the plain sync
(wall and CPU). Both lakes are compared row for row afterwards (they must be equal; columns by
name, and the quarantine's archive file by its name: the homes differ). Results go
to ``<out>/results.json``; a Markdown table is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from datalake_assets.ingest.demo import generate_archive  # noqa: E402
from datalake_assets.spec.layout import ArchiveHour, archive_hour_dir  # noqa: E402

SOURCE = "bench"
HOUR = "2026-11-21T10"


def datalake(home: Path, *args: str) -> dict:
    """``datalake --settings <home>/lake.toml ARGS`` in a fresh process: its report (the last
    JSON document on stdout), wall and CPU seconds."""
    script = Path(sys.executable).with_name("datalake")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "datalake_assets.cli"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.monotonic()
    done = subprocess.run(
        [*command, "--settings", str(home / "lake.toml"), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "DATALAKE_HOME": str(home)},
        check=False,
    )
    wall = time.monotonic() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"datalake {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"report": json.loads(done.stdout), "wall_s": wall, "cpu_s": cpu}


def home_with(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "lake.toml").write_text(
        'table_format = "iceberg"\narchive_root = "archive"\nlake_root = "lake"\n'
        f'[[sources]]\nid = "{SOURCE}"\n[models]\nenabled = false\n',
        encoding="utf-8",
    )
    return folder


def rows(lake_root: Path) -> dict[str, list]:
    """Every table's rows (minus the quarantine's run id), sorted: two lakes compare equal."""
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog(
        "datalake",
        uri=f"sqlite:///{lake_root}/_iceberg/catalog.db",
        warehouse=f"file://{lake_root}/iceberg",
    )
    out = {}
    for ident in catalog.list_tables(SOURCE):
        t = catalog.load_table(ident).scan().to_arrow()
        t = t.drop_columns([c for c in ("run_id",) if c in t.schema.names])
        t = t.select(sorted(t.column_names))  # a column's position follows the lake's history
        found = t.to_pylist()
        for r in found:  # the two homes' archives are in different folders: the file's name
            if r.get("archive_file"):
                r["archive_file"] = r["archive_file"].rsplit("/", 1)[-1]
        out[ident[-1]] = sorted((tuple(r.values()) for r in found), key=repr)
    return out


def no_spark():
    raise RuntimeError("a batch this small runs in the driver: no Spark session expected")


def loader(home: Path, parts: list[Path]) -> list[dict]:
    """The ``loader`` contender, in this process (started fresh by ``main``): each slice
    arrives, then one batch, in process, then its record in a Dagster instance as the loop
    makes it (``open_hour_asset.dagster_reporter``; an instance on SQLite made from the
    project's ``dagster.yaml``, as ``datalake dev``'s)."""
    from datetime import UTC, datetime

    from dagster import DagsterInstance

    from datalake_assets.orchestration.freshness.open_hour_asset import dagster_reporter
    from datalake_assets.settings import load_settings
    from datalake_assets.transform.sync import run_sync
    from datalake_assets.transform.sync_request import request_from_settings

    settings = load_settings(str(home / "lake.toml"), env={})
    source = settings.source(SOURCE)
    target = Path(archive_hour_dir(settings.archive_root, SOURCE, ArchiveHour.parse(HOUR)))
    target.mkdir(parents=True)
    dagster_home = home / "dagster_home"
    dagster_home.mkdir()
    shutil.copy(REPO / "dagster.yaml", dagster_home / "dagster.yaml")
    instance = DagsterInstance.from_config(str(dagster_home))
    record = dagster_reporter(instance, settings)
    # the batch's hour is the bench's fixed one: the record counts that hour's rows
    at = ArchiveHour.parse(HOUR).start.replace(minute=30, tzinfo=UTC)
    assert at < datetime.now(UTC)
    out = []
    for part in parts:
        shutil.copy(part, target / part.name)
        cpu, t = time.process_time(), time.monotonic()
        report = run_sync(
            no_spark, request_from_settings(settings, source, [HOUR], replay=False, batch=True)
        )
        wall, used = time.monotonic() - t, time.process_time() - cpu
        cpu, t = time.process_time(), time.monotonic()
        record(source, report, at)
        out.append(
            {
                "lines": report.source.lines_in,
                "rows": report.source.messages_written,
                "wall_s": round(wall, 3),
                "cpu_s": round(used, 3),
                "commit_s": (report.source.timings or {}).get("commit_s"),
                "record_wall_s": round(time.monotonic() - t, 3),
                "record_cpu_s": round(time.process_time() - cpu, 3),
            }
        )
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=12_000)
    p.add_argument("--files", type=int, default=12)
    p.add_argument("--out", default=str(REPO / "bench" / "out" / "open_hour"))
    p.add_argument("--child-loader", help=argparse.SUPPRESS)  # <home>: run ``loader`` there
    a = p.parse_args()
    if a.child_loader:
        home = Path(a.child_loader)
        parts = sorted(Path(home, "slices").iterdir())
        print(json.dumps(loader(home, parts)))
        return
    out = Path(a.out)
    shutil.rmtree(out, ignore_errors=True)
    slices = out / "slices"
    generate_archive(
        str(slices),
        SOURCE,
        [ArchiveHour.parse(HOUR)],
        events_per_hour=a.events,
        files_per_hour=a.files,
        seed=55,
    )
    parts = sorted(Path(archive_hour_dir(str(slices), SOURCE, ArchiveHour.parse(HOUR))).iterdir())

    batched = home_with(out / "batched")
    target = Path(archive_hour_dir(str(batched / "archive"), SOURCE, ArchiveHour.parse(HOUR)))
    target.mkdir(parents=True)
    batches = []
    for part in parts:  # a spool segment reaches the archive, then the batch runs
        shutil.copy(part, target / part.name)
        r = datalake(batched, "sync", "--source", SOURCE, "--batch", "--hours", HOUR)
        rep = r["report"]
        assert rep.get("batch_id"), rep
        batches.append(
            {
                "lines": rep["lines_in"],
                "rows": rep["messages_written"],
                "wall_s": round(r["wall_s"], 3),
                "cpu_s": round(r["cpu_s"], 3),
                "commit_s": rep["timings"].get("commit_s"),
            }
        )
    close = datalake(batched, "sync", "--source", SOURCE, "--hours", HOUR)

    in_process = home_with(out / "loader")
    shutil.copytree(parts[0].parent, in_process / "slices")
    done = subprocess.run(
        [sys.executable, __file__, "--child-loader", str(in_process)],
        capture_output=True,
        text=True,
        check=True,
    )
    loaded = json.loads(done.stdout.strip().splitlines()[-1])

    plain = home_with(out / "plain")
    shutil.copytree(batched / "archive", plain / "archive")
    sync = datalake(plain, "sync", "--source", SOURCE, "--hours", HOUR)
    equal = rows(batched / "lake") == rows(plain / "lake")

    def med(key: str, runs: list[dict]) -> float:
        return round(statistics.median(b[key] for b in runs), 3)

    def top(key: str, runs: list[dict]) -> float:
        return round(max(b[key] for b in runs), 3)

    results = {
        "events": a.events,
        "files": a.files,
        "batches": batches,
        "loader": loaded,
        "close": {"wall_s": close["wall_s"], "cpu_s": close["cpu_s"]},
        "sync": {"wall_s": sync["wall_s"], "cpu_s": sync["cpu_s"]},
        "close_vs_sync_wall": close["wall_s"] / sync["wall_s"],
        "close_vs_sync_cpu": close["cpu_s"] / sync["cpu_s"],
        "lakes_equal": equal,
        "cpu_count": os.cpu_count(),
    }
    (out / "results.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    print(f"{a.events} events in {a.files} segments of ~{a.events // a.files} lines\n")
    print("| a batch | process each: median | max | loader: median | max |")
    print("|---|---|---|---|---|")
    for key, label in (
        ("lines", "lines read"),
        ("wall_s", "wall s"),
        ("cpu_s", "CPU s"),
        ("commit_s", "commit wall s"),
    ):
        print(
            f"| {label} | {med(key, batches)} | {top(key, batches)} | {med(key, loaded)} | "
            f"{top(key, loaded)} |"
        )
    for key, label in (
        ("record_wall_s", "its record in Dagster, wall s"),
        ("record_cpu_s", "its record in Dagster, CPU s"),
    ):
        print(f"| {label} | | | {med(key, loaded)} | {top(key, loaded)} |")
    print(
        f"\nclose {close['wall_s']:.2f} s wall, {close['cpu_s']:.2f} CPU-s; plain sync "
        f"{sync['wall_s']:.2f} s, {sync['cpu_s']:.2f} CPU-s: close/sync "
        f"{results['close_vs_sync_wall']:.2f}x wall, {results['close_vs_sync_cpu']:.2f}x CPU; "
        f"lakes equal: {equal}"
    )


if __name__ == "__main__":
    main()
