"""DDL for people who register tables by hand (Athena console, Hive CLI, Spark SQL).

The statements are the ones the Hive backend runs, in the Hive DDL dialect that Athena also
speaks (``CREATE EXTERNAL TABLE ... PARTITIONED BY ... STORED AS PARQUET LOCATION``)::

    print(print_table_ddl(settings, settings.source("demo"), "pages"))

Identifiers are backtick-quoted after validation (``[a-z0-9_]`` only) and locations are
single-quoted after validation (no quote, backslash, ``;``, backtick or control character can
appear), so a printed statement can be pasted as is: nothing in it comes from event data
without passing the same checks as the catalog backends (``catalog_interface.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from datalake_assets.catalog import reports
from datalake_assets.catalog.catalog_interface import (
    CatalogError,
    Column,
    PartitionSpec,
    TableInfo,
    check_columns,
    check_partition_keys,
    check_partition_value,
    normalize_location,
    quote_identifier,
    quote_location,
    quote_text,
)
from datalake_assets.lake import storage
from datalake_assets.lake.records import read_schema_record
from datalake_assets.spec import layout
from datalake_assets.spec.layout import DATE_LAYOUTS, table_root
from datalake_assets.spec.naming import catalog_table_name

if TYPE_CHECKING:  # pragma: no cover
    from datalake_assets.settings import LakeSettings, SourceSettings

TABLE_PROPERTIES = {"classification": "parquet", "parquet.compression": "SNAPPY"}
# properties the metastore adds to every table: not ours, not compared
_DROPPED_PROPERTIES = {"transient_lastDdlTime", "option.serialization.format", "comment"}


def table_info_of_description(
    database: str, table: str, rows: Sequence[tuple[str | None, str | None]]
) -> TableInfo:
    """A table as ``DESCRIBE TABLE EXTENDED`` describes it (``(col_name, data_type)`` rows):
    its columns, then ``# Partition Information``, then ``# Detailed Table Information``."""
    columns: list[Column] = []
    keys: list[str] = []
    details: dict[str, str] = {}
    section = "columns"
    for raw_name, raw_value in rows:
        name, value = (raw_name or "").strip(), raw_value or ""
        if name == "# Partition Information":
            section = "partitions"
        elif name == "# Detailed Table Information":
            section = "details"
        elif not name or name.startswith("#"):
            if section == "partitions" and not name:
                section = "after"
        elif section == "columns":
            columns.append((name, value))
        elif section == "partitions":
            keys.append(name)
        elif section == "details":
            details.setdefault(name, value)
    params = {}
    props = details.get("Table Properties", "").strip()
    if props.startswith("[") and props.endswith("]"):
        for item in props[1:-1].split(", "):
            k, sep, v = item.partition("=")
            if sep and k not in _DROPPED_PROPERTIES:
                params[k] = v
    return TableInfo(
        database,
        table,
        [c for c in columns if c[0] not in keys],
        keys,
        normalize_location(details["Location"]) if details.get("Location") else "",
        params,
        details.get("Comment", ""),
    )


def qualified(database: str, table: str) -> str:
    """A table's name in a statement: database and table each backtick-quoted, validated."""
    return f"{quote_identifier(database, 'database')}.{quote_identifier(table, 'table')}"


def create_database_ddl(database: str, description: str = "") -> str:
    comment = f" COMMENT {quote_text(description)}" if description else ""
    return f"CREATE DATABASE IF NOT EXISTS {quote_identifier(database, 'database')}{comment}"


def create_table_ddl(
    database: str,
    table: str,
    columns: Sequence[Column],
    partition_keys: Sequence[str],
    location: str,
    description: str = "",
    *,
    if_not_exists: bool = True,
) -> str:
    """``CREATE EXTERNAL TABLE`` of a partitioned Parquet table (no trailing ``;``)."""
    cols = check_columns(columns)
    keys = check_partition_keys(partition_keys, cols)
    if not cols:
        raise CatalogError(f"table {database}.{table} has no columns", "internal")
    body = ",\n".join(f"  {quote_identifier(n, 'column')} {t}" for n, t in cols)
    parts = ", ".join(f"{quote_identifier(k, 'partition key')} string" for k in keys)
    props = ", ".join(f"'{k}'='{v}'" for k, v in TABLE_PROPERTIES.items())
    lines = [
        f"CREATE EXTERNAL TABLE {'IF NOT EXISTS ' if if_not_exists else ''}"
        f"{qualified(database, table)} (",
        body,
        ")",
    ]
    if description:
        lines.append(f"COMMENT {quote_text(description)}")
    if keys:
        lines.append(f"PARTITIONED BY ({parts})")
    lines += [
        "STORED AS PARQUET",
        f"LOCATION {quote_location(location)}",
        f"TBLPROPERTIES ({props})",
    ]
    return "\n".join(lines)


def partition_clause(keys: Sequence[str], values: Sequence[str]) -> str:
    """``PARTITION (`day`='2026-11-21', `hr`='09')``."""
    if len(keys) != len(values):
        raise CatalogError(f"partition {list(values)} does not match keys {list(keys)}", "internal")
    inner = ", ".join(
        f"{quote_identifier(k, 'partition key')}='{check_partition_value(v, k)}'"
        for k, v in zip(keys, values)
    )
    return f"PARTITION ({inner})"


