"""The catalog's commands (``datalake sql``, ``datalake catalog``) and ``datalake dev``'s
metastore server (``catalog/metastore_server.py``); beside ``cli.py``, which wires them in."""

from __future__ import annotations

import argparse
import sys
import threading
import time

from datalake_assets.cli_parser import UsageError
from datalake_assets.settings import LakeSettings

# The catalog's modules are imported by the commands that need them: `datalake collect` and
# `datalake demo` start without them.


def cmd_sql(settings: LakeSettings, args: argparse.Namespace) -> int:
    """One Spark SQL statement against the Hive catalog: through the metastore's server while
    ``datalake dev`` runs (Derby is then held by it), else in a local session of our own.
    A query Spark cannot analyse (a table that does not exist, a syntax error) is the user's
    mistake: its message's first line, exit code 2; a failure while it runs: exit code 1."""
    from pyspark.errors import AnalysisException  # ParseException is one too

    from datalake_assets.catalog.config import config_from_settings
    from datalake_assets.transform.spark_logs import quiet_query_error_logs

    if settings.table_format == "iceberg":
        return _sql_on_iceberg(settings, args)
    cfg = config_from_settings(settings.catalog)
    if cfg.backend != "hive":
        raise UsageError(
            f"[catalog] backend is {cfg.backend!r}: query the lake's Parquet files "
            "(docs/get-started/query.md) or the Glue catalog with Athena"
        )
    quiet_query_error_logs()  # the served session's errors are logged too, not only a local one's
    spark = cfg.served_session()
    if spark is None:
        from datalake_assets.transform.session import settings_spark_session

        spark = settings_spark_session(settings, quiet=True)
    try:
        spark.sql(args.query).show(args.limit, truncate=False)
    except AnalysisException as e:
        raise UsageError(first_line(e)) from None
    except Exception as e:  # noqa: BLE001 - a failed Spark job, a lost server: no trace either
        print(f"datalake sql: {first_line(e)}", file=sys.stderr)
        return 1
    return 0


def _sql_on_iceberg(settings: LakeSettings, args: argparse.Namespace) -> int:
    """DuckDB over the Iceberg tables (``lake/formats/iceberg_read.py`` says why not Spark)."""
    import duckdb

    from datalake_assets.lake.formats import table_format
    from datalake_assets.lake.formats.iceberg_read import attach_tables, duckdb_connection
    from datalake_assets.settings.formats_section import FormatConfig

    tables = table_format(FormatConfig.of_settings(settings), settings.lake_root)
    con = duckdb_connection()
    attach_tables(
        con,
        tables.catalog(),
        [s.database for s in settings.sources] + [settings.catalog.reports_database],
    )
    try:
        con.sql(args.query).show(max_rows=args.limit)
    except (duckdb.CatalogException, duckdb.ParserException, duckdb.BinderException) as e:
        raise UsageError(first_line(e)) from None
    except duckdb.Error as e:
        print(f"datalake sql: {first_line(e)}", file=sys.stderr)
        return 1
    return 0


def cmd_maintain(settings: LakeSettings, args: argparse.Namespace) -> int:
    """The table format's maintenance (``lake/formats/maintain.py``), one line per table."""
    from datetime import timedelta

    from datalake_assets.lake.formats import SourceTables, table_format
    from datalake_assets.lake.formats.maintain import maintain_source
    from datalake_assets.settings.formats_section import FormatConfig

    config = FormatConfig.of_settings(settings)
    if not table_format(config, settings.lake_root).keeps_versions:
        print(
            f"nothing to maintain: the {settings.table_format} table format keeps no old versions"
        )
        return 0
    sources = [settings.source(s) for s in args.source] or list(settings.sources)
    retention = None if args.retention_hours is None else timedelta(hours=args.retention_hours)
    for s in sources:
        src = SourceTables(s.lake_dir, s.database, s.effective_table_prefix, s.date_layout)
        done = maintain_source(settings.lake_root, config, src, "datalake-maintain", retention)
        for table, d in sorted(done.items()):
            print(
                f"{s.id}.{table}: {d['snapshots_expired']} snapshots expired, "
                f"{d['orphan_files_removed']} files deleted ({d['orphan_bytes_removed']} bytes)"
            )
    return 0


