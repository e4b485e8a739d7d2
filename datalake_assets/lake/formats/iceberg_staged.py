"""The rows a sync (or an erasure) staged for one Iceberg table, read as the table's schema,
and their commit (``iceberg.py``'s ``apply``): written by pyiceberg in place of the synced hours'
rows, or added to them by an open hour's batch. The quarantine and an erasure's rewrite come
this way; a sync's tables, as files already in place (``iceberg_in_place.py``)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from datalake_assets.lake import storage
from datalake_assets.lake.formats.iceberg_schema import add_columns, commit_widening
from datalake_assets.spec import layout


def append_staged(tbl, columns, staged: pa.Table, props: dict[str, str]) -> None:
    """An open hour's batch: ``staged`` added to the table, nothing replaced."""
    if staged.num_rows:
        with tbl.transaction() as tx:
            add_columns(tx, tbl, columns)
            tx.append(staged, snapshot_properties=props)


def replace_staged(
    tbl, columns, staged: pa.Table, widened: list[str], rows_filter, props: dict[str, str]
) -> None:
    """The hours of ``rows_filter`` replaced by ``staged``: one append, overwrite or delete
    snapshot (none for a table the hours leave untouched); a widening rewrites first."""
    widened = [c for c in widened if c in tbl.schema().column_names]
    if widened:
        commit_widening(tbl, columns, widened, staged, rows_filter, props)
        return
    has_rows = any(True for _ in tbl.scan(row_filter=rows_filter).plan_files())
    if staged.num_rows == 0 and not has_rows:
        return  # an untouched table: no snapshot
    with tbl.transaction() as tx:
        add_columns(tx, tbl, columns)
        if staged.num_rows and not has_rows:
            tx.append(staged, snapshot_properties=props)
        elif staged.num_rows:
            tx.overwrite(staged, overwrite_filter=rows_filter, snapshot_properties=props)
        else:
            tx.delete(rows_filter, snapshot_properties=props)


def read_staged(staged_root: str, schema: pa.Schema) -> pa.Table:
    """The staged files of a table (every hour), with ``day`` and ``hr`` from each file's
    hour, cast to ``schema``."""
    parts = []
    for loc, _ in storage.list_files(staged_root, recursive=True):
        hour = layout.hour_of_data_file(loc)
        if hour is None or not loc.endswith(".parquet"):
            continue
        h = layout.ArchiveHour.parse(hour)
        fs, path = storage.resolve(loc)
        t = pq.read_table(path, filesystem=fs)
        if "day" in t.column_names and "hr" in t.column_names:
            # a table's own file staged by an erasure may be a compacted one holding other
            # hours too: only the hour's rows replace the hour (the rest stay in the table)
            t = t.filter(pc.and_(pc.equal(t["day"], h.day), pc.equal(t["hr"], h.hr)))
        n = t.num_rows
        # an erasure stages a table's own files too: their day/hr, and columns added after
        # them (absent: null), come from the hour and the schema
        values = {
            "day": pa.array([h.day] * n, pa.string()),
            "hr": pa.array([h.hr] * n, pa.string()),
        }
        parts.append(
            pa.Table.from_arrays(
                [
                    values[f.name]
                    if f.name in values
                    else t[f.name].cast(f.type)
                    if f.name in t.column_names
                    else pa.nulls(n, f.type)
                    for f in schema
                ],
                schema=schema,
            )
        )
    return pa.concat_tables(parts) if parts else schema.empty_table()
