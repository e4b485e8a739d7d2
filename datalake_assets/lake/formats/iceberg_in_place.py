"""An Iceberg table's data files written once, in place, and a commit that only writes metadata.

**Written in place.** Stage B writes a table's hours as Parquet straight into the table's data
folder (``<location>/data/day=/hr=/part-<hour>-<run>-*.parquet``, where pyiceberg would put
them) with the table's schema as it will be after this run's commit: each field carries its
Iceberg field id (``PARQUET:field_id``, how Iceberg readers match a file's columns to the
table's), and ``day``/``hr`` are columns of the file as well as its partition, so every reader
agrees on them. ``predicted_ids`` decides those ids before anything is written: the table's
own ids for the columns it has, and for the columns this run adds (new, or replaced by a
widening) the ids Iceberg will assign them, in the order the commit adds them (ids are
handed out from the table's ``last-column-id`` upwards; a new table numbers its columns from
1 in order). The commit checks each file's ids against the schema it commits and refuses,
with nothing committed, if another writer changed the table's columns in between.

**The commit reads footers, not data.** ``data_files`` builds each file's manifest entry from
its Parquet footer (row count, column sizes, value and null counts, lower and upper bounds for
pruning), its size from stage B's manifest and its partition from the hour; one overwrite
snapshot then removes the hours' previous files and adds these (``commit_in_place``). Only a
file compaction wrote (a day's or a month's rows, ``iceberg_compact.py``) that also holds an
hour being replaced is rewritten, by pyiceberg's delete, without that hour's rows: the price
of replaying a compacted hour, as before.

A run killed before its commit leaves its files referenced by no snapshot: readers never see
them, and ``maintain`` deletes them once older than the retention (``iceberg_files.py``)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from datalake_assets.lake import storage
from datalake_assets.lake.formats.format_interface import FormatError
from datalake_assets.lake.formats.iceberg_catalog import _uri
from datalake_assets.lake.formats.iceberg_schema import (
    PARTITION_COLUMNS,
    add_columns,
    arrow_schema,
    commit_widening,
)
from datalake_assets.spec import layout

FIELD_ID = b"PARQUET:field_id"
HOURLY_SPEC = ["day", "hr"]
_FOOTER_THREADS = 8  # footers read at once (on S3 each is a ranged GET or two)


def predicted_ids(tbl, columns, widened: list[str]) -> dict[str, int]:
    """Each column's field id once this run's commit has changed the table's schema (``tbl``
    ``None``: the table does not exist yet and the commit creates it with ``columns``)."""
    names = [f.name for f in arrow_schema(columns)]
    if tbl is None:  # create_table numbers a flat schema 1, 2, ... in order
        return {n: i + 1 for i, n in enumerate(names)}
    ids = {f.name: f.field_id for f in tbl.schema().fields}
    last = tbl.metadata.last_column_id
    # the commit's order: the widened columns dropped and added again (``commit_widening``),
    # then the new columns in the run's order (``add_columns``)
    for c in [c for c in widened if c in ids] + [n for n in names if n not in ids]:
        last += 1
        ids[c] = last
    return {n: ids[n] for n in names}


def write_schema(columns, ids: dict[str, int]) -> pa.Schema:
    """The Arrow schema of the files stage B writes: the table's columns and ``day``/``hr``,
    each with its field id."""
    return pa.schema(
        [f.with_metadata({FIELD_ID: str(ids[f.name]).encode()}) for f in arrow_schema(columns)]
    )


def data_files(table_metadata, files: list[tuple[str, int, str]], table: str) -> list:
    """A data-file entry per ``(location, bytes, hour)``, from its footer alone. Each file's
    field ids must be those ``table_metadata``'s schema (the commit's) gives its columns:
    otherwise readers would read them as other columns, and nothing is committed."""
    from pyiceberg.io.pyarrow import (
        compute_statistics_plan,
        data_file_statistics_from_parquet_metadata,
        parquet_path_to_id_mapping,
    )

    schema = table_metadata.schema()
    stats_plan = compute_statistics_plan(schema, table_metadata.properties)
    id_of_path = parquet_path_to_id_mapping(schema)
    spec_id = hourly_spec_id(table_metadata)
    ids = {f.name: f.field_id for f in schema.fields}

    def one(entry: tuple[str, int, str]):
        location, size, hour = entry
        fs, path = storage.resolve(location)
        footer = pq.read_metadata(path, filesystem=fs)
        _check_ids(footer.schema.to_arrow_schema(), ids, table, location)
        stats = data_file_statistics_from_parquet_metadata(
            parquet_metadata=footer, stats_columns=stats_plan, parquet_column_mapping=id_of_path
        )
        return hour_data_file(location, size, hour, stats, spec_id)

    with ThreadPoolExecutor(_FOOTER_THREADS, thread_name_prefix="iceberg-footers") as pool:
        return list(pool.map(one, files))


def hour_data_file(location: str, size: int, hour: str, stats: Any, spec_id: int):
    """The data-file entry of a file of ``hour`` (compact): in the hourly partition of the
    spec ``spec_id``, with ``stats`` (pyiceberg's ``DataFileStatistics`` of its footer)."""
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.typedef import Record

    h = layout.ArchiveHour.parse(hour)
    return DataFile.from_args(
        content=DataFileContent.DATA,
        file_path=_uri(location),
        file_format=FileFormat.PARQUET,
        partition=Record(h.day, h.hr),
        file_size_in_bytes=size,
        sort_order_id=None,
        spec_id=spec_id,
        equality_ids=None,
        key_metadata=None,
        **stats.to_serialized_dict(),
    )


def _check_ids(written: pa.Schema, ids: dict[str, int], table: str, location: str) -> None:
    wrong = sorted(
        f.name
        for f in written
        if int((f.metadata or {}).get(FIELD_ID, b"-1")) != ids.get(f.name, -2)
    )
    if wrong:
        raise FormatError(
            f"table {table}: {location} holds the columns {', '.join(wrong)} under other "
            "field ids than the table's (another writer changed the table's schema during "
            "the sync); nothing committed: sync the hours again",
            "conflict",
        )


def hourly_spec_id(table_metadata) -> int:
    """The table's ``identity(day), identity(hr)`` spec (the default; compaction's coarse
    specs are only ever default inside its own transaction)."""
    for spec_id, spec in table_metadata.specs().items():
        if [f.name for f in spec.fields] == HOURLY_SPEC:
            return spec_id
    raise FormatError("the Iceberg table has no hourly partition spec", "internal")


def replace_in_place(
    tbl,
    columns,
    files: list,
    table: str,
    widened: list[str],
    rows_filter,
    props: dict[str, str],
) -> None:
    """A sync's commit of one table: the hours of ``rows_filter`` replaced by ``files``
    (``(location, bytes, hour)``, in place), new columns with them; a widening rewrites the
    table's rows first (``iceberg_schema.commit_widening``)."""
    if not any([f.name for f in s.fields] == list(PARTITION_COLUMNS) for s in tbl.specs().values()):
        # created by an earlier version in two commits, killed in between
        with tbl.update_spec() as spec:
            for c in PARTITION_COLUMNS:
                spec.add_identity(c)
    widened = [c for c in widened if c in tbl.schema().column_names]
    if widened:
        commit_widening(
            tbl,
            columns,
            widened,
            None,
            rows_filter,
            props,
            in_place=lambda tx: data_files(tx.table_metadata, files, table),
        )
        return
    with tbl.transaction() as tx:
        add_columns(tx, tbl, columns)
        new_files = data_files(tx.table_metadata, files, table)
        commit_in_place(tx, tbl, rows_filter, new_files, props)


def commit_in_place(tx, tbl, rows_filter, new_files: list, props: dict[str, str]) -> None:
    """In ``tx``: the hours of ``rows_filter`` replaced by ``new_files`` (entries of files
    already in place). One overwrite snapshot when the hours' rows are all in hourly files;
    with a compacted file holding some of them, pyiceberg's delete rewrites that file first."""
    old = [task.file for task in tbl.scan(row_filter=rows_filter).plan_files()]
    specs = tbl.metadata.specs()
    coarse = [f for f in old if [x.name for x in specs[f.spec_id].fields] != HOURLY_SPEC]
    if coarse:
        tx.delete(rows_filter, snapshot_properties=props)
        if new_files:
            with tx.update_snapshot(snapshot_properties=props).fast_append() as append:
                for f in new_files:
                    append.append_data_file(f)
        return
    if not old and not new_files:
        return
    with tx.update_snapshot(snapshot_properties=props).overwrite() as overwrite:
        overwrite.delete_by_predicate(rows_filter)  # prunes the manifests it reads
        for f in old:
            overwrite.delete_data_file(f)
        for f in new_files:
            overwrite.append_data_file(f)


def append_in_place(tbl, columns, files: list, table: str, props: dict[str, str]) -> None:
    """An open hour's batch (``transform/open_hour.py``): ``files`` (``(location, bytes,
    hour)``, in place) added to the table in one fast append, new columns with them; no file
    replaced and no column widened (a batch that widens runs as its hours' sync)."""
    if not files:
        return
    with tbl.transaction() as tx:
        add_columns(tx, tbl, columns)
        new_files = data_files(tx.table_metadata, files, table)
        with tx.update_snapshot(snapshot_properties=props).fast_append() as append:
            for f in new_files:
                append.append_data_file(f)
