"""A Segment-layout lake turned into Iceberg tables without copying its data (``datalake convert
--to iceberg``).

Each table of the source's schema record, and its quarantine, becomes the Iceberg table the
lake's Iceberg format expects (``IcebergFormat.identifier``, ``table_location``, the schema and
hourly spec of ``new_table_schema``), in **one commit a table**: every hour's Parquet files are
registered where they are (``data/<source>/segment_type=<t>/day=/hr=/``, ``quarantine/<source>/
day=/hr=/``), each with its metrics from its footer and its partition (``day``, ``hr``) from its
folder. Hours the table already has are skipped: a second run commits nothing. It runs under the
source's lock (``lake/lock.py``), after rolling an unfinished commit forward.

The Segment files carry no Parquet field ids and no ``day``/``hr`` columns: the table's name
mapping (``schema.name-mapping.default``) maps their columns by name, and readers take ``day`` and
``hr`` from the partition values of the metadata. A reader that does neither reads them wrong, so
``rewrite=True`` writes each hour again as a sync would (the table's field ids, ``day``/``hr`` in
the file, under the table's own data folder, ``iceberg_in_place.py``) instead; an hour whose file
holds a column under another type than the table's (a Segment lake keeps the files of before a
widening) is always rewritten, its values cast by the lake's rules (``cast_array``).
docs/guides/iceberg.md, "Converting a Segment-layout lake", says which readers need which."""

from __future__ import annotations

import re
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from datalake_assets.lake import commit, storage
from datalake_assets.lake.formats.format_interface import FormatError, SourceTables
from datalake_assets.lake.formats.iceberg import QUARANTINE_COLUMNS, RUN_PROPERTY, IcebergFormat
from datalake_assets.lake.formats.iceberg_catalog import _uri
from datalake_assets.lake.formats.iceberg_in_place import (
    data_files,
    hour_data_file,
    hourly_spec_id,
    predicted_ids,
    write_schema,
)
from datalake_assets.lake.formats.iceberg_schema import (
    PARTITION_COLUMNS,
    add_columns,
    arrow_schema,
    new_table_schema,
)
from datalake_assets.lake.lock import SourceLock
from datalake_assets.lake.records import read_schema_record
from datalake_assets.spec import layout
from datalake_assets.spec.columnar import cast_array
from datalake_assets.spec.naming import QUARANTINE

NAME_MAPPING = "schema.name-mapping.default"
CONVERTED_PROPERTY = "datalake.converted-from"


@dataclass
class TableConversion:
    """One table's conversion: the hours, files, rows and bytes its commit registered."""

    table: str
    hours: int = 0  # hours committed by this run
    files: int = 0
    rows: int = 0
    bytes: int = 0
    skipped_hours: int = 0  # already in the table
    rewritten_hours: int = 0  # written again (``rewrite``, or a column of another type)


@dataclass
class ConvertReport:
    source: str
    run_id: str
    rewrite: bool
    tables: list[TableConversion] = field(default_factory=list)
    seconds: float = 0.0

    def totals(self) -> dict[str, int]:
        keys = ("hours", "files", "rows", "bytes", "skipped_hours", "rewritten_hours")
        return {k: sum(getattr(t, k) for t in self.tables) for k in keys}

    def to_json(self) -> dict:
        return {**asdict(self), "totals": self.totals()}


_DAY = re.compile(r"^day=(\d{4}-\d{2}-\d{2})$")
_HR = re.compile(r"^hr=(\d{2})$")


def segment_hours(root: str) -> dict[str, list[tuple[str, int]]]:
    """``{compact hour: [(location, size)]}`` of a ``day=/hr=`` tree's Parquet files (anything
    else, such as a hidden file or a swap's ``hr=10.old-<pid>`` folder, is skipped)."""
    out: dict[str, list[tuple[str, int]]] = defaultdict(list)
    prefix = root.rstrip("/") + "/"
    for loc, size in storage.list_files(root, recursive=True):
        parts = loc[len(prefix) :].split("/")
        if len(parts) != 3 or not loc.endswith(".parquet") or parts[2].startswith((".", "_")):
            continue
        day, hr = _DAY.match(parts[0]), _HR.match(parts[1])
        if day and hr:
            out[layout.ArchiveHour.parse(f"{day.group(1)}T{hr.group(1)}").compact].append(
                (loc, size)
            )
    return {h: sorted(files) for h, files in sorted(out.items())}