def cmd_compact(settings: LakeSettings, args: argparse.Namespace) -> int:
    """Compaction of cold data (``lake/formats/compaction.py``): a line per table rewritten and
    one per source; each source's report written beside the sync reports."""
    from datalake_assets.lake.formats import SourceTables
    from datalake_assets.lake.formats.compaction import (
        MB,
        compact_source,
        report_lines,
        write_report,
    )
    from datalake_assets.settings.formats_section import FormatConfig

    config = FormatConfig.of_settings(settings)
    sources = [settings.source(s) for s in args.source] or list(settings.sources)
    target = None if args.target_mb is None else args.target_mb * MB
    for s in sources:
        src = SourceTables(s.lake_dir, s.database, s.effective_table_prefix, s.date_layout)
        report = compact_source(
            settings.lake_root,
            config,
            src,
            "datalake-compact",
            settle_hours=args.after_hours,
            target_bytes=target,
        )
        for line in report_lines(s.id, report):
            print(line)
        if report.supported:
            print(f"{s.id}: report {write_report(settings.lake_root, report)}")
    return 0


def first_line(e: Exception) -> str:
    """An exception's first line: Spark's messages go on with the JVM's stack trace."""
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def cmd_catalog(settings: LakeSettings, args: argparse.Namespace) -> int:
    """``init-metastore``: the Hive schema of ``[catalog] metastore_jdbc_url``'s database
    (``catalog/metastore_init.py``); sessions never create it themselves."""
    from datalake_assets.catalog.catalog_interface import CatalogError
    from datalake_assets.catalog.config import config_from_settings
    from datalake_assets.catalog.metastore_init import init_metastore

    try:
        result = init_metastore(config_from_settings(settings.catalog))
    except CatalogError as e:
        if e.code == "invalid_settings":  # the URL, the driver's jar, the password file
            raise UsageError(str(e)) from None
        print(f"datalake catalog: {e}", file=sys.stderr)
        return 1
    print(result.summary())
    return 0


def serve_metastore(settings: LakeSettings) -> threading.Thread | None:
    """Start the server of the embedded metastore (``catalog/metastore_server.py``) in the
    background, while Dagster starts. Returns once the server's discovery file is locked:
    a run that looks for the server from then on waits for it rather than opening Derby."""
    from datalake_assets.catalog import metastore_server
    from datalake_assets.catalog.config import config_from_settings

    cfg = config_from_settings(settings.catalog)
    if not cfg.servable or settings.table_format == "iceberg":
        return None  # an Iceberg lake's tables are in its Iceberg catalog: nothing to serve

    def serve() -> None:
        t0 = time.monotonic()
        try:
            address = metastore_server.start(cfg.metastore_dir, cfg.spark_conf(), started=locked)
        except Exception as e:  # noqa: BLE001 - the runs then open the metastore themselves
            print(
                f"the metastore server did not start ({type(e).__name__}: {e}); runs open "
                "the metastore themselves, one at a time",
                file=sys.stderr,
                flush=True,
            )
            return
        print(
            f"metastore served at {address} ({time.monotonic() - t0:.0f} s; {cfg.metastore_dir})",
            flush=True,
        )

    locked = threading.Event()
    thread = threading.Thread(target=serve, name="metastore-server", daemon=True)
    thread.start()
    locked.wait(timeout=60)
    return thread


def stop_metastore(settings: LakeSettings, starting: threading.Thread) -> None:
    """Stop the server ``serve_metastore`` started (a start still under way ends first)."""
    from datalake_assets.catalog import metastore_server
    from datalake_assets.catalog.config import config_from_settings

    starting.join()
    metastore_server.stop(config_from_settings(settings.catalog).metastore_dir)
