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

from datalake_assets.lake.formats.format_interface import FormatError


def _extension(module: str, name: str) -> str:
    import importlib

    pkg = importlib.import_module(module)
    found = glob.glob(
        os.path.join(os.path.dirname(pkg.__file__), "extensions", "*", f"{name}.duckdb_extension")
    )
    if not found:
        raise FormatError(
            f"DuckDB's {name} extension is missing from {module}: reinstall the "
            "package (pip install -e .)",
            "internal",
        )
    return found[0]


def duckdb_connection() -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with the iceberg extension loaded from its package."""
    con = duckdb.connect(
        config={"autoinstall_known_extensions": False, "autoload_known_extensions": False}
    )
    for module, name in (
        ("duckdb_extension_avro", "avro"),
        ("duckdb_extension_iceberg", "iceberg"),
    ):
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
            con.execute(
                f'CREATE OR REPLACE VIEW "{database}"."{ident[-1]}" AS '
                f"SELECT * FROM iceberg_scan('{metadata}')"
            )
            names.append(f"{database}.{ident[-1]}")
    return names
