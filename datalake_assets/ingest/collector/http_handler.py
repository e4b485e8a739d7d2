"""The collector's HTTP handling: one ``_Handler`` per connection of the standard library's
``ThreadingHTTPServer`` (one thread per connection, HTTP/1.1 keep-alive). ``POST`` reads the
body (``body.py``), checks the origin (``cors.py``) and the write key, decodes the request
(``protocol.py``), turns its messages into lines (``message_rules.py``) and waits for them
to be durable in the spool before it answers; ``GET`` serves analytics.js's settings
(``settings_endpoint.py``), ``/health`` (liveness), ``/ready`` (``readiness.py``) and
``/metrics`` (``metrics.py``); ``OPTIONS`` answers CORS preflights. Each reply is one write.
The collector (``server.py``) owns what the handlers share: keys, limits, spool, counters.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from threading import Lock
from typing import Any, Protocol

import orjson

from datalake_assets.ingest.collector import (
    http_request,
    message_rules,
    protocol,
    readiness,
    settings_endpoint,
)
from datalake_assets.ingest.collector.body import BodyError, read_body
from datalake_assets.ingest.collector.cors import ALLOW_METHODS, Cors, KeyTable
from datalake_assets.ingest.collector.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from datalake_assets.ingest.collector.metrics import CollectorMetrics, endpoint_label
from datalake_assets.ingest.collector.spool import Spool, SpoolError
from datalake_assets.ingest.collector.suppression import Suppression
from datalake_assets.spec.layout import ArchiveHour

# the collector's logger, the same name as before the handler had a module of its own
log = logging.getLogger("datalake_assets.ingest.collector.server")

IDLE_TIMEOUT_SECONDS = 60  # a keep-alive connection idle this long is closed
RETRY_AFTER_BUSY = "1"  # seconds, on a 429 (too many requests in progress)
RETRY_AFTER_UNAVAILABLE = "5"  # seconds, on a 503 (the spool failed, or shutting down)


_REASONS = {code: phrase for code, (phrase, _) in BaseHTTPRequestHandler.responses.items()}
_date_cache: tuple[int, str] = (0, "")


def _http_date() -> str:
    """The ``Date`` header's value, formatted once a second."""
    global _date_cache
    now = int(time.time())
    if _date_cache[0] != now:
        _date_cache = (now, formatdate(now, usegmt=True))
    return _date_cache[1]


