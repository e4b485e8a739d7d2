"""The lake's shared append-only Iceberg tables (the sync reports: one table for every
source's runs, ``<reports_database>.sync_reports``): appends from many writers, kept cheap.

Every run appends one snapshot and one manifest; with the open hour's batches that is hundreds
an hour, and each append loads the table, whose cost grows with every snapshot and manifest it
holds (about 1.6 ms a snapshot here: an append 0.09 CPU-s at 10 snapshots, 1.35 at 800). So the
table merges its manifests as it is appended (Iceberg's ``commit.manifest-merge.enabled``), and
its snapshots beyond the newest ``KEPT_SNAPSHOTS`` are expired once there are twice as many
(metadata only: every row is in the current snapshot).
"""

from __future__ import annotations

import threading
import time

import pyarrow as pa

APPEND_ATTEMPTS = 10  # concurrent appends to a shared table (every source's syncs)
APPEND_ONLY_PROPERTIES = {"commit.manifest-merge.enabled": "true"}
KEPT_SNAPSHOTS = 50


def append_shared(
    catalog,
    ident: tuple[str, str],
    location: str,
    rows: pa.Table,
    partition_by: tuple[str, ...],
    create_lock: threading.Lock,
) -> bool:
    """One append to ``ident`` (created at ``location`` on first use, partitioned by
    ``partition_by``). Every source's syncs append to the same table: a commit that lost the
    race to another is retried on the table's new version."""
    from pyiceberg.exceptions import (
        CommitFailedException,
        NoSuchTableError,
        TableAlreadyExistsError,
    )

    database = ident[0]
    for attempt in range(APPEND_ATTEMPTS):
        try:
            tbl = catalog.load_table(ident)
        except NoSuchTableError:
            with create_lock:
                catalog.create_namespace_if_not_exists(database)
            try:
                tbl = catalog.create_table(
                    ident, schema=rows.schema, location=location, properties=APPEND_ONLY_PROPERTIES
                )
                with tbl.update_spec() as spec:
                    for c in partition_by:
                        spec.add_identity(c)
                tbl = catalog.load_table(ident)
            except TableAlreadyExistsError:  # another source's sync created it first
                tbl = catalog.load_table(ident)
        try:
            with tbl.transaction() as tx:
                if any(tbl.properties.get(k) != v for k, v in APPEND_ONLY_PROPERTIES.items()):
                    tx.set_properties(APPEND_ONLY_PROPERTIES)  # a table made before them
                tx.update_schema().union_by_name(rows.schema).commit()
                tx.append(rows)
        except CommitFailedException:
            if attempt == APPEND_ATTEMPTS - 1:
                raise
            time.sleep(0.05 * (attempt + 1))
            continue
        keep_recent_snapshots(tbl, CommitFailedException)
        return True
    return True


def keep_recent_snapshots(tbl, conflict: type[Exception]) -> int:
    """The table's snapshots but the newest ``KEPT_SNAPSHOTS`` expired, once it holds twice as
    many; how many. Another writer's commit in between (``conflict``) leaves them to the next
    append."""
    snaps = sorted(tbl.snapshots(), key=lambda s: s.timestamp_ms)
    if len(snaps) <= 2 * KEPT_SNAPSHOTS:
        return 0
    current = tbl.current_snapshot()
    old = [
        s.snapshot_id
        for s in snaps[:-KEPT_SNAPSHOTS]
        if current is None or s.snapshot_id != current.snapshot_id
    ]
    try:
        tbl.maintenance.expire_snapshots().by_ids(old).commit()
    except conflict:
        return 0
    return len(old)
