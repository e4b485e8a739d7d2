"""Writing one demo source hour: its files (each under a temporary dot-name, renamed when
complete; compressed and written by a background thread while the next lines are generated),
its lines in received-time order, and the re-deliveries of duplicated messages later in the
hour."""

from __future__ import annotations

import os
import random
import zlib
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor

import orjson

from datalake_assets.ingest.demo.hour_messages import _Hour
from datalake_assets.ingest.demo.timestamps import _ms_z
from datalake_assets.ingest.demo.traffic_mix import (
    MALFORMED_KINDS,
    MALFORMED_REASONS,
    GenerateSummary,
)
from datalake_assets.lake import storage
from datalake_assets.spec.layout import ArchiveHour, archive_hour_dir, join

_HOUR_MS = 3_600_000


class _Sink:
    """One archive file, written under a temporary dot-name and renamed when complete.

    Chunks are compressed and written by a background thread (zlib and file writes release the
    GIL, so compression overlaps generation); one writer thread per call keeps the bytes in
    order, so the output does not depend on timing.
    """

    _MAX_IN_FLIGHT = 4

    def __init__(
        self,
        fs,
        directory: str,
        name: str,
        compress: bool,
        pool: ThreadPoolExecutor,
        root: str = "",
    ) -> None:
        self.fs = fs
        self.root = root  # the archive root: how a file is published there (storage.publish)
        self.final = f"{directory}/{name}"
        self.tmp = f"{directory}/.{name}.tmp"
        self.pool = pool
        self.in_flight: deque[Future] = deque()
        if fs is None:
            self.out = open(self.tmp, "wb")  # noqa: SIM115 - closed in close()/abort()
        else:
            self.out = fs.open_output_stream(self.tmp, compression=None)
        # wbits 31: a gzip stream (header without name or mtime, so the bytes are reproducible)
        self.z = zlib.compressobj(1, zlib.DEFLATED, 31) if compress else None

    def _write(self, data: bytes) -> None:
        self.out.write(self.z.compress(data) if self.z is not None else data)

    def write(self, data: bytes) -> None:
        self.in_flight.append(self.pool.submit(self._write, data))
        if len(self.in_flight) > self._MAX_IN_FLIGHT:
            self.in_flight.popleft().result()

    def close(self) -> None:
        while self.in_flight:
            self.in_flight.popleft().result()
        if self.z is not None:
            self.out.write(self.z.flush())
        self.out.close()
        if self.fs is None:
            os.replace(self.tmp, self.final)
        else:  # a rename, or on blob-only Azure a copy and a delete
            storage.publish(self.fs, self.tmp, self.final, self.root)

    def abort(self) -> None:
        for fut in self.in_flight:
            fut.cancel()
        for fut in self.in_flight:
            if not fut.cancelled():
                try:
                    fut.result()
                except Exception:  # noqa: BLE001, S110 - the original error is re-raised
                    pass
        self.in_flight.clear()
        try:
            self.out.close()
        except Exception:  # noqa: BLE001, S110
            pass
        try:
            if self.fs is None:
                os.remove(self.tmp)
            else:
                self.fs.delete_file(self.tmp)
        except Exception:  # noqa: BLE001, S110
            pass


