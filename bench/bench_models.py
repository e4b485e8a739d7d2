"""Benchmark (issue #28): building the models for 30 days of the demo source, the way
``datalake dev`` runs them: the metastore served by its Spark Connect server
(``catalog/metastore_server.py``), the sync sending its catalog statements there, and dbt
(dbt-spark's session method, ``SPARK_REMOTE``) running the models on that same server.

    python bench/bench_models.py [--days 30] [--events-per-hour 300] [--workdir DIR]

The sync is set-up, not what is measured: it writes the files without a catalog (registering
13,000 hourly partitions one sync at a time takes longer than the models), then the tables are
registered in the served metastore in one go from ``datalake ddl``'s statements.

Prints, for one dbt invocation over every day (a backfill's single run) and for one more day
alone (the automation's daily run): wall time, the CPU of dbt's process and of the server's
JVM, and each model's time from dbt's run_results.json; then DuckDB computing
``daily_event_counts`` from the same Parquet files in the same run, for comparison.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path


def jvm_cpu_s(pid: int | None) -> float:
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--days", type=int, default=30)
    p.add_argument("--events-per-hour", type=int, default=300)
    p.add_argument("--workdir", default="")
    a = p.parse_args()
    work = Path(a.workdir or tempfile.mkdtemp(prefix="bench-models-"))
    work.mkdir(parents=True, exist_ok=True)
    last = datetime(2026, 10, 31, 23, tzinfo=UTC)
    first = last - timedelta(hours=24 * a.days - 1)
    common = (
        f'archive_root = "archive"\nlake_root = "lake"\n[[sources]]\nid = "demo"\n'
        f'start = "{first:%Y-%m-%d-%H}:00"\n'
    )
    (work / "lake.toml").write_text(f'{common}[catalog]\nmetastore_dir = "metastore"\n')
    (work / "sync.toml").write_text(f'{common}[catalog]\nbackend = "none"\n')
    os.environ["DATALAKE_SETTINGS"] = str(work / "lake.toml")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

    from datalake_assets.catalog import metastore_server
    from datalake_assets.catalog.config import config_from_settings
    from datalake_assets.catalog.ddl import print_table_ddl
    from datalake_assets.ingest.demo import generate_archive
    from datalake_assets.models.erasure import run_dbt
    from datalake_assets.models.workspace import models_root, prepare_project, source_tables
    from datalake_assets.settings import load_settings
    from datalake_assets.spec import layout
    from datalake_assets.transform.session import settings_spark_session
    from datalake_assets.transform.sync import run_sync
    from datalake_assets.transform.sync_request import request_from_settings

    settings = load_settings()
    files_only = load_settings(work / "sync.toml")
    source = settings.sources[0]
    hours = layout.hour_range(layout.ArchiveHour.of(first), layout.ArchiveHour.of(last))
    t = time.monotonic()
    if not any((work / "archive").rglob("*.gz")):
        generate_archive(
            settings.archive_root,
            source.id,
            hours,
            events_per_hour=a.events_per_hour,
            files_per_hour=1,
            seed=7,
        )
    print(f"archive: {len(hours)} hours x {a.events_per_hour} lines ({time.monotonic() - t:.0f} s)")

    cfg = config_from_settings(settings.catalog)
    t = time.monotonic()
    address = metastore_server.start(cfg.metastore_dir, cfg.spark_conf())
    server_pid = _server_pid(cfg.metastore_dir)
    print(f"metastore served at {address} ({time.monotonic() - t:.0f} s)")
    try:
        t = time.monotonic()
        if not (work / "lake" / "models").exists():
            spark = settings_spark_session(files_only, quiet=True)  # no Hive: the server has it
            for i in range(0, len(hours), 24 * 5):
                run_sync(
                    spark,
                    request_from_settings(files_only, source, hours[i : i + 24 * 5], replay=True),
                )
            print(f"sync (files only): {time.monotonic() - t:.0f} s")
            t = time.monotonic()
            served = cfg.served_session()
            for statement in print_table_ddl(settings, source).split(";\n"):
                body = "\n".join(
                    line for line in statement.splitlines() if not line.startswith("--")
                ).strip()
                if body:
                    served.sql(body).collect()
            print(f"registered in the served metastore: {time.monotonic() - t:.0f} s")
        project = prepare_project(settings, source, source_tables(settings, source))
        days = sorted({h.day for h in hours})
        for label, lo, hi in (
            ("all days, one invocation", days[0], days[-1]),
            ("one day (the daily run)", days[-1], days[-1]),
        ):
            for selection in (["--select", "tag:daily"], ["--exclude", "tag:daily"]):
                cpu0, jvm0, t0 = children_cpu_s(), jvm_cpu_s(server_pid), time.monotonic()
                done = run_dbt(
                    settings,
                    project,
                    ["build", *selection, "--vars", json.dumps({"min_day": lo, "max_day": hi})],
                )
                wall = time.monotonic() - t0
                if done.returncode:
                    raise SystemExit(done.stdout[-3000:])
                results = json.loads(
                    (Path(project.project_dir) / "target" / "run_results.json").read_text()
                )
                timing = {
                    r["unique_id"].split(".")[-1]: round(r["execution_time"], 1)
                    for r in results["results"]
                    if r["unique_id"].startswith("model.")
                }
                tests = sum(
                    r["execution_time"]
                    for r in results["results"]
                    if r["unique_id"].startswith("test.")
                )
                print(
                    f"{label} {' '.join(selection)}: {lo}..{hi}: wall {wall:.1f} s, dbt process CPU "
                    f"{children_cpu_s() - cpu0:.1f} s, server JVM CPU "
                    f"{jvm_cpu_s(server_pid) - jvm0:.1f} s; models {timing}; "
                    f"{len(results['results']) - len(timing)} tests {tests:.1f} s"
                )
        _duckdb_counts(models_root(settings, source), settings, source)
    finally:
        metastore_server.stop(cfg.metastore_dir)


def _server_pid(metastore_dir: str) -> int | None:
    try:
        from pyspark.sql.connect import local_server as ls

        from datalake_assets.catalog import metastore_server as ms

        with ls.Discovery(ms.discovery_path(metastore_dir)) as d:
            return ls.LocalConnectServer(d).pid
    except Exception:  # noqa: BLE001 - the figure is then missing, not the benchmark
        return None


def _duckdb_counts(root: str, settings, source) -> None:
    import duckdb

    t = time.monotonic()
    data = f"{settings.lake_root}/data/{source.lake_dir}"
    con = duckdb.connect()
    n = con.sql(
        "SELECT count(*) FROM (SELECT day, type, coalesce(event, type), count(*), "
        "count(DISTINCT user_id), count(DISTINCT anonymous_id) FROM read_parquet("
        f"['{data}/segment_type=tracks/*/*/*.parquet', '{data}/segment_type=pages/*/*/*.parquet',"
        f" '{data}/segment_type=screens/*/*/*.parquet', "
        f"'{data}/segment_type=identifies/*/*/*.parquet', "
        f"'{data}/segment_type=groups/*/*/*.parquet', '{data}/segment_type=aliases/*/*/*.parquet'],"
        " hive_partitioning = true, union_by_name = true) GROUP BY ALL)"
    ).fetchone()[0]
    print(
        f"duckdb daily_event_counts over the same Parquet: {n} rows in {time.monotonic() - t:.1f} s"
    )
    m = con.sql(
        f"SELECT count(*) FROM read_parquet('{root}/daily_event_counts/*/*.parquet')"
    ).fetchone()[0]
    print(f"the model's daily_event_counts: {m} rows")


if __name__ == "__main__":
    main()
