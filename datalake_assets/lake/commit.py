"""Commit protocol: how a sync replaces hours of a lake without readers seeing half of one.

Stage B writes every new file into the run's staging area, a mirror of the lake:
``<lake>/_staging/<run_id>/data/<source>/segment_type=<t>/<date partition>/part-*.parquet``
(and ``.../quarantine/<source>/day=/hr=/``). Nothing in the lake has changed at that point; a
crash leaves only staging debris that the next run of the source deletes.

Then the driver commits, partition directory by partition directory:

1. **Journal.** It writes ``<lake>/_commits/<source>/<run_id>.json`` listing every swap
   (staged dir -> lake partition dir, and which hours it replaces). From here on the run is
   committed: recovery rolls it *forward*, because every staged file is complete.
2. **Carry-over** (coarse layouts only, ``day`` and ``year_month_day``, where one partition
   holds 24 hours): the files of the partition's *other* hours are hard-linked into the staged
   dir, so the staged dir is the partition's complete next version.
3. **Swap.** Locally, ``renameat2(RENAME_EXCHANGE)`` swaps the staged dir and the live dir in
   one atomic step (a new partition is a plain rename). A marker ``_COMMITTED_BY`` (ignored by
   Spark, Hive and ``*.parquet`` globs) in the new dir records the run, so a recovery knows
   whether a swap already happened. The old version, now in staging, is deleted.
4. **Done.** The schema record is written (it is in the journal too, so a roll-forward writes
   it), the journal is removed; then the report is written.

With a table format that commits tables itself (Iceberg, ``lake/formats/``), the journal
also lists the run's table commits (``steps``); they are applied before the swaps (the run's
indexes and quarantine), each idempotently, and recovery rolls them forward the same way.

A reader of a partition directory therefore sees the old hour or the new hour, never a mix,
and a re-run replaces an hour instead of adding to it. Hours of a run whose tables disappeared
(no rows any more) are swapped with an empty version.

On Azure with a hierarchical namespace (``abfss://``) a directory rename is atomic but there
is no exchange, and a rename onto a non-empty directory fails. Step 3 is then: rename the live
dir aside (to ``<staged>.replaced``, inside the run's staging area, where no reader looks),
rename the staged dir in, delete the old version. A reader of the partition sees the old hour,
briefly no hour, or the new hour, never a mix. A crash between the renames leaves the hour
absent until ``recover`` (the next sync of the source) renames the staged dir in.

On an object store (``s3://``, and blob-only Azure ``az://``) there is no rename: new objects
are copied in under their final names, then the replaced hour's old objects are deleted. A
direct-path reader can briefly see both versions; catalog readers are switched atomically by
the catalog's partition update (the catalog issue). The journal and roll-forward recovery
work the same way.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import shutil
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass

import orjson
import pyarrow.fs as pafs

from datalake_assets.lake import faults, storage
from datalake_assets.lake.records import write_schema_record
from datalake_assets.spec import layout

MARKER = "_COMMITTED_BY"


@dataclass(frozen=True)
class Swap:
    staged: str  # staged partition dir (complete new files of ``hours``)
    target: str  # live partition dir in the lake
    hours: tuple[str, ...]  # YYYYMMDDHH of the hours this swap replaces


def swaps_of(by_dir: dict[tuple[str, str], set[str]]) -> list[Swap]:
    """The swaps of ``(live folder, staged folder) -> hours``. A folder with nothing staged
    is swapped (with an empty version) only where the live one holds files of those hours."""
    swaps = []
    for (target, staged), hs in sorted(by_dir.items()):
        if not storage.exists(staged):
            live = [loc for loc, _ in storage.list_files(target)]
            if not any(layout.hour_of_data_file(loc) in hs for loc in live):
                continue
            if storage.renames_directories(staged):  # renamed in: must exist (empty)
                storage.create_dir(staged)
        swaps.append(Swap(staged=staged, target=target, hours=tuple(sorted(hs))))
    return swaps


def journal_location(lake_root: str, source_dir: str, run_id: str) -> str:
    return layout.join(layout.commit_journal_dir(lake_root, source_dir), f"{run_id}.json")


STEP_THREADS = 4  # table commits applied at once
SWAP_THREADS = 8  # partition swaps applied at once on an object store

# A source's schema record: each table's columns and types (``records.py``)
SchemaRecord = dict[str, list[tuple[str, str]]]

# A table format's commit of one journaled step (``TableFormat.apply``), idempotent.
ApplyStep = Callable[[dict, str], None]


def write_journal(
    lake_root: str,
    source_dir: str,
    run_id: str,
    swaps: list[Swap],
    steps: list[dict] = (),
    record: SchemaRecord | None = None,
) -> str:
    location = journal_location(lake_root, source_dir, run_id)
    body = {"run_id": run_id, "swaps": [asdict(s) for s in swaps], "steps": list(steps)}
    if record is not None:
        body["record"] = record
    storage.write_bytes_atomic(location, orjson.dumps(body))
    return location


def commit(
    lake_root: str,
    source_dir: str,
    run_id: str,
    swaps: list[Swap],
    steps: list[dict] = (),
    apply_step: ApplyStep | None = None,
    record: SchemaRecord | None = None,
) -> None:
    """Steps 1-4 above. Raises on failure; a later ``recover`` finishes what was journaled.
    ``record``: the source's schema record after this commit (a sync's), written before the
    journal goes, so it is never behind the tables: a run killed after its commit left
    tables the record did not know, and the next sync typed its files from the stale record
    (an Iceberg table refuses a file of another type), the next erasure staged tables without
    their columns."""
    journal = write_journal(lake_root, source_dir, run_id, swaps, steps, record)
    _apply(run_id, swaps, list(steps), apply_step)
    if record is not None:
        write_schema_record(lake_root, source_dir, record)
    _delete_file(journal)


def _apply(run_id: str, swaps: list[Swap], steps: list[dict], apply_step: ApplyStep | None) -> None:
    if steps and apply_step is None:
        raise RuntimeError(
            f"the commit of run {run_id} holds table commits: apply it with the "
            "lake's table format ([table_format])"
        )
    # Table commits are independent (one table each; the journal covers a cut): a few at a
    # time, since each waits mostly on writes and the catalog. The fault point fires once the
    # first is done, the others possibly under way.
    # A failure cancels the commits not yet started (the journal keeps them for recovery).
    pool = ThreadPoolExecutor(max_workers=STEP_THREADS)
    try:
        for i, future in enumerate(
            as_completed([pool.submit(apply_step, step, run_id) for step in steps])
        ):
            future.result()
            if i == 0:
                faults.checkpoint("mid_commit")
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    if swaps and _object_store(swaps[0].target):
        # Swaps are independent too (one partition each, idempotent): on an object store each
        # is a listing, a copy per new file and a delete per old one, all waiting on the
        # network, so a few at a time, as the table commits; the fault point fires once the
        # first is done. A local folder's swap is one rename, and a renaming store's (Azure
        # HNS) leaves its hour absent between its two renames: those keep their order, so a
        # crash leaves at most one hour absent until ``recover``.
        pool = ThreadPoolExecutor(max_workers=SWAP_THREADS)
        try:
            futures = [pool.submit(apply_swap, swap, run_id) for swap in swaps]
            for i, future in enumerate(as_completed(futures)):
                future.result()
                if i == 0 and not steps:
                    faults.checkpoint("mid_commit")
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        return
    for i, swap in enumerate(swaps):
        apply_swap(swap, run_id)
        if i == 0 and not steps:
            faults.checkpoint("mid_commit")


def _object_store(target: str) -> bool:
    """A partition on a store without directory renames (S3, blob-only Azure, GCS)."""
    return storage.is_uri(target) and not storage.renames_directories(target)


def recover(lake_root: str, source_dir: str, apply_step: ApplyStep | None = None) -> list[str]:
    """Roll forward every journaled commit of a source that did not finish; returns run ids.
    ``apply_step``: the lake's table format's (journals with table commits need it)."""
    done = []
    for location, _ in storage.list_files(layout.commit_journal_dir(lake_root, source_dir)):
        if not location.endswith(".json") or location.rsplit("/", 1)[-1].startswith("."):
            continue
        body = orjson.loads(storage.read_bytes(location))
        swaps = [Swap(s["staged"], s["target"], tuple(s["hours"])) for s in body["swaps"]]
        _apply(body["run_id"], swaps, body.get("steps", []), apply_step)
        if body.get("record") is not None:
            write_schema_record(lake_root, source_dir, body["record"])
        _delete_file(location)
        done.append(body["run_id"])
    return done


def apply_swap(swap: Swap, run_id: str) -> None:
    """Idempotent: a swap already made (marker present) only cleans up."""
    if not storage.is_uri(swap.target):
        _apply_local(swap, run_id)
    elif storage.renames_directories(swap.target):
        _apply_renames(swap, run_id)
    else:
        _apply_object_store(swap, run_id)


# ------------------------------------------------------------------------------- local files


def _marker_run(directory: str) -> str | None:
    try:
        with open(os.path.join(directory, MARKER), encoding="utf-8") as f:
            return f.read().strip()
    except FileNotFoundError:
        return None


def _apply_local(swap: Swap, run_id: str) -> None:
    if _marker_run(swap.target) == run_id:  # already swapped; staged holds the old version
        shutil.rmtree(swap.staged, ignore_errors=True)
        return
    if not os.path.isdir(swap.staged):
        # Nothing staged and not swapped: the staging area was lost; the live data is intact.
        raise RuntimeError(f"staged partition missing, cannot commit: {swap.staged}")
    hours = set(swap.hours)
    if os.path.isdir(swap.target):  # carry over the partition's other hours (coarse layouts)
        for name in os.listdir(swap.target):
            hour = layout.hour_of_data_file(name)
            if hour is None or hour in hours:
                continue
            dst = os.path.join(swap.staged, name)
            if not os.path.exists(dst):
                try:
                    os.link(os.path.join(swap.target, name), dst)
                except OSError:
                    shutil.copy2(os.path.join(swap.target, name), dst)
    marker = os.path.join(swap.staged, MARKER)
    with open(marker, "w", encoding="utf-8") as f:
        f.write(run_id)
        f.flush()
        os.fsync(f.fileno())
    if os.path.isdir(swap.target):
        _exchange(swap.staged, swap.target)
        shutil.rmtree(swap.staged, ignore_errors=True)
    else:
        os.makedirs(os.path.dirname(swap.target), exist_ok=True)
        os.rename(swap.staged, swap.target)
    _fsync_dir(os.path.dirname(swap.target))


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
_libc = None


def _exchange(a: str, b: str) -> None:
    """Atomically swap two directories (Linux ``renameat2``); two renames elsewhere."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    fn = getattr(_libc, "renameat2", None)
    if fn is not None:
        res = fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
        if res == 0:
            return
        err = ctypes.get_errno()
        if err not in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
            raise OSError(err, os.strerror(err), a, None, b)
    # Fallback (no renameat2): the hour is briefly absent, never mixed.
    aside = f"{b}.old-{os.getpid()}"
    os.rename(b, aside)
    os.rename(a, b)
    os.rename(aside, a)


