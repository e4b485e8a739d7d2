"""The table format seam: how a lake's tables hold their files (``spec.table_formats``).

A sync stages every table-hour as Parquet in the Segment layout (``spec/layout.py``'s staging
area) whatever the format; the format decides what *committing* those staged hours means, and
everything that reads or changes a table's files afterwards goes through it too:

* ``write_targets``: where and how stage B writes a table's hours: into the run's staging area
  (the Segment layout, moved in by the commit) or, once, where the files will live (Iceberg:
  the table's data folder, with the table's field ids), so the commit writes metadata only.
* ``plan``: the journal entries that replace the synced hours of the tables: directory swaps
  (the Segment layout, ``lake/commit.py``) or table commits (Iceberg, one transaction a
  table). ``lake/commit.py`` journals them with the run's other swaps (indexes, quarantine),
  so a kill at any point is rolled forward by the next run of the source (``recover``).
* ``apply``: one planned table commit, idempotent (recovery may apply it again).
* ``live_files``: the data files a table's hours are read from now (the checks run alone,
  erasure); ``stored_files``: every file stored for an hour, read or not (erasure's proof).
* ``location`` and ``committed``: where a table is and which version a run committed.
* ``maintain``: expire what readers can no longer see (old snapshots, orphan files).
* ``compact``: rewrite the small files of cold data into right-sized ones (``compaction.py``).
* ``publish_model``, ``current_version`` and ``model_files``: the models' tables (``models/``):
  a build's rows replace exactly the days it built (or the whole table) in one step, in the
  lake's format, and an engine reads any table's current version (``model_tables.py``).

Erasure (``privacy/rewrite.py``) stages an hour's rows without the person's exactly as a sync
stages an hour, and commits them with ``plan``/``apply``: a format has one way to replace
an hour.

Two implementations: ``segment.SegmentLayout`` (the default: Segment Data Lakes' own layout of
hive-style folders, registered as external tables by the ``[catalog]``) and
``iceberg.IcebergFormat`` (Apache Iceberg tables through pyiceberg, in a SQL or Glue catalog).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pyarrow as pa

# The quarantine (spec.naming.QUARANTINE) is one more table of each source for a format:
# Segment's layout keeps it in its own folders (``quarantine/<source>/day=/hr=``), Iceberg as a
# table like the others.

SEGMENT_COMPACTION = "not supported for the Segment layout: see docs/concepts/compaction.md"


class FormatError(RuntimeError):
    """A table format's failure, with one of the sync's error codes."""

    def __init__(self, message: str, code: str = "internal") -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class SourceTables:
    """Where one source's tables are: its lake folder and its catalog database."""

    source_dir: str
    database: str
    table_prefix: str = ""
    date_layout: str = "day_hour"  # the Segment layout's folders (``layout.DATE_LAYOUTS``)


@dataclass(frozen=True)
class TablesToCommit:
    """What a sync (or an erasure) asks the format to commit for one source."""

    src: SourceTables
    run_id: str
    staged_data_root: str  # <staging>/data: segment_type=<t>/<date partition>/part-*.parquet
    hours: tuple[str, ...]  # compact YYYYMMDDHH: the hours replaced in every table below
    tables: dict[str, tuple[tuple[str, str], ...]]  # every table touched -> columns, types
    # table -> columns whose type widened in this run (Iceberg rewrites the table's old files)
    widened: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # the staged quarantine (``<staging>/quarantine``: day=/hr= folders): its ``hours`` are
    # replaced too; "" leaves the quarantine as it is (an erasure that did not touch it)
    quarantine_staged: str = ""
    # table -> the data files stage B wrote in place (``write_targets``): (location, bytes,
    # hour); a table of ``tables`` missing here had no rows in the run
    written: dict[str, tuple[tuple[str, int, str], ...]] = field(default_factory=dict)
    # an open hour's batch id (``transform/open_hour.py``): the rows are *added* to ``hours``
    # (formats with ``appends``), nothing replaced; "" replaces the hours
    batch: str = ""


