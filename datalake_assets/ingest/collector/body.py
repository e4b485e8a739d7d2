"""Reading a request's body: ``Content-Length``, or ``Transfer-Encoding: chunked`` (what
analytics-kotlin sends: ``HttpURLConnection.setChunkedStreamingMode``, gzip inside), at most
``max_bytes`` of it (as sent, before gzip decoding)."""

from __future__ import annotations

from typing import BinaryIO

from datalake_assets.ingest.collector.protocol import RequestError

DRAIN_LIMIT_FACTOR = 8  # a body up to 8x max_bytes is read (and dropped) before the 400
_MAX_LINE = 1024  # a chunk-size line, a trailer line


class BodyError(RequestError):
    """A request refused before its body was read whole: ``close`` when the connection cannot
    be reused (the rest of the body was not read)."""

    def __init__(self, status: int, code: str, message: str, close: bool) -> None:
        super().__init__(status, code, message)
        self.close = close


def _too_large(max_bytes: int, close: bool) -> BodyError:
    return BodyError(
        400, "batch_too_large", f"request body is larger than {max_bytes} bytes", close
    )


def read_body(headers: object, rfile: BinaryIO, max_bytes: int) -> bytes | None:
    """The body (``None``: the client went away mid-body)."""
    get = headers.get  # type: ignore[attr-defined]
    encoding = get("Transfer-Encoding")
    if encoding is not None:
        if encoding.strip().lower() != "chunked":
            raise BodyError(
                501,
                "unsupported_transfer_encoding",
                f"Transfer-Encoding {encoding!r} is not supported (chunked is)",
                True,
            )
        return _read_chunked(rfile, max_bytes)
    length_text = get("Content-Length")
    if length_text is None:
        raise BodyError(411, "length_required", "Content-Length (or chunked) is required", True)
    try:
        length = int(length_text)
        if length < 0:
            raise ValueError
    except ValueError:
        raise BodyError(400, "invalid_request", "invalid Content-Length", True) from None
    if length > max_bytes:
        # Read and drop a moderately large body, so the client gets the reply instead of a
        # broken pipe; a huge one is refused unread and the connection closed.
        drained = length <= DRAIN_LIMIT_FACTOR * max_bytes
        left = length if drained else 0
        while left > 0:
            chunk = rfile.read(min(left, 1 << 16))
            if not chunk:
                drained = False
                break
            left -= len(chunk)
        raise _too_large(max_bytes, close=not drained)
    raw = rfile.read(length)
    return raw if len(raw) == length else None


def _read_chunked(rfile: BinaryIO, max_bytes: int) -> bytes | None:
    parts: list[bytes] = []
    size = 0
    while True:
        line = rfile.readline(_MAX_LINE + 1)
        if not line:
            return None
        try:
            n = int(line.split(b";", 1)[0].strip(), 16)
            if n < 0 or len(line) > _MAX_LINE:
                raise ValueError
        except ValueError:
            raise BodyError(400, "invalid_request", "invalid chunked body", True) from None
        if n == 0:
            break
        size += n
        if size > max_bytes:
            raise _too_large(max_bytes, close=True)
        data = rfile.read(n)
        if len(data) != n or rfile.readline(_MAX_LINE + 1) not in (b"\r\n", b"\n"):
            return None
        parts.append(data)
    while True:  # trailers, up to the empty line
        line = rfile.readline(_MAX_LINE + 1)
        if not line:
            return None
        if line in (b"\r\n", b"\n"):
            return b"".join(parts)