def _write_hour(
    fs,
    base: str,
    archive_root: str,
    source_id: str,
    hour: ArchiveHour,
    ext: str,
    compress: bool,
    pool: ThreadPoolExecutor,
    cat: dict,
    users: list[dict],
    summary: GenerateSummary,
    n_lines: int,
    files_per_hour: int,
    seed: int,
    malformed_rate: float,
    duplicate_rate: float,
    late_rate: float,
) -> None:
    rng = random.Random(f"datalake-demo|hour|{seed}|{source_id}|{hour}")
    rnd = rng.random
    start_ms = int(hour.start.timestamp()) * 1000
    end_ms = start_ms + _HOUR_MS  # exclusive
    gen = _Hour(rng, cat, users, late_rate)
    message = gen.message
    dumps = orjson.dumps
    directory = archive_hour_dir(base, source_id, hour)
    if fs is None:
        os.makedirs(directory, exist_ok=True)
    else:
        fs.create_dir(directory, recursive=True)

    n_files = min(files_per_hour, n_lines)
    ms_per_slot = _HOUR_MS / n_lines
    jitter = max(1, _HOUR_MS // n_lines)
    by_type, by_event = summary.by_type, summary.by_event
    reasons = summary.malformed_by_reason
    # slot -> (message, the receivedAt in ms of its previous delivery)
    pending: dict[int, tuple[dict, int]] = {}
    valid = dups = bad = nbytes = 0
    buf: list[bytes] = []
    add = buf.append

    for f in range(n_files):
        first, last = f * n_lines // n_files, (f + 1) * n_lines // n_files
        name = f"part-{f:04d}{ext}"
        sink = _Sink(fs, directory, name, compress, pool, archive_root)
        try:
            for slot in range(first, last):
                # this line's receivedAt: its share of the hour plus jitter, inside the hour
                rec = start_ms + int(slot * ms_per_slot) + int(rnd() * jitter)
                if rec >= end_ms:
                    rec = end_ms - 1
                again = pending.pop(slot, None) if pending else None
                if again is not None and rec <= again[1]:
                    # only possible above one line per millisecond: a little later, or never
                    rec = again[1] + 1
                    if rec >= end_ms:
                        again, rec = None, end_ms - 1
                if again is not None:
                    msg = again[0].copy()
                    msg["receivedAt"] = _ms_z(rec)
                    add(dumps(msg))
                    dups += 1
                    if rnd() < 0.05:  # a third delivery, now and then
                        _schedule(pending, msg, rec, slot, n_lines, ms_per_slot, rnd)
                elif rnd() < malformed_rate:
                    kind = MALFORMED_KINDS[int(rnd() * len(MALFORMED_KINDS))]
                    add(gen.malformed(kind, rec))
                    bad += 1
                    reason = MALFORMED_REASONS[kind]
                    reasons[reason] = reasons.get(reason, 0) + 1
                else:
                    msg = message(rec)
                    add(dumps(msg))
                    valid += 1
                    t = msg["type"]
                    by_type[t] += 1
                    if t == "track":
                        e = msg["event"]
                        by_event[e] = by_event.get(e, 0) + 1
                    if rnd() < duplicate_rate:
                        _schedule(pending, msg, rec, slot, n_lines, ms_per_slot, rnd)
                if len(buf) >= 1024:
                    buf.append(b"")  # so the join ends with a newline
                    data = b"\n".join(buf)
                    buf.clear()
                    nbytes += len(data)
                    sink.write(data)
            if buf:
                buf.append(b"")
                data = b"\n".join(buf)
                buf.clear()
                nbytes += len(data)
                sink.write(data)
            sink.close()
        except BaseException:
            sink.abort()
            raise
        summary.files.append(join(archive_hour_dir(archive_root, source_id, hour), name))

    if pending:  # cannot happen: every reserved slot lies inside the hour
        raise AssertionError("a scheduled re-delivery was not written")
    summary.lines += n_lines
    summary.valid_messages += valid
    summary.duplicate_lines += dups
    summary.malformed_lines += bad
    summary.bytes_uncompressed += nbytes


def _schedule(
    pending: dict, msg: dict, rec: int, slot: int, n_lines: int, ms_per_slot: float, rnd
) -> None:
    """Reserve a later slot of the hour for a re-delivery of ``msg``: mostly seconds to
    minutes later, sometimes up to half an hour; at least two slots on, so its receivedAt is
    later. No re-delivery when the hour has no later free slot."""
    r = rnd()
    delay_ms = 1000 + r * r * r * 1_800_000
    target = slot + max(2, int(delay_ms / ms_per_slot))
    if target >= n_lines:
        lo = slot + 2
        if lo >= n_lines:
            return
        target = lo + int(rnd() * (n_lines - lo))
    while target in pending:
        target += 1
        if target >= n_lines:
            return
    pending[target] = (msg, rec)