@dataclass(frozen=True)
class TableWrite:
    """How stage B writes one table's hours when the format wants its files in place: the
    files' Arrow schema (with the format's field ids in each field's ``PARQUET:field_id``
    metadata; ``day``/``hr`` fields, if any, are filled from the hour) and each hour's
    folder. Picklable: it travels to Spark's Python workers in ``StageBConfig``."""

    schema: pa.Schema
    directories: dict[str, str]  # compact hour -> folder of its files


@dataclass(frozen=True)
class CommittedTable:
    """A table after a commit: where readers find it (``dagster/uri``) and its version."""

    table: str
    name: str  # database.table in the format's catalog ("" for the Segment layout)
    location: str
    snapshot_id: int | None = None  # Iceberg: the table's current snapshot


@dataclass
class TableCompaction:
    """What ``TableFormat.compact`` did to one table (``compaction.py`` reports it)."""

    table: str
    files_before: int = 0  # the files rewritten ...
    files_after: int = 0  # ... and the files written in their place
    bytes_before: int = 0
    bytes_after: int = 0
    rows: int = 0
    partitions: list[str] = field(default_factory=list)  # coarse partitions written (day, month)
    seconds: float = 0.0
    snapshot_id: int | None = None  # Iceberg: the snapshot of the compaction's commit
    attempts: int = 0  # commits tried (another writer's commit in between: re-planned)


@dataclass(frozen=True)
class ModelRows:
    """A model build's rows, to publish as the model's table (``TableFormat.publish_model``).

    ``day_column``: a daily model's partition column (its values ``YYYY-MM-DD`` strings); the
    build replaces exactly the days ``days`` (first, last, inclusive), whether or not rows
    remain for each. ``""``: a whole table, replaced as a whole."""

    model: str
    location: str  # the model table's folder: <lake>/models/<slug>/<model>
    rows: pa.Table  # in the lake's five types (``models/publish.lake_rows`` casts them)
    day_column: str = ""
    days: tuple[str, str] | None = None


@dataclass(frozen=True)
class TableVersion:
    """What a reader reads for a table now, engine-neutral: ``parquet`` files under a folder
    (at any depth, hive-style ``key=value`` folders, columns matched by name), or an
    ``iceberg`` table's current metadata file (exactly its current snapshot's files)."""

    kind: str  # "parquet" | "iceberg"
    location: str


class CompactionUnsupported(FormatError):
    """The format cannot compact (the message says why and where it is documented)."""

    def __init__(self, message: str = SEGMENT_COMPACTION) -> None:
        super().__init__(message, "unsupported")


