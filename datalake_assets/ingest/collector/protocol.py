"""Segment's tracking API, request to archive lines: pure functions, no I/O.

``POST /v1/track|identify|page|screen|group|alias`` (and the short forms ``/v1/t|i|p|s|g|a``)
take one message, ``/v1/batch`` (``/v1/b``, ``/v1/import``) takes
``{"batch": [...], "context": {...}, "integrations": {...}, "sentAt": ...}``. What the collector does to each
message before it is archived (Segment's documented behaviour):

* ``type`` is the endpoint's (single calls); ``writeKey`` is removed (never archived);
* the batch-level ``context`` and ``integrations`` are merged into the message's own (the
  message's keys win); a batch-level ``sentAt`` is copied into messages without one;
* ``receivedAt`` is the server's clock (ms, UTC, ``...Z``), the same for the whole request;
* ``messageId`` is stamped (a UUID) when missing or empty;
* clock skew: the device time is ``originalTimestamp`` if sent, else the client's
  ``timestamp``. With a ``sentAt`` and a client that did not send both ``timestamp`` and
  ``originalTimestamp`` (that pair means the client already decided), ``originalTimestamp`` is
  set to the device time and ``timestamp = receivedAt - (sentAt - originalTimestamp)``.
  Without a usable ``sentAt`` the client's ``timestamp`` is kept as sent; a message with no
  time at all gets ``timestamp = receivedAt``. Unparseable times are kept as sent, uncorrected.

A message is then rejected, alone, when its archived JSON exceeds ``max_message_bytes`` or when
the sync would quarantine it whole (``spec.messages.validate``: not an object, no or unknown
``type``, no ``userId``/``anonymousId``, a ``track`` without ``event``, a bad ``messageId``):
whatever the collector accepts, the sync turns into a row. A request is refused whole (400)
when its body is not JSON, not an object, or larger than ``max_batch_bytes``.

A valid message for which ``drop`` (the suppression list's test, ``suppression.py``) says yes
is *suppressed*: not archived, counted, and answered like an accepted one (as Segment does).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import uuid
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import orjson

from datalake_assets.spec.messages import Rejected, validate
from datalake_assets.spec.naming import MESSAGE_TYPES
from datalake_assets.spec.types import parse_timestamp

# path -> message type (None: a batch). Segment's paths, with or without a trailing '/': the
# tracking API's long ones, ``/v1/import`` (its endpoint for historical batches, the same body
# as ``/v1/batch``), and the short ones analytics.js posts to (``/v1/t``, ``/v1/p``, ...: the
# type's first letter) and the mobile libraries' ``/v1/b`` (a batch).
ENDPOINTS: dict[str, str | None] = {f"/v1/{t}": t for t in sorted(MESSAGE_TYPES)}
ENDPOINTS.update({f"/v1/{t[0]}": t for t in sorted(MESSAGE_TYPES)})
ENDPOINTS.update({"/v1/batch": None, "/v1/import": None, "/v1/b": None})
ENDPOINTS.update({f"{p}/": t for p, t in list(ENDPOINTS.items())})

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_CACHE_MAX = 65536  # entries of each of the two time caches below (cleared when full)


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


@dataclass
class Outcome:
    """What became of a request's messages: ``lines`` to archive (JSON, no newline), the
    ``rejected`` ones by index (``{"index", "code", "message"}``), the ``suppressed`` count
    and ``total``."""

    lines: list[bytes] = field(default_factory=list)
    rejected: list[dict[str, object]] = field(default_factory=list)
    total: int = 0
    suppressed: int = 0  # valid messages of suppressed identities: answered as accepted
    _payload: bytes | None = None

    def payload(self) -> bytes:
        """The accepted lines as the spool stores them: each ends with a newline."""
        if self._payload is None:
            self._payload = b"\n".join(self.lines) + b"\n" if self.lines else b""
        return self._payload


# ------------------------------------------------------------------------------ request pieces


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


# ------------------------------------------------------------------------------------ stamping


def iso_ms(dt: datetime) -> str:
    """``2026-11-21T10:00:00.123Z``."""
    return dt.astimezone(UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


# Per-second caches: a batch's times fall in a few seconds, so each message costs a dict lookup
# and a few string operations instead of a datetime parse or format.
_SECOND_TEXT: dict[int, str] = {}  # epoch second -> "YYYY-MM-DDTHH:MM:SS"
_TEXT_SECOND: dict[str, int | None] = {}  # "YYYY-MM-DDTHH:MM:SS" -> epoch µs (None: invalid)
_UTC_SUFFIXES = ("Z", "+00:00")


def _iso_us(us: int) -> str:
    """Microseconds since the epoch as ``YYYY-MM-DDTHH:MM:SS.mmmZ`` (truncated to ms)."""
    sec, rem = divmod(us, 1_000_000)
    head = _SECOND_TEXT.get(sec)
    if head is None:
        head = (_EPOCH + timedelta(seconds=sec)).isoformat()[:19]
        if len(_SECOND_TEXT) >= _CACHE_MAX:
            _SECOND_TEXT.clear()
        _SECOND_TEXT[sec] = head
    return f"{head}.{rem // 1000:03d}Z"


def time_us(text: str) -> int | None:
    """``spec.types.parse_timestamp``, with a fast path for the UTC forms libraries send
    (``2026-11-21T10:00:00[.fff...](Z|+00:00)``)."""
    n = len(text)
    if n >= 20 and text[10] == "T":
        head = text[:19]
        rest = text[19:]
        frac = ""
        if rest[0] == ".":
            for suffix in _UTC_SUFFIXES:
                if rest.endswith(suffix):
                    frac = rest[1 : -len(suffix)]
                    break
            else:
                return parse_timestamp(text)
            if not frac.isdigit() or not frac.isascii():
                return parse_timestamp(text)
        elif rest not in _UTC_SUFFIXES:
            return parse_timestamp(text)
        second = _TEXT_SECOND.get(head, -1)
        if second == -1:
            second = parse_timestamp(head) if head.isascii() else None
            if len(_TEXT_SECOND) >= _CACHE_MAX:
                _TEXT_SECOND.clear()
            _TEXT_SECOND[head] = second
        if second is None:
            return parse_timestamp(text)
        return second + (int(frac[:6].ljust(6, "0")) if frac else 0)
    return parse_timestamp(text)


class _Clock:
    """Skew correction for one request: its ``receivedAt`` and a cache of parsed ``sentAt``."""

    __slots__ = ("_sent", "received_text", "received_us")

    def __init__(self, received: datetime) -> None:
        received = received.astimezone(UTC)
        received = received.replace(microsecond=received.microsecond // 1000 * 1000)
        self.received_text = iso_ms(received)
        delta = received - _EPOCH
        self.received_us = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
        self._sent: dict[str, int | None] = {}

    def sent_us(self, sent: object) -> int | None:
        if type(sent) is not str:
            return None
        if sent not in self._sent:
            self._sent[sent] = time_us(sent)
        return self._sent[sent]

    def stamp(self, m: dict) -> None:
        m["receivedAt"] = self.received_text
        ts = m.get("timestamp")
        original = m.get("originalTimestamp")
        if ts is not None and original is not None:
            return  # the client sent both: its own decision
        device = original if original is not None else ts
        if device is None:
            m["timestamp"] = self.received_text
            return
        sent = self.sent_us(m.get("sentAt"))
        device_us = time_us(device) if type(device) is str else None
        if sent is None or device_us is None:
            return  # nothing to correct with: kept as sent
        try:
            corrected = _iso_us(self.received_us - (sent - device_us))
        except (OverflowError, ValueError):
            return
        m["originalTimestamp"] = device
        m["timestamp"] = corrected


def _merge(m: dict, name: str, batch_value: object) -> None:
    if type(batch_value) is not dict or not batch_value:
        return
    own = m.get(name)
    if own is None:
        m[name] = dict(batch_value)
    elif type(own) is dict:
        m[name] = {**batch_value, **own}


def _finite(v: object) -> object:
    """``v`` with NaN and infinities as null, as orjson writes them."""
    if type(v) is float and not math.isfinite(v):
        return None
    if type(v) is dict:
        return {k: _finite(x) for k, x in v.items()}
    if type(v) is list:
        return [_finite(x) for x in v]
    return v


def _dumps(m: dict) -> bytes:
    try:
        return orjson.dumps(m)
    except TypeError:  # an integer wider than 64 bits (exact parse path)
        return json.dumps(_finite(m), ensure_ascii=False, separators=(",", ":")).encode()


Drop = Callable[[dict], bool]


def process(
    body: dict,
    endpoint_type: str | None,
    received: datetime,
    limits: Limits,
    drop: Drop | None = None,
) -> Outcome:
    """Stamp, check and serialize the messages of one request (``endpoint_type`` ``None``: a
    batch); a valid message ``drop`` says yes to is only counted (``suppressed``). Raises
    ``RequestError`` for a request refused whole."""
    clock = _Clock(received)
    out = Outcome()
    if endpoint_type is None:
        messages = body.get("batch")
        if type(messages) is not list:
            raise RequestError(
                400,
                "invalid_batch",
                f"'batch' must be an array of messages, got {_kind(messages)}"
                if "batch" in body
                else "missing 'batch' (an array of messages)",
            )
        context, integrations = body.get("context"), body.get("integrations")
        sent_at = body.get("sentAt")
    else:
        body["type"] = endpoint_type
        messages, context, integrations, sent_at = [body], None, None, None
    out.total = len(messages)
    max_bytes = limits.max_message_bytes
    for i, m in enumerate(messages):
        try:
            if type(m) is not dict:
                raise Rejected("not_an_object", f"message is {_kind(m)}")
            m.pop("writeKey", None)
            if context is not None:
                _merge(m, "context", context)
            if integrations is not None:
                _merge(m, "integrations", integrations)
            if sent_at is not None and "sentAt" not in m:
                m["sentAt"] = sent_at
            if m.get("messageId") in (None, ""):
                m["messageId"] = str(uuid.uuid4())
            clock.stamp(m)
            validate(m)
            if drop is not None and drop(m):
                out.suppressed += 1
                continue
            line = _dumps(m)
            if len(line) > max_bytes:
                raise Rejected("oversize", f"{len(line)} bytes > limit {max_bytes}")
        except Rejected as e:
            out.rejected.append(
                {"index": i, "code": e.reason, "message": e.detail or e.reason.replace("_", " ")}
            )
            continue
        out.lines.append(line)
    return out


def process_body(
    raw: bytes,
    endpoint_type: str | None,
    received: datetime,
    limits: Limits,
    body: dict | None = None,
    drop: Drop | None = None,
) -> Outcome:
    """``process`` of ``body`` (``parse_json(raw)`` if not given). orjson reads integers wider
    than 64 bits as floats, which it writes as ``1.2e+19``: when an archived line holds an
    ``e+``, ``raw`` is read again with the exact parser (rare: a float >= 1e16, or the text
    ``e+`` in a string)."""
    outcome = process(
        parse_json(raw) if body is None else body, endpoint_type, received, limits, drop
    )
    if outcome.lines and b"e+" in outcome.payload():
        outcome = process(parse_json(raw, exact=True), endpoint_type, received, limits, drop)
    return outcome


def reply_for(outcome: Outcome, batch: bool) -> tuple[int, dict[str, object]]:
    """The HTTP status and JSON reply once the accepted lines are durable."""
    if not outcome.rejected:
        return 200, {"success": True}
    accepted = len(outcome.lines) + outcome.suppressed  # a client cannot tell them apart
    if not accepted:
        if not batch:
            r = outcome.rejected[0]
            return 400, {"success": False, "code": r["code"], "message": r["message"]}
        return 400, {
            "success": False,
            "code": "invalid_batch",
            "message": f"all {outcome.total} messages were rejected",
            "rejected": outcome.rejected,
        }
    return 200, {"success": True, "accepted": accepted, "rejected": outcome.rejected}