def convert_source(
    lake_root: str,
    format_config: Any,  # settings.formats_section.FormatConfig (its catalog settings)
    src: SourceTables,
    owner: str,
    *,
    rewrite: bool = False,
    lock_wait_s: float = 600.0,
) -> ConvertReport:
    """Every table of the source's schema record and its quarantine as an Iceberg table, one
    commit a table, under the source's lock (the module docstring says how)."""
    if src.date_layout != layout.DEFAULT_DATE_LAYOUT:
        raise FormatError(
            f"source {src.source_dir}: only the {layout.DEFAULT_DATE_LAYOUT!r} date layout "
            f"(day=/hr= folders) converts to Iceberg in place, not {src.date_layout!r}: "
            'replay its hours with table_format = "iceberg" instead',
            "invalid_settings",
        )
    t0 = time.monotonic()
    run_id = "convert-" + datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    fmt = IcebergFormat(format_config, lake_root)
    report = ConvertReport(src.source_dir, run_id, rewrite)
    record = read_schema_record(lake_root, src.source_dir)
    with SourceLock(lake_root, src.source_dir, owner, wait_s=lock_wait_s):
        commit.recover(lake_root, src.source_dir, fmt.apply)
        for table in [*sorted(record), QUARANTINE]:
            if table == QUARANTINE:
                columns = QUARANTINE_COLUMNS
                root = layout.quarantine_root(lake_root, src.source_dir)
            else:
                columns = tuple(tuple(c) for c in record[table])
                root = layout.table_root(lake_root, src.source_dir, table)
            report.tables.append(
                convert_table(fmt, src, table, columns, segment_hours(root), run_id, rewrite)
            )
    report.seconds = round(time.monotonic() - t0, 3)
    return report


def convert_table(
    fmt: IcebergFormat,
    src: SourceTables,
    table: str,
    columns: tuple,
    hours: dict[str, list[tuple[str, int]]],
    run_id: str,
    rewrite: bool,
) -> TableConversion:
    """One commit: the table created (or loaded) with the hours it lacks registered."""
    from pyiceberg.table.name_mapping import create_mapping_from_schema

    out = TableConversion(table)
    tbl = fmt.load(src, table)
    have = present_hours(tbl) if tbl is not None else set()
    todo = {h: files for h, files in hours.items() if h not in have}
    out.skipped_hours = len(hours) - len(todo)
    if not todo:
        return out
    props = {RUN_PROPERTY: run_id, CONVERTED_PROPERTY: "segment"}
    if tbl is None:
        cat = fmt.catalog()
        cat.create_namespace_if_not_exists(src.database)
        schema, spec = new_table_schema(columns)
        tx = cat.create_table_transaction(
            fmt.identifier(src, table),
            schema=schema,
            partition_spec=spec,
            location=_uri(fmt.location(src, table)),
            properties={"format-version": "2"},
        )
        ids = predicted_ids(None, columns, [])
    else:
        tx = tbl.transaction()
        ids = predicted_ids(tbl, columns, [])
        add_columns(tx, tbl, columns)
    mapping = create_mapping_from_schema(tx.table_metadata.schema())
    tx.set_properties({NAME_MAPPING: mapping.model_dump_json()})
    metadata = tx.table_metadata
    expected = arrow_schema(columns)
    new_files = []
    for hour, files in todo.items():
        footers = [_footer(loc) for loc, _ in files]
        if rewrite or any(_mistyped(f.schema.to_arrow_schema(), expected) for f in footers):
            loc, size = rewrite_hour(fmt, src, table, columns, ids, hour, files, run_id)
            entries = data_files(metadata, [(loc, size, hour)], table)
            out.rewritten_hours += 1
        else:
            entries = [
                registered_file(metadata, loc, size, footer, hour)
                for (loc, size), footer in zip(files, footers, strict=True)
            ]
        new_files += entries
        out.hours += 1
        out.files += len(entries)
        out.rows += sum(e.record_count for e in entries)
        out.bytes += sum(e.file_size_in_bytes for e in entries)
    with tx.update_snapshot(snapshot_properties=props).fast_append() as append:
        for f in new_files:
            append.append_data_file(f)
    tx.commit_transaction()
    return out


