"""Catalogs: the lake's tables, columns and partitions, registered where engines look.

One interface (``Catalog``, ``base.py``) and three backends chosen by ``CatalogConfig``
(``config.py``): ``glue`` (AWS Glue, for Athena; ``glue.py``), ``hive`` (a Hive metastore
through Spark SQL: embedded Derby locally, or a remote metastore; ``hive.py``) and ``none``.

What the sync calls (``register.py``, ``reports.py``)::

    catalog = catalog_from_config(cfg, spark)
    current = read_schemas(catalog, database, table_prefix, tables)        # before casting
    ...                                                                    # write + commit
    register_sync(catalog, database=..., table_prefix=..., lake_root=..., source_dir=...,
                  date_layout=..., tables=..., partitions=..., quarantine_hours=...)
    write_report_table(lake_root, source_id, run_id, report, day)
    register_reports(catalog, cfg.reports_database, lake_root, source_id, day)

``ddl.py`` prints the same tables as Athena / Hive DDL (``print_table_ddl``).

Only the light modules are imported here; the rest load on first use (``boto3``, ``pyarrow``
and Spark are not needed to read settings).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from datalake_assets.catalog.base import (
    ERROR_CODES,
    INSUFFICIENT_PERMISSIONS,
    INTERNAL,
    INVALID_SETTINGS,
    Catalog,
    CatalogError,
    Column,
    InvalidNameError,
    NoCatalog,
    PartitionSpec,
    TableInfo,
    merge_columns,
)
from datalake_assets.catalog.config import (
    BACKENDS,
    DEFAULT_REPORTS_DATABASE,
    CatalogConfig,
    catalog_from_config,
    hive_spark_conf,
)

_LAZY = {
    "GlueCatalog": "glue",
    "HiveCatalog": "hive",
    "create_table_ddl": "ddl",
    "add_partitions_ddl": "ddl",
    "create_database_ddl": "ddl",
    "table_ddl": "ddl",
    "scan_partitions": "ddl",
    "print_table_ddl": "ddl",
    "REPORT_SCHEMA": "reports",
    "REPORTS_TABLE": "reports",
    "QUARANTINE_TABLE": "reports",
    "write_report_table": "reports",
    "register_reports": "reports",
    "register_quarantine": "reports",
    "report_rows": "reports",
    "register_sync": "register",
    "read_schemas": "register",
}

__all__ = [
    "BACKENDS", "DEFAULT_REPORTS_DATABASE", "ERROR_CODES", "INSUFFICIENT_PERMISSIONS",
    "INTERNAL", "INVALID_SETTINGS", "Catalog", "CatalogConfig", "CatalogError", "Column",
    "InvalidNameError", "NoCatalog", "PartitionSpec", "TableInfo", "catalog_from_config",
    "hive_spark_conf", "merge_columns", *sorted(_LAZY),
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'datalake_assets.catalog' has no attribute {name!r}")
    value = getattr(import_module(f"datalake_assets.catalog.{module}"), name)
    globals()[name] = value
    return value
