"""What a sync does with the catalog: read the current schemas, then register the result.

Before casting, the sync reads the catalog's current columns of its tables
(``read_schemas``): a column's type there is the widest any engine has been told about, so
the sync never writes a narrower type than the catalog declares.

After the sync's data commit, ``register_sync`` makes the catalog describe the lake:

1. the source's database exists;
2. each table exists as an external Parquet table at its lake root, with the sync's columns
   merged in (appended / widened, never narrowed or dropped; ``base.merge_columns``);
3. the partitions of the hours the sync wrote are registered with the columns their files
   were written with (idempotent; a replayed hour's partition is updated);
4. the quarantine table and the partitions of the hours that quarantined something.

Registration runs after the commit, so a failure leaves the files correct and the catalog
behind; re-running the sync (or just ``register_sync`` with the same arguments) catches it
up, because every step is idempotent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from datalake_assets.catalog.catalog_interface import (
    CONCURRENT_CALLS,
    Catalog,
    Column,
    PartitionSpec,
)
from datalake_assets.catalog.reports import register_quarantine
from datalake_assets.spec import layout
from datalake_assets.spec.naming import catalog_table_name


def read_schemas(
    catalog: Catalog, database: str, table_prefix: str, tables: Iterable[str]
) -> dict[str, list[Column]]:
    """``{lake table: columns}`` as the catalog has them now; tables it lacks are left out
    (``NoCatalog``: always ``{}``)."""
    names = {catalog_table_name(t, table_prefix): t for t in tables}
    if not names:
        return {}
    found = catalog.get_tables(database, list(names))
    return {names[n]: list(info.columns) for n, info in found.items() if n in names}


def register_sync(
    catalog: Catalog,
    *,
    database: str,
    table_prefix: str,
    lake_root: str,
    source_dir: str,
    date_layout: str,
    tables: Mapping[str, Sequence[Column]],
    partitions: Mapping[str, Iterable[layout.ArchiveHour | str]],
    quarantine_hours: Iterable[layout.ArchiveHour | str] = (),
    count_partitions: bool = True,
    hour_columns: Mapping[str, Mapping[layout.ArchiveHour, Sequence[Column]]] | None = None,
) -> dict[str, dict]:
    """Register a committed sync; returns, per lake table (and ``"quarantine"`` when hours
    were given): ``catalog_table``, ``database``, ``columns`` (after the merge),
    ``new_columns``, ``widened_columns``, ``location``, ``partitions`` (count in the catalog)
    and ``partitions_added``.

    ``tables``: the columns the sync wrote each table with (every table it wrote; others may
    be included to register their schema). ``partitions``: the hours written per table.
    ``count_partitions=False`` skips the count (one paginated listing per table on Glue);
    ``partitions`` is then ``None``. ``hour_columns``: per table, the columns an hour's files
    were written with, where they differ from ``tables`` (a registration from the lake's
    files, ``in_step.register_from_lake``).
    """
    unknown = sorted(set(partitions) - set(tables))
    if unknown:
        raise ValueError(f"partitions given for tables without columns: {unknown}")
    out: dict[str, dict] = {}
    if not tables and not quarantine_hours:
        return out
    catalog.ensure_database(database, "Segment data lake tables (datalake-assets)")

    def one(table: str) -> dict:
        hours = {layout.ArchiveHour.parse(h) for h in partitions.get(table, ())}
        return _register_table(
            catalog,
            database,
            table_prefix,
            lake_root,
            source_dir,
            date_layout,
            table,
            tables[table],
            hours,
            count_partitions,
            (hour_columns or {}).get(table, {}),
        )

    # Tables in parallel: each is a few catalog round trips (~50-100 ms each through the
    # served metastore or to Glue), independent of the others'. The first error (in table
    # order) is raised once every table's registration has ended.
    names = sorted(tables)
    with ThreadPoolExecutor(
        min(CONCURRENT_CALLS, max(len(names), 1)), thread_name_prefix="catalog-register"
    ) as pool:
        out.update(zip(names, pool.map(one, names)))
    quarantine = list(quarantine_hours)
    if quarantine:
        out["quarantine"] = register_quarantine(
            catalog, database, table_prefix, lake_root, source_dir, quarantine
        )
    return out


def _register_table(
    catalog: Catalog,
    database: str,
    table_prefix: str,
    lake_root: str,
    source_dir: str,
    date_layout: str,
    table: str,
    columns: Sequence[Column],
    hours: set[layout.ArchiveHour],
    count_partitions: bool,
    hour_columns: Mapping[layout.ArchiveHour, Sequence[Column]],
) -> dict:
    """One table of ``register_sync``: its definition, then its partitions of ``hours``."""
    name = catalog_table_name(table, table_prefix)
    columns = [tuple(c) for c in columns]
    keys = list(layout.DATE_LAYOUTS[date_layout])
    description = f"Segment {table} of {source_dir} (datalake-assets)"
    root = layout.table_root(lake_root, source_dir, table)
    before = catalog.get_table(database, name)
    info = catalog.create_or_update_table(database, name, columns, keys, root, description)
    specs: dict[tuple[str, ...], PartitionSpec] = {}
    for h in sorted(hours):
        values = tuple(v for _, v in layout.date_partition_values(date_layout, h))
        specs[values] = PartitionSpec(
            values,
            layout.table_partition_dir(lake_root, source_dir, table, date_layout, h),
            tuple(tuple(c) for c in hour_columns.get(h, columns)),
        )
    added = catalog.add_partitions(database, name, list(specs.values())) if specs else 0
    old = dict(before.columns) if before else {}
    return {
        "catalog_table": name,
        "database": database,
        "columns": list(info.columns),
        "new_columns": [c for c in info.columns if c[0] not in old] if before else [],
        "widened_columns": [(n, old[n], t) for n, t in info.columns if n in old and old[n] != t],
        "is_new": before is None,
        "location": info.location,
        "partitions_added": added,
        "partitions": catalog.partition_count(database, name) if count_partitions else None,
    }
