"""Segment's tracking API, the request: its endpoints, its body decoded and parsed, its write
key, and the errors that refuse a request whole. Pure functions, no I/O.

``POST /v1/track|identify|page|screen|group|alias`` (and the short forms ``/v1/t|i|p|s|g|a``)
take one message, ``/v1/batch`` (``/v1/b``, ``/v1/import``) takes
``{"batch": [...], "context": {...}, "integrations": {...}, "sentAt": ...}``. A request is
refused whole (400) when its body is not JSON, not an object, or larger than
``max_batch_bytes``. What becomes of each message of a request is ``message_rules.py``'s; its
times, ``clock_skew.py``'s.
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from dataclasses import dataclass

import orjson

from datalake_assets.spec.naming import MESSAGE_TYPES

# path -> message type (None: a batch). Segment's paths, with or without a trailing '/': the
# tracking API's long ones, ``/v1/import`` (its endpoint for historical batches, the same body
# as ``/v1/batch``), and the short ones analytics.js posts to (``/v1/t``, ``/v1/p``, ...: the
# type's first letter) and the mobile libraries' ``/v1/b`` (a batch).
ENDPOINTS: dict[str, str | None] = {f"/v1/{t}": t for t in sorted(MESSAGE_TYPES)}
ENDPOINTS.update({f"/v1/{t[0]}": t for t in sorted(MESSAGE_TYPES)})
ENDPOINTS.update({"/v1/batch": None, "/v1/import": None, "/v1/b": None})
ENDPOINTS.update({f"{p}/": t for p, t in list(ENDPOINTS.items())})


class RequestError(Exception):
    """A request refused whole: ``status`` and a JSON body ``{"success": false, "code",
    "message", ...}`` (the official libraries read ``code`` and ``message``)."""

    def __init__(self, status: int, code: str, message: str, **extra: object) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.extra = extra

    def body(self) -> dict[str, object]:
        return {"success": False, "code": self.code, "message": self.message, **self.extra}


@dataclass(frozen=True)
class Limits:
    max_message_bytes: int = 32768
    max_batch_bytes: int = 512000


def write_key_from_header(authorization: str | None) -> str | None:
    """The write key of an ``Authorization: Basic base64(key:)`` header; ``None`` without one.
    A header that is not valid Basic auth counts as a wrong key (``""``)."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "basic":
        return ""
    try:
        user, _, _password = base64.b64decode(token.strip(), validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return ""
    return user


def decode_body(raw: bytes, content_encoding: str | None, limits: Limits) -> bytes:
    """The request body, gzip/deflate decoded, at most ``max_batch_bytes`` long."""
    encoding = (content_encoding or "identity").strip().lower()
    if encoding in ("gzip", "x-gzip", "deflate"):
        raw = _inflate(raw, limits.max_batch_bytes + 1, encoding)
    elif encoding != "identity":
        raise RequestError(
            415,
            "unsupported_encoding",
            f"Content-Encoding {encoding!r} is not supported (use gzip)",
        )
    if len(raw) > limits.max_batch_bytes:
        raise RequestError(
            400, "batch_too_large", f"request body is larger than {limits.max_batch_bytes} bytes"
        )
    return raw


def _inflate(data: bytes, max_out: int, encoding: str) -> bytes:
    """gzip (one or more members) or zlib data, at most ``max_out`` bytes of it."""
    parts: list[bytes] = []
    size = 0
    while data:
        d = zlib.decompressobj(wbits=47)  # 32 + 15: a gzip or a zlib header
        try:
            part = d.decompress(data, max_out - size)
        except zlib.error as e:
            raise RequestError(400, "invalid_body", f"cannot decode {encoding} body: {e}") from None
        parts.append(part)
        size += len(part)
        if size >= max_out:
            break
        if not d.eof:
            raise RequestError(400, "invalid_body", f"truncated {encoding} body")
        data = d.unused_data
    return b"".join(parts)


def parse_json(raw: bytes, exact: bool = False) -> dict:
    """The body as a JSON object (orjson; ``exact``: the standard library's parser, which keeps
    integers wider than 64 bits). The ``NaN``/``Infinity`` literals some JSON encoders write
    are accepted (archived as null)."""
    try:
        body = json.loads(raw) if exact else orjson.loads(raw)
    except orjson.JSONDecodeError:
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError) as e:
            raise RequestError(400, "invalid_json", f"body is not valid JSON: {e}") from None
    except (ValueError, RecursionError) as e:
        raise RequestError(400, "invalid_json", f"body is not valid JSON: {e}") from None
    if type(body) is not dict:
        raise RequestError(400, "invalid_json", f"body must be a JSON object, got {_kind(body)}")
    return body


def _kind(v: object) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean"}.get(
        type(v), "null" if v is None else "number"
    )
