"""Reading an Iceberg lake without Spark: DuckDB with its iceberg extension.

No Iceberg runtime jar for Spark can be installed offline here, so ``datalake sql`` on an
Iceberg lake runs DuckDB: each Iceberg table of the lake's databases is a view
``<database>.<table>`` over ``iceberg_scan(<its current metadata file>)``, which reads exactly
the current snapshot's files (the folder read as plain Parquet would also count replaced
files) and prunes on ``day``/``hr``. The extensions come from their Python packages
(``duckdb-extension-iceberg``, ``-avro``), never downloaded."""

from __future__ import annotations

import glob
import os

import duckdb

from datalake_assets.lake import storage
from datalake_assets.lake.formats.base import FormatError
from datalake_assets.spec import layout


def _extension(module: str, name: str) -> str:
    import importlib

    pkg = importlib.import_module(module)
    found = glob.glob(os.path.join(os.path.dirname(pkg.__file__), "extensions", "*",
                                   f"{name}.duckdb_extension"))
    if not found:
        raise FormatError(f"DuckDB's {name} extension is missing from {module}: reinstall the "
                          "package (pip install -e .)", "internal")
    return found[0]


def duckdb_connection() -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with the iceberg extension loaded from its package."""
    con = duckdb.connect(config={"autoinstall_known_extensions": False,
                                 "autoload_known_extensions": False})
    for module, name in (("duckdb_extension_avro", "avro"),
                         ("duckdb_extension_iceberg", "iceberg")):
        con.execute(f"LOAD '{_extension(module, name)}'")
    return con


def attach_tables(con: duckdb.DuckDBPyConnection, catalog, databases: list[str]) -> list[str]:
    """A view per Iceberg table of ``databases`` (``<database>.<table>``); returns their
    names."""
    from pyiceberg.exceptions import NoSuchNamespaceError

    names = []
    for database in sorted(set(databases)):
        try:
            idents = catalog.list_tables(database)
        except NoSuchNamespaceError:
            continue
        con.execute(f'CREATE SCHEMA IF NOT EXISTS "{database}"')
        for ident in sorted(idents):
            metadata = catalog.load_table(ident).metadata_location.replace("'", "''")
            con.execute(f'CREATE OR REPLACE VIEW "{database}"."{ident[-1]}" AS '
                        f"SELECT * FROM iceberg_scan('{metadata}')")
            names.append(f"{database}.{ident[-1]}")
    return names


def attach_lake_files(con: duckdb.DuckDBPyConnection, lake_root: str,
                      sources: list[tuple[str, str, str]], reports_database: str) -> list[str]:
    """Views over the lake's own Parquet records, which stay files in every format: each
    source's quarantine (``<database>.<prefix_>quarantine``; ``sources``: ``(database, table
    name, lake folder)``) and the ``sync_reports`` table. Local lakes only (DuckDB reads S3
    through its httpfs extension, not shipped here); a record with no file yet has no view."""
    if storage.is_uri(lake_root):
        return []
    views = [(database, name, layout.join(layout.quarantine_root(lake_root, source_dir),
                                          "*", "*", "*.parquet"))
             for database, name, source_dir in sources]
    views.append((reports_database, "sync_reports",
                  layout.join(layout.reports_table_root(lake_root), "*", "*", "*.parquet")))
    names = []
    for database, name, pattern in views:
        if not glob.glob(pattern):
            continue
        con.execute(f'CREATE SCHEMA IF NOT EXISTS "{database}"')
        con.execute(f'CREATE OR REPLACE VIEW "{database}"."{name}" AS SELECT * FROM read_parquet('
                    f"'{pattern.replace(chr(39), chr(39) * 2)}', hive_partitioning = true, "
                    "union_by_name = true)")
        names.append(f"{database}.{name}")
    return names
