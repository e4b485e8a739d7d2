"""Several collector processes on one port (``[collector] workers``): Python runs one thread
at a time per process, and JSON decoding is most of a request's work.

Pre-fork: the parent binds the listening socket, takes the spool's lock
(``<spool_dir>/.lock``, so no single-process collector runs on the same spool), moves the
segments of spools nobody will own (``<spool_dir>/<source>/`` of a single-process run,
``worker.<i>`` beyond the new count) into ``worker.0``, then forks the workers. Worker ``i``
is a whole ``Collector`` (server, spool, roller) with its own spool
``<spool_dir>/worker.<i>/``, accepting connections on the shared socket; a keep-alive
connection stays with the worker that accepted it. Segment ids are random, so the workers'
archive files never collide.

The parent restarts a worker that dies (its spool is recovered by the new one), stops the
workers on SIGTERM/SIGINT (each stops gracefully: finishes its requests, rolls its spool;
after ``[collector] drain_seconds`` of ``/ready`` failing if the parent got SIGTERM), and
exits once they have. A worker whose parent dies gets SIGTERM (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import signal
import socket
import time

from datalake_assets.ingest.collector.spool_files import (
    WORKER_PREFIX,
    adopt_worker_spools,
    lock_spool,
    move_segments,
)
from datalake_assets.settings import LakeSettings

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1


def worker_spool(spool_dir: str, index: int) -> str:
    return os.path.join(spool_dir, f"{WORKER_PREFIX}{index}")


def prepare_spool(spool_dir: str, workers: int) -> int:
    """Move segments no worker of this run would own into ``worker.0`` (the caller holds the
    spool's lock); returns how many moved."""
    first = worker_spool(spool_dir, 0)
    fd = lock_spool(first)
    try:
        moved = move_segments(spool_dir, first)  # a single-process run's segments
        return moved + adopt_worker_spools(spool_dir, keep=workers, into=first)
    finally:
        os.close(fd)


def _die_with_parent() -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # not Linux: the parent's SIGTERM still reaches us
        pass


def _worker_main(
    settings: LakeSettings, sock: socket.socket, spool_dir: str, report_fd: int
) -> int:
    from datalake_assets.ingest.collector.server import Collector

    _die_with_parent()
    stopping: list[int] = []  # the stop signals received, first first

    def stop(signum: int, _frame: object) -> None:
        stopping.append(signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    collector = Collector(settings, spool_dir=spool_dir, listen_socket=sock)
    collector.start()
    while not stopping:
        time.sleep(0.2)
    # SIGTERM (the parent's drain, or the parent's death): drain; SIGINT (Ctrl-C reaches the
    # whole process group, or the parent's stop without a drain): stop at once
    drain = settings.collector.drain_seconds if stopping[0] == signal.SIGTERM else 0
    complete = collector.stop(drain_seconds=drain)
    os.write(report_fd, json.dumps(collector.stats()).encode() + b"\n")
    return 0 if complete else 1


class Workers:
    """The parent of ``n`` collector worker processes."""

    def __init__(
        self, settings: LakeSettings, n: int, host: str | None = None, port: int | None = None
    ) -> None:
        cs = settings.collector
        self.settings = settings
        self.n = n
        self.host = cs.host if host is None else host
        self.port = cs.port if port is None else port
        self.spool_dir = os.path.abspath(cs.spool_path())
        self.pids: dict[int, int] = {}  # pid -> worker index
        self.stats: list[dict[str, int]] = []
        self._sock: socket.socket | None = None
        self._lock_fd: int | None = None
        self._report_r, self._report_w = -1, -1
        self.moved = 0

    @property
    def url(self) -> str:
        assert self._sock is not None
        host, port = self._sock.getsockname()[:2]
        return f"http://{'[' + host + ']' if ':' in host else host}:{port}"

    def start(self) -> None:
        if not self.settings.write_key_sources():
            raise RuntimeError(
                "no write keys configured: add write_keys to a [[sources]] entry of the "
                'settings, or set DATALAKE_WRITE_KEYS="key=source,..."'
            )
        self._lock_fd = lock_spool(self.spool_dir)
        self.moved = prepare_spool(self.spool_dir, self.n)
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        sock.listen(256)
        sock.setblocking(False)  # a connection another worker accepted first: no block
        self._sock = sock
        self._report_r, self._report_w = os.pipe()
        for i in range(self.n):
            self._spawn(i)

    def _spawn(self, index: int) -> None:
        assert self._sock is not None
        pid = os.fork()
        if pid == 0:  # the worker
            code = 1
            try:
                os.close(self._report_r)
                if self._lock_fd is not None:
                    os.close(self._lock_fd)  # the parent's lock stays the parent's
                code = _worker_main(
                    self.settings, self._sock, worker_spool(self.spool_dir, index), self._report_w
                )
            except BaseException:
                log.exception("collector worker %d failed", index)
            finally:
                os._exit(code)
        self.pids[pid] = index

    def supervise(self, should_stop) -> None:
        """Restart workers that die, until ``should_stop()``."""
        while not should_stop():
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                pid = 0
            if pid and pid in self.pids:
                index = self.pids.pop(pid)
                log.error(
                    "collector worker %d (pid %d) exited with status %d: restarting it",
                    index,
                    pid,
                    status,
                )
                time.sleep(0.5)
                self._spawn(index)
                continue
            time.sleep(0.2)

    def stop(self, timeout: float = 60.0, drain_seconds: float = 0.0) -> bool:
        """Stop every worker; wait for them; whether all exited 0 (everything rolled).
        ``drain_seconds > 0``: SIGTERM, each worker drains for its settings'
        ``[collector] drain_seconds`` (the value the caller passes: the workers cannot be told
        another once forked); else SIGINT, each stops at once."""
        sig = signal.SIGTERM if drain_seconds > 0 else signal.SIGINT
        for pid in self.pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        ok = True
        deadline = time.monotonic() + drain_seconds + timeout  # no worker killed mid-drain
        while self.pids:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid:
                self.pids.pop(pid, None)
                ok = ok and os.waitstatus_to_exitcode(status) == 0
                continue
            if time.monotonic() > deadline:
                for pid in self.pids:
                    os.kill(pid, signal.SIGKILL)  # their spools wait for the next start
                timeout, deadline = 0, float("inf")
                ok = False
            time.sleep(0.05)
        os.close(self._report_w)
        with os.fdopen(self._report_r, "rb") as f:
            self.stats = [json.loads(line) for line in f.read().splitlines() if line.strip()]
        if self._sock is not None:
            self._sock.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
        return ok
