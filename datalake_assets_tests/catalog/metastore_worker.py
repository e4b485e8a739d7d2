"""One Spark process of the MySQL/MariaDB metastore tests, and the registration they compare.

``python -m datalake_assets_tests.catalog.metastore_worker <plan.json>`` builds its session
from a settings file exactly as ``datalake sync`` does (``settings_spark_session``: the JDBC
metastore's conf, the password from the environment or a file), waits for its peers (a
barrier of files, so that the processes really overlap), then ``register`` s its tables
through the Hive catalog as a sync does, reads its peers' tables by name once they appear,
and writes what the metastore holds (``dump``) as JSON.

The tests run ``register`` + ``dump`` on the suite's embedded Derby session too, and compare.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

# Per round: the columns each table is written with, and the hour.
ROUNDS = (
    (
        "2026-11-21T09",
        [("message_id", "string"), ("received_at", "timestamp"), ("amount", "bigint")],
    ),
    (
        "2026-11-21T10",
        [
            ("message_id", "string"),
            ("received_at", "timestamp"),
            ("amount", "bigint"),
            ("coupon", "string"),
        ],
    ),
)
TABLES = ("pages", "orders")
ROWS_PER_HOUR = 3


def write_lake(lake: str, source_dir: str, source_id: str) -> int:
    """The Parquet files of every round (as the sync writes them) and a sync report per
    round; rows per table."""
    from datetime import timedelta

    import pyarrow as pa
    import pyarrow.parquet as pq

    from datalake_assets.catalog.reports import write_report_table
    from datalake_assets.spec import layout

    arrow = {"string": pa.string(), "bigint": pa.int64(), "timestamp": pa.timestamp("us", tz="UTC")}
    for n, (hour_text, columns) in enumerate(ROUNDS):
        hour = layout.ArchiveHour.parse(hour_text)
        for table in TABLES:
            folder = layout.table_partition_dir(lake, source_dir, table, "day_hour", hour)
            os.makedirs(folder, exist_ok=True)
            rows = [
                {
                    "message_id": f"{table}-{n}-{i}",
                    "received_at": hour.start + timedelta(minutes=i),
                    "amount": i,
                    "coupon": f"c{i}",
                }
                for i in range(ROWS_PER_HOUR)
            ]
            schema = pa.schema([(c, arrow[t]) for c, t in columns])
            pq.write_table(
                pa.Table.from_pylist(rows, schema=schema),
                f"{folder}/{layout.data_file_name(hour, 'run1', 0, 0)}",
            )
        write_report_table(
            lake,
            source_id,
            f"run{n}",
            [
                {
                    "type": "source",
                    "run_id": f"run{n}",
                    "source_id": source_id,
                    "status": "finished",
                    "start_time": f"{hour_text}:00:00+00:00",
                }
            ],
            hour_text[:10],
        )
    return ROWS_PER_HOUR * len(ROUNDS)


def register(
    catalog: Any,
    *,
    database: str,
    prefix: str,
    lake: str,
    source_dir: str,
    source_id: str,
    reports_database: str,
) -> None:
    """What a sync registers, round by round: the tables (a column added in round 2), their
    hours' partitions, and the shared ``sync_reports`` table (every source's)."""
    from datalake_assets.catalog.register import register_sync
    from datalake_assets.catalog.reports import register_reports

    for hour, columns in ROUNDS:
        register_sync(
            catalog,
            database=database,
            table_prefix=prefix,
            lake_root=lake,
            source_dir=source_dir,
            date_layout="day_hour",
            tables={t: columns for t in TABLES},
            partitions={t: [hour] for t in TABLES},
        )
        register_reports(catalog, reports_database, lake, source_id, hour[:10])


def dump(spark: Any, catalog: Any, database: str, prefix: str) -> dict[str, Any]:
    """What the metastore holds of ``prefix``'s tables, and what Spark reads through them."""
    out: dict[str, Any] = {}
    for table in TABLES:
        name = f"{prefix}_{table}"
        info = catalog.get_table(database, name)
        out[name] = {
            "columns": [list(c) for c in info.columns],
            "keys": info.partition_keys,
            "location": info.location,
            "description": info.description,
            "parameters": info.parameters,
            "partitions": [
                [list(p.values), p.location] for p in catalog.list_partitions(database, name)
            ],
            "rows": spark.sql(f"SELECT count(*) FROM {database}.{name}").collect()[0][0],
            "coupons": spark.sql(f"SELECT count(coupon) FROM {database}.{name}").collect()[0][0],
        }
    return out


def _barrier(folder: Path, me: str, peers: list[str], timeout_s: float = 600) -> None:
    (folder / f"{me}.ready").write_text("ready")
    deadline = time.monotonic() + timeout_s
    while not all((folder / f"{p}.ready").exists() for p in peers):
        if time.monotonic() > deadline:
            raise TimeoutError(f"peers {peers} never got ready")
        time.sleep(0.2)


def _read_peer(
    spark: Any, catalog: Any, database: str, peer: str, rows: int, timeout_s: float = 600
) -> dict[str, int]:
    """The peer's tables by name, once they hold all of its rows."""
    deadline = time.monotonic() + timeout_s
    names = [f"{peer}_{t}" for t in TABLES]
    while True:
        # metastore calls first: a count is a Spark job, run once the partitions are all there
        if set(names) <= set(catalog.list_tables(database)) and all(
            catalog.partition_count(database, n) == len(ROUNDS) for n in names
        ):
            counts = {
                n: spark.sql(f"SELECT count(*) FROM {database}.{n}").collect()[0][0] for n in names
            }
            if all(c == rows for c in counts.values()):
                return counts
        if time.monotonic() > deadline:
            raise TimeoutError(f"the tables of {peer} never held {rows} rows")
        time.sleep(0.5)


def main(argv: list[str]) -> int:
    from datalake_assets.catalog.catalog_interface import CatalogError
    from datalake_assets.catalog.config import catalog_from_config, config_from_settings
    from datalake_assets.settings import load_settings
    from datalake_assets.transform.session import settings_spark_session

    plan = json.loads(Path(argv[0]).read_text())
    out = Path(plan["out"])
    settings = load_settings(plan["settings"])
    begun = time.monotonic()
    try:
        spark = settings_spark_session(settings)
        spark.sparkContext.setLogLevel("ERROR")
        started = time.monotonic()
        catalog = catalog_from_config(config_from_settings(settings.catalog), spark)
        if plan.get("probe"):  # only: does the metastore answer?
            catalog.list_tables("default")
            out.write_text(json.dumps({"ok": True}))
            return 0
        _barrier(Path(plan["barrier"]), plan["name"], plan["peers"])
        register(
            catalog,
            database=plan["database"],
            prefix=plan["name"],
            lake=plan["lake"],
            source_dir=plan["name"],
            source_id=plan["name"],
            reports_database=plan["reports_database"],
        )
        result = {
            "tables": dump(spark, catalog, plan["database"], plan["name"]),
            "peers": {
                p: _read_peer(spark, catalog, plan["database"], p, plan["rows"])
                for p in plan["peers"]
            },
        }
        result["seconds"] = {
            "session": round(started - begun, 1),
            "work": round(time.monotonic() - started, 1),
        }
        out.write_text(json.dumps(result))
        return 0
    except CatalogError as e:
        out.write_text(json.dumps({"error": str(e), "code": e.code}))
        return 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
