"""The collector's readiness (``GET /ready``): whether a load balancer should send it requests.

``/health`` says the process answers (liveness: restart it if not); ``/ready`` says it can
also keep its promise, that an acknowledged message is durable. It cannot while it drains
(``Collector.stop``), nor when its spool cannot take a write: a full disk, a read-only or
vanished volume. Every request would then be answered 503, so the replica is taken out of
rotation until the spool is writable again, without being restarted (a restart would not free
the disk, and would have to recover the spool it cannot write).

The spool is tested by writing, fsync'ing and removing a small file in it, which is what an
append does: checking permissions alone would say yes to root on a read-only mount and on a
full disk.
"""

from __future__ import annotations

import os
import threading

PROBE_PREFIX = ".ready-probe-"  # a dot file: never taken for a segment (spool_files.py)


def spool_write_error(spool_dir: str) -> str | None:
    """Why a small write into the spool failed, ``None`` if it succeeded."""
    # one file per thread: two probes at once never remove each other's file
    path = os.path.join(spool_dir, f"{PROBE_PREFIX}{threading.get_ident()}")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, b"ready\n")
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as e:
        return f"spool {spool_dir} cannot be written: {e.strerror or e}"
    finally:
        try:
            os.remove(path)
        except OSError:
            pass  # never created, or the folder is read-only: nothing left to remove
    return None


def not_ready_reason(draining: bool, spool_dir: str) -> str | None:
    """``None`` when the collector is ready, else why not."""
    if draining:
        return "draining: the collector is stopping"
    return spool_write_error(spool_dir)
