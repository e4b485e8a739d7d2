"""The write-ahead spool: accepted messages are on disk, fsync'd, before the collector replies.

Layout: ``<spool_dir>/<source_id>/<YYYYMMDDHH>-<segment id>.wal``, JSON lines. Each segment
holds one source and one *received* hour (the hour is in its name), so the roller never parses
a line: a segment becomes one archive file, ``collector-<YYYYMMDDHH>-<segment id>.jsonl.gz``.

Group commit: request threads append their (already stamped) lines to the current *round* and
wait on it; one committer thread takes the whole round, writes each segment's share with one
``write`` and one ``fsync``, then wakes every request of the round at once. Requests that
arrive during an fsync form the next round, so the number of fsyncs per second stays bounded
whatever the concurrency, and the reply waits for the fsync that covers it.

A segment is closed when it reaches ``segment_max_bytes``, when it is ``segment_max_age``
seconds old, when a message of another hour arrives for its source, and at ``close()``; closed
segments go to ``on_closed`` (the roller). Segments found at ``open()`` were left by an earlier
process (crash or not): all are closed and handed over, after their torn tail (a last line
without its newline, which no reply ever covered) is cut off.

One process per spool: ``open()`` takes an exclusive ``flock`` on ``<spool_dir>/.lock``.
With several worker processes (``workers.py``) each has its own spool,
``<spool_dir>/worker.<i>/`` (source ids cannot contain a dot); a spool adopts, at ``open()``,
the segments of worker folders no process holds any more, so changing the number of workers
strands nothing.

The files (segment names, the lock, moves between worker spools, torn tails) are
``spool_files.py``'s; here, the group commit.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from datalake_assets.ingest.collector.spool_files import (
    ClosedSegment,
    SpoolError,
    adopt_worker_spools,
    cut_torn_tail,
    fsync_dir,
    lock_spool,
    new_segment_id,
    parse_segment_path,
    segment_file_name,
    source_dirs,
)
from datalake_assets.spec.layout import ArchiveHour

log = logging.getLogger(__name__)


@dataclass(eq=False)
class _Segment:
    source_id: str
    hour: ArchiveHour
    segment_id: str
    path: str
    opened_at: float  # monotonic time of its first line
    size: int = 0  # bytes appended (written or pending)
    fd: int | None = None  # created by the committer with the first write
    written: int = 0  # bytes written and fsync'd: the file is whole lines up to here
    broken: BaseException | None = None  # a write failed: no more writes to this file

    def closed(self) -> ClosedSegment:
        return ClosedSegment(self.source_id, self.hour, self.segment_id, self.path)


@dataclass(eq=False)
class _Round:
    """One group commit: the lines appended while the previous round was being fsync'd."""

    pending: dict[_Segment, list[bytes]] = field(default_factory=dict)
    closing: list[_Segment] = field(default_factory=list)
    failed: dict[_Segment, BaseException] = field(default_factory=dict)
    done: threading.Event = field(default_factory=threading.Event)


