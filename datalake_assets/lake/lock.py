"""One sync per source at a time, whoever starts it (Dagster, the CLI, EMR, a second host).

A sync deletes its source's staging debris and rolls journaled commits forward when it starts,
and swaps partitions when it ends: two syncs of one source at once would undo each other. The
lock makes the second one wait for the first (up to ``wait_s``) and then run against the
committed result, so two runs of the same hour are *serialized*, never interleaved.

- Local lake: ``flock`` on ``<lake>/_locks/<source>.lock``. The kernel drops it when the holder
  dies, even by ``SIGKILL``: a crashed sync never blocks the next one.
- ``s3://``, ``abfss://`` or ``az://`` lake: a lease object ``_locks/<source>.json`` created
  with a conditional write (``If-None-Match: *``), renewed by a heartbeat with ``If-Match`` on
  its ETag (``lake/lease_store.py``: boto3 on S3, the Azure SDK on Azure, where pyarrow has no
  conditional writes). A holder that
  died stops renewing; after ``lease_s`` the next sync takes the lease over (again with
  ``If-Match``, so two waiters cannot both win). A holder that lost its lease (a pause longer
  than the lease) finds out at ``check()`` before it commits, and fails instead of committing.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from datalake_assets.lake.lease_store import AzureLeaseStore, LeaseStore, S3LeaseStore
from datalake_assets.spec import layout
from datalake_assets.spec.azure_uri import is_azure


class LockTimeout(RuntimeError):
    """Another sync of the source held the lock for longer than the wait allowed."""


class LockLost(RuntimeError):
    """The lease was taken over (the holder paused longer than the lease)."""


def _holder(run_id: str, lease_s: float | None = None, now: float | None = None) -> dict:
    body = {
        "run_id": run_id,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "since": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    if lease_s is not None:
        body["expires_at"] = (time.time() if now is None else now) + lease_s
    return body


def _describe(body: dict) -> str:
    return (
        f"run {body.get('run_id', '?')} (pid {body.get('pid', '?')} on "
        f"{body.get('host', '?')}, since {body.get('since', '?')})"
    )


class SourceLock:
    """``with SourceLock(lake_root, source_dir, run_id): ...``; see the module docstring.
    ``clock``: the wall clock that leases (S3, Azure) expire by (injectable, so tests of expiry and
    renewal do not depend on how fast a busy machine schedules the heartbeat)."""

    def __init__(
        self,
        lake_root: str,
        source_dir: str,
        run_id: str,
        wait_s: float = 600.0,
        lease_s: float = 300.0,
        poll_s: float = 1.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.clock = clock
        self.location = layout.join(lake_root, "_locks", f"{source_dir}.lock")
        self.source_dir = source_dir
        self.run_id = run_id
        self.wait_s = wait_s
        self.lease_s = lease_s
        self.poll_s = poll_s
        self.waited_s = 0.0
        self._impl = _ObjectLease(self) if "://" in lake_root else _LocalFlock(self)

    def __enter__(self) -> SourceLock:
        t = time.monotonic()
        self._impl.acquire()
        self.waited_s = time.monotonic() - t
        return self

    def __exit__(self, *exc) -> None:
        self._impl.release()

    def check(self) -> None:
        """Raise ``LockLost`` if this holder no longer holds the lock (call before committing)."""
        self._impl.check()

    def _timeout(self, holder: dict) -> LockTimeout:
        return LockTimeout(
            f"another sync of source {self.source_dir!r} holds its lock: {_describe(holder)}; "
            f"waited {self.wait_s:.0f} s. Nothing was changed; retry when it has finished"
        )


class _LocalFlock:
    def __init__(self, lock: SourceLock) -> None:
        self.lock = lock
        self.fd: int | None = None

    def acquire(self) -> None:
        path = self.lock.location
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + self.lock.wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EACCES):
                    os.close(fd)
                    raise
                if time.monotonic() >= deadline:
                    holder = self._read(fd)
                    os.close(fd)
                    raise self.lock._timeout(holder) from None
                time.sleep(self.lock.poll_s)
        # Who holds it, for the next waiter's message (informational; the flock is the lock).
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(_holder(self.lock.run_id)).encode(), 0)
        self.fd = fd

    @staticmethod
    def _read(fd: int) -> dict:
        try:
            return json.loads(os.pread(fd, 4096, 0) or b"{}")
        except ValueError:
            return {}

    def release(self) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None

    def check(self) -> None:
        return None  # a flock cannot be taken away from a live holder


class _ObjectLease:
    """The lease of an object store (S3 or Azure blobs), on a ``LeaseStore``'s conditional
    writes; see the module docstring."""

    def __init__(self, lock: SourceLock) -> None:
        self.lock = lock
        location = lock.location[: -len(".lock")] + ".json"
        self.store: LeaseStore = (
            AzureLeaseStore(location) if is_azure(location) else S3LeaseStore(location)
        )
        self.etag: str | None = None
        self.lost = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._mutex = threading.Lock()

    def _body(self) -> bytes:
        return json.dumps(_holder(self.lock.run_id, self.lock.lease_s, self.lock.clock())).encode()

    def acquire(self) -> None:
        deadline = time.monotonic() + self.lock.wait_s
        holder: dict = {}
        while True:
            self.etag = self.store.create(self._body())
            if self.etag is not None:
                break
            got = self.store.read()
            if got is None:
                continue  # released between our create and read: try again at once
            holder, etag = got
            if float(holder.get("expires_at", 0)) < self.lock.clock():  # holder died: take over
                self.etag = self.store.replace(self._body(), etag)  # two waiters: one wins
                if self.etag is not None:
                    break
            if time.monotonic() >= deadline:
                raise self.lock._timeout(holder)
            time.sleep(self.lock.poll_s)
        self._thread = threading.Thread(
            target=self._heartbeat, daemon=True, name=f"datalake-lease-{self.lock.source_dir}"
        )
        self._thread.start()

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.lock.lease_s / 3):
            with self._mutex:
                try:
                    etag = self.store.replace(self._body(), self.etag or "")
                except Exception:  # noqa: BLE001 - transient: the lease has slack for two beats
                    continue
                if etag is None:  # taken over, or deleted
                    self.lost = True
                    return
                self.etag = etag

    def check(self) -> None:
        if not self.lost:  # one HEAD: is the lease still ours?
            self.lost = self.store.etag() != self.etag
        if self.lost:
            raise LockLost(
                f"the lock of source {self.lock.source_dir!r} was taken over while this sync "
                "paused longer than its lease; nothing was committed"
            )

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._mutex:
            if self.lost or self.etag is None:
                return
            self.store.delete(self.etag)