def add_partitions_ddl(
    database: str,
    table: str,
    partition_keys: Sequence[str],
    partitions: Iterable[PartitionSpec],
    *,
    batch_size: int = 100,
) -> list[str]:
    """``ALTER TABLE ... ADD IF NOT EXISTS PARTITION (...) LOCATION '...' ...``, one statement
    per ``batch_size`` partitions (no trailing ``;``)."""
    specs = list(partitions)
    out = []
    for start in range(0, len(specs), max(1, batch_size)):
        lines = [f"ALTER TABLE {qualified(database, table)} ADD IF NOT EXISTS"]
        for spec in specs[start : start + batch_size]:
            lines.append(
                f"  {partition_clause(partition_keys, spec.values)} "
                f"LOCATION {quote_location(spec.location)}"
            )
        out.append("\n".join(lines))
    return out


# ------------------------------------------------------------------------- the lake on disk


def scan_partitions(root: str, partition_keys: Sequence[str]) -> list[PartitionSpec]:
    """The partitions under a table root that hold data files: folders
    ``<k1>=<v1>/<k2>=<v2>/...`` in key order containing ``*.parquet`` (names starting with
    ``.`` or ``_``, such as commit markers, are not data)."""
    found: set[tuple[str, ...]] = set()
    prefix = root.rstrip("/") + "/"
    for location, _ in storage.list_files(root, recursive=True):
        if not location.startswith(prefix):
            continue
        parts = location[len(prefix) :].split("/")
        name = parts[-1]
        if not name.endswith(".parquet") or name.startswith((".", "_")):
            continue
        dirs = parts[:-1]
        if len(dirs) != len(partition_keys):
            continue
        values = []
        for key, part in zip(partition_keys, dirs):
            k, sep, v = part.partition("=")
            if not sep or k != key:
                break
            values.append(v)
        else:
            found.add(tuple(values))
    return [
        PartitionSpec(v, layout.join(root, *(f"{k}={x}" for k, x in zip(partition_keys, v))))
        for v in sorted(found)
    ]


def table_ddl(
    database: str,
    table: str,
    columns: Sequence[Column],
    partition_keys: Sequence[str],
    location: str,
    partitions: Sequence[PartitionSpec] = (),
    description: str = "",
) -> str:
    """The ``CREATE EXTERNAL TABLE`` and its ``ADD PARTITION`` statements, ``;``-terminated."""
    statements = [create_table_ddl(database, table, columns, partition_keys, location, description)]
    statements += add_partitions_ddl(database, table, partition_keys, partitions)
    return ";\n\n".join(statements) + ";\n"


def print_table_ddl(
    settings: LakeSettings, source: SourceSettings | str, table: str | None = None
) -> str:
    """DDL (Athena / Hive) of a source's table as the lake holds it now: columns from the
    lake's schema record, partitions from the folders on disk. ``table`` is the lake's name
    (``pages``, ``order_completed``), ``quarantine`` or ``sync_reports``; ``None``: every
    table of the source (plus quarantine and sync_reports)."""
    if isinstance(source, str):
        source = settings.source(source)
    lake = settings.lake_root
    reports_db = settings.catalog.reports_database
    record = read_schema_record(lake, source.lake_dir)
    special = (reports.QUARANTINE_TABLE, reports.REPORTS_TABLE)
    if table is not None and table not in record and table not in special:
        known = ", ".join(sorted(record) + list(special))
        raise CatalogError(
            f"source {source.id!r} has no table {table!r} in the lake's schema record; "
            f"known: {known}",
            "invalid_settings",
        )
    names = [table] if table is not None else sorted(record) + list(special)
    keys = list(DATE_LAYOUTS[source.date_layout])
    out = [
        f"-- Tables of Segment source '{source.id}' (database {source.database}), generated by "
        "datalake-assets from the lake's schema record and the partitions on disk.",
        "-- Athena / Hive DDL: run the statements in order.",
        "",
        create_database_ddl(source.database) + ";",
        "",
    ]
    for name in names:
        if name == reports.REPORTS_TABLE:
            root = layout.reports_table_root(lake)
            out += [
                create_database_ddl(reports_db) + ";",
                "",
                table_ddl(
                    reports_db,
                    reports.REPORTS_TABLE,
                    reports.report_columns(),
                    list(reports.REPORTS_PARTITION_KEYS),
                    root,
                    scan_partitions(root, reports.REPORTS_PARTITION_KEYS),
                    "Sync reports of every source (datalake-assets)",
                ),
            ]
        elif name == reports.QUARANTINE_TABLE:
            root = layout.quarantine_root(lake, source.lake_dir)
            out.append(
                table_ddl(
                    source.database,
                    catalog_table_name(name, source.table_prefix),
                    reports.quarantine_columns(),
                    list(reports.QUARANTINE_PARTITION_KEYS),
                    root,
                    scan_partitions(root, reports.QUARANTINE_PARTITION_KEYS),
                    f"Quarantined lines and values of source {source.id}",
                )
            )
        else:
            root = table_root(lake, source.lake_dir, name)
            out.append(
                table_ddl(
                    source.database,
                    catalog_table_name(name, source.table_prefix),
                    record[name],
                    keys,
                    root,
                    scan_partitions(root, keys),
                    f"Segment {name} of source {source.id}",
                )
            )
        out.append("")
    return "\n".join(out)
