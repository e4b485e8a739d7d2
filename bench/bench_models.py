"""Benchmark (issues #28, #43): the models built on each engine (``[models] engine``) for N days
of the demo source, the way ``datalake dev`` runs them, on each table format, in one run.

    python bench/bench_models.py [--days 30] [--events-per-hour 300] [--workdir DIR]
        [--engines duckdb,spark] [--table-format segment,iceberg]

Set-up (not measured, kept in ``--workdir`` and reused by a later run with the same options):
the demo archive (``generate_archive``), synced as files by Spark (``--sync-batch-days``, 5;
each batch recorded, so an interrupted set-up goes on from the next), without a catalog
(registering thousands of hourly partitions one sync at a time takes longer than the models),
once per table format, each a lake of its own. The Segment layout: the metastore is then
served by its Spark Connect server (``catalog/metastore_server.py``, as ``datalake dev``
does) and, for the Spark engine, the tables are registered there in one go from ``datalake
ddl``'s statements. Iceberg (SQL catalog under the lake): its hours compacted after each
batch, as the product's maintenance keeps the default lake (``compact_after_hours``), and
only the DuckDB engine runs: the Spark engine's local profile reads the tables through
Spark's Hive catalog, which cannot read Iceberg tables here (``spark_engine.can_run``).

Measured, for each engine (DuckDB first), each in a process of its own so that
``RUSAGE_CHILDREN``'s peak RSS is that engine's dbt processes and nothing else: through
``build_outside_dagster`` (dbt, then the publish into the lake) one build of every day of the
daily models, one of the whole-table models, then one day alone (the automation's daily run).
Each prints wall time, CPU of dbt's process and of the server's JVM, the dbt process's wall,
dbt's own elapsed time and each model's (run_results.json), and for DuckDB the time to create
the build's views over the lake, the publish's time, the dbt processes' peak RSS and the Python
process's RSS growth during the publish. Then the models' row counts read back
from the lake (for ``daily_event_counts`` also the sum of ``events``), which must agree between
engines, and the ratios Spark / DuckDB.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

BUILDS = (  # label, dbt selection, days: "all" or "last"
    ("daily models, all days", ["--select", "tag:daily"], "all"),
    ("whole tables", ["--exclude", "tag:daily"], "all"),
    ("daily models, one day", ["--select", "tag:daily"], "last"),
)


def jvm_cpu_s(pid: int | None) -> float:
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def children_peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # Linux: KiB


def own_rss_mb(key: str = "VmRSS") -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def reset_own_peak() -> None:
    try:
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    except OSError:
        pass


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--days", type=int, default=30)
    p.add_argument("--events-per-hour", type=int, default=300)
    p.add_argument("--workdir", default="")
    p.add_argument("--engines", default="duckdb,spark")
    p.add_argument("--sync-batch-days", type=int, default=5, help="days synced per Spark job")
    p.add_argument(
        "--table-format",
        default="segment,iceberg",
        help="segment, iceberg, or both (comma-separated): each a lake of its own, same archive",
    )
    p.add_argument("--measure", default="", help=argparse.SUPPRESS)  # internal: one engine
    a = p.parse_args()
    engines = [e.strip() for e in a.engines.split(",") if e.strip()]
    engines.sort(key=lambda e: e != "duckdb")  # DuckDB first
    formats = [f.strip() for f in a.table_format.split(",") if f.strip()]
    if not formats or set(formats) - {"segment", "iceberg"}:
        raise SystemExit(f"--table-format: segment, iceberg or both, not {a.table_format!r}")
    work = Path(a.workdir or tempfile.mkdtemp(prefix="bench-models-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    os.environ["DATALAKE_HOME"] = str(work / "home")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    last = datetime(2026, 10, 31, 23, tzinfo=UTC)
    first = last - timedelta(hours=24 * a.days - 1)
    if a.measure:
        (table_format,) = formats  # the parent passes one
        lake_toml, _ = _write_settings(work, table_format, first)
        os.environ["DATALAKE_SETTINGS"] = str(lake_toml)
        _measure(a.measure, lake_toml, work, first, last)
        return
    print(
        f"{a.days} days x {a.events_per_hour} events/hour, table formats {formats}, "
        f"engines {engines}, workdir {work}",
        flush=True,
    )
    figures: dict[str, dict] = {}
    for table_format in formats:
        figures.update(_run_format(a, work, table_format, engines, first, last))
    _compare(figures)


def _run_format(a, work: Path, table_format: str, engines: list[str], first, last) -> dict:
    """Each engine's builds on this format's lake, in processes of their own; returns their
    figures by ``<format>-<engine>``. The Spark engine runs on the Segment layout only: its
    local profile reads the tables through Spark's Hive catalog, which cannot read Iceberg
    tables here (``spark_engine.can_run``)."""
    from datalake_assets.catalog import metastore_server
    from datalake_assets.catalog.config import config_from_settings
    from datalake_assets.settings import load_settings

    if table_format == "iceberg":
        engines = [e for e in engines if e != "spark"]
    lake_toml, sync_toml = _write_settings(work, table_format, first)
    os.environ["DATALAKE_SETTINGS"] = str(lake_toml)
    settings = load_settings(lake_toml)
    cfg = config_from_settings(settings.catalog)
    _setup(work, a, table_format, lake_toml, sync_toml, first, last)
    served = table_format == "segment"  # a Hive catalog: datalake dev serves it
    server_pid = None
    if served:
        t = time.monotonic()
        address = metastore_server.start(cfg.metastore_dir, cfg.spark_conf())
        server_pid = _server_pid(cfg.metastore_dir)
        print(f"metastore served at {address} ({time.monotonic() - t:.0f} s)", flush=True)
    figures = {}
    try:
        if "spark" in engines and not (work / "registered.done").exists():
            _register(settings, cfg)
            (work / "registered.done").write_text("")
        for engine in engines:
            out = work / f"figures-{table_format}-{engine}.json"
            cmd = [sys.executable, __file__, *sys.argv[1:], "--measure", engine]
            cmd += ["--workdir", str(work), "--table-format", table_format]
            env = {**os.environ, "BENCH_SERVER_PID": str(server_pid or "")}
            if subprocess.run(cmd, env=env, check=False).returncode:
                raise SystemExit(f"the {engine} engine's measurement on {table_format} failed")
            figures[f"{table_format}-{engine}"] = json.loads(out.read_text())
    finally:
        if served:
            metastore_server.stop(cfg.metastore_dir)
    return figures


def _write_settings(work: Path, table_format: str, first: datetime) -> tuple[Path, Path]:
    lake = "lake" if table_format == "segment" else "lake-iceberg"
    common = (
        f'archive_root = "archive"\nlake_root = "{lake}"\ntable_format = "{table_format}"\n'
        f'[[sources]]\nid = "demo"\nstart = "{first:%Y-%m-%d-%H}:00"\n'
        f'[models]\nbuild_dir = "dbt-{table_format}"\n'
    )
    lake_toml = work / f"lake-{table_format}.toml"
    sync_toml = work / f"sync-{table_format}.toml"
    catalog = 'metastore_dir = "metastore"' if table_format == "segment" else 'backend = "none"'
    lake_toml.write_text(f"{common}[catalog]\n{catalog}\n")
    sync_toml.write_text(f'{common}[catalog]\nbackend = "none"\n')
    return lake_toml, sync_toml


def _setup(work, a, table_format, lake_toml, sync_toml, first, last) -> None:
    from datalake_assets.ingest.demo import generate_archive
    from datalake_assets.settings import load_settings
    from datalake_assets.spec import layout

    settings = load_settings(lake_toml)
    source = settings.sources[0]
    hours = layout.hour_range(layout.ArchiveHour.of(first), layout.ArchiveHour.of(last))
    marker = work / "archive.done"
    if not marker.exists():
        t = time.monotonic()
        generate_archive(
            settings.archive_root,
            source.id,
            hours,
            events_per_hour=a.events_per_hour,
            files_per_hour=1,
            seed=7,
        )
        marker.write_text(f"{len(hours)} hours x {a.events_per_hour}\n")
        print(
            f"archive: {len(hours)} hours x {a.events_per_hour} lines "
            f"({time.monotonic() - t:.0f} s)",
            flush=True,
        )
    if not (work / f"sync-{table_format}.done").exists():
        _sync(work, table_format, sync_toml, source, hours, 24 * a.sync_batch_days)
    marker = work / f"compact-{table_format}.done"
    if table_format == "iceberg" and not marker.exists():
        marker.write_text(_compact(settings, source))


def _sync(work: Path, table_format: str, sync_toml: Path, source, hours, batch: int) -> None:
    from datalake_assets.settings import load_settings
    from datalake_assets.transform.session import settings_spark_session
    from datalake_assets.transform.sync import run_sync
    from datalake_assets.transform.sync_request import request_from_settings

    files_only = load_settings(sync_toml)
    # A year's sync takes hours: each committed batch is recorded, and a run interrupted
    # (or crashed) goes on from the first batch not recorded, replaying it.
    progress = work / f"sync-{table_format}.progress"
    start = int(progress.read_text()) if progress.exists() else 0
    t = time.monotonic()
    spark = settings_spark_session(files_only, quiet=True)  # no Hive: the server has it
    for i in range(start, len(hours), batch):
        b = time.monotonic()
        run_sync(
            spark, request_from_settings(files_only, source, hours[i : i + batch], replay=True)
        )
        done = min(i + batch, len(hours))
        if table_format == "iceberg":
            # as the maintenance keeps the default lake: each batch's cold hours compacted
            # before the next batch (its commit then plans over a few files, not thousands)
            _compact(files_only, source)
        progress.write_text(f"{done}\n")
        print(
            f"  synced {done}/{len(hours)} hours: this batch {time.monotonic() - b:.0f} s "
            f"({time.monotonic() - t:.0f} s in this run)",
            flush=True,
        )
    spark.stop()
    (work / f"sync-{table_format}.done").write_text(f"{time.monotonic() - t:.0f} s\n")
    print(f"sync (files only, {table_format}): {time.monotonic() - t:.0f} s", flush=True)


def _compact(settings, source) -> str:
    """The Iceberg lake as the product keeps it: its cold hours compacted (the maintenance
    asset's ``compact_source``, ``compact_after_hours`` after the hour; here all of them)."""
    from datalake_assets.lake.formats.compaction import compact_source
    from datalake_assets.models.publish import tables_of
    from datalake_assets.settings.formats_section import FormatConfig

    t = time.monotonic()
    report = compact_source(
        settings.lake_root, FormatConfig.of_settings(settings), tables_of(source), "bench"
    )
    before = sum(x.files_before for x in report.tables)
    after = sum(x.files_after for x in report.tables)
    line = f"compacted: {before} files -> {after} ({time.monotonic() - t:.0f} s)"
    print(line, flush=True)
    return line + "\n"


def _register(settings, cfg) -> None:
    """The event tables in the served metastore, in one go (the Spark engine reads them
    there; the DuckDB engine reads the files)."""
    from datalake_assets.catalog.ddl import print_table_ddl

    t = time.monotonic()
    served = cfg.served_session()
    for statement in print_table_ddl(settings, settings.sources[0]).split(";\n"):
        body = "\n".join(
            line for line in statement.splitlines() if not line.startswith("--")
        ).strip()
        if body:
            served.sql(body).collect()
    print(f"registered in the served metastore: {time.monotonic() - t:.0f} s", flush=True)


def _measure(engine: str, lake_toml: Path, work: Path, first: datetime, last: datetime) -> None:
    """One engine's builds, in this process of its own (``RUSAGE_CHILDREN``: its dbt only)."""
    from datalake_assets.models import build as build_module
    from datalake_assets.models.build import build_outside_dagster
    from datalake_assets.models.engines import duckdb_engine
    from datalake_assets.models.workspace import prepare_project, source_tables
    from datalake_assets.settings import load_settings

    settings = load_settings(lake_toml, env={**os.environ, "DATALAKE_MODELS_ENGINE": engine})
    source = settings.sources[0]
    server_pid = int(os.environ.get("BENCH_SERVER_PID") or 0) or None

    # run_results.json lives in build_outside_dagster's temporary target: keep a copy as it
    # is read; and the DuckDB publish's time and RSS, around DuckDBRun.publish
    seen: dict = {}
    read_artifact = build_module._artifact

    def keep_artifact(target, name):
        out = read_artifact(target, name)
        if name == "run_results.json":
            seen["run_results"] = out
        return out

    build_module._artifact = keep_artifact
    run_publish = duckdb_engine.DuckDBRun.publish

    def timed_publish(self, built):
        before = own_rss_mb()
        reset_own_peak()
        t = time.monotonic()
        try:
            return run_publish(self, built)
        finally:
            seen["publish_s"] = time.monotonic() - t
            seen["publish_rss_growth_mb"] = own_rss_mb("VmHWM") - before

    duckdb_engine.DuckDBRun.publish = timed_publish
    make_views = duckdb_engine.duckdb_lake.create_views

    def timed_views(*args, **kwargs):
        t = time.monotonic()
        try:
            return make_views(*args, **kwargs)
        finally:
            seen["views_s"] = time.monotonic() - t

    duckdb_engine.duckdb_lake.create_views = timed_views
    run_process = subprocess.run  # build_outside_dagster's dbt process

    def timed_process(*args, **kwargs):
        t = time.monotonic()
        try:
            return run_process(*args, **kwargs)
        finally:
            seen["dbt_process_s"] = time.monotonic() - t

    subprocess.run = timed_process

    t = time.monotonic()
    project = prepare_project(settings, source, source_tables(settings, source))
    print(f"[{engine}] dbt project prepared ({time.monotonic() - t:.0f} s)", flush=True)
    d0, d1 = f"{first:%Y-%m-%d}", f"{last:%Y-%m-%d}"
    rows = []
    for label, selection, days in BUILDS:
        lo = d0 if days == "all" else d1
        seen.clear()
        cpu0, jvm0, t0 = children_cpu_s(), jvm_cpu_s(server_pid), time.monotonic()
        done = build_outside_dagster(
            settings,
            source,
            project,
            ["build", *selection],
            f"bench-{engine}-{len(rows)}",
            {"min_day": lo, "max_day": d1},
        )
        wall = time.monotonic() - t0
        if done.returncode:
            raise SystemExit(f"[{engine}] {label}: dbt failed:\n{done.output[-4000:]}")
        results = seen.get("run_results") or {}
        res = results.get("results", [])
        row = {
            "build": label,
            "selection": " ".join(selection),
            "days": f"{lo}..{d1}",
            "wall_s": round(wall, 1),
            "dbt_cpu_s": round(children_cpu_s() - cpu0, 1),
            "jvm_cpu_s": round(jvm_cpu_s(server_pid) - jvm0, 1),
            "dbt_process_s": round(seen.get("dbt_process_s", 0.0), 1),
            "dbt_elapsed_s": round(results.get("elapsed_time", 0.0), 1),
            "models": {
                r["unique_id"].split(".")[-1]: round(r["execution_time"], 1)
                for r in res
                if r["unique_id"].startswith("model.")
            },
            "tests": sum(1 for r in res if r["unique_id"].startswith("test.")),
            "tests_s": round(
                sum(r["execution_time"] for r in res if r["unique_id"].startswith("test.")), 1
            ),
            "published": len(done.published),
        }
        if engine == "duckdb":
            row["views_s"] = round(seen.get("views_s", 0.0), 1)
            row["publish_s"] = round(seen.get("publish_s", 0.0), 1)
            row["publish_rss_growth_mb"] = round(seen.get("publish_rss_growth_mb", 0.0))
            row["dbt_peak_rss_mb_so_far"] = round(children_peak_mb())
        rows.append(row)
        print(f"[{engine}] {json.dumps(row)}", flush=True)
    counts = _lake_counts(settings, source, project.model_names(), work)
    print(f"[{engine}] models in the lake: {json.dumps(counts)}", flush=True)
    out = {
        "engine": engine,
        "builds": rows,
        "counts": counts,
        "dbt_peak_rss_mb": round(children_peak_mb()),
        "python_rss_mb": round(own_rss_mb("VmRSS")),
    }
    (work / f"figures-{settings.table_format}-{engine}.json").write_text(json.dumps(out, indent=1))


def _lake_counts(settings, source, models, work: Path) -> dict:
    """Each model's rows as the lake holds them now (its current version, either format)."""
    from datalake_assets.models.engines import duckdb_engine, duckdb_lake
    from datalake_assets.models.publish import lake_format, model_location, tables_of

    fmt = lake_format(settings)
    src = tables_of(source)
    ext = duckdb_engine.extension_dir(settings)
    duckdb_lake.install_extensions(ext)
    con = duckdb_lake.connect(":memory:", ext)
    out = {}
    try:
        for model in sorted(models):
            version = fmt.current_version(src, model, model_location(settings, source, model))
            if version is None:
                out[model] = None
                continue
            scan = duckdb_lake.scan_sql(version)
            out[model] = con.execute(f"SELECT count(*) FROM {scan}").fetchone()[0]
            if model == "daily_event_counts":
                out["daily_event_counts.sum(events)"] = con.execute(
                    f"SELECT sum(events) FROM {scan}"
                ).fetchone()[0]
    finally:
        con.close()
    return out


def _compare(figures: dict) -> None:
    """Each run's figures, then each DuckDB run against the Spark engine's (Segment layout):
    the models in the lake must agree, and the ratios of wall and CPU."""
    for label, f in figures.items():
        print(
            f"{label}: dbt processes' peak RSS {f['dbt_peak_rss_mb']} MB, "
            f"this engine's Python process at the end {f['python_rss_mb']} MB"
        )
        for row in f["builds"]:
            print(f"  {json.dumps(row)}")
        print(f"  counts {json.dumps(f['counts'])}")
    s = figures.get("segment-spark")
    for label, d in figures.items():
        if s is None or not label.endswith("-duckdb"):
            continue
        same = d["counts"] == s["counts"]
        print(f"{label} and segment-spark: the models in the lake agree: {same}")
        if not same:
            for k in sorted(set(d["counts"]) | set(s["counts"])):
                print(f"  {k}: {label} {d['counts'].get(k)}, spark {s['counts'].get(k)}")
        for dr, sr in zip(d["builds"], s["builds"], strict=True):
            cpu = (sr["dbt_cpu_s"] + sr["jvm_cpu_s"]) / max(dr["dbt_cpu_s"] + dr["jvm_cpu_s"], 0.1)
            print(
                f"Spark (segment) / DuckDB ({label.partition('-')[0]}), {dr['build']}: wall "
                f"{sr['wall_s'] / dr['wall_s']:.1f}x ({sr['wall_s']} s / {dr['wall_s']} s); "
                f"CPU (dbt + server JVM) {cpu:.1f}x"
            )


def _server_pid(metastore_dir: str) -> int | None:
    try:
        from pyspark.sql.connect import local_server as ls

        from datalake_assets.catalog import metastore_server as ms

        with ls.Discovery(ms.discovery_path(metastore_dir)) as d:
            return ls.LocalConnectServer(d).pid
    except Exception:  # noqa: BLE001 - the figure is then missing, not the benchmark
        return None


if __name__ == "__main__":
    main()
