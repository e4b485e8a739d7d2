"""``datalake``: the project's command line.

    datalake dev                 generate demo traffic if the archive is empty, start `dg dev`
    datalake demo [--hours N]    write N hours of demo traffic (default: the last 6 closed hours)
    datalake sync --hours H ...  run one sync outside Dagster (local Spark), print the report
    datalake import [--from D]   import Segment's S3-destination archive into the raw archive
    datalake collect             run the Segment-compatible collector until SIGTERM/SIGINT
    datalake catalog init-metastore   create a MySQL/MariaDB metastore's schema, once, up front
    datalake forget --user-id X  erase and suppress a person (docs/guides/forget-a-person.md)
    datalake sql "SELECT ..."    SQL on the lake's tables (DuckDB on Iceberg; Spark SQL, Segment layout)
    datalake status [--json]     each source's last synced hour, lag, failed runs, rows per day
    datalake convert --to iceberg   a Segment-layout lake's tables as Iceberg tables, in place
    datalake plan validate FILE  a tracking plan is valid, and what it declares
    datalake plan check --hours H   what a source's plan would do to archived hours
    datalake plan diff OLD NEW   what changing a plan does to the tables
    datalake plan infer          a first plan drafted from what a source sent

Every option and its help: ``cli_parser.py``. A user's mistake is raised as ``UsageError`` and
told by ``main`` in one line, exit code 2.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from datalake_assets.cli_batches import cmd_batches, prepare_instance, start_batches, stop_batches
from datalake_assets.cli_catalog import (
    cmd_catalog,
    cmd_compact,
    cmd_maintain,
    cmd_sql,
    serve_metastore,
    stop_metastore,
)
from datalake_assets.cli_collect import cmd_collect
from datalake_assets.cli_convert import cmd_convert
from datalake_assets.cli_demo import cmd_demo, generate_dev_demo, start_demo_feed
from datalake_assets.cli_forget import cmd_forget
from datalake_assets.cli_parser import UsageError, build_parser, chosen_source
from datalake_assets.cli_plan import cmd_plan
from datalake_assets.cli_status import cmd_status
from datalake_assets.settings import LakeSettings, load_settings
from datalake_assets.settings.fields import SettingsError, default_home
from datalake_assets.settings.orchestration_section import dagster_home
from datalake_assets.spec import layout

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def dg_command() -> list[str]:
    """Dagster's ``dg`` command of this Python: its console script beside the interpreter, else
    its entry point run by the interpreter."""
    script = Path(sys.executable).with_name("dg")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "from dagster_dg_cli.cli import main; main()"]


def cmd_dev(settings: LakeSettings, args: argparse.Namespace) -> int:
    live = generate_dev_demo(settings)  # the demo source, when its archive was empty
    home = dagster_home()
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
    # The code location runs in the project's folder: its home (and so the default lake and
    # archive) must be this command's, wherever the command was started
    env["DATALAKE_HOME"] = os.path.abspath(default_home())
    for name, root in (
        ("DATALAKE_LAKE_ROOT", settings.lake_root),
        ("DATALAKE_ARCHIVE_ROOT", settings.archive_root),
    ):
        if env.get(name):  # resolved against this command's folder, not the project's
            env[name] = root
    # The definitions sensor reloads the code location through this server when syncs create
    # event tables (datalake_assets/orchestration/automation/definitions_reload.py).
    shown_host = "127.0.0.1" if args.host in ("0.0.0.0", "::", "") else args.host
    env.setdefault("DATALAKE_WEBSERVER_URL", f"http://{shown_host}:{args.port}")
    if settings.settings_file:
        env["DATALAKE_SETTINGS"] = settings.settings_file
    # `dg dev`: what Dagster 1.13 supports (`dagster dev` warns on every start that it is
    # superseded). With a workspace file it starts the same webserver and daemon. The services
    # log at WARNING by default: at INFO the run queue's daemon says "1 runs are currently in
    # progress ... won't launch more" every dequeue interval (1 s) while a sync runs, and the
    # sensors' ticks say nothing a newcomer acts on. A run's own events (a sync's figures, its
    # failures) come from the run's process and are printed whatever this level is.
    cmd = [
        *dg_command(),
        "dev",
        "-w",
        str(PROJECT_ROOT / "workspace.yaml"),
        "-h",
        args.host,
        "-p",
        str(args.port),
        "--log-level",
        args.log_level,
    ]
    print(f"DAGSTER_HOME={home}\nlake: {settings.lake_root}\narchive: {settings.archive_root}")
    metastore = serve_metastore(settings)
    print(f"starting Dagster on http://{args.host}:{args.port} (Ctrl-C stops it)")
    # Started in DAGSTER_HOME: Dagster warns when the folder it starts in holds a dagster.yaml
    # other than DAGSTER_HOME's, and the project's folder holds the template copied above
    # (the instance of `dg dev` started there without DAGSTER_HOME).
    # Own process group, SIGINT restored (a shell's background job ignores it), and every stop
    # signal forwarded to the whole group: no webserver or daemon is left behind.
    prepare_instance(settings, str(home))
    proc = subprocess.Popen(
        cmd,
        env=env,
        cwd=home,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )

    def stop(signum, _frame):
        try:
            os.killpg(proc.pid, signal.SIGINT)
        except ProcessLookupError:
            pass

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    batches = start_batches(settings, env)
    feed = start_demo_feed(settings, live) if live else None
    try:
        code = proc.wait()
    finally:
        if feed is not None:
            feed.set()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        stop_batches(batches)
        if metastore is not None:
            stop_metastore(settings, metastore)
    return code


def cmd_sync(settings: LakeSettings, args: argparse.Namespace) -> int:
    from datalake_assets.catalog.catalog_interface import CatalogError
    from datalake_assets.transform.catalog_phase import CatalogBehind
    from datalake_assets.transform.session import settings_spark_session
    from datalake_assets.transform.sync import run_sync
    from datalake_assets.transform.sync_request import SyncError, request_from_settings

    source = chosen_source(settings, args)
    request = request_from_settings(
        settings, source, args.hours, replay=args.replay, batch=args.batch
    )
    try:  # the session starts when the sync first needs it (a small batch may not)
        result = run_sync(lambda: settings_spark_session(settings, quiet=True), request)
    except CatalogError as e:  # a JDBC metastore's password or driver jar missing
        raise UsageError(str(e)) from None
    except SyncError as e:
        if isinstance(e, CatalogBehind):  # the data is committed: Dagster shows its tables
            record_in_dagster(settings, source, e.report)
        print(json.dumps({"status": "failed", "error": str(e), "error_code": e.code}))
        return 1
    print(json.dumps(result.source.to_dict(), indent=2))
    if result.source.batch_id is None:  # a batch's rows are provisional: the hour's partition
        record_in_dagster(settings, source, result)  # materializes when its sync closes it
    return 0


def record_in_dagster(settings: LakeSettings, source, report) -> None:
    """A sync outside Dagster, recorded in the instance ``datalake dev`` uses, if there is one
    (``orchestration/sync/sync_records.py``), so the UI shows its hours as materialized."""
    if not (dagster_home() / "dagster.yaml").is_file():
        return  # no instance (checked before importing Dagster: ~2 s a command otherwise)
    from datalake_assets.orchestration.sync.sync_records import existing_instance, record_sync

    try:
        instance = existing_instance()
        if instance is None:
            return
        with instance:
            n = record_sync(instance, settings, source, report)
        print(f"recorded in the Dagster instance at {dagster_home()}: {n} events", file=sys.stderr)
    except Exception as e:  # noqa: BLE001 - the sync is committed; the record is secondary
        print(
            f"warning: the sync is committed, but recording it in Dagster failed: {e}",
            file=sys.stderr,
        )


def cmd_import(settings: LakeSettings, args: argparse.Namespace) -> int:
    """Import received days of a source's Segment archive; then sync the changed hours
    (``--sync``) or print how to (a Dagster backfill)."""
    from datalake_assets.ingest.segment_import import SegmentImporter, hour_ranges

    source = chosen_source(settings, args)
    if not source.segment_archive:
        raise UsageError(
            f"source {source.id!r} has no segment_archive to import (set it in its "
            "[[sources]] entry)"
        )
    importer = SegmentImporter.for_source(settings.archive_root, source)

    def progress(day: str, report) -> None:
        s = report.summary()
        print(
            f"{day}: {s['files']} files ({s['files_imported']} imported, "
            f"{s['files_unchanged']} unchanged, {s['files_failed']} failed), "
            f"{s['lines_in']} lines, {len(s['hours_changed'])} hours changed",
            flush=True,
        )
        for f in report.failures:
            print(f"  FAILED {f.day}/{f.name}: {f.error}", file=sys.stderr)

    print(
        f"importing {importer.segment_archive}/segment-logs/{source.segment_source_id} "
        f"({args.first or 'first day'} .. {args.last or 'last day'}) into "
        f"{layout.join(settings.archive_root, source.id)}",
        flush=True,
    )
    report = importer.import_range(args.first, args.last, force=args.force, progress=progress)
    summary = report.summary()
    if report.invalid_folders:
        print(
            f"skipped {len(report.invalid_folders)} folders that are not a day's epoch ms: "
            f"{', '.join(report.invalid_folders[:10])}",
            file=sys.stderr,
        )
    changed = report.hours_changed
    ranges = hour_ranges(changed, settings.automation.backfill_hours_per_run)
    print(json.dumps({k: v for k, v in summary.items() if k != "hours_changed"}, indent=2))
    code = 1 if report.failures else 0
    if not changed:
        print("no archive hour changed: nothing to sync")
        return code
    print(
        f"{len(changed)} archive hours changed, {changed[0]} .. {changed[-1]} "
        f"({len(ranges)} syncs of up to {settings.automation.backfill_hours_per_run} hours)"
    )
    if not args.sync:
        from datalake_assets.settings.orchestration_section import archive_sensor_name

        sensor = archive_sensor_name(settings.automation, settings.compute, source.slug)
        print(
            "sync them with `datalake import ... --sync` (local Spark, same ranges), or in Dagster:"
            f" backfill `{source.slug}/sync_reports` (the `{source.slug}_lake_sync` assets) over "
            f"partitions {changed[0].partition_key} ... {changed[-1].partition_key}; hours "
            f"within the last {settings.automation.recheck_hours} h are synced by "
            f"`{sensor}` anyway"
        )
        return code
    from datalake_assets.transform.session import settings_spark_session
    from datalake_assets.transform.sync import run_sync
    from datalake_assets.transform.sync_request import SyncError, request_from_settings

    spark = settings_spark_session(settings, quiet=True)
    for first, last in ranges:
        request = request_from_settings(
            settings, source, layout.hour_range(first, last), replay=True
        )
        try:
            report = run_sync(spark, request)
        except SyncError as e:
            print(f"sync {first} .. {last} failed: {e}", file=sys.stderr)
            return 1
        record_in_dagster(settings, source, report)
        result = report.source
        print(
            f"synced {first} .. {last}: {result.lines_in} lines, "
            f"{result.messages_written} rows, {result.duplicates} duplicates, "
            f"{result.lines_quarantined} quarantined, {result.suppressed} suppressed",
            flush=True,
        )
    return code


def cmd_ddl(settings: LakeSettings, args: argparse.Namespace) -> int:
    from datalake_assets.catalog.catalog_interface import CatalogError
    from datalake_assets.catalog.ddl import print_table_ddl

    source = chosen_source(settings, args)
    try:
        print(print_table_ddl(settings, source, args.table))
    except CatalogError as e:
        raise UsageError(str(e)) from None
    return 0


COMMANDS = {
    "dev": cmd_dev,
    "demo": cmd_demo,
    "sync": cmd_sync,
    "ddl": cmd_ddl,
    "import": cmd_import,
    "catalog": cmd_catalog,
    "forget": cmd_forget,
    "collect": cmd_collect,
    "sql": cmd_sql,
    "maintain": cmd_maintain,
    "compact": cmd_compact,
    "convert": cmd_convert,
    "status": cmd_status,
    "batches": cmd_batches,
    "plan": cmd_plan,
}


# The commands that read or write the lake's tables in the settings' table format: a lake that
# holds another one (a Segment-layout lake from before Iceberg became the default, settings
# without table_format) is refused up front with what to do, never met as a missing table.
# `sync` refuses it in the sync itself (transform/sync.py), `convert` is the way between them.
IN_LAKE_FORMAT = frozenset({"dev", "sql", "compact", "maintain", "status", "forget", "batches"})


def main(argv: list[str] | None = None) -> int:
    """Run one command; a user's mistake (``UsageError``, invalid settings, settings naming
    another table format than the lake's) is one line on stderr and exit code 2, here and
    nowhere else."""
    from datalake_assets.lake.formats import FormatError, format_record

    command = "datalake"
    try:
        args = build_parser().parse_args(argv)
        command = f"datalake {args.command}"
        settings = load_settings(args.settings)
        if args.command in IN_LAKE_FORMAT:
            format_record.check(settings.lake_root, settings.table_format)
        return COMMANDS[args.command](settings, args)
    except SettingsError as e:
        print(f"datalake: invalid settings: {e}", file=sys.stderr)
    except UsageError as e:
        print(f"{e.prog or command}: {e}", file=sys.stderr)
    except FormatError as e:
        print(f"{command}: {e}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
