"""The collector's HTTP service and its life cycle: Segment's tracking API (``http_handler``)
in front of the spool and the roller.

The standard library's ``ThreadingHTTPServer`` (one thread per connection, HTTP/1.1
keep-alive): the work per request is JSON decoding and stamping (``protocol``,
``message_rules``), then one wait for a group-committed fsync (``spool``), so threads
suffice; the figures are in ``docs/reference/performance.md`` and ``bench/bench_collector.py``.

Life cycle (``Collector``): ``start()`` locks the spool, reads the suppression list
(``suppression.py``: suppressed messages are answered as accepted, then dropped), hands the
segments an earlier process left to the roller, and listens. ``stop()`` is graceful: no new
connections, requests in progress finish (``Connection: close``), idle keep-alive connections
are closed, every spool segment is committed, closed and rolled into the archive. ``/ready``
answers 503 from its first step (``readiness.py``), and ``drain_seconds`` keeps accepting
that long after it, so a load balancer polling ``/ready`` sends new clients elsewhere before
the port closes. ``/metrics`` (``metrics.py``) exposes this collector's counters alone.
"""

from __future__ import annotations

import logging
import socket
import threading
import time

from datalake_assets.ingest.collector import protocol
from datalake_assets.ingest.collector.cors import Cors, KeyTable
from datalake_assets.ingest.collector.http_handler import _Handler, _Server
from datalake_assets.ingest.collector.metrics import CollectorMetrics
from datalake_assets.ingest.collector.roller import Roller
from datalake_assets.ingest.collector.spool import Spool
from datalake_assets.ingest.collector.suppression import Suppression
from datalake_assets.settings import LakeSettings

log = logging.getLogger(__name__)


class Collector:
    """The collector of one settings: ``start()``, then ``stop()`` (graceful)."""

    def __init__(
        self,
        settings: LakeSettings,
        host: str | None = None,
        port: int | None = None,
        spool_dir: str | None = None,
        listen_socket: socket.socket | None = None,
    ) -> None:
        """``spool_dir``: default ``[collector] spool_dir``; ``listen_socket``: a listening
        socket to accept on (shared by worker processes) instead of binding host and port."""
        cs = settings.collector
        self.settings = settings
        self.host = cs.host if host is None else host
        self.port = cs.port if port is None else port
        self.limits = protocol.Limits(cs.max_message_bytes, cs.max_batch_bytes)
        self.keys = KeyTable({k: s.id for k, s in settings.write_key_sources().items()})
        self.cors = Cors({s.id: s.cors_origins for s in settings.sources})
        self.max_pending = cs.max_pending_requests
        self._pending = 0  # requests in progress (under _stats_lock)
        self.suppression = Suppression.of(settings)
        self.roller = Roller(settings.archive_root, suppression=self.suppression)
        self.spool = Spool(
            spool_dir or cs.spool_path(),
            self.roller.submit,
            cs.segment_max_bytes,
            cs.segment_max_age_seconds,
        )
        self.metrics = CollectorMetrics(self.spool.spool_dir, self.roller, lambda: self._pending)
        self._listen_socket = listen_socket
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[_Handler] = set()
        self._draining = False
        self._stats_lock = threading.Lock()
        self._stats = dict.fromkeys(
            (
                "requests",
                "accepted",
                "rejected",
                "suppressed",
                "busy",
                "unauthorized",
                "errors",
                "preflights",
                "refused_origins",
            ),
            0,
        )
        self.recovered = 0

    # ------------------------------------------------------------------------------ running

    @property
    def address(self) -> tuple[str, int]:
        if self._httpd is None:
            raise RuntimeError("the collector is not started")
        host, port = self._httpd.server_address[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        host, port = self.address
        return f"http://{'[' + host + ']' if ':' in host else host}:{port}"

    def start(self) -> Collector:
        if not self.keys:
            raise RuntimeError(
                "no write keys configured: add write_keys to a [[sources]] entry of the "
                'settings, or set DATALAKE_WRITE_KEYS="key=source,..."'
            )
        left = self.spool.open()
        try:
            self.suppression.start()  # before the roller takes the segments left by a crash
            self.recovered = len(left)
            self.roller.start()
            for seg in left:
                self.roller.submit(seg)
            if left:
                log.info("rolling %d spool segment(s) left by an earlier run", len(left))
            server_cls = _Server
            if ":" in self.host:
                server_cls = type("_Server6", (_Server,), {"address_family": socket.AF_INET6})
            if self._listen_socket is None:
                self._httpd = server_cls((self.host, self.port), _Handler)
            else:
                self._httpd = server_cls(
                    self._listen_socket.getsockname()[:2], _Handler, bind_and_activate=False
                )
                self._httpd.socket.close()
                self._httpd.socket = self._listen_socket
        except BaseException:
            self.spool.close()
            self.roller.stop()
            self.suppression.stop()
            raise
        self._httpd.collector = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.2},
            name="collector-http",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self, timeout: float = 30.0, drain_seconds: float = 0.0) -> bool:
        """Graceful shutdown; returns whether every segment reached the archive (if not,
        the rest stays in the spool for the next start). ``drain_seconds``: how long requests
        are still accepted once ``/ready`` fails (each reply then closes its connection)."""
        if self._httpd is None:
            return True
        self._draining = True
        if drain_seconds > 0:
            time.sleep(drain_seconds)
        self._httpd.shutdown()  # no new connections
        self._httpd.server_close()
        deadline = time.monotonic() + timeout
        for conn in list(self._connections):  # idle keep-alive connections: closed now
            if not conn.busy:
                try:
                    conn.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        while any(conn.busy for conn in list(self._connections)) and time.monotonic() < deadline:
            time.sleep(0.02)
        self.spool.close()
        complete = self.roller.stop(timeout=max(1.0, deadline - time.monotonic()))
        self.suppression.stop()
        self._httpd = None
        return complete

    # -------------------------------------------------------------------------------- stats

    def _count(self, name: str, n: int = 1) -> None:
        with self._stats_lock:
            self._stats[name] += n

    def stats(self) -> dict[str, int]:
        with self._stats_lock:
            out = dict(self._stats)
        out.update(
            fsync_rounds=self.spool.commits,
            segments_rolled=self.roller.rolled,
            segments_waiting=self.roller.pending(),
            roll_failures=self.roller.failures,
            suppressed_at_roll=self.roller.suppressed,
            **self.suppression.stats(),
        )
        return out
