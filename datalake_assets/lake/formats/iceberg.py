"""Apache Iceberg tables (``table_format = "iceberg"``), through pyiceberg.

Each event table of a source is an Iceberg table ``<database>.<prefix_><table>`` in an
Iceberg catalog (a SQL catalog in SQLite under the lake by default; AWS Glue), located at
``<lake>/iceberg/<source>/<table>``, with the Segment layout's columns plus ``day`` and ``hr``
(strings, as in the Segment layout's folders), partitioned by ``identity(day), identity(hr)``
so ``WHERE day = ... AND hr = ...`` prunes in every engine.

**A sync's commit of a table is one Iceberg transaction** (``apply``) that writes metadata
only: stage B wrote the hours' data files in the table's data folder with the table's field ids
(``write_targets``, ``iceberg_in_place.py``), and the commit adds them by their footers in one
overwrite snapshot that removes the hours' previous files (a replay replaces, never adds); new
columns are added, and the snapshot carries the run id (``datalake.run-id``), which makes a
re-apply after a kill a no-op. A run killed before its commit leaves files no snapshot
references: readers never see them and ``maintain`` deletes them once older than the
retention. The quarantine and an erasure's hours are staged rows, written by pyiceberg.

**Type widening** (``bigint -> double -> string``, ``boolean``/``timestamp -> string``): Iceberg
only promotes ``int -> long`` and ``float -> double`` in place, and a column whose Parquet type
differs from the table's cannot be read. So the widened column is replaced, in the same
transaction as the hours' commit: dropped and added again under its name (a new field id, at
its old position), and every row the table keeps is rewritten with its old values cast by the
lake's own rules (``spec/columnar.cast_array``, the rules a sync applies to new values). Readers
see the table before (old type, every value) or after (new type, every value). The cost is a
rewrite of the table, paid once per column and widening (a column widens at most twice); the
sync's report lists the widening (``widened_columns``).

Beside this module: ``iceberg_catalog.py`` (which catalog, the FileIO's URIs),
``iceberg_in_place.py`` (the files stage B writes in place and the commit of their footers),
``pyiceberg_memo.py`` (a transaction's metadata computed once per change),
``pyiceberg_bounds.py`` (no timestamp bounds for a file with one beyond the year 9999),
``pyiceberg_manifest_eval.py`` (no manifest evaluator shared between an overwrite's threads),
``iceberg_staged.py`` (the staged rows a commit writes), ``iceberg_schema.py`` (columns and
widening), ``iceberg_hours.py`` (the filter of a commit's hours, the files that hold an
hour), ``iceberg_files.py`` (expiry and orphan files), ``iceberg_compact.py`` (compaction),
``iceberg_read.py`` (reading without Spark), ``iceberg_models.py`` (the models' tables).
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa

from datalake_assets.lake.formats import (
    iceberg_hours,
    iceberg_models,
    pyiceberg_bounds,
    pyiceberg_manifest_eval,
    pyiceberg_memo,
    segment_models,
)
from datalake_assets.lake.formats.format_interface import (
    CommittedTable,
    ModelRows,
    SourceTables,
    TableCompaction,
    TableFormat,
    TablesToCommit,
    TableVersion,
    TableWrite,
)
from datalake_assets.lake.formats.iceberg_catalog import _location, _uri, open_catalog
from datalake_assets.lake.formats.iceberg_hours import hours_filter
from datalake_assets.lake.formats.iceberg_in_place import (
    append_in_place,
    predicted_ids,
    replace_in_place,
    write_schema,
)
from datalake_assets.lake.formats.iceberg_schema import (
    arrow_schema,
    lake_columns,
    new_table_schema,
)
from datalake_assets.lake.formats.iceberg_shared import append_shared
from datalake_assets.lake.formats.iceberg_staged import append_staged, read_staged, replace_staged
from datalake_assets.lake.records import QUARANTINE_SCHEMA
from datalake_assets.spec import layout
from datalake_assets.spec.naming import QUARANTINE, catalog_table_name
from datalake_assets.spec.table_formats import ICEBERG

RUN_PROPERTY = "datalake.run-id"
BATCH_PROPERTY = "datalake.batch-id"  # an open hour's batch (transform/open_hour.py)
# the quarantine's columns (``records.QUARANTINE_SCHEMA``) as the lake's types
QUARANTINE_COLUMNS = tuple(
    (f.name, "bigint" if f.type == pa.int64() else "string") for f in QUARANTINE_SCHEMA
)


def table_location(lake_root: str, source_dir: str, table: str) -> str:
    """``<lake>/iceberg/<source>/<table>``: a source's Iceberg tables side by side."""
    return layout.join(lake_root, "iceberg", source_dir, table)


