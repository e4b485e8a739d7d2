"""Is the catalog in step with the lake? And registering hours from what the lake holds.

The lake's files are the truth: each table-hour's Parquet files (named ``part-<hour>-...``)
under its partition folder, written with the columns of the sync that wrote them. For each
such table-hour, the catalog must have

* the table, with every column the files have;
* the hour's partition, at the files' folder;
* where the backend keeps a schema per partition (Glue, for Athena), the files' column
  types on it (``glue.py`` says why partitions keep their own).

``out_of_step`` lists what differs, by hour, in words that name the table, partition and
column; ``register_from_lake`` registers the hours again from the files alone (the repair
after a registration that failed once the data was committed), without reading the archive.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from datalake_assets.catalog.catalog_interface import (
    CONCURRENT_CALLS,
    Catalog,
    Column,
    PartitionSpec,
    normalize_location,
)
from datalake_assets.catalog.register import register_sync
from datalake_assets.lake import storage
from datalake_assets.lake.formats import SourceTables, table_hour_files
from datalake_assets.lake.records import read_schema_record
from datalake_assets.settings.formats_section import FormatConfig
from datalake_assets.spec import layout
from datalake_assets.spec.naming import catalog_table_name
from datalake_assets.spec.types import BIGINT, BOOLEAN, DOUBLE, STRING, TIMESTAMP


@dataclass(frozen=True)
class CatalogSource:
    """Where a source's tables are, in the lake and in the catalog."""

    lake_root: str
    source_dir: str
    date_layout: str
    database: str
    table_prefix: str


@dataclass(frozen=True)
class LakePartition:
    """One table-hour as its files are."""

    table: str
    hour: layout.ArchiveHour
    location: str  # the partition folder
    columns: tuple[Column, ...]  # as the files were written (the first file's schema)


def _type_name(t: pa.DataType) -> str:
    if pa.types.is_timestamp(t):
        return TIMESTAMP
    return {pa.int64(): BIGINT, pa.float64(): DOUBLE, pa.bool_(): BOOLEAN}.get(t, STRING)


# The catalog registers the Segment layout's tables (external tables over its partition
# folders); a format whose commit is its catalog's update has none here.
_SEGMENT_LAYOUT = FormatConfig()


def lake_partitions(
    src: CatalogSource, tables: list[str], hours: list[layout.ArchiveHour]
) -> list[LakePartition]:
    """The table-hours of ``tables`` in ``hours`` that have files, with their columns."""
    out = []
    for table in tables:
        for hour in hours:
            folder = layout.table_partition_dir(
                src.lake_root, src.source_dir, table, src.date_layout, hour
            )
            files = [
                loc
                for loc, _ in table_hour_files(
                    _SEGMENT_LAYOUT,
                    src.lake_root,
                    SourceTables(src.source_dir, src.database, src.table_prefix, src.date_layout),
                    table,
                    hour,
                )
            ]
            if not files:
                continue
            fs, path = storage.resolve(files[0])
            schema = pq.read_schema(path, filesystem=fs)
            out.append(
                LakePartition(
                    table, hour, folder, tuple((f.name, _type_name(f.type)) for f in schema)
                )
            )
    return out


def quarantine_hours(
    src: CatalogSource, hours: list[layout.ArchiveHour]
) -> list[layout.ArchiveHour]:
    return [
        h
        for h in hours
        if storage.list_files(layout.quarantine_dir(src.lake_root, src.source_dir, h))
    ]


def out_of_step(
    catalog: Catalog, src: CatalogSource, parts: list[LakePartition]
) -> dict[str, list[str]]:
    """What the catalog lacks or says differently from the lake, by hour (``str(hour)``);
    an hour in step has an empty list."""
    problems: dict[str, list[str]] = {str(p.hour): [] for p in parts}
    names = {t: catalog_table_name(t, src.table_prefix) for t in {p.table for p in parts}}
    found = catalog.get_tables(src.database, sorted(set(names.values()))) if names else {}

    def one(table: str) -> list[tuple[str, str]]:
        name = f"{src.database}.{names[table]}"
        mine = [p for p in parts if p.table == table]
        info = found.get(names[table])
        if info is None:
            return [(str(p.hour), f"table {name} is not in the catalog") for p in mine]
        return _table_problems(catalog, src, names[table], info.columns, mine)

    # Tables at once, as registration does (each a round trip or two to the catalog).
    with ThreadPoolExecutor(
        min(CONCURRENT_CALLS, max(len(names), 1)), thread_name_prefix="catalog-check"
    ) as pool:
        for found_problems in pool.map(one, sorted(names)):
            for hour, text in found_problems:
                problems[hour].append(text)
    return problems


def _table_problems(
    catalog: Catalog,
    src: CatalogSource,
    table: str,
    columns: list[Column],
    mine: list[LakePartition],
) -> list[tuple[str, str]]:
    """(hour, problem) of one catalog table against its table-hours in the lake."""
    values = {
        tuple(v for _, v in layout.date_partition_values(src.date_layout, p.hour)): p for p in mine
    }
    registered = {
        s.values: s for s in catalog.list_partitions(src.database, table, only=set(values))
    }
    return [
        (str(p.hour), text)
        for vals, p in values.items()
        for text in _partition_problems(
            f"{src.database}.{table}", dict(columns), registered.get(vals), p, src.date_layout
        )
    ]


def _partition_problems(
    name: str, have: dict[str, str], spec: PartitionSpec | None, p: LakePartition, date_layout: str
) -> list[str]:
    said = []
    missing = [c for c, _ in p.columns if c not in have]
    if missing:
        said.append(f"columns {', '.join(missing)} of {name} are not in the catalog")
    where = "/".join(f"{k}={v}" for k, v in layout.date_partition_values(date_layout, p.hour))
    if spec is None:
        return [*said, f"partition {where} of {name} is not in the catalog"]
    if normalize_location(spec.location) != normalize_location(p.location):
        said.append(f"partition {where} of {name} is at {spec.location}, its files at {p.location}")
    if spec.columns:  # Glue keeps each partition's schema (Hive does not)
        typed = dict(spec.columns)
        wrong = [
            f"{c} {typed.get(c, 'absent')} (files: {t})" for c, t in p.columns if typed.get(c) != t
        ]
        if wrong:
            said.append(f"partition {where} of {name} has columns {', '.join(wrong)}")
    return said


def register_from_lake(
    catalog: Catalog,
    src: CatalogSource,
    parts: list[LakePartition],
    quarantined: list[layout.ArchiveHour],
) -> dict[str, dict]:
    """Registers the table-hours ``parts`` (and the quarantine's ``quarantined`` hours) from
    the files: each table with the columns of the lake's schema record, each partition with
    its files' columns. Idempotent, like every registration."""
    record = read_schema_record(src.lake_root, src.source_dir)
    tables = {p.table: record.get(p.table) or list(p.columns) for p in parts}
    partitions: dict[str, list[layout.ArchiveHour]] = {}
    columns: dict[str, dict[layout.ArchiveHour, tuple[Column, ...]]] = {}
    for p in parts:
        partitions.setdefault(p.table, []).append(p.hour)
        columns.setdefault(p.table, {})[p.hour] = p.columns
    return register_sync(
        catalog,
        database=src.database,
        table_prefix=src.table_prefix,
        lake_root=src.lake_root,
        source_dir=src.source_dir,
        date_layout=src.date_layout,
        tables=tables,
        partitions=partitions,
        quarantine_hours=quarantined,
        hour_columns=columns,
    )
