"""An Iceberg lake read back as a reader would: through the Iceberg catalog (pyiceberg's own
SQL or Glue catalog, never the sync's code), each table's current snapshot, or DuckDB's
``iceberg_scan`` of its metadata file. The quarantine is a table too; the indexes stay files
of the lake."""

from __future__ import annotations

import base64
import glob
import os
from collections import Counter

import duckdb
import pyarrow as pa

from datalake_assets_tests.support.lake_reader import Lake, read_lake


def sql_catalog(lake_root: str):
    """The lake's SQL catalog as any pyiceberg user opens it: the catalog's name is part of
    each table's row in SQLite (the lake's is ``datalake``)."""
    from pyiceberg.catalog.sql import SqlCatalog

    return SqlCatalog(
        "datalake",
        uri=f"sqlite:///{lake_root}/_iceberg/catalog.db",
        warehouse=f"file://{lake_root}/iceberg",
    )


def tables(catalog, database: str) -> dict[str, object]:
    """``{table name: pyiceberg table}`` of a namespace (none if it does not exist)."""
    from pyiceberg.exceptions import NoSuchNamespaceError

    try:
        names = catalog.list_tables(database)
    except NoSuchNamespaceError:
        return {}
    return {ident[-1]: catalog.load_table(ident) for ident in names}


QUARANTINE = "quarantine"
_LINE_FIELDS = (
    "level",
    "reason",
    "archive_file",
    "line_number",
    "raw_line",
    "raw_line_base64",
    "day",
    "hr",
)


def read_iceberg_lake(store, catalog, lake_root: str, source_dir: str, database: str) -> Lake:
    """The oracle's view of an Iceberg lake: message id -> (table, hour) counts from every
    table's current snapshot, and the quarantined lines from the quarantine table's."""
    lake = read_lake(store, lake_root, source_dir)
    assert not lake.rows and not lake.lines_q, (
        "an Iceberg lake must hold no Segment-layout table or quarantine file"
    )
    for name, tbl in tables(catalog, database).items():
        if name == QUARANTINE:
            for r in tbl.scan(selected_fields=_LINE_FIELDS).to_arrow().to_pylist():
                if r["level"] == "line":
                    raw = (
                        base64.b64decode(r["raw_line_base64"])
                        if r["raw_line_base64"]
                        else (r["raw_line"] or "").encode("utf-8")
                    )
                    lake.lines_q.append({**r, "hour": f"{r['day']}T{r['hr']}", "raw": raw})
            continue
        t = tbl.scan(selected_fields=("message_id", "day", "hr")).to_arrow()
        for mid, day, hr in zip(*(t[c].to_pylist() for c in ("message_id", "day", "hr"))):
            lake.rows.setdefault(mid, Counter())[(name, f"{day}T{hr}")] += 1
    return lake


def duckdb_with_iceberg() -> duckdb.DuckDBPyConnection:
    """DuckDB with the iceberg and avro extensions of their packages (never downloaded)."""
    import duckdb_extension_avro
    import duckdb_extension_iceberg

    con = duckdb.connect(
        config={"autoinstall_known_extensions": False, "autoload_known_extensions": False}
    )
    for pkg, name in ((duckdb_extension_avro, "avro"), (duckdb_extension_iceberg, "iceberg")):
        (path,) = glob.glob(
            os.path.join(
                os.path.dirname(pkg.__file__), "extensions", "*", f"{name}.duckdb_extension"
            )
        )
        con.execute(f"LOAD '{path}'")
    return con


def sorted_rows(t: pa.Table) -> list[tuple]:
    """A table's rows, columns by name, sorted: equal tables compare equal."""
    t = t.select(sorted(t.column_names))
    return sorted(tuple(r.values()) for r in t.to_pylist())
