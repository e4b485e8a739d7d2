"""Segment's tracking API, request to archive lines: what the collector does to each message of
a request (``protocol.py`` decodes the request) before it is archived, and the reply. Pure
functions, no I/O.

Segment's documented behaviour:

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
whatever the collector accepts, the sync turns into a row. (A request is refused whole by
``protocol.py``.)

A valid message for which ``drop`` (the suppression list's test, ``suppression.py``) says yes
is *suppressed*: not archived, counted, and answered like an accepted one (as Segment does).
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

import orjson

from datalake_assets.ingest.collector.clock_skew import _Clock
from datalake_assets.ingest.collector.protocol import Limits, RequestError, _kind, parse_json
from datalake_assets.spec.messages import Rejected, validate


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
