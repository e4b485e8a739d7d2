"""The models' tables on an Iceberg lake: Iceberg tables in the lake's Iceberg catalog.

A model's table is ``<database>.<model>`` in the lake's Iceberg catalog (beside the event
tables, as ``SELECT * FROM demo.sessions`` expects), its files under
``<lake>/models/<slug>/<model>/``. A daily model is partitioned by ``identity(<day column>)``;
a build is **one commit** (one transaction: new columns, then an overwrite whose filter is
exactly the built days), so a reader sees every built day new or none of them; a whole-table
model's build is one overwrite of everything. A column whose type changed is dropped and
added again under its name (a new field id: no old file is ever read with the new type),
which a whole table's overwrite makes consistent; a daily build that changes a column's type
is refused (its other days would keep the old type): build every day again.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from datalake_assets.lake.formats.format_interface import (
    CommittedTable,
    FormatError,
    ModelRows,
    SourceTables,
    TableVersion,
)

RUN_PROPERTY = "datalake.run-id"


def _new_table(cat: Any, ident: tuple[str, str], out: ModelRows, schema: pa.Schema):
    """Created with its partition spec in the same commit (no table without it)."""
    from pyiceberg.catalog import Catalog
    from pyiceberg.exceptions import TableAlreadyExistsError
    from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, PartitionField, PartitionSpec
    from pyiceberg.schema import assign_fresh_schema_ids
    from pyiceberg.transforms import IdentityTransform

    iceberg_schema = assign_fresh_schema_ids(Catalog._convert_schema_if_needed(schema))
    spec = UNPARTITIONED_PARTITION_SPEC
    if out.day_column:
        spec = PartitionSpec(
            PartitionField(
                source_id=iceberg_schema.find_field(out.day_column).field_id,
                field_id=1000,
                transform=IdentityTransform(),
                name=out.day_column,
            )
        )
    cat.create_namespace_if_not_exists(ident[0])
    location = out.location if "://" in out.location else f"file://{out.location}"
    try:
        return cat.create_table(
            ident,
            schema=iceberg_schema,
            partition_spec=spec,
            location=location,
            properties={"format-version": "2"},
        )
    except TableAlreadyExistsError:  # another build created it meanwhile
        return cat.load_table(ident)


def _changed_types(tbl: Any, schema: pa.Schema) -> list[str]:
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    current = schema_to_pyarrow(tbl.schema(), include_field_ids=False)
    return [
        f.name
        for f in schema
        if f.name in current.names and not _same_type(current.field(f.name).type, f.type)
    ]


def _same_type(a: pa.DataType, b: pa.DataType) -> bool:
    if pa.types.is_timestamp(a) and pa.types.is_timestamp(b):
        return (a.tz is None) == (b.tz is None)
    if pa.types.is_string(a) or pa.types.is_large_string(a):
        return pa.types.is_string(b) or pa.types.is_large_string(b)
    return a == b or (pa.types.is_int64(a) and pa.types.is_int32(b))


def publish(fmt: Any, src: SourceTables, out: ModelRows, run_id: str) -> CommittedTable:
    """``fmt``: the lake's ``IcebergFormat`` (its catalog)."""
    from pyiceberg.exceptions import NoSuchTableError
    from pyiceberg.expressions import AlwaysTrue, And, GreaterThanOrEqual, LessThanOrEqual

    cat = fmt.catalog()
    ident = (src.database, out.model)
    rows = out.rows  # already in the lake's types (models/publish.lake_rows)
    try:
        tbl = cat.load_table(ident)
    except NoSuchTableError:
        tbl = _new_table(cat, ident, out, rows.schema)
    changed = _changed_types(tbl, rows.schema)
    if changed and out.days is not None:
        raise FormatError(
            f"model {out.model}: the type of {', '.join(changed)} changed; a build of some "
            "days cannot change a column of the days it keeps: build every day of the model "
            "again (a backfill of all its partitions)",
            "schema",
        )
    where = AlwaysTrue()
    if out.day_column and out.days is not None:
        where = And(
            GreaterThanOrEqual(out.day_column, out.days[0]),
            LessThanOrEqual(out.day_column, out.days[1]),
        )
    with tbl.transaction() as tx:
        if changed:  # a whole rebuild: each such column again, under a new field id
            with tx.update_schema(allow_incompatible_changes=True) as update:
                for name in changed:
                    update.delete_column(name)
        with tx.update_schema() as update:
            update.union_by_name(rows.schema)
        _overwrite(tx, tbl, rows, where, run_id)
    tbl = cat.load_table(ident)
    snapshot = tbl.current_snapshot()
    return CommittedTable(
        out.model,
        f"{ident[0]}.{ident[1]}",
        out.location,
        snapshot.snapshot_id if snapshot else None,
    )


def _overwrite(tx: Any, tbl: Any, rows: pa.Table, where: Any, run_id: str) -> None:
    """ONE overwrite snapshot: the files of the built days (a day's rows are in its own
    partition's files, so a file matching the filter holds only replaced rows) out, the new
    files in. pyiceberg's ``Transaction.overwrite`` would commit a delete and an append
    snapshot, a reader of snapshots seeing the days empty in between."""
    import itertools
    import uuid

    from pyiceberg.io.pyarrow import _dataframe_to_data_files  # what Transaction.append uses

    old = [task.file for task in tbl.scan(row_filter=where).plan_files()]
    props = {RUN_PROPERTY: run_id}
    with tx.update_snapshot(snapshot_properties=props).overwrite() as ow:
        for f in old:
            ow.delete_data_file(f)
        if rows.num_rows:
            for f in _dataframe_to_data_files(
                tx.table_metadata, rows, tbl.io, write_uuid=uuid.uuid4(), counter=itertools.count()
            ):
                ow.append_data_file(f)


def current_version(fmt: Any, ident: tuple[str, str]) -> TableVersion | None:
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    try:
        tbl = fmt.catalog().load_table(ident)
    except (NoSuchTableError, NoSuchNamespaceError):
        return None
    if tbl.current_snapshot() is None:
        return None
    return TableVersion("iceberg", tbl.metadata_location)