def present_hours(tbl) -> set[str]:
    """The compact hours the table has rows of: its hourly files' partitions, and the hours of
    the rows in files compaction coarsened (``day``/``hr`` read from those alone)."""
    if tbl.current_snapshot() is None:
        return set()
    specs = tbl.metadata.specs()
    hours, coarse = set(), False
    for task in tbl.scan().plan_files():
        f = task.file
        if [x.name for x in specs[f.spec_id].fields] == list(PARTITION_COLUMNS):
            hours.add(f"{f.partition[0].replace('-', '')}{f.partition[1]}")
        else:
            coarse = True
    if coarse:
        t = tbl.scan(selected_fields=PARTITION_COLUMNS).to_arrow()
        hours |= {
            f"{d.replace('-', '')}{h}"
            for d, h in zip(*(t[c].to_pylist() for c in PARTITION_COLUMNS))
        }
    return hours


def _footer(location: str):
    fs, path = storage.resolve(location)
    return pq.read_metadata(path, filesystem=fs)


def _mistyped(written: pa.Schema, expected: pa.Schema) -> bool:
    """Whether a file holds a column under another type than the table's (read as the table's
    type it would fail or be misread: Iceberg promotes only int/float widths)."""
    return any(f.name in expected.names and expected.field(f.name).type != f.type for f in written)


def registered_file(table_metadata, location: str, size: int, footer, hour: str):
    """A data-file entry of a Segment file left where it is: metrics from its footer (its
    columns matched to the table's by name), its partition from its folder's hour."""
    from pyiceberg.io.pyarrow import (
        compute_statistics_plan,
        data_file_statistics_from_parquet_metadata,
        parquet_path_to_id_mapping,
    )

    schema = table_metadata.schema()
    stats = data_file_statistics_from_parquet_metadata(
        parquet_metadata=footer,
        stats_columns=compute_statistics_plan(schema, table_metadata.properties),
        parquet_column_mapping=parquet_path_to_id_mapping(schema),
    )
    return hour_data_file(location, size, hour, stats, hourly_spec_id(table_metadata))


def rewrite_hour(
    fmt: IcebergFormat,
    src: SourceTables,
    table: str,
    columns: tuple,
    ids: dict[str, int],
    hour: str,
    files: list[tuple[str, int]],
    run_id: str,
) -> tuple[str, int]:
    """The hour's files read and written again as one file of the table's data folder, as a
    sync of the hour writes it: the table's field ids, ``day``/``hr`` columns, each column of
    another type cast by the lake's rules. Returns ``(location, size)``."""
    types = dict(columns)
    target = write_schema(columns, ids)
    h = layout.ArchiveHour.parse(hour)
    parts = []
    for loc, _ in files:
        fs, path = storage.resolve(loc)
        t = pq.read_table(path, filesystem=fs)
        arrays = []
        for f in target:
            if f.name in PARTITION_COLUMNS:
                value = h.day if f.name == "day" else h.hr
                arrays.append(pa.array([value] * t.num_rows, pa.string()))
            elif f.name not in t.column_names:
                arrays.append(pa.nulls(t.num_rows, f.type))
            else:
                col = t[f.name].combine_chunks()
                if col.type != f.type:
                    col, _ = cast_array(col, types[f.name])
                arrays.append(col.cast(f.type))
        parts.append(pa.Table.from_arrays(arrays, schema=target))
    rows = pa.concat_tables(parts) if parts else target.empty_table()
    folder = fmt.hour_location(src, table, hour)
    location = layout.join(folder, layout.data_file_name(h, run_id, 0, 0))
    fs, path = storage.resolve(location)
    storage.create_dir(folder)
    pq.write_table(rows, path, filesystem=fs, compression="snappy")
    return location, fs.get_file_info(path).size


def report_lines(source_id: str, report: ConvertReport) -> list[str]:
    """What ``datalake convert`` prints: a line per table, then the source's."""
    out = [
        f"{source_id}.{t.table}: {t.hours} hours registered ({t.skipped_hours} already in the "
        f"table, {t.rewritten_hours} rewritten), {t.files} files, {t.rows} rows, "
        f"{t.bytes} bytes"
        for t in report.tables
    ]
    tot = report.totals()
    out.append(
        f"{source_id}: {len(report.tables)} tables, {tot['hours']} hours registered, "
        f"{tot['files']} files, {tot['rows']} rows ({tot['skipped_hours']} hours already "
        f"in Iceberg, {tot['rewritten_hours']} rewritten); {report.seconds:.1f} s"
    )
    return out
