"""The sync's last phases, once stage B has written into staging: reconcile, commit, and what
the catalog step registers (``catalog/step.py``); then the report (``sync_report.py``).
``sync.py`` runs them in that order."""

from __future__ import annotations

import time
from collections import Counter, defaultdict

from datalake_assets.catalog import step
from datalake_assets.lake import commit, faults, storage
from datalake_assets.lake.formats import TablesToCommit
from datalake_assets.spec import layout
from datalake_assets.spec.naming import (
    TRACKS_TABLE,
    is_event_table,
)
from datalake_assets.spec.schema import TableChange
from datalake_assets.transform import open_hour
from datalake_assets.transform.dedup import Duplicates
from datalake_assets.transform.manifest import (
    CONFORMANCE,
    FILE,
    INDEX,
    MISFITS,
    QUARANTINE,
    VIOLATION,
    ManifestEntry,
)
from datalake_assets.transform.run import SyncRun
from datalake_assets.transform.stage_a_stats import StageAStats
from datalake_assets.transform.sync_request import SyncError
from datalake_assets.transform.tally import Tally

# --------------------------------------------------------------------------------- reconcile


def reconcile(
    run: SyncRun,
    stats: StageAStats,
    duplicates: Duplicates,
    manifest: list[ManifestEntry],
    repeated_ids: dict[str, int],
) -> Tally:
    """The tally of what was written; fails, with nothing committed, unless every line read
    is a row, a duplicate, quarantined or suppressed."""
    tally = _tally(stats, manifest, repeated_ids)
    written, dups, quarantined = tally.messages_written, duplicates.total, tally.lines_quarantined
    suppressed = tally.lines_suppressed
    if tally.lines_in != written + dups + quarantined + suppressed:
        storage.delete_dir(run.staging)
        raise SyncError(
            f"reconciliation failed, nothing committed: lines_in={tally.lines_in} != rows={written}"
            f" + duplicates={dups} + quarantined={quarantined} + suppressed={suppressed}"
        )
    return tally


def _tally(
    stats: StageAStats, manifest: list[ManifestEntry], repeated_ids: dict[str, int]
) -> Tally:
    tally = Tally(
        lines_in=stats.lines_in,
        lines_quarantined=sum(stats.lines_quarantined.values()),
        quarantine_hours={h for h, _, _, _ in stats.quarantine_files},
        repeated_ids=dict(repeated_ids),
        suppressed=Counter(stats.suppressed),
        lines_by_hour=dict(stats.lines_by_hour),
        quarantined_by_hour=dict(stats.lines_quarantined),
    )
    for m in manifest:
        if m.entry == FILE:
            tally.rows[(m.table, m.hour)] += m.rows
            tally.values_quarantined[m.table] += m.values_quarantined
            tally.values_by_hour[(m.table, m.hour)] += m.values_quarantined
            tally.valued[(m.table, m.hour)].update(m.columns)
            if m.location:
                tally.files[(m.table, m.hour)].append(m)
        elif m.entry == QUARANTINE:
            tally.quarantine_hours.add(m.hour)
        elif m.entry == VIOLATION:
            tally.violations[(m.table, m.hour)][m.column or ""] += m.rows
        elif m.entry == MISFITS:
            tally.misfits_by_column[m.table][m.column] += m.rows
            tally.misfits_by_hour[(m.table, m.hour)][m.column] += m.rows
        elif m.entry == CONFORMANCE:
            hour = str(layout.ArchiveHour.parse(m.hour))
            tally.conformance[m.table].extend({**f, "hour": hour} for f in m.failures)
        elif m.entry == INDEX:
            tally.index_ids_written += m.rows
    # ``tracks`` holds the track tables' rows: its count must match theirs, and an id
    # repeated in a track table is repeated in tracks.
    track_rows = sum(n for (t, _), n in tally.rows.items() if is_event_table(t))
    tally.repeated_ids[TRACKS_TABLE] = abs(tally.table_rows(TRACKS_TABLE) - track_rows) + sum(
        n for t, n in tally.repeated_ids.items() if is_event_table(t)
    )
    return tally


# ------------------------------------------------------------------------------------ commit


def commit_sync(
    run: SyncRun,
    existing: dict[str, list[tuple[str, str]]],
    changes: dict[str, TableChange],
    tally: Tally,
    files: list[open_hour.ArchiveFile],
) -> None:
    """Commit the staged hours: the tables through the lake's table format (``lake/formats``),
    the quarantine and the indexes as folder swaps, and the tables' schema record, in one
    journal (``lake/commit.py``). The catalog was prepared before (``sync.py``). The hours'
    ledgers of ``files`` go with their id index (``open_hour.py``). An open hour's batch
    (``req.batch``) appends to its hours instead of replacing them."""
    req = run.req
    hours = sorted({hour for _, hour, _ in files})
    tables_after = dict(existing)
    for t, c in changes.items():
        tables_after[t] = c.columns
    open_hour.stage_ledgers(layout.staged_index_root(run.staging), req.run_id, files)
    batch = tables_to_commit(run, tables_after, changes, tally, hours, files)
    table_swaps, steps = run.tables.plan(batch)
    swaps = table_swaps + _plan_side_swaps(run, hours)
    faults.checkpoint("staged")
    run.held.check()  # an S3 lease lost during a long pause: fail here, before the lake changes
    t = time.monotonic()
    commit.commit(
        req.lake_root,
        req.source_dir,
        req.run_id,
        swaps,
        steps,
        run.tables.apply,
        record=tables_after,  # with the commit: never behind the tables
    )
    run.timings["commit_s"] = time.monotonic() - t
    faults.checkpoint("committed")
    _files_readers_read(run, tally, hours)
    storage.delete_dir(run.staging)


