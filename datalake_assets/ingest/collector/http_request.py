"""A request's line and headers, parsed without the ``email`` package.

``BaseHTTPRequestHandler.parse_request`` reads headers with ``http.client.parse_headers``,
which hands them to ``email.parser``: about 30 µs a request, as much as decoding, stamping and
serializing a small event (a web source sends one event per request). ``parse_request`` here
does the same for the ordinary ``HTTP/1.1`` and ``HTTP/1.0`` requests, with the same limits
(65,536 bytes a line, 100 headers) and the same ``Connection``/``Expect`` handling; anything
unusual goes to the standard library's parser."""

from __future__ import annotations

from http import HTTPStatus
from typing import BinaryIO

MAX_LINE = 65536
MAX_HEADERS = 100


class Headers(dict):
    """Header name (lower case) -> value, the first of repeated headers (as ``email``'s
    ``Message.get``); ``get`` and ``[]`` take any case."""

    def get(self, name: str, default: object = None) -> object:  # type: ignore[override]
        return dict.get(self, name.lower(), default)

    def __getitem__(self, name: str) -> object:
        return dict.get(self, name.lower())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and dict.__contains__(self, name.lower())


class HeaderError(Exception):
    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


def read_headers(rfile: BinaryIO) -> Headers:
    headers = Headers()
    last = None
    for _ in range(MAX_HEADERS + 1):
        line = rfile.readline(MAX_LINE + 1)
        if len(line) > MAX_LINE:
            raise HeaderError(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "Line too long")
        if line in (b"\r\n", b"\n", b""):
            return headers
        text = line.decode("iso-8859-1").rstrip("\r\n")
        if text[:1] in (" ", "\t") and last is not None:  # obsolete line folding
            headers[last] = f"{dict.get(headers, last)} {text.strip()}"
            continue
        name, sep, value = text.partition(":")
        name = name.strip().lower()
        if not sep or not name:
            raise HeaderError(HTTPStatus.BAD_REQUEST, "Malformed header line")
        if name not in headers:
            headers[name] = value.strip()
        last = name
    raise HeaderError(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "Too many headers")


def parse_request(handler, fallback) -> bool:  # noqa: ANN001 (a BaseHTTPRequestHandler)
    """``handler.parse_request()``: the fast path for ``METHOD /path HTTP/1.x``, else
    ``fallback()`` (the standard library's)."""
    requestline = str(handler.raw_requestline, "iso-8859-1").rstrip("\r\n")
    words = requestline.split()
    if len(words) != 3 or words[2] not in ("HTTP/1.1", "HTTP/1.0"):
        return fallback()
    handler.requestline = requestline
    handler.command, path, handler.request_version = words
    handler.path = "/" + path.lstrip("/") if path.startswith("//") else path
    handler.close_connection = words[2] == "HTTP/1.0"
    try:
        handler.headers = read_headers(handler.rfile)
    except HeaderError as e:
        handler.close_connection = True
        handler.send_error(e.status, str(e))
        return False
    conntype = handler.headers.get("Connection", "").lower()
    if conntype == "close":
        handler.close_connection = True
    elif conntype == "keep-alive":
        handler.close_connection = False
    if (
        handler.headers.get("Expect", "").lower() == "100-continue"
        and handler.request_version == "HTTP/1.1"
    ):
        return handler.handle_expect_100()
    return True
