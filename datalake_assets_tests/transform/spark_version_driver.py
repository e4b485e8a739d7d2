"""The driver that ``test_spark35.py`` runs under each PySpark (3.5 and the project's 4.x):
a series of syncs of one lake through the job's entry point, then what the Hive catalog holds.

Run as ``python spark_version_driver.py <spec.json>`` with the repository on ``PYTHONPATH``
and a folder of its own as the working directory (Derby's metastore). The spec::

    {"lake_root": ..., "archive_root": ..., "source_id": ..., "metastore_dir": ...,
     "runs": [{"hours": ["2026-11-21T10", ...], "big_batch": false}, ...]}

Each run is ``transform.job.main`` with the job's own arguments (``--catalog-backend hive``:
the catalog layer runs under the same Spark). ``big_batch``: the run takes the Spark paths of
a batch too big for the driver (the dedup's window and the check's Spark job:
``dedup.DRIVER_MAX_KEYS`` and ``dedup._DRIVER_CHECK_MAX_ROWS`` set to 0 for that run). The last line of stdout is a JSON object: the
PySpark version, each run's exit code, and per database the registered tables (columns,
partition keys, location, partitions with their columns) and their row counts through Spark
SQL.
"""

from __future__ import annotations

import json
import sys


def _catalog_state(spark, catalog, databases: list[str]) -> dict:
    state: dict = {}
    for database in databases:
        tables = {}
        for name, info in sorted(catalog.get_tables(database).items()):
            tables[name] = {
                "columns": [list(c) for c in info.columns],
                "partition_keys": list(info.partition_keys),
                "location": info.location,
                "partitions": sorted(
                    [list(p.values), p.location, [list(c) for c in p.columns or ()]]
                    for p in catalog.list_partitions(database, name)
                ),
            }
        if tables:  # what a query engine reads through the catalog, in one Spark job
            union = " UNION ALL ".join(
                f"SELECT '{n}' AS t, count(*) AS n FROM `{database}`.`{n}`" for n in tables
            )
            for row in spark.sql(union).collect():
                tables[row["t"]]["rows"] = row["n"]
        state[database] = tables
    return state


def main(spec_path: str) -> int:
    import pyspark

    from datalake_assets.catalog.config import CatalogConfig, catalog_from_config
    from datalake_assets.transform import dedup, job

    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)
    cfg = CatalogConfig(backend="hive", metastore_dir=spec["metastore_dir"])
    codes, limits = [], (dedup.DRIVER_MAX_KEYS, dedup._DRIVER_CHECK_MAX_ROWS)
    for run in spec["runs"]:
        dedup.DRIVER_MAX_KEYS, dedup._DRIVER_CHECK_MAX_ROWS = (
            (0, 0) if run.get("big_batch") else limits
        )
        codes.append(
            job.main(
                [
                    "--lake-root",
                    spec["lake_root"],
                    "--archive-root",
                    spec["archive_root"],
                    "--source-id",
                    spec["source_id"],
                    "--lock-wait-seconds",
                    "5",
                    "--local-max-bytes",
                    "0",  # the Spark path, whatever the batch's size
                    *cfg.to_args(),
                    "--hours",
                    *run["hours"],
                ]
            )
        )
    spark = job.job_spark_session(cfg)  # the session the runs used
    state = _catalog_state(
        spark, catalog_from_config(cfg, spark), [spec["source_id"], cfg.reports_database]
    )
    print(
        json.dumps(
            {
                "pyspark": pyspark.__version__,
                "spark": spark.version,
                "exit_codes": codes,
                "catalog": state,
            }
        )
    )
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