class TableFormat(ABC):
    """One lake's table format (see the module's docstring)."""

    name: str
    # whether the ``[catalog]`` registers the tables and their partitions after a commit
    # (the Segment layout's external tables); Iceberg's commit is its catalog's update
    registered_by_catalog: bool = True
    # whether replaced versions stay stored until maintenance removes them (Iceberg's
    # snapshots); the Segment layout deletes a replaced hour as it commits
    keeps_versions: bool = False
    # whether a commit can add rows to an hour (``TablesToCommit.batch``: an open hour's
    # batches); the Segment layout's hour is a folder swapped whole
    appends: bool = False

    def __init__(self, config: Any, lake_root: str) -> None:
        # config: the lake's ``settings.formats_section.FormatConfig`` (a layer above)
        self.config = config
        self.lake_root = lake_root

    def write_targets(
        self,
        src: SourceTables,
        tables: dict[str, tuple[tuple[str, str], ...]],
        widened: dict[str, tuple[str, ...]],
        hours: list[str],
    ) -> dict[str, TableWrite]:
        """Per table, where stage B writes the hours' files in place (``TableWrite``); a
        table missing here is written into the run's staging area (the default)."""
        return {}

    @abstractmethod
    def plan(self, batch: TablesToCommit) -> tuple[list[Any], list[dict]]:
        """``(swaps, steps)``: directory swaps (``commit.Swap``) and table commits (JSON-able
        dicts for ``apply``) that replace ``batch.hours`` of ``batch.tables``."""

    def apply(self, step: dict, run_id: str) -> None:
        """Apply one planned table commit; a no-op if ``run_id`` already applied it."""
        raise FormatError(f"the {self.name} format plans no table commits", "internal")

    @abstractmethod
    def location(self, src: SourceTables, table: str) -> str:
        """Where the table's files are (a folder of the lake): ``dagster/uri``."""

    @abstractmethod
    def hour_location(self, src: SourceTables, table: str, hour: str) -> str:
        """The folder of the table's files of ``hour`` (compact): a materialization's path."""

    @abstractmethod
    def committed(self, batch: TablesToCommit) -> dict[str, CommittedTable]:
        """Each table of ``batch`` as readers now see it."""

    @abstractmethod
    def live_files(self, src: SourceTables, table: str, hour: str) -> list[tuple[str, int]]:
        """``[(location, size)]``: the data files readers read for ``table``'s rows of
        ``hour`` (compact ``YYYYMMDDHH``)."""

    def committed_files(
        self, src: SourceTables, table: str, hours: list[str]
    ) -> dict[str, list[tuple[str, int]]] | None:
        """``{hour: [(location, size)]}``: the files readers read for ``hours`` (compact) after
        a commit, when they are not the staged files themselves (``None``: they are, as
        the Segment layout moves them in)."""
        return None

    def columns(self, src: SourceTables, table: str) -> list[tuple[str, str]]:
        """``[(name, lake type)]`` of the table as the format holds it (none: the table does
        not exist, or the format keeps no schema of its own and the lake's record is the
        truth, as in the Segment layout)."""
        return []

    def hour_rows(self, src: SourceTables, table: str, hour: str) -> int | None:
        """The rows readers read for ``table``'s ``hour`` (compact), from the format's
        metadata; ``None`` when it cannot say without reading the data. What an open hour's
        batches have added so far (``orchestration/freshness/``): formats that append give it."""
        return None

    def append(
        self, database: str, table: str, rows: pa.Table, partition_by: tuple[str, ...]
    ) -> bool:
        """Append ``rows`` to an append-only table of the lake's own (the sync reports), if
        the format holds such tables; ``False``: it does not (the Segment layout's are files
        registered by the ``[catalog]``)."""
        return False

    def stored_files(self, src: SourceTables, table: str, hour: str) -> list[tuple[str, int]]:
        """Every file stored for ``table``'s ``hour``, read by readers or not (an erasure's
        proof reads them all): the live ones, unless the format keeps older versions."""
        return self.live_files(src, table, hour)

    def maintain(
        self, src: SourceTables, tables: list[str], retention: timedelta | None = None
    ) -> dict[str, dict]:
        """Expire what no reader needs any more (older than ``retention``, default the
        settings'); per table, what was removed."""
        return {}

    def compact(
        self, src: SourceTables, tables: list[str], cutoff: datetime, target_bytes: int
    ) -> list[TableCompaction]:
        """Rewrite the small files of the tables' hours that ended before ``cutoff`` into files
        of about ``target_bytes``, one atomic commit a table; ``CompactionUnsupported`` if the
        format cannot (``compaction.py`` calls it under the source's lock)."""
        raise CompactionUnsupported(f"compaction is not supported by the {self.name} format")

    # ------------------------------------------------------------------ model tables

    @abstractmethod
    def publish_model(self, src: SourceTables, out: ModelRows, run_id: str) -> CommittedTable:
        """Replace the days ``out`` built (or the whole table) with its rows, atomically for a
        reader; the table is created at ``out.location`` if it does not exist."""

    @abstractmethod
    def current_version(
        self, src: SourceTables, table: str, model_location: str = ""
    ) -> TableVersion | None:
        """The current version of an event table, or of a model table (``model_location``
        given: the model's folder); ``None`` if it holds nothing yet."""

    @abstractmethod
    def model_files(
        self, src: SourceTables, model: str, model_location: str
    ) -> list[tuple[str, int]]:
        """Every data file stored for a model table, read by readers or not (erasure's proof)."""
