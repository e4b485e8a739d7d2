"""The files of an Iceberg table that nothing references any more, and their removal after
its old snapshots expire (``expire_and_remove``: the maintenance of ``IcebergFormat.maintain``).

pyiceberg 0.12 expires snapshots (metadata only) but has no orphan-file removal: this module
lists the files under a table's location, subtracts every file a live snapshot or metadata
version references (data files, manifests, manifest lists, metadata JSON, statistics), and
deletes what is left once it is older than a cutoff. The cutoff protects files a running
writer has written but not committed yet (a sync of the source holds its lock; other writers
of the table, if any, are the reason for the retention)."""

from __future__ import annotations

from datetime import datetime

import pyarrow.fs as pafs

from datalake_assets.lake import storage


def referenced(tbl) -> set[str]:
    """Every file URI the table's metadata still points to."""
    io = tbl.io
    meta = tbl.metadata
    out = {tbl.metadata_location}
    out.update(m.metadata_file for m in meta.metadata_log)
    out.update(s.statistics_path for s in getattr(meta, "statistics", []) or [])
    for snap in tbl.snapshots():
        out.add(snap.manifest_list)
        for manifest in snap.manifests(io):
            out.add(manifest.manifest_path)
            # a DELETED entry only records that its file left this snapshot: the file is
            # referenced by the snapshots where it is ADDED or EXISTING, if any remain
            for entry in manifest.fetch_manifest_entry(io, discard_deleted=True):
                out.add(entry.data_file.file_path)
    return {_plain(u) for u in out}


def _plain(uri: str) -> str:
    return uri.removeprefix("file://")


def unreferenced(tbl, cutoff: datetime, root: str = "") -> list[tuple[str, int]]:
    """``[(location, size)]`` under the table's location (or ``root``), referenced by nothing,
    last modified before ``cutoff``."""
    root = root or _plain(tbl.location())
    keep = referenced(tbl)
    fs, path = storage.resolve(root)
    try:
        infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True, recursive=True))
    except FileNotFoundError:
        return []
    out = []
    for info in infos:
        if info.type != pafs.FileType.File:
            continue
        location = storage.to_location(root, info.path)
        if location in keep:
            continue
        if info.mtime is not None and info.mtime.timestamp() >= cutoff.timestamp():
            continue  # maybe a writer's file not committed yet
        out.append((location, info.size or 0))
    return sorted(out)


def remove_orphans(tbl, cutoff: datetime, also: str = "") -> tuple[int, int]:
    """Delete ``unreferenced(tbl, cutoff)``, and the Parquet files under ``also`` (a converted
    table's Segment-layout folder) that no version references; returns ``(files, bytes)``."""
    files = unreferenced(tbl, cutoff)
    if also:
        files += [f for f in unreferenced(tbl, cutoff, also) if f[0].endswith(".parquet")]
    for location, _ in files:
        storage.delete_file(location)
    return len(files), sum(size for _, size in files)


def expire_and_remove(tbl, load, cutoff: datetime, also: str = "") -> dict:
    """The table's snapshots older than ``cutoff`` expired (the current one stays), then its
    orphan files removed (``remove_orphans``). ``load()`` gives the table as committed after
    the expiry (which commits a new metadata version)."""
    before = len(tbl.snapshots())
    current = tbl.current_snapshot()
    old = [
        s.snapshot_id
        for s in tbl.snapshots()
        if current is not None
        and s.snapshot_id != current.snapshot_id
        and s.timestamp_ms < cutoff.timestamp() * 1000
    ]
    if old:
        tbl.maintenance.expire_snapshots().by_ids(old).commit()
        tbl = load()
    removed, freed = remove_orphans(tbl, cutoff, also=also)
    return {
        "snapshots_expired": len(old),
        "snapshots_before": before,
        "orphan_files_removed": removed,
        "orphan_bytes_removed": freed,
    }
