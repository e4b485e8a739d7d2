"""An Iceberg table's schema: the lake's columns and types as Iceberg's, new columns, and
type widening (``iceberg.py``'s docstring says why a widening is a rewrite).

A widening, in one transaction: the widened columns are dropped and added again under their
names, at their positions (new field ids, so no file is ever read with the new type), every
row the table keeps is rewritten with its values cast by the lake's own rules
(``cast_array``), and the synced hours' rows are replaced by the staged ones."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from datalake_assets.lake.formats.format_interface import FormatError
from datalake_assets.spec.columnar import ARROW_TYPES, cast_array

PARTITION_COLUMNS = ("day", "hr")
_LAKE_TYPE = {arrow: lake for lake, arrow in ARROW_TYPES.items()}  # Arrow type -> lake type


def arrow_schema(columns: tuple[tuple[str, str], ...] | list) -> pa.Schema:
    """A table's Arrow schema: its columns (the lake's types) and the partition columns."""
    fields = [pa.field(n, ARROW_TYPES[t]) for n, t in columns if n not in PARTITION_COLUMNS]
    return pa.schema(fields + [pa.field(c, pa.string()) for c in PARTITION_COLUMNS])


def new_table_schema(columns):
    """``(schema, spec)`` of a new table: the columns of ``arrow_schema`` numbered 1, 2, ...
    in order, partitioned by ``identity(day), identity(hr)``: created in one commit, so no
    table exists without its hourly spec (a run killed in between would leave one)."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import NestedField

    fields = [
        NestedField(i + 1, f.name, iceberg_type(_LAKE_TYPE[f.type]), required=False)
        for i, f in enumerate(arrow_schema(columns))
    ]
    schema = Schema(*fields)
    spec = PartitionSpec(
        *(
            PartitionField(
                source_id=schema.find_field(c).field_id,
                field_id=1000 + i,
                transform=IdentityTransform(),
                name=c,
            )
            for i, c in enumerate(PARTITION_COLUMNS)
        )
    )
    return schema, spec


def add_columns(tx, tbl, columns) -> None:
    """Columns new in this run, appended in the run's order (never a type change here)."""
    known = set(tbl.schema().column_names)
    new = [(n, t) for n, t in columns if n not in known and n not in PARTITION_COLUMNS]
    if new:
        with tx.update_schema() as us:
            us.union_by_name(pa.schema([pa.field(n, ARROW_TYPES[t]) for n, t in new]))


def commit_widening(
    tbl,
    columns,
    widened: list[str],
    staged: pa.Table | None,
    rows_filter,
    props: dict[str, str],
    in_place: Callable[[Any], list] | None = None,
) -> None:
    """One transaction: the widened columns replaced (new field ids, same names and
    positions), every kept row rewritten with its values cast by the lake's rules, the
    synced hours' rows replaced by ``staged`` or, written in place with the new field ids,
    by the data-file entries ``in_place(tx)`` builds from their footers (not rewritten)."""
    from pyiceberg.expressions import Not

    types = dict(columns)
    kept = tbl.scan(row_filter=Not(rows_filter)).to_arrow()
    target = arrow_schema(columns)
    arrays = []
    for f in target:
        if f.name not in kept.column_names:
            arrays.append(pa.nulls(kept.num_rows, f.type))
            continue
        col = kept[f.name].combine_chunks() if kept.num_rows else pa.array([], f.type)
        if f.name in widened:
            col, misfits = cast_array(col, types[f.name])
            if misfits:  # a widening always fits (types.CASTABLE); never drop a value silently
                raise FormatError(
                    f"widening {f.name} to {types[f.name]} would lose "
                    f"{len(misfits)} values; nothing committed",
                    "internal",
                )
        arrays.append(col.cast(f.type))
    rewritten = pa.Table.from_arrays(arrays, schema=target)
    names = [n for n, _ in columns]
    with tbl.transaction() as tx:
        with tx.update_schema(allow_incompatible_changes=True) as us:
            for c in widened:
                us.delete_column(c)
        with tx.update_schema() as us:
            for c in widened:
                us.add_column(c, iceberg_type(types[c]))
            for c in widened:  # back to its position
                i = names.index(c)
                if i == 0:
                    us.move_first(c)
                else:
                    us.move_after(c, names[i - 1])
        add_columns(tx, tbl, columns)
        if staged is not None:
            rewritten = pa.concat_tables([rewritten, staged])
        tx.overwrite(rewritten, snapshot_properties=props)
        if in_place is not None:
            new_files = in_place(tx)  # entries under the schema as it is now
            with tx.update_snapshot(snapshot_properties=props).fast_append() as append:
                for f in new_files:
                    append.append_data_file(f)


def lake_columns(schema) -> list[tuple[str, str]]:
    """``[(name, lake type)]`` of an Iceberg schema's columns, the partition columns left out:
    ``iceberg_type`` read back."""
    from pyiceberg import types as it

    kinds = {
        it.LongType: "bigint",
        it.DoubleType: "double",
        it.BooleanType: "boolean",
        it.StringType: "string",
        it.TimestamptzType: "timestamp",
    }
    return [
        (f.name, kinds[type(f.field_type)])
        for f in schema.fields
        if f.name not in PARTITION_COLUMNS and type(f.field_type) in kinds
    ]


def iceberg_type(typ: str):
    """The Iceberg type of a lake type (``ARROW_TYPES``'s Arrow types, as pyiceberg maps them)."""
    from pyiceberg import types as it

    return {
        "bigint": it.LongType(),
        "double": it.DoubleType(),
        "boolean": it.BooleanType(),
        "string": it.StringType(),
        "timestamp": it.TimestamptzType(),
    }[typ]
