"""The collector's request-line and header parser (``http_request.py``), through the server."""

from __future__ import annotations

import io
import json
import socket

import pytest

from datalake_assets.ingest.collector.http_request import HeaderError, read_headers
from datalake_assets_tests.ingest.collector.helpers import KEY, archive_lines, basic


def _raw(url: str, data: bytes) -> bytes:
    host, port = url.split("://")[1].split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    return out


def test_read_headers():
    h = read_headers(
        io.BytesIO(b"Host: a\r\nX-Long: one\r\n  two\r\nhost: b\r\nContent-Length:  3 \r\n\r\nabc")
    )
    assert h.get("HOST") == "a" and h["x-long"] == "one two" and h.get("content-length") == "3"
    assert "Host" in h and h.get("nope") is None and h["nope"] is None
    with pytest.raises(HeaderError, match="Malformed"):
        read_headers(io.BytesIO(b"no colon here\r\n\r\n"))
    with pytest.raises(HeaderError, match="Too many"):
        read_headers(io.BytesIO(b"".join(b"X-%d: v\r\n" % i for i in range(101)) + b"\r\n"))
    with pytest.raises(HeaderError, match="too long"):
        read_headers(io.BytesIO(b"X: " + b"v" * 70000 + b"\r\n\r\n"))


def test_requests_the_parser_sees(tmp_path, collector):
    body = json.dumps({"userId": "u", "event": "E", "messageId": "m-11"}).encode()
    head = (
        f"POST /v1/t HTTP/1.1\r\nHost: x\r\nAuthorization: {basic(KEY)}\r\n"
        f"Content-Length: {len(body)}\r\n"
    ).encode()
    # keep-alive: two requests on one connection, the second closes it
    out = _raw(
        collector.url,
        head
        + b"\r\n"
        + body
        + head.replace(b"m-11", b"m-12")
        + b"Connection: close\r\n\r\n"
        + body.replace(b"m-11", b"m-12"),
    )
    assert out.count(b"HTTP/1.1 200 OK") == 2 and b"Connection: close" in out
    # Expect: 100-continue (curl, for bodies over 1 KB)
    out = _raw(
        collector.url,
        head.replace(b"m-11", b"m-13")
        + b"Expect: 100-continue\r\n\r\n"
        + body.replace(b"m-11", b"m-13"),
    )
    assert out.startswith(b"HTTP/1.1 100 Continue") and b"200 OK" in out
    # HTTP/1.0: answered, then closed
    out = _raw(
        collector.url,
        head.replace(b"HTTP/1.1", b"HTTP/1.0").replace(b"m-11", b"m-14")
        + b"\r\n"
        + body.replace(b"m-11", b"m-14"),
    )
    assert out.startswith(b"HTTP/1.1 200") or out.startswith(b"HTTP/1.0 200")
    # malformed: 400, nothing accepted; an unusual request line: the standard library's parser
    assert _raw(collector.url, b"POST /v1/t HTTP/1.1\r\nbroken\r\n\r\n").startswith(b"HTTP/1.1 400")
    assert b"Error code: 505" in _raw(collector.url, b"POST /v1/t HTTP/2.0\r\n\r\n")
    assert collector.stop() is True
    assert sorted(m["messageId"] for m in archive_lines(tmp_path / "archive")) == [
        "m-11",
        "m-12",
        "m-13",
        "m-14",
    ]