class CollectorView(Protocol):
    """What a handler uses of its collector (``server.Collector``, which imports this module):
    the settings, the write keys, CORS, the limits, the suppression list and the spool, and
    the counters and the set of connections the handlers keep up to date."""

    settings: Any  # the LakeSettings: [collector] public_url
    keys: KeyTable
    cors: Cors
    limits: protocol.Limits
    max_pending: int
    suppression: Suppression
    spool: Spool
    metrics: CollectorMetrics
    _pending: int  # requests in progress (under _stats_lock)
    _draining: bool
    _stats_lock: Lock
    _connections: set[_Handler]

    @property
    def url(self) -> str: ...

    def _count(self, name: str, n: int = 1) -> None: ...

    def stats(self) -> dict[str, int]: ...


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256

    collector: CollectorView  # a server.Collector


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "datalake-collector/1"
    timeout = IDLE_TIMEOUT_SECONDS
    # TCP_NODELAY: the reply's headers and body are two writes; with Nagle's algorithm the
    # body would wait for the client's delayed ACK of the headers (~40 ms a request).
    disable_nagle_algorithm = True
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.busy = False
        self._status: int | None = None  # of the last reply: a POST is counted by it
        self._settled = True  # a POST's figures taken (``_settle``)
        self._cors: tuple[tuple[str, str], ...] = ()
        # the last Authorization header this connection sent that named a key: (header,
        # (key, source id)); a browser or library sends the same one on every request
        self._auth: tuple[str | None, tuple[str | None, str | None]] = (None, (None, None))
        self.server.collector._connections.add(self)

    def finish(self) -> None:
        self.server.collector._connections.discard(self)
        super().finish()

    def parse_request(self) -> bool:
        return http_request.parse_request(self, super().parse_request)

    def log_message(self, format: str, *args: object) -> None:
        if log.isEnabledFor(logging.DEBUG):  # never headers: no keys
            log.debug("%s %s", self.address_string(), format % args)

    def _reply(
        self,
        status: int,
        body: dict[str, object] | None,
        close: bool = False,
        headers: list[tuple[str, str]] | tuple = (),
    ) -> None:
        """A JSON reply (or an empty one: ``body`` None)."""
        data = orjson.dumps(body) if body is not None else b""
        content_type = "application/json" if body is not None else None
        self._send(status, data, content_type, close, headers)

    def _send(
        self,
        status: int,
        data: bytes,
        content_type: str | None,
        close: bool = False,
        headers: list[tuple[str, str]] | tuple = (),
    ) -> None:
        """The whole reply in one write (status line, headers, body): one syscall and one
        packet per reply, which matters with one small event per request."""
        self._status = status
        lines = [
            f"HTTP/1.1 {status} {_REASONS.get(status, '')}\r\nServer: {self.server_version}"
            f"\r\nDate: {_http_date()}\r\nContent-Length: {len(data)}\r\n"
        ]
        if content_type is not None:
            lines.append(f"Content-Type: {content_type}\r\n")
        if status == 401:
            lines.append('WWW-Authenticate: Basic realm="segment write key"\r\n')
        if status == 429:
            lines.append(f"Retry-After: {RETRY_AFTER_BUSY}\r\n")
        if status == 503:
            lines.append(f"Retry-After: {RETRY_AFTER_UNAVAILABLE}\r\n")
        for name, value in (*self._cors, *headers):
            lines.append(f"{name}: {value}\r\n")
        if close or self.server.collector._draining:
            self.close_connection = True
        if self.close_connection:
            lines.append("Connection: close\r\n")
        lines.append("\r\n")
        self.log_request(status, len(data))
        if self.busy:  # a POST's figures before its reply: a client that reads the metrics
            self._settle()  # after its answer finds the request counted, none in progress
        self.wfile.write("".join(lines).encode("latin-1") + data)

    def _settle(self) -> None:
        """A POST's end in the figures, once: no longer pending, and its answer counted by
        endpoint and status (none when the client went away unanswered)."""
        if self._settled:
            return
        self._settled = True
        c = self.server.collector
        with c._stats_lock:
            c._pending -= 1
        if self._status is not None:
            c.metrics.answered(endpoint_label(self.path.split("?", 1)[0]), self._status)

    def _error(self, e: protocol.RequestError, close: bool = False) -> None:
        if self.busy:  # a POST refused whole (a GET's 404 is no rejected request)
            self.server.collector.metrics.request_rejected(e.code)
        self._reply(e.status, e.body(), close)

    def _admit_origin(self, c: CollectorView, source_id: str | None = None) -> bool:
        """CORS (``cors.py``): an admitted ``Origin`` (or none) -> True, the reply will carry
        the CORS headers; a refused one -> 403 sent, no CORS header."""
        origin = self.headers.get("Origin")
        if origin is None:
            return True
        if c.cors.allows(origin, source_id):
            self._cors = c.cors.headers(origin)
            return True
        self._cors = ()
        c._count("refused_origins")
        self._error(
            protocol.RequestError(
                403,
                "origin_not_allowed",
                "this page's origin may not send to this source (its cors_origins)",
            )
        )
        return False

    def do_OPTIONS(self) -> None:
        """CORS preflight: an origin admitted by any source gets 204 and the CORS headers."""
        c = self.server.collector
        self._cors = ()
        path = self.path.split("?", 1)[0]
        if path not in protocol.ENDPOINTS and settings_endpoint.write_key_of(path) is None:
            self._error(protocol.RequestError(404, "not_found", f"no such endpoint: {path}"))
            return
        origin = self.headers.get("Origin")
        if origin is None:  # not a preflight
            self._reply(204, None, headers=[("Allow", ALLOW_METHODS)])
        elif c.cors.allows(origin):
            c._count("preflights")
            self._reply(
                204,
                None,
                headers=Cors.preflight_headers(
                    origin,
                    self.headers.get("Access-Control-Request-Headers"),
                    self.headers.get("Access-Control-Request-Private-Network") == "true",
                ),
            )
        else:
            c._count("refused_origins")
            self._error(
                protocol.RequestError(
                    403, "origin_not_allowed", "no source admits this origin (cors_origins)"
                )
            )

    def do_GET(self) -> None:
        c = self.server.collector
        self._cors = ()
        path = self.path.split("?", 1)[0]
        key = settings_endpoint.write_key_of(path)
        if key is not None:
            self._settings(c, key)
        elif path.rstrip("/") in ("/health", ""):
            self._reply(200, {"status": "draining" if c._draining else "ok", **c.stats()})
        elif path == "/ready":
            reason = readiness.not_ready_reason(c._draining, c.spool.spool_dir)
            if reason is None:
                self._reply(200, {"ready": True})
            else:
                self._reply(503, {"ready": False, "reason": reason})
        elif path == "/metrics":
            self._send(200, c.metrics.exposition(), METRICS_CONTENT_TYPE)
        else:
            self._error(protocol.RequestError(404, "not_found", f"no such path: {path}"))

    def _settings(self, c: CollectorView, key: str) -> None:
        if not self._admit_origin(c):
            return
        source_id = c.keys.source_of(key)
        if source_id is None:
            self._error(
                protocol.RequestError(404, "not_found", settings_endpoint.UNKNOWN_KEY_MESSAGE)
            )
            return
        if not self._admit_origin(c, source_id):
            return
        url = settings_endpoint.collector_url(
            c.settings.collector.public_url,
            self.headers.get("Host"),
            self.headers.get("X-Forwarded-Proto"),
            c.url,
        )
        self._reply(
            200,
            settings_endpoint.settings_document(key, url),
            headers=[("Cache-Control", "private, max-age=60")],
        )

    def do_POST(self) -> None:
        c = self.server.collector
        self.busy = True  # stop() waits for busy connections and closes idle ones
        self._cors = ()
        self._status = None
        self._settled = False
        with c._stats_lock:
            c._pending += 1
            overloaded = c._pending > c.max_pending
        try:
            self._post(c, overloaded)
        except OSError:  # the connection broke: nobody to answer
            raise
        except Exception:  # a bug, not the client's fault: 500, which the libraries retry
            log.exception("request failed")
            c._count("errors")
            self._error(
                protocol.RequestError(500, "internal_error", "the collector failed; retry later"),
                close=True,
            )
        finally:
            self._settle()  # if no reply settled it
            self.busy = False

    def _post(self, c: CollectorView, overloaded: bool) -> None:
        path = self.path.split("?", 1)[0]
        if path not in protocol.ENDPOINTS:
            c._count("errors")
            self._error(
                protocol.RequestError(404, "not_found", f"no such endpoint: {path}"), close=True
            )
            return
        endpoint_type = protocol.ENDPOINTS[path]
        try:
            raw = read_body(self.headers, self.rfile, c.limits.max_batch_bytes)
        except BodyError as e:
            c._count("errors")
            self._error(e, close=e.close)
            return
        if raw is None:  # the client went away
            self.close_connection = True
            return
        if not self._admit_origin(c):
            return
        if overloaded:  # before the JSON work: the client retries after Retry-After
            c._count("busy")
            self._error(
                protocol.RequestError(
                    429,
                    "too_many_requests",
                    f"more than {c.max_pending} requests in progress; retry after "
                    f"{RETRY_AFTER_BUSY} s",
                )
            )
            return
        authorization = self.headers.get("Authorization")
        if authorization is not None and authorization == self._auth[0]:
            header_key, source_id = self._auth[1]  # this connection's key, checked before
        else:
            header_key = protocol.write_key_from_header(authorization)
            source_id = c.keys.source_of(header_key) if header_key else None
            if source_id is not None:
                self._auth = (authorization, (header_key, source_id))
        if header_key is not None and source_id is None:
            c._count("unauthorized")
            self._error(protocol.RequestError(401, "unauthorized", "unknown write key"))
            return
        try:
            raw = protocol.decode_body(raw, self.headers.get("Content-Encoding"), c.limits)
            body = protocol.parse_json(raw)
            if source_id is None:
                key = body.get("writeKey")
                source_id = c.keys.source_of(key)
                if source_id is None:
                    c._count("unauthorized")
                    raise protocol.RequestError(
                        401,
                        "unauthorized",
                        "unknown write key"
                        if key
                        else "missing write key (HTTP Basic user name, or 'writeKey' in the body)",
                    )
            received = datetime.now(UTC)
            drop = c.suppression.matches if c.suppression.active else None  # else no hashing
            outcome = message_rules.process_body(raw, endpoint_type, received, c.limits, body, drop)
        except protocol.RequestError as e:
            if e.status != 401:
                c._count("errors")
            self._error(e)
            return
        if self.headers.get("Origin") is not None and not self._admit_origin(c, source_id):
            return
        if outcome.lines:
            try:
                c.spool.append(source_id, ArchiveHour.of(received), outcome.payload())
            except SpoolError as e:
                c._count("errors")
                self._error(protocol.RequestError(503, "unavailable", str(e)), close=True)
                return
        c.metrics.messages(
            endpoint_label(path), len(outcome.lines), outcome.rejected, outcome.suppressed
        )
        c._count("accepted", len(outcome.lines))
        c._count("rejected", len(outcome.rejected))
        c._count("suppressed", outcome.suppressed)
        c._count("requests")
        status, reply = message_rules.reply_for(outcome, endpoint_type is None)
        self._reply(status, reply)
