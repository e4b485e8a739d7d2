"""The spool's files on disk: segment names (``<YYYYMMDDHH>-<segment id>.wal``) and the
``ClosedSegment`` they name, the spool's exclusive lock, durable moves of segments between
worker spools, and the cut of a torn tail. ``spool.py`` describes the spool as a whole."""

from __future__ import annotations

import fcntl
import os
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime

from datalake_assets.spec.layout import ArchiveHour

SEGMENT_SUFFIX = ".wal"
LOCK_NAME = ".lock"
WORKER_PREFIX = "worker."  # <spool_dir>/worker.<i>/: the spool of worker process i


class SpoolError(RuntimeError):
    """The lines were not made durable (disk full, I/O error, spool closed): no 2xx reply."""


@dataclass(frozen=True)
class ClosedSegment:
    """A spool file that receives no more lines, to be rolled into the archive."""

    source_id: str
    hour: ArchiveHour
    segment_id: str
    path: str

    @property
    def archive_name(self) -> str:
        """Deterministic, so a roll repeated after a crash replaces its own file."""
        return f"collector-{self.hour.compact}-{self.segment_id}.jsonl.gz"


def segment_file_name(hour: ArchiveHour, segment_id: str) -> str:
    return f"{hour.compact}-{segment_id}{SEGMENT_SUFFIX}"


def parse_segment_path(path: str) -> ClosedSegment | None:
    """The segment a spool path names, ``None`` for anything else."""
    source_id = os.path.basename(os.path.dirname(path))
    name = os.path.basename(path)
    if not name.endswith(SEGMENT_SUFFIX) or name.startswith("."):
        return None
    hour_text, sep, segment_id = name[: -len(SEGMENT_SUFFIX)].partition("-")
    if not sep or len(hour_text) != 10 or not hour_text.isdigit() or not segment_id:
        return None
    try:
        hour = ArchiveHour(datetime.strptime(hour_text, "%Y%m%d%H").replace(tzinfo=UTC))
    except ValueError:
        return None
    return ClosedSegment(source_id, hour, segment_id, path)


def new_segment_id(now: datetime | None = None) -> str:
    """``<UTC creation time>-<12 random hex>``: unique across restarts and collectors."""
    now = now or datetime.now(UTC)
    return f"{now:%Y%m%dT%H%M%S}-{secrets.token_hex(6)}"


def segment_created_at(segment_id: str) -> float | None:
    """The creation time (epoch seconds) ``new_segment_id`` put in a segment id, ``None`` for
    an id not of that form."""
    try:
        created = datetime.strptime(segment_id[:15], "%Y%m%dT%H%M%S").replace(tzinfo=UTC)
    except ValueError:
        return None
    return created.timestamp()


def lock_spool(spool_dir: str) -> int:
    """Take the spool's exclusive lock (released when the returned fd is closed)."""
    os.makedirs(spool_dir, exist_ok=True)
    fd = os.open(os.path.join(spool_dir, LOCK_NAME), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise SpoolError(f"spool {spool_dir} is in use by another collector process") from None
    return fd


def source_dirs(spool_dir: str) -> list[str]:
    """The per-source folders of a spool (not its lock, nor worker spools)."""
    try:
        names = sorted(os.listdir(spool_dir))
    except FileNotFoundError:
        return []
    return [
        os.path.join(spool_dir, n)
        for n in names
        if not n.startswith((".", WORKER_PREFIX)) and os.path.isdir(os.path.join(spool_dir, n))
    ]


def move_segments(from_spool: str, into_spool: str) -> int:
    """Move every segment of ``from_spool`` into ``into_spool`` under the same names (so
    their archive names do not change), making the moves durable; returns how many. Both
    spools must be locked by the caller (or owned by no live process)."""
    moved = 0
    for folder in source_dirs(from_spool):
        target = os.path.join(into_spool, os.path.basename(folder))
        here = 0
        for name in sorted(os.listdir(folder)):
            if parse_segment_path(os.path.join(folder, name)) is None:
                continue
            os.makedirs(target, exist_ok=True)
            os.replace(os.path.join(folder, name), os.path.join(target, name))
            here += 1
        if here:
            fsync_dir(target)
            fsync_dir(folder)
            moved += here
        try:
            os.rmdir(folder)
        except OSError:
            pass  # not empty: something that is not a segment
    if moved:
        fsync_dir(into_spool)
    return moved


def adopt_worker_spools(spool_dir: str, keep: int = 0, into: str | None = None) -> int:
    """Move the segments of ``<spool_dir>/worker.<i>`` for every ``i >= keep`` into ``into``
    (default ``spool_dir``). Each such spool's lock is taken first: a live worker's is not."""
    moved = 0
    for name in sorted(os.listdir(spool_dir)):
        index = name[len(WORKER_PREFIX) :]
        if not name.startswith(WORKER_PREFIX) or not index.isdigit() or int(index) < keep:
            continue
        worker_dir = os.path.join(spool_dir, name)
        fd = lock_spool(worker_dir)
        try:
            moved += move_segments(worker_dir, into or spool_dir)
        finally:
            os.close(fd)
    return moved


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def cut_torn_tail(path: str) -> int:
    """Truncate a segment after its last newline (a line cut by a crash was never
    acknowledged); returns the bytes removed."""
    size = os.path.getsize(path)
    if size == 0:
        return 0
    with open(path, "rb+") as f:
        keep, pos = 0, size
        while pos > 0:  # scan back for the last newline, 64 KiB at a time
            start = max(0, pos - 65536)
            f.seek(start)
            chunk = f.read(pos - start)
            i = chunk.rfind(b"\n")
            if i != -1:
                keep = start + i + 1
                break
            pos = start
        if keep != size:
            f.truncate(keep)
            f.flush()
            os.fsync(f.fileno())
    return size - keep
