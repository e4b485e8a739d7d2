"""The rows a sync (or an erasure) staged for one Iceberg table, read as the table's schema:
what a commit (``iceberg.py``'s ``apply``) writes in place of the synced hours' rows."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from datalake_assets.lake import storage
from datalake_assets.spec import layout


def _read_staged(staged_root: str, schema: pa.Schema) -> pa.Table:
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
