"""Erasure from the collector's spool: the lines of given identities removed from the spool
segments on disk (``erase_from_spool``), for the erasure engine (``privacy/``).

**Which segments.** A spool is owned by one process at a time, which holds its ``flock``
(``spool_files.lock_spool``): the single-process spool ``<spool_dir>/`` and each worker's
``<spool_dir>/worker.<i>/``. A spool whose lock this function can take has no live
collector: every segment in it is sealed (left by a stopped or crashed process, waiting for
the next start's roll), and each one holding a line of the identities is rewritten while the
lock is held, so no collector can start on it and roll it meanwhile (a collector starting in
that moment fails to take the lock and must be restarted: a worker is restarted by its parent).

A spool whose lock is held belongs to a running collector: its open segment is being appended
to through an open descriptor, and its closed ones may be read by the roller at any moment, so
none of them can be replaced without losing lines or racing the roller. They are *skipped*
(counted in ``SpoolErasure.skipped_live``). What covers them is the suppression: the erasure
engine writes the identities to the suppression list first; a running collector re-reads it
within ``[privacy] suppression_reload_seconds``, drops new messages of those identities at
accept time, and its roller leaves their earlier lines out of every segment it rolls from then
on (``roller.py``). Lines rolled in between are in the archive, where the archive erasure
finds them. So an engine should: suppress, wait one reload interval, erase the spool, then
erase the archive.

**How.** Each affected segment is rewritten as ``.erase-<name>`` beside it (a name the spool
and the roller ignore: it starts with a dot), fsync'd, renamed over the segment and the folder
fsync'd: the segment is the old or the new version, never a mix, whatever crash. A segment
that loses every line is deleted. A torn last line (never acknowledged) is kept as it is.
A line that is not a JSON object names nobody and is kept.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import BinaryIO

import orjson

from datalake_assets.ingest.collector.spool_files import (
    WORKER_PREFIX,
    SpoolError,
    fsync_dir,
    lock_spool,
    parse_segment_path,
    source_dirs,
)
from datalake_assets.spec.identity import identity_hashes

log = logging.getLogger(__name__)

TMP_PREFIX = ".erase-"


@dataclass
class SpoolErasure:
    """What ``erase_spool`` did: lines removed, segments rewritten (or deleted when emptied),
    and segments of live collectors' spools left to the suppression (module docstring)."""

    lines_removed: int = 0
    segments_rewritten: int = 0
    segments_deleted: int = 0
    skipped_live: int = 0


def erase_from_spool(
    spool_dir: str, key: bytes, hashes: frozenset[str], traits: Iterable[str]
) -> int:
    """Remove the lines of the identities ``hashes`` (``identity_hash`` under ``key``) from
    the sealed segments of the spool; returns the lines removed (``erase_spool`` for more)."""
    return erase_spool(spool_dir, key, hashes, traits).lines_removed


def erase_spool(
    spool_dir: str, key: bytes, hashes: frozenset[str], traits: Iterable[str]
) -> SpoolErasure:
    out = SpoolErasure()
    if not hashes or not os.path.isdir(spool_dir):
        return out
    traits = tuple(traits)
    cache: dict[object, str] = {}

    def names_them(line: bytes) -> bool:
        try:
            message = orjson.loads(line)
        except orjson.JSONDecodeError:  # an integer wider than 64 bits: the exact parser
            try:
                message = json.loads(line)
            except (ValueError, RecursionError):
                return False
        return type(message) is dict and not hashes.isdisjoint(
            identity_hashes(message, traits, key, cache)
        )

    for spool in _spools(spool_dir):
        try:
            fd = lock_spool(spool)
        except SpoolError:  # a running collector's: covered by the suppression
            out.skipped_live += len(_segments(spool, clean=False))
            continue
        try:
            for path in _segments(spool):
                _erase_segment(path, names_them, out)
        finally:
            os.close(fd)
    if out.skipped_live:
        log.warning(
            "spool erasure: %d segment(s) of running collectors skipped; their lines "
            "are dropped by the suppression list when rolled",
            out.skipped_live,
        )
    return out


def _spools(spool_dir: str) -> list[str]:
    """The spool itself and its worker spools."""
    out = [spool_dir]
    for name in sorted(os.listdir(spool_dir)):
        path = os.path.join(spool_dir, name)
        if (
            name.startswith(WORKER_PREFIX)
            and name[len(WORKER_PREFIX) :].isdigit()
            and os.path.isdir(path)
        ):
            out.append(path)
    return out


def _segments(spool: str, clean: bool = True) -> list[str]:
    """The spool's segments; ``clean``: delete rewrites a crash interrupted (never renamed,
    so never part of the spool) on the way (only in a spool this process has locked)."""
    out = []
    for folder in source_dirs(spool):
        for name in sorted(os.listdir(folder)):
            path = os.path.join(folder, name)
            if name.startswith(TMP_PREFIX):
                if clean:
                    os.remove(path)
            elif parse_segment_path(path) is not None:
                out.append(path)
    return out


def _copy_head(path: str, writer: BinaryIO, size: int) -> None:
    with open(path, "rb") as f:
        while size > 0:
            chunk = f.read(min(size, 1 << 20))
            if not chunk:
                raise OSError(f"{path}: shorter than it was a moment ago")
            writer.write(chunk)
            size -= len(chunk)


def _erase_segment(path: str, names_them: Callable[[bytes], bool], out: SpoolErasure) -> None:
    """Rewrite one segment without the lines ``names_them`` says yes to (module docstring)."""
    folder, name = os.path.split(path)
    tmp = os.path.join(folder, TMP_PREFIX + name)
    removed = kept = 0
    writer: BinaryIO | None = None
    try:
        with open(path, "rb") as f:
            offset = 0
            for line in f:
                if line.endswith(b"\n") and names_them(line[:-1]):
                    if writer is None:  # the first match: copy what came before it
                        writer = open(tmp, "wb")
                        _copy_head(path, writer, offset)
                    removed += 1
                else:
                    kept += 1
                    if writer is not None:
                        writer.write(line)
                offset += len(line)
        if writer is None:
            return
        writer.flush()
        os.fsync(writer.fileno())
    except BaseException:
        if writer is not None:
            writer.close()
            os.remove(tmp)
        raise
    writer.close()
    if kept:
        os.replace(tmp, path)
        out.segments_rewritten += 1
    else:
        os.remove(tmp)
        os.remove(path)
        out.segments_deleted += 1
    fsync_dir(folder)
    out.lines_removed += removed