class IcebergFormat(TableFormat):
    name = ICEBERG
    registered_by_catalog = False
    keeps_versions = True
    appends = True

    def __init__(self, config: Any, lake_root: str) -> None:
        super().__init__(config, lake_root)
        self._catalog: Any = None
        self._lock = threading.Lock()
        self._create_lock = threading.Lock()
        self._loaded: dict[tuple[str, str], Any] = {}  # ``load(cached=True)``
        pyiceberg_memo.install()
        pyiceberg_bounds.install()
        pyiceberg_manifest_eval.install()

    # ------------------------------------------------------------------------- catalog

    def catalog(self):
        with self._lock:
            if self._catalog is None:
                self._catalog = open_catalog(self.config, self.lake_root)
            return self._catalog

    def identifier(self, src: SourceTables, table: str) -> tuple[str, str]:
        return (src.database, catalog_table_name(table, src.table_prefix))

    def load(self, src: SourceTables, table: str, cached: bool = False):
        """The table, or ``None`` if it does not exist yet. ``cached``: as this instance last
        loaded or committed it (a sync's phases under the source's lock, where no other
        writer commits: a stale table would fail its commit, never commit over another's)."""
        from pyiceberg.exceptions import NoSuchTableError

        ident = self.identifier(src, table)
        if cached and ident in self._loaded:
            return self._loaded[ident]
        try:
            tbl = self.catalog().load_table(ident)
        except NoSuchTableError:
            return None
        self._loaded[ident] = tbl  # a Table's commit updates it in place
        return tbl

    def _create(self, src: SourceTables, table: str, columns) -> Any:
        from pyiceberg.exceptions import TableAlreadyExistsError

        cat = self.catalog()
        with self._create_lock:  # tables commit in threads: one namespace creation at a time
            cat.create_namespace_if_not_exists(src.database)
        schema, spec = new_table_schema(columns)
        try:
            cat.create_table(
                self.identifier(src, table),
                schema=schema,
                partition_spec=spec,
                location=_uri(self.location(src, table)),
                properties={"format-version": "2"},
            )
        except TableAlreadyExistsError:  # created by a run that was killed right after
            pass
        return self.load(src, table)

    # -------------------------------------------------------------------------- commit

    def write_targets(
        self,
        src: SourceTables,
        tables: dict[str, tuple[tuple[str, str], ...]],
        widened: dict[str, tuple[str, ...]],
        hours: list[str],
    ) -> dict[str, TableWrite]:
        """Every table's hours are written in place, in the table's data folder, with the
        field ids the commit will give their columns (``iceberg_in_place.py``)."""
        out = {}
        for t, columns in tables.items():
            ids = predicted_ids(self.load(src, t), columns, list(widened.get(t, ())))
            out[t] = TableWrite(
                write_schema(columns, ids), {h: self.hour_location(src, t, h) for h in hours}
            )
        return out

    def plan(self, batch: TablesToCommit) -> tuple[list, list[dict]]:
        """One step a table: the files written in place (``batch.written``) to add by their
        footers, or staged rows to write (an erasure's, the quarantine's)."""
        src = batch.src
        staged = {t: layout.segment_type_dir(batch.staged_data_root, t) for t in batch.tables}
        tables = dict(batch.tables)
        if batch.quarantine_staged:  # the quarantine: a table of the source like the others
            staged[QUARANTINE] = batch.quarantine_staged
            tables[QUARANTINE] = QUARANTINE_COLUMNS
        steps = [
            {
                "format": ICEBERG,
                "table": t,
                "source_dir": src.source_dir,
                "database": src.database,
                "table_prefix": src.table_prefix,
                "staged": staged[t],
                "hours": list(batch.hours),
                "columns": [list(c) for c in cols],
                "widened": list(batch.widened.get(t, ())),
                "batch": batch.batch,
                **({"files": [list(f) for f in batch.written[t]]} if t in batch.written else {}),
            }
            for t, cols in sorted(tables.items())
        ]
        return [], steps

    def apply(self, step: dict, run_id: str) -> None:
        if "files" in step:
            self._apply_in_place(step, run_id)
        else:
            self._apply_staged(step, run_id)

    def _apply_in_place(self, step: dict, run_id: str) -> None:
        """The table's hours replaced by the files stage B wrote in place: metadata only
        (``iceberg_in_place.py``)."""
        src = SourceTables(step["source_dir"], step["database"], step["table_prefix"])
        table, columns = step["table"], tuple(tuple(c) for c in step["columns"])
        files = [(loc, int(size), hour) for loc, size, hour in step["files"]]
        tbl = self.load(src, table, cached=True)  # as write_targets read it
        if tbl is None:
            if not files:
                return  # nothing to replace and nothing to add
            tbl = self._create(src, table, columns)
        if applied(tbl, run_id):
            return
        props = {RUN_PROPERTY: run_id}
        if step.get("batch"):  # an open hour's batch: its files added, nothing replaced
            append_in_place(tbl, columns, files, table, {**props, BATCH_PROPERTY: step["batch"]})
            return
        replace_in_place(
            tbl, columns, files, table, step["widened"], hours_filter(step["hours"]), props
        )
        expire_batches(tbl)

    def _apply_staged(self, step: dict, run_id: str) -> None:
        """The table's hours replaced by staged rows (an erasure's, the quarantine's):
        ``iceberg_staged.py``."""
        src = SourceTables(step["source_dir"], step["database"], step["table_prefix"])
        table, columns = step["table"], tuple(tuple(c) for c in step["columns"])
        staged = read_staged(step["staged"], arrow_schema(columns))
        tbl = self.load(src, table)
        if tbl is None:
            if staged.num_rows == 0:
                return  # nothing to replace and nothing to add
            tbl = self._create(src, table, columns)
        if applied(tbl, run_id):
            return
        props = {RUN_PROPERTY: run_id}
        if step.get("batch"):  # an open hour's batch: its rows added
            append_staged(tbl, columns, staged, {**props, BATCH_PROPERTY: step["batch"]})
            return
        replace_staged(tbl, columns, staged, step["widened"], hours_filter(step["hours"]), props)
        expire_batches(tbl)

    def location(self, src: SourceTables, table: str) -> str:
        return table_location(self.lake_root, src.source_dir, table)

    def committed(self, batch: TablesToCommit) -> dict[str, CommittedTable]:
        out = {}
        for t in batch.tables:
            tbl = self.load(batch.src, t, cached=True)
            if tbl is None:
                continue
            snap = tbl.current_snapshot()
            out[t] = CommittedTable(
                t,
                ".".join(self.identifier(batch.src, t)),
                _location(tbl.location()),
                snap.snapshot_id if snap else None,
            )
        return out

    # --------------------------------------------------------------------------- reads

    def live_files(self, src: SourceTables, table: str, hour: str) -> list[tuple[str, int]]:
        return iceberg_hours.live_files(self.load(src, table), hour)

    def hour_rows(self, src: SourceTables, table: str, hour: str) -> int | None:
        return iceberg_hours.hour_rows(self.load(src, table), hour)

    def columns(self, src: SourceTables, table: str) -> list[tuple[str, str]]:
        tbl = self.load(src, table, cached=True)  # as write_targets and the commit read it
        return [] if tbl is None else lake_columns(tbl.schema())

    def stored_files(self, src: SourceTables, table: str, hour: str) -> list[tuple[str, int]]:
        return iceberg_hours.stored_files(
            self.lake_root, src, table, self.location(src, table), hour
        )

    def committed_files(
        self, src: SourceTables, table: str, hours: list[str]
    ) -> dict[str, list[tuple[str, int]]] | None:
        return iceberg_hours.committed_files(self.load(src, table), hours)

    def hour_location(self, src: SourceTables, table: str, hour: str) -> str:
        return iceberg_hours.hour_location(self.location(src, table), hour)

    def append(
        self, database: str, table: str, rows: pa.Table, partition_by: tuple[str, ...]
    ) -> bool:
        location = _uri(layout.join(self.lake_root, "iceberg", "_meta", table))
        return append_shared(
            self.catalog(), (database, table), location, rows, partition_by, self._create_lock
        )

    # -------------------------------------------------------------------- model tables

    def publish_model(self, src: SourceTables, out: ModelRows, run_id: str) -> CommittedTable:
        return iceberg_models.publish(self, src, out, run_id)

    def current_version(
        self, src: SourceTables, table: str, model_location: str = ""
    ) -> TableVersion | None:
        ident = (src.database, table) if model_location else self.identifier(src, table)
        return iceberg_models.current_version(self, ident)

    def model_files(
        self, src: SourceTables, model: str, model_location: str
    ) -> list[tuple[str, int]]:
        """Every data file under the model table's folder: current, in an older snapshot, or
        left by a killed build (``maintain`` with no retention removes all but the current)."""
        return segment_models.parquet_files(model_location)

    # --------------------------------------------------------------------- maintenance

    def maintain(
        self, src: SourceTables, tables: list[str], retention: timedelta | None = None
    ) -> dict[str, dict]:
        """Expire the snapshots older than the retention (the current one stays), then delete
        the files under each table's location that no remaining snapshot or metadata version
        references and that are older than the retention (a killed run's files, replaced
        files). ``retention=timedelta(0)``: everything but the current version (erasure,
        under the source's lock)."""
        from datalake_assets.lake.formats.iceberg_files import expire_and_remove

        keep = retention if retention is not None else timedelta(hours=self.config.retention_hours)
        cutoff = datetime.now(UTC) - keep
        out = {}
        for table in tables:
            tbl = self.load(src, table)
            if tbl is None:
                continue
            # a converted table's replaced files, where the Segment layout wrote them, too
            segment_root = layout.table_root(self.lake_root, src.source_dir, table)
            out[table] = expire_and_remove(
                tbl, lambda t=table: self.load(src, t), cutoff, also=segment_root
            )
        return out

    def compact(
        self, src: SourceTables, tables: list[str], cutoff: datetime, target_bytes: int
    ) -> list[TableCompaction]:
        """Each table's cold small files rewritten under a coarse spec, one transaction a
        table (``iceberg_compact.py`` says how and why)."""
        from datalake_assets.lake.formats.iceberg_compact import compact_table

        return [
            compact_table(lambda t=table: self.load(src, t), table, cutoff, target_bytes)
            for table in tables
        ]


def expire_batches(tbl) -> int:
    """After a commit that replaced hours of the table (a sync, the hour's close, an
    erasure): the snapshots of open hours' batches expired (metadata only; their rows are in
    the current snapshot, and their files stay until ``maintain`` removes what no snapshot
    references). Batches commit about 15 snapshots an hour per table; kept until
    ``retention_hours``, a week of them would make every load of the table, and so every
    batch, slower by the thousands of snapshots it parses. Time travel reaches the syncs'
    snapshots, not each batch's. Returns how many were expired."""
    current = tbl.current_snapshot()
    ids = [
        s.snapshot_id
        for s in tbl.snapshots()
        if s.summary is not None
        and s.summary[BATCH_PROPERTY]
        and (current is None or s.snapshot_id != current.snapshot_id)
    ]
    if ids:
        tbl.maintenance.expire_snapshots().by_ids(ids).commit()
    return len(ids)


def applied(tbl, run_id: str) -> bool:
    """Whether a snapshot of the table carries the run's id (its commit is done)."""
    return any(
        s.summary is not None and s.summary.get(RUN_PROPERTY) == run_id for s in tbl.snapshots()
    )