def _files_readers_read(run: SyncRun, tally: Tally, hours: list[str]) -> None:
    """The report's and the UI's files and bytes of each table-hour are those readers read:
    a format that writes its own files (Iceberg's staged rows) replaces the staged ones'
    figures; files written in place are the ones readers read."""
    for table in sorted({t for t, _ in tally.files} - run.in_place):
        live = run.tables.committed_files(run.src, table, hours)
        if live is None:
            return
        for h in hours:
            if (table, h) in tally.files:
                tally.files[(table, h)] = [
                    ManifestEntry(FILE, table, h, bytes=size, location=loc)
                    for loc, size in live.get(h, [])
                ]


def tables_to_commit(
    run: SyncRun,
    tables_after: dict[str, list[tuple[str, str]]],
    changes: dict[str, TableChange],
    tally: Tally,
    hours: list[str],
    files: list[open_hour.ArchiveFile],
) -> TablesToCommit:
    """Every table of the source has its ``hours`` replaced: those this run wrote, and the
    others (a replayed hour may have lost all its rows of one). The files of a table written
    in place are listed for the format's commit. An open hour's batch appends to the tables
    it wrote rows to, and to no other."""
    if run.req.batch:
        tables_after = {t: cols for t, cols in tables_after.items() if t in changes}
    written: dict[str, list[tuple[str, int, str]]] = {t: [] for t in run.in_place}
    for (table, hour), entries in sorted(tally.files.items()):
        if table in written:
            written[table].extend((e.location, e.bytes, hour) for e in entries if e.location)
    return TablesToCommit(
        src=run.src,
        run_id=run.req.run_id,
        staged_data_root=layout.staged_data_root(run.staging),
        hours=tuple(sorted(hours)),
        quarantine_staged=layout.staged_quarantine_root(run.staging),
        tables={t: tuple(tuple(c) for c in cols) for t, cols in sorted(tables_after.items())},
        widened={t: tuple(n for n, _, _ in c.widened) for t, c in changes.items() if c.widened},
        written={t: tuple(entries) for t, entries in written.items()},
        batch=open_hour.batch_id(files) if run.req.batch else "",
    )


def _plan_side_swaps(run: SyncRun, hours: list[str]) -> list[commit.Swap]:
    """Each hour's id index and identity index (the lake's own records, in every table
    format): one folder swap each. An open hour's batch adds its files to the hour's (a swap
    that replaces no hour: every live file is carried over)."""
    req, staging = run.req, run.staging
    by_dir: dict[tuple[str, str], set[str]] = defaultdict(set)  # (target, staged) -> hours
    for h in hours:
        hour = layout.ArchiveHour.parse(h)
        by_dir[
            (
                layout.join(
                    layout.index_root(req.lake_root, req.source_dir),
                    layout.index_partition_path(hour),
                ),
                layout.join(layout.staged_index_root(staging), layout.index_partition_path(hour)),
            )
        ].add(h)
        by_dir[
            (
                layout.join(
                    layout.identity_index_root(req.lake_root, req.source_dir),
                    layout.index_partition_path(hour),
                ),
                layout.join(
                    layout.staged_identity_root(staging), layout.index_partition_path(hour)
                ),
            )
        ].add(h)
    if req.batch:
        by_dir = {key: set() for key in by_dir}
    return commit.swaps_of(by_dir)


# ---------------------------------------------------------------------------------- register


def committed(
    run: SyncRun, changes: dict[str, TableChange], tally: Tally, hours: list[str]
) -> step.Committed:
    """What the catalog step registers and checks of the commit: the Segment layout's tables
    and quarantine are external tables of the [catalog]; an Iceberg table's commit was its
    catalog's update (the step reports it as the format's catalog holds it)."""
    if not run.tables.registered_by_catalog:
        return step.Committed(hours, sorted(changes), by_format=_format_tables(run, changes))
    return step.Committed(
        hours,
        sorted(changes),
        tables={t: c.columns for t, c in changes.items()},
        partitions={t: tally.hours_written(t) for t in changes},
        quarantine_hours=sorted(tally.quarantine_hours),
    )


def _format_tables(run: SyncRun, changes: dict[str, TableChange]) -> dict[str, dict]:
    """The tables as the format's own catalog holds them (Iceberg: name, location, snapshot)."""
    batch = TablesToCommit(
        src=run.src,
        run_id=run.req.run_id,
        staged_data_root="",
        hours=(),
        tables={t: tuple(c.columns) for t, c in changes.items()},
    )
    return {
        t: {
            "catalog_table": c.name.split(".", 1)[1],
            "database": c.name.split(".", 1)[0],
            "location": c.location,
            "snapshot_id": c.snapshot_id,
            "is_new": changes[t].is_new,
            "table_format": run.tables.name,
        }
        for t, c in run.tables.committed(batch).items()
    }
