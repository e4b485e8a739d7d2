"""The catalog's commands (``datalake sql``, ``datalake catalog``) and ``datalake dev``'s
metastore server (``catalog/metastore_server.py``); beside ``cli.py``, which wires them in."""

from __future__ import annotations

import argparse
import sys
import threading
import time

from datalake_assets.settings import LakeSettings

# The catalog's modules are imported by the commands that need them: `datalake collect` and
# `datalake demo` start without them.


def cmd_sql(settings: LakeSettings, args: argparse.Namespace) -> int:
    """One Spark SQL statement against the Hive catalog: through the metastore's server while
    ``datalake dev`` runs (Derby is then held by it), else in a local session of our own."""
    from datalake_assets.catalog.config import config_from_settings

    cfg = config_from_settings(settings.catalog)
    if cfg.backend != "hive":
        print(f"datalake sql: [catalog] backend is {cfg.backend!r}: query the lake's Parquet "
              "files (README: Query the lake) or the Glue catalog with Athena", file=sys.stderr)
        return 2
    spark = cfg.served_session()
    if spark is None:
        from datalake_assets.transform.session import settings_spark_session

        spark = settings_spark_session(settings)
    try:
        spark.sql(args.query).show(args.limit, truncate=False)
    except Exception as e:  # noqa: BLE001 - AnalysisException, ParseException...: no trace
        print(f"datalake sql: {str(e).strip().splitlines()[0]}", file=sys.stderr)
        return 1
    return 0


def cmd_catalog(settings: LakeSettings, args: argparse.Namespace) -> int:
    """``init-metastore``: the Hive schema of ``[catalog] metastore_jdbc_url``'s database
    (``catalog/metastore_init.py``); sessions never create it themselves."""
    from datalake_assets.catalog.base import CatalogError
    from datalake_assets.catalog.config import config_from_settings
    from datalake_assets.catalog.metastore_init import init_metastore

    try:
        result = init_metastore(config_from_settings(settings.catalog))
    except CatalogError as e:
        print(f"datalake: {e}", file=sys.stderr)
        return 2 if e.code == "invalid_settings" else 1
    print(result.summary())
    return 0


def serve_metastore(settings: LakeSettings) -> threading.Thread | None:
    """Start the server of the embedded metastore (``catalog/metastore_server.py``) in the
    background, while Dagster starts. Returns once the server's discovery file is locked:
    a run that looks for the server from then on waits for it rather than opening Derby."""
    from datalake_assets.catalog import metastore_server
    from datalake_assets.catalog.config import config_from_settings

    cfg = config_from_settings(settings.catalog)
    if not cfg.servable:
        return None

    def serve() -> None:
        t0 = time.monotonic()
        try:
            address = metastore_server.start(cfg.metastore_dir, cfg.spark_conf(), started=locked)
        except Exception as e:  # noqa: BLE001 - the runs then open the metastore themselves
            print(f"the metastore server did not start ({type(e).__name__}: {e}); runs open "
                  "the metastore themselves, one at a time", file=sys.stderr, flush=True)
            return
        print(f"metastore served at {address} ({time.monotonic() - t0:.0f} s; "
              f"{cfg.metastore_dir})", flush=True)

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
