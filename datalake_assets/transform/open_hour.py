"""An open hour's batches: the archive files of an hour the lake has not taken in yet, appended
to its tables by the same sync as a whole hour (``sync.py``), so rules never differ.

A sync (``SyncRequest.batch = False``) replaces its hours: every table's rows of the hour, its
quarantine, its id and identity indexes, whatever batches ran before. A **batch**
(``SyncRequest.batch = True``) adds to them:

* **what it reads**: each hour's archive files that no earlier run took in. Every run records
  the files it read (name and size) in a ledger file in the hour's id-index folder
  (``layout.hour_files_name``), committed with the hour's index, so the ledger and the tables
  change together or not at all. A sync's ledger lists every file of the hour (a later batch
  takes only files that arrived since); a batch's lists its own. Files are known by name: the
  collector and the importer write new names, and an erasure that rewrites a file of the hour
  (``privacy/rewrite.py``, which carries the ledgers over) must not make it new again. A file
  rewritten under its name by anything else waits for the hour's close, which reads it whole.
* **dedup**: against the lookback window *and* the hour itself (the id index of its earlier
  batches, ``dedup.index_files``), so a message sent twice across two batches is written once.
* **commit**: one append per table it wrote rows to (Iceberg: a fast append of the files
  stage B wrote in place, the run id and the batch id in the snapshot summary, so the journal's
  roll-forward applies it once), the quarantine's rows appended the same way; the hour's id
  index, identity index and the ledger gain the batch's files (a swap that carries the hour's
  files over instead of replacing them). A batch killed before its journal leaves files no
  snapshot references (``maintain`` removes them) and a ledger without its files: the next
  batch takes them again. One killed after is rolled forward by the next run of the source.
* **the close**: the hourly sync of the hour replaces everything batches appended (one
  overwrite per table, its ledger lists every file), so a closed hour holds exactly what a
  sync of its archive gives, whatever batches ran, failed or ran twice.

A batch whose rows would widen a column's type (``bigint -> double``, ...) is run as a sync of
its whole hours instead: a widening rewrites the table's rows, which is the hourly sync's job,
and the result is the same rows.

Only a table format that can append (``TableFormat.appends``: Iceberg) takes batches; the
Segment layout's hour is a folder swapped whole, and refuses them with the reason.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict

import orjson

from datalake_assets.lake import storage
from datalake_assets.spec import layout
from datalake_assets.transform.run import SyncRun
from datalake_assets.transform.sync_request import SyncError

ArchiveFile = tuple[str, str, int]  # (location, compact hour, size): sync.list_archive_files


def _name(location: str) -> str:
    return location.rsplit("/", 1)[-1]


def hour_index_dir(lake_root: str, source_dir: str, hour: str) -> str:
    """The hour's id-index folder, where its ledgers are."""
    return layout.join(
        layout.index_root(lake_root, source_dir),
        layout.index_partition_path(layout.ArchiveHour.parse(hour)),
    )


def taken(lake_root: str, source_dir: str, hour: str) -> set[tuple[str, int]]:
    """``(file name, size)`` of every archive file of ``hour`` (compact) the lake holds."""
    out: set[tuple[str, int]] = set()
    for location, _ in storage.list_files(hour_index_dir(lake_root, source_dir, hour)):
        if layout.is_hour_files(location):
            out.update(
                (name, int(size)) for name, size in orjson.loads(storage.read_bytes(location))
            )
    return out


def untaken(run: SyncRun, files: list[ArchiveFile]) -> list[ArchiveFile]:
    """The files of ``files`` that no committed run of their hour took in (by name); a
    ``SyncError`` if the lake's table format cannot append."""
    if not run.tables.appends:
        raise SyncError(
            f"the {run.tables.name} table format replaces whole hours and takes no open "
            'hour\'s batches: use table_format = "iceberg", or [freshness] interval_minutes = 0 '
            "for hourly syncs only",
            "unsupported",
        )
    by_hour: dict[str, list[ArchiveFile]] = defaultdict(list)
    for f in files:
        by_hour[f[1]].append(f)
    out = []
    for hour, hour_files in sorted(by_hour.items()):
        held = {name for name, _ in taken(run.req.lake_root, run.req.source_dir, hour)}
        out += [f for f in hour_files if _name(f[0]) not in held]
    return out


def finds_files(lake_root: str, source_dir: str, files: list[ArchiveFile]) -> bool:
    """Whether a batch would read one of ``files`` (``sync.list_archive_files``): one that no
    run of its hour took in. Asked before a batch is sent to a cluster, where a batch that
    finds nothing still costs a job."""
    held: dict[str, set[str]] = {}
    for location, hour, _ in files:
        if hour not in held:
            held[hour] = {name for name, _ in taken(lake_root, source_dir, hour)}
        if _name(location) not in held[hour]:
            return True
    return False


def batch_id(files: list[ArchiveFile]) -> str:
    """The batch's id: its hours and files (names and sizes), so the same files are the same
    batch in every run and every report."""
    text = "\n".join(sorted(f"{hour}/{_name(loc)}:{size}" for loc, hour, size in files))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def stage_ledgers(staged_index_root: str, run_id: str, files: list[ArchiveFile]) -> None:
    """Each hour's ledger of the files this run read, into the run's staged id index (the
    commit swaps it in with the hour's index)."""
    by_hour: dict[str, list[list]] = defaultdict(list)
    for location, hour, size in files:
        by_hour[hour].append([_name(location), size])
    for hour, names in by_hour.items():
        h = layout.ArchiveHour.parse(hour)
        folder = layout.join(staged_index_root, layout.index_partition_path(h))
        storage.create_dir(folder)
        storage.write_bytes_atomic(
            layout.join(folder, layout.hour_files_name(h, run_id)), orjson.dumps(sorted(names))
        )
