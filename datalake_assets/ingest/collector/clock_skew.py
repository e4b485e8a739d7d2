"""The times of a request's messages: ``receivedAt`` (the server's clock, the same for the
whole request) and the clock-skew correction of ``timestamp`` (the rule is in
``message_rules.py``'s docstring), with per-second caches so a message costs a dict lookup
instead of a datetime parse or format."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from datalake_assets.spec.types import parse_timestamp

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_CACHE_MAX = 65536  # entries of each of the two time caches below (cleared when full)


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
