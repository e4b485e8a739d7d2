"""A loopback HTTP proxy in front of a moto server that injects S3/Glue failures.

Clients (pyarrow's S3 filesystem, boto3) are pointed at the proxy with ``AWS_ENDPOINT_URL``;
every request is forwarded to moto unless ``fail`` (a callable of method, path, headers and body)
returns an HTTP status, in which case the proxy answers with that status and an AWS error
body (``SlowDown`` for 503, ``InternalError`` otherwise), as S3 and Glue do under throttling
or an outage. Counts of forwarded and failed requests are kept for the tests' figures.
"""

from __future__ import annotations

import http.client
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FailRule = Callable[[str, str, dict, bytes], int | None]  # method, path, headers, body

_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te"}


class FaultProxy:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.fail: FailRule = lambda method, path, headers, body: None
        self.delay_s = 0.0  # added to every request: a cloud round trip (bench_s3_requests.py)
        self.forwarded = 0
        self.failed = 0
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                return

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    out = b""
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                        if size == 0:
                            self.rfile.readline()
                            return out
                        out += self.rfile.read(size)
                        self.rfile.readline()
                n = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(n) if n else b""

            def _handle(self) -> None:
                body = self._body()
                if proxy.delay_s:
                    time.sleep(proxy.delay_s)
                headers = {k: v for k, v in self.headers.items()}
                status = proxy.fail(self.command, self.path, headers, body)
                if status:
                    with proxy._lock:
                        proxy.failed += 1
                    code = "SlowDown" if status == 503 else "InternalError"
                    payload = (
                        f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
                        f"<Message>injected by the test proxy</Message></Error>"
                    ).encode()
                    if "x-amz-target" in {k.lower() for k in headers}:  # JSON APIs (Glue)
                        payload = (
                            f'{{"__type":"{"ThrottlingException" if status == 503 else "InternalServiceException"}",'
                            f'"message":"injected by the test proxy"}}'
                        ).encode()
                    self.send_response(status)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(payload)
                    return
                with proxy._lock:
                    proxy.forwarded += 1
                conn = http.client.HTTPConnection(*proxy.upstream, timeout=60)
                fwd = {k: v for k, v in headers.items() if k.lower() not in _HOP}
                if body or self.command in ("PUT", "POST"):
                    fwd["Content-Length"] = str(len(body))
                conn.request(self.command, self.path, body=body, headers=fwd)
                resp = conn.getresponse()
                data = resp.read()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in _HOP and k.lower() != "content-length":
                        self.send_header(k, v)
                # HEAD: the object's length as upstream said it (the body is empty)
                length = resp.getheader("Content-Length") if self.command == "HEAD" else None
                self.send_header("Content-Length", length or str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                conn.close()

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FaultProxy:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