class Spool:
    def __init__(
        self,
        spool_dir: str,
        on_closed: Callable[[ClosedSegment], None],
        segment_max_bytes: int = 64 * 1024 * 1024,
        segment_max_age_seconds: float = 60,
    ) -> None:
        self.spool_dir = os.path.abspath(spool_dir)
        self.on_closed = on_closed
        self.segment_max_bytes = segment_max_bytes
        self.segment_max_age = segment_max_age_seconds
        self._cond = threading.Condition(threading.Lock())
        self._open: dict[str, _Segment] = {}  # source id -> its segment taking lines
        self._round = _Round()
        self._stopping = False
        self._closed = True
        self._lock_fd: int | None = None
        self._thread: threading.Thread | None = None
        self._known_dirs: set[str] = set()
        self._committer_idle = False  # waiting for lines: an append must wake it
        self.commits = 0  # fsync rounds, for the stats

    # ---------------------------------------------------------------------------- lifecycle

    def open(self) -> list[ClosedSegment]:
        """Lock the spool, start the committer; returns the segments an earlier process left
        (already cut to whole lines), oldest hour first, for the roller."""
        self._lock_fd = lock_spool(self.spool_dir)
        try:
            adopted = adopt_worker_spools(self.spool_dir)
        except BaseException:
            os.close(self._lock_fd)
            self._lock_fd = None
            raise
        if adopted:
            log.info("adopted %d segment(s) from the spools of earlier worker processes", adopted)
        left = self.recover()
        self._stopping, self._closed = False, False
        self._thread = threading.Thread(target=self._commit_loop, name="spool-commit", daemon=True)
        self._thread.start()
        return left

    def recover(self) -> list[ClosedSegment]:
        found: list[ClosedSegment] = []
        for folder in source_dirs(self.spool_dir):
            for name in sorted(os.listdir(folder)):
                seg = parse_segment_path(os.path.join(folder, name))
                if seg is None:
                    continue
                cut = cut_torn_tail(seg.path)
                if cut:
                    log.warning(
                        "spool segment %s: cut %d bytes of an unacknowledged torn line",
                        seg.path,
                        cut,
                    )
                if os.path.getsize(seg.path) == 0:
                    os.remove(seg.path)
                    continue
                found.append(seg)
        found.sort(key=lambda s: (s.hour, s.segment_id))
        return found

    def close(self) -> None:
        """Commit what is pending, close every segment (handed to ``on_closed``), stop."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            for seg in list(self._open.values()):
                self._close_locked(seg)
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join()
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None

    # ------------------------------------------------------------------------------ appends

    def append(self, source_id: str, hour: ArchiveHour, data: bytes) -> None:
        """Append whole lines (``data`` ends with a newline) of one source and received hour;
        returns once they are fsync'd. Raises ``SpoolError`` if they may not be durable."""
        with self._cond:
            if self._closed:
                raise SpoolError("the collector is shutting down")
            seg = self._open.get(source_id)
            if seg is not None and seg.hour != hour:
                self._close_locked(seg)
                seg = None
            if seg is None:
                sid = new_segment_id()
                seg = _Segment(
                    source_id,
                    hour,
                    sid,
                    os.path.join(self.spool_dir, source_id, segment_file_name(hour, sid)),
                    opened_at=time.monotonic(),
                )
                self._open[source_id] = seg
            r = self._round
            r.pending.setdefault(seg, []).append(data)
            seg.size += len(data)
            if seg.size >= self.segment_max_bytes:
                self._close_locked(seg)
            if self._committer_idle:
                self._cond.notify()
        r.done.wait()
        error = r.failed.get(seg)
        if error is not None:
            raise SpoolError(f"spool write failed: {error}")

    def _close_locked(self, seg: _Segment) -> None:
        if self._open.get(seg.source_id) is seg:
            del self._open[seg.source_id]
        self._round.closing.append(seg)

    # ---------------------------------------------------------------------------- committer

    def _next_round(self) -> _Round | None:
        with self._cond:
            while True:
                r = self._round
                if r.pending or r.closing:
                    self._round = _Round()
                    return r
                if self._stopping:
                    return None
                now = time.monotonic()
                deadline = None
                for seg in list(self._open.values()):
                    due = seg.opened_at + self.segment_max_age
                    if due <= now:
                        self._close_locked(seg)
                    elif deadline is None or due < deadline:
                        deadline = due
                if r.closing:
                    continue
                self._committer_idle = True
                self._cond.wait(None if deadline is None else deadline - now)
                self._committer_idle = False

    def _commit_loop(self) -> None:
        while True:
            r = self._next_round()
            if r is None:
                return
            for seg, chunks in r.pending.items():
                if seg.broken is not None:
                    r.failed[seg] = seg.broken
                    continue
                try:
                    self._write(seg, b"".join(chunks))
                except OSError as e:
                    log.error("spool segment %s: write failed: %s", seg.path, e)
                    seg.broken = r.failed[seg] = e
                    self._cut_back(seg)
            self.commits += 1
            if r.failed:
                with self._cond:  # no more lines into a segment whose state is unknown
                    for seg in r.failed:
                        if self._open.get(seg.source_id) is seg:
                            self._close_locked(seg)
                    self._cond.notify()
            r.done.set()
            for seg in r.closing:
                if seg.fd is not None:
                    os.close(seg.fd)
                    seg.fd = None
                if os.path.exists(seg.path):
                    self.on_closed(seg.closed())

    @staticmethod
    def _cut_back(seg: _Segment) -> None:
        """After a failed write: drop what it may have left (a part of a line), so the file
        stays whole, fsync'd lines; the next lines go to a new segment."""
        if seg.fd is None:
            return
        try:
            os.ftruncate(seg.fd, seg.written)
            os.fsync(seg.fd)
        except OSError as e:
            log.error(
                "spool segment %s: cannot cut back to %d bytes: %s (the roll skips a "
                "torn last line; a line damaged in the middle would be quarantined by "
                "the sync)",
                seg.path,
                seg.written,
                e,
            )

    def _write(self, seg: _Segment, data: bytes) -> None:
        if seg.fd is None:
            folder = os.path.dirname(seg.path)
            if folder not in self._known_dirs:
                os.makedirs(folder, exist_ok=True)
                fsync_dir(self.spool_dir)
                self._known_dirs.add(folder)
            seg.fd = os.open(seg.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
            fsync_dir(folder)  # the new file's name is durable before any reply depends on it
        view = memoryview(data)
        while view:
            n = os.write(seg.fd, view)
            view = view[n:]
        os.fsync(seg.fd)
        seg.written += len(data)