def _fsync_dir(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# ------------------------------------------------------- hierarchical namespace (abfss://)


def aside_location(swap: Swap) -> str:
    """Where the live version waits between the two renames: inside the run's staging area
    (never next to the partition, where Spark would read ``hr=10.old`` as another hour)."""
    return f"{swap.staged}.replaced"


def _fs_marker_run(fs: pafs.FileSystem, directory: str) -> str | None:
    try:
        with fs.open_input_stream(f"{directory}/{MARKER}", compression=None) as f:
            return f.read().decode("utf-8").strip()
    except (FileNotFoundError, OSError):
        return None


def _is_dir(fs: pafs.FileSystem, path: str) -> bool:
    return fs.get_file_info(path).type == pafs.FileType.Directory


def _apply_renames(swap: Swap, run_id: str) -> None:
    fs, target = storage.resolve(swap.target)
    _, staged = storage.resolve(swap.staged)
    _, aside = storage.resolve(aside_location(swap))
    if _fs_marker_run(fs, target) == run_id:  # swapped: only the old version to delete
        storage.delete_dir(aside_location(swap))
        storage.delete_dir(swap.staged)
        return
    if not _is_dir(fs, staged):
        raise RuntimeError(f"staged partition missing, cannot commit: {swap.staged}")
    hours = set(swap.hours)
    live = _is_dir(fs, target)
    if live:  # carry over the partition's other hours (coarse layouts): server-side copies
        have = {i.base_name for i in fs.get_file_info(pafs.FileSelector(staged))}
        for info in fs.get_file_info(pafs.FileSelector(target)):
            hour = layout.hour_of_data_file(info.base_name)
            if (
                info.type == pafs.FileType.File
                and hour is not None
                and hour not in hours
                and info.base_name not in have
            ):
                fs.copy_file(info.path, f"{staged}/{info.base_name}")
    with fs.open_output_stream(f"{staged}/{MARKER}", compression=None) as f:
        f.write(run_id.encode())
    if live:
        if _is_dir(fs, aside):  # a rename aside already happened: the live one is not ours
            raise RuntimeError(
                f"both {swap.target} and its replaced version {aside} exist; "
                "another writer touched the partition during the commit"
            )
        storage.rename(fs, target, aside)
        faults.checkpoint("swap_aside")
    else:
        fs.create_dir(target.rpartition("/")[0], recursive=True)  # a rename needs the parent
    storage.rename(fs, staged, target)
    storage.delete_dir(aside_location(swap))


# ------------------------------------------------------------------------------ object store


def _apply_object_store(swap: Swap, run_id: str) -> None:
    fs, target = storage.resolve(swap.target)
    _, staged = storage.resolve(swap.staged)
    hours = set(swap.hours)
    new_names = set()
    for info in fs.get_file_info(pafs.FileSelector(staged, allow_not_found=True)):
        if info.type != pafs.FileType.File:
            continue
        name = info.path.rsplit("/", 1)[-1]
        new_names.add(name)
        fs.copy_file(info.path, f"{target}/{name}")
    if not new_names and not storage.exists(swap.staged):
        # Already applied (staging cleaned) or only a deletion: fall through to deletes.
        pass
    for info in fs.get_file_info(pafs.FileSelector(target, allow_not_found=True)):
        name = info.path.rsplit("/", 1)[-1]
        if info.type == pafs.FileType.File and layout.hour_of_data_file(name) in hours:
            if name not in new_names and run_id not in name:
                fs.delete_file(info.path)
    storage.delete_dir(swap.staged)


def _delete_file(location: str) -> None:
    fs, path = storage.resolve(location)
    try:
        fs.delete_file(path)
    except FileNotFoundError:
        pass
