"""``datalake``: the project's command line.

    datalake dev                 generate demo traffic if the archive is empty, start `dagster dev`
    datalake demo [--hours N]    write N hours of demo traffic (default: the last 6 closed hours)
    datalake sync --hours H ...  run one sync outside Dagster (local Spark), print the report
    datalake import [--from D]   import Segment's S3-destination archive into the raw archive
    datalake collect             run the Segment-compatible collector until SIGTERM/SIGINT
    datalake catalog init-metastore   create a MySQL/MariaDB metastore's schema, once, up front
    datalake forget --user-id X  erase and suppress a person (docs/privacy.md)
    datalake sql "SELECT ..."    Spark SQL on the Hive catalog (through `datalake dev`'s server)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from datalake_assets.settings import LakeSettings, SettingsError, default_home, load_settings
from datalake_assets.spec import layout
from datalake_assets.lake import storage
from datalake_assets.cli_catalog import cmd_catalog, cmd_sql, serve_metastore, stop_metastore
from datalake_assets.cli_forget import add_forget_parser, cmd_forget

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def _last_closed_hours(n: int, now: datetime | None = None) -> list[layout.ArchiveHour]:
    now = now or datetime.now(UTC)
    last = layout.ArchiveHour.of(now - timedelta(hours=1))
    first = layout.ArchiveHour.of(last.start - timedelta(hours=n - 1))
    return layout.hour_range(first, last)


def cmd_demo(settings: LakeSettings, args: argparse.Namespace) -> int:
    from datalake_assets.ingest.demo import generate_archive

    source = settings.source(args.source) if args.source else settings.sources[0]
    if args.end:
        last = layout.ArchiveHour.parse(args.end)
        hours = layout.hour_range(layout.ArchiveHour.of(last.start - timedelta(hours=args.hours - 1)), last)
    else:
        hours = _last_closed_hours(args.hours)
    summary = generate_archive(
        settings.archive_root, source.id, hours, events_per_hour=args.events_per_hour,
        files_per_hour=args.files_per_hour, seed=args.seed,
    )
    print(
        f"wrote {summary.lines} lines ({summary.valid_messages} messages, "
        f"{summary.duplicate_lines} duplicate deliveries, {summary.malformed_lines} malformed) "
        f"for {len(hours)} hours of source {source.id!r} under {settings.archive_root}"
    )
    return 0


def archive_is_empty(settings: LakeSettings, source_id: str) -> bool:
    return not storage.list_files(layout.join(settings.archive_root, source_id), recursive=True)


def cmd_dev(settings: LakeSettings, args: argparse.Namespace) -> int:
    for source in settings.sources:
        if archive_is_empty(settings, source.id) and source.id == "demo":
            print(f"archive of {source.id!r} is empty: generating 6 hours of demo traffic")
            cmd_demo(settings, argparse.Namespace(
                source=source.id, hours=6, end=None, events_per_hour=2000, files_per_hour=2, seed=7,
            ))
    home = Path(os.environ.get("DAGSTER_HOME") or Path(default_home(os.environ)) / "dagster_home")
    home.mkdir(parents=True, exist_ok=True)
    instance_yaml = home / "dagster.yaml"
    shipped = PROJECT_ROOT / "dagster.yaml"
    if not os.environ.get("DAGSTER_HOME"):
        # Our own home: keep its instance settings those of the project (queue lanes, pools).
        if not instance_yaml.exists() or instance_yaml.read_bytes() != shipped.read_bytes():
            shutil.copy(shipped, instance_yaml)
    elif not instance_yaml.exists():
        shutil.copy(shipped, instance_yaml)  # a user's home: only filled in, never overwritten
    env = dict(os.environ, DAGSTER_HOME=str(home))
    # The definitions sensor reloads the code location through this server when syncs create
    # event tables (datalake_assets/orchestration/reload.py).
    shown_host = "127.0.0.1" if args.host in ("0.0.0.0", "::", "") else args.host
    env.setdefault("DATALAKE_WEBSERVER_URL", f"http://{shown_host}:{args.port}")
    if settings.settings_file:
        env["DATALAKE_SETTINGS"] = settings.settings_file
    cmd = [sys.executable, "-m", "dagster", "dev", "-w", str(PROJECT_ROOT / "workspace.yaml"),
           "-h", args.host, "-p", str(args.port)]
    print(f"DAGSTER_HOME={home}\nlake: {settings.lake_root}\narchive: {settings.archive_root}")
    metastore = serve_metastore(settings)
    print(f"starting Dagster on http://{args.host}:{args.port} (Ctrl-C stops it)")
    # Own process group, SIGINT restored (a shell's background job ignores it), and every stop
    # signal forwarded to the whole group: no webserver or daemon is left behind.
    proc = subprocess.Popen(
        cmd, env=env, cwd=PROJECT_ROOT, start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )

    def stop(signum, _frame):
        try:
            os.killpg(proc.pid, signal.SIGINT)
        except ProcessLookupError:
            pass

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        code = proc.wait()
    finally:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        if metastore is not None:
            stop_metastore(settings, metastore)
    return code


def cmd_sync(settings: LakeSettings, args: argparse.Namespace) -> int:
    from datalake_assets.catalog.base import CatalogError
    from datalake_assets.transform.request import SyncError, request_from_settings
    from datalake_assets.transform.session import settings_spark_session
    from datalake_assets.transform.sync import run_sync

    source = settings.source(args.source) if args.source else settings.sources[0]
    request = request_from_settings(settings, source, args.hours, replay=args.replay)
    try:  # the session starts when the sync first needs it (a small batch may not)
        result = run_sync(lambda: settings_spark_session(settings), request)
    except CatalogError as e:  # a JDBC metastore's password or driver jar missing
        print(f"datalake: {e}", file=sys.stderr)
        return 2
    except SyncError as e:
        print(json.dumps({"status": "failed", "error": str(e), "error_code": e.code}))
        return 1
    print(json.dumps(result.source.to_dict(), indent=2))
    return 0


def cmd_import(settings: LakeSettings, args: argparse.Namespace) -> int:
    """Import received days of a source's Segment archive; then sync the changed hours
    (``--sync``) or print how to (a Dagster backfill)."""
    from datalake_assets.ingest.segment_import import SegmentImporter, hour_ranges

    source = settings.source(args.source) if args.source else settings.sources[0]
    if not source.segment_archive:
        print(f"datalake: source {source.id!r} has no segment_archive to import (set it in its "
              "[[sources]] entry)", file=sys.stderr)
        return 2
    for day in (args.first, args.last):
        if day:
            try:
                datetime.strptime(day, "%Y-%m-%d")
            except ValueError:
                print(f"datalake: not a day: {day!r} (expected YYYY-MM-DD)", file=sys.stderr)
                return 2
    importer = SegmentImporter.for_source(settings.archive_root, source)

    def progress(day: str, report) -> None:
        s = report.summary()
        print(f"{day}: {s['files']} files ({s['files_imported']} imported, "
              f"{s['files_unchanged']} unchanged, {s['files_failed']} failed), "
              f"{s['lines_in']} lines, {len(s['hours_changed'])} hours changed", flush=True)
        for f in report.failures:
            print(f"  FAILED {f.day}/{f.name}: {f.error}", file=sys.stderr)

    print(f"importing {importer.segment_archive}/segment-logs/{source.segment_source_id} "
          f"({args.first or 'first day'} .. {args.last or 'last day'}) into "
          f"{layout.join(settings.archive_root, source.id)}", flush=True)
    report = importer.import_range(args.first, args.last, force=args.force, progress=progress)
    summary = report.summary()
    if report.invalid_folders:
        print(f"skipped {len(report.invalid_folders)} folders that are not a day's epoch ms: "
              f"{', '.join(report.invalid_folders[:10])}", file=sys.stderr)
    changed = report.hours_changed
    ranges = hour_ranges(changed, settings.automation.backfill_hours_per_run)
    print(json.dumps({k: v for k, v in summary.items() if k != "hours_changed"}, indent=2))
    code = 1 if report.failures else 0
    if not changed:
        print("no archive hour changed: nothing to sync")
        return code
    print(f"{len(changed)} archive hours changed, {changed[0]} .. {changed[-1]} "
          f"({len(ranges)} syncs of up to {settings.automation.backfill_hours_per_run} hours)")
    if not args.sync:
        from datalake_assets.orchestration.settings import archive_sensor_name

        sensor = archive_sensor_name(settings.automation, settings.compute, source.slug)
        print(
            "sync them with `datalake import ... --sync` (local Spark, same ranges), or in Dagster:"
            f" backfill `{source.slug}/sync_reports` (the `{source.slug}_lake_sync` assets) over "
            f"partitions {changed[0].partition_key} ... {changed[-1].partition_key}; hours "
            f"within the last {settings.automation.recheck_hours} h are synced by "
            f"`{sensor}` anyway"
        )
        return code
    from datalake_assets.transform.request import SyncError, request_from_settings
    from datalake_assets.transform.session import settings_spark_session
    from datalake_assets.transform.sync import run_sync

    spark = settings_spark_session(settings)
    for first, last in ranges:
        request = request_from_settings(settings, source, layout.hour_range(first, last),
                                        replay=True)
        try:
            result = run_sync(spark, request).source
        except SyncError as e:
            print(f"sync {first} .. {last} failed: {e}", file=sys.stderr)
            return 1
        print(f"synced {first} .. {last}: {result.lines_in} lines, "
              f"{result.messages_written} rows, {result.duplicates} duplicates, "
              f"{result.lines_quarantined} quarantined, {result.suppressed} suppressed",
              flush=True)
    return code


def cmd_ddl(settings: LakeSettings, args: argparse.Namespace) -> int:
    from datalake_assets.catalog.base import CatalogError
    from datalake_assets.catalog.ddl import print_table_ddl

    source = settings.source(args.source) if args.source else settings.sources[0]
    try:
        print(print_table_ddl(settings, source, args.table))
    except CatalogError as e:
        print(f"datalake: {e}", file=sys.stderr)
        return 2
    return 0


def cmd_collect(settings: LakeSettings, args: argparse.Namespace) -> int:
    import logging
    import threading

    from datalake_assets.ingest.collector import Collector
    from datalake_assets.ingest.collector.spool import SpoolError
    from datalake_assets.ingest.collector.workers import Workers

    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    cs = settings.collector
    n = cs.workers if args.workers is None else args.workers
    if not 1 <= n <= 64:
        print(f"datalake: --workers must be from 1 to 64, got {n}", file=sys.stderr)
        return 2
    service = (Collector(settings, host=args.host, port=args.port) if n == 1
               else Workers(settings, n, host=args.host, port=args.port))
    try:
        service.start()
    except (RuntimeError, SpoolError, OSError) as e:
        print(f"datalake: cannot start the collector: {e}", file=sys.stderr)
        return 2
    stop = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stop.set())
                for s in (signal.SIGTERM, signal.SIGINT)}
    if cs.max_message_bytes > settings.sync.max_message_bytes:
        print(f"warning: [collector] max_message_bytes ({cs.max_message_bytes}) is larger than "
              f"[sync] max_message_bytes ({settings.sync.max_message_bytes}): the sync will "
              "quarantine the largest accepted messages", file=sys.stderr)
    sources = ", ".join(
        f"{s.id} ({len(s.write_keys)} write key{'' if len(s.write_keys) == 1 else 's'})"
        for s in settings.sources if s.write_keys)
    processes = "" if n == 1 else f" ({n} worker processes)"
    print(f"collector listening on {service.url}{processes}\nsources: {sources}\n"
          f"spool: {cs.spool_path()}\narchive: {settings.archive_root}\n"
          "SIGTERM or Ctrl-C stops it (pending messages are rolled into the archive first)",
          flush=True)
    if isinstance(service, Collector):
        if service.recovered:
            print(f"rolling {service.recovered} spool segment(s) left by an earlier run",
                  flush=True)
        while not stop.wait(1.0):
            pass
    else:
        service.supervise(stop.is_set)
    print("stopping: finishing requests, rolling the spool into the archive...", flush=True)
    complete = service.stop()
    for signum, handler in previous.items():
        signal.signal(signum, handler)
    stats = [service.stats()] if isinstance(service, Collector) else service.stats
    total = {k: sum(s.get(k, 0) for s in stats)
             for k in ("accepted", "rejected", "segments_rolled")}
    per_worker = "" if len(stats) < 2 else (
        " (per worker: " + ", ".join(str(s.get("accepted", 0)) for s in stats) + ")")
    print(f"stopped: {total['accepted']} messages accepted{per_worker}, "
          f"{total['rejected']} rejected, {total['segments_rolled']} segments rolled"
          + ("" if complete else "; some segments could not be rolled and stay in the spool "
             "for the next start"), flush=True)
    return 0 if complete else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="datalake", description=__doc__.split("\n\n")[0])
    p.add_argument("--settings", help="lake settings file (TOML); default: $DATALAKE_SETTINGS")
    sub = p.add_subparsers(dest="command", required=True)

    d = sub.add_parser("dev", help="demo data if needed, then `dagster dev`")
    d.add_argument("--host", default="127.0.0.1")
    d.add_argument("--port", type=int, default=3000)

    g = sub.add_parser("demo", help="write demo traffic into the raw archive")
    g.add_argument("--source", help="source id or slug (default: the first)")
    g.add_argument("--hours", type=int, default=6, help="how many hours (default 6)")
    g.add_argument("--end", help="last hour, YYYY-MM-DDTHH (default: the last closed hour)")
    g.add_argument("--events-per-hour", type=int, default=2000)
    g.add_argument("--files-per-hour", type=int, default=2)
    g.add_argument("--seed", type=int, default=7)

    s = sub.add_parser("sync", help="sync hours now, outside Dagster")
    s.add_argument("--source", help="source id or slug (default: the first)")
    s.add_argument("--replay", action="store_true")
    s.add_argument("--hours", nargs="+", required=True, help="UTC hours, YYYY-MM-DDTHH")

    i = sub.add_parser("import", help="import Segment's S3-destination archive (segment-logs/)")
    i.add_argument("--source", help="source id or slug (default: the first)")
    i.add_argument("--from", dest="first", help="first received day, YYYY-MM-DD (default: all)")
    i.add_argument("--to", dest="last", help="last received day, YYYY-MM-DD (default: all)")
    i.add_argument("--force", action="store_true",
                   help="import files again even if their manifest says they are unchanged")
    i.add_argument("--sync", action="store_true",
                   help="then sync the changed hours here (local Spark), a day per Spark job")

    t = sub.add_parser("ddl", help="print CREATE EXTERNAL TABLE / ADD PARTITION statements")
    t.add_argument("--source", help="source id or slug (default: the first)")
    t.add_argument("table", nargs="?", help="lake table name (default: every table)")

    c = sub.add_parser("collect", help="run the Segment-compatible collector (docs/collector.md)")
    c.add_argument("--host", help="listening address (default: [collector] host)")
    c.add_argument("--port", type=int, help="port, 0 for any free one (default: [collector] port)")
    c.add_argument("--workers", type=int, help="processes (default: [collector] workers)")

    k = sub.add_parser("catalog", help="catalog maintenance (README: Catalog)")
    k.add_argument("action", choices=["init-metastore"],
                   help="init-metastore: create the Hive schema of metastore_jdbc_url's "
                        "database (idempotent)")

    q = sub.add_parser("sql", help="run Spark SQL on the Hive catalog (the served metastore "
                                   "while `datalake dev` runs)")
    q.add_argument("query", help="e.g. \"SELECT event, count(*) FROM demo.tracks GROUP BY 1\"")
    q.add_argument("--limit", type=int, default=50, help="rows shown (default 50)")

    add_forget_parser(sub)

    args = p.parse_args(argv)
    try:
        settings = load_settings(args.settings)
    except SettingsError as e:
        print(f"datalake: invalid settings: {e}", file=sys.stderr)
        return 2
    commands = {"dev": cmd_dev, "demo": cmd_demo, "sync": cmd_sync, "ddl": cmd_ddl,
                "import": cmd_import, "catalog": cmd_catalog, "forget": cmd_forget,
                "collect": cmd_collect, "sql": cmd_sql}
    return commands[args.command](settings, args)


if __name__ == "__main__":
    sys.exit(main())
