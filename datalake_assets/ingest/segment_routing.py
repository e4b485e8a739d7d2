"""Routing one line of a Segment file to the hour of its ``receivedAt`` (the sync's decoder and
timestamp rule), and the gzip output of one hour of one input file."""

from __future__ import annotations

import hashlib
import re
import sys
import zlib

from datalake_assets.ingest.segment_layout import HOUR_US
from datalake_assets.lake import storage
from datalake_assets.spec.messages import Rejected, decode
from datalake_assets.spec.types import parse_timestamp

MAX_HOUR_INDEX = 70_000_000  # hours since 1970 up to the year 9955: beyond, not a receivedAt
FLUSH_BYTES = 1 << 17  # lines buffered per hour before they are compressed

UNROUTED_REASONS = ("invalid_json", "not_an_object", "missing_received_at", "invalid_received_at")

# ``YYYY-MM-DDTHH:MM:SS[.fraction]Z``: what ``parse_timestamp`` accepts whenever the date and
# hour are valid (checked once per hour text, cached), in the hour the text names.
_COMMON_TS = re.compile(
    r"([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,9})?Z\Z"
)
_HOUR_CACHE: dict[str, int] = {}


def route(raw: bytes) -> tuple[int | None, str | None]:
    """``(hour index since 1970, None)`` of a line, or ``(None, reason)`` if it has no usable
    ``receivedAt`` (reasons: ``UNROUTED_REASONS``)."""
    try:
        obj = decode(raw, sys.maxsize)  # the sync's decoder; size limits are the sync's call
    except Rejected:
        return None, "invalid_json"
    if type(obj) is not dict:
        return None, "not_an_object"
    received = obj.get("receivedAt")
    if received is None or received == "":
        return None, "missing_received_at"
    if type(received) is not str:
        return None, "invalid_received_at"
    m = _COMMON_TS.match(received)
    if m:  # Segment's own form: the hour decides, minutes and seconds are valid by the pattern
        index = _HOUR_CACHE.get(m.group(1))
        if index is None:
            micros = parse_timestamp(f"{m.group(1)}:00:00Z")
            index = -1 if micros is None else micros // HOUR_US
            if len(_HOUR_CACHE) < 100_000:
                _HOUR_CACHE[m.group(1)] = index
    else:
        micros = parse_timestamp(received)
        index = -1 if micros is None else micros // HOUR_US
    if not 0 <= index < MAX_HOUR_INDEX:
        return None, "invalid_received_at"
    return index, None


class HourOutput:
    """One output hour of one input file: lines -> gzip -> a staged file."""

    def __init__(self, staged: storage.StagedFile):
        self.staged = staged
        self._gz = zlib.compressobj(6, zlib.DEFLATED, 31)  # gzip; header without a time
        self._buf = bytearray()
        self._sha = hashlib.sha256()
        self.lines = 0

    def write(self, raw: bytes) -> None:
        self._buf += raw
        self._buf += b"\n"
        self.lines += 1
        if len(self._buf) >= FLUSH_BYTES:
            self._emit(self._gz.compress(bytes(self._buf)))
            self._buf.clear()

    def finish(self) -> str:
        """Compress the rest; the SHA-256 of the gzip bytes."""
        self._emit(self._gz.compress(bytes(self._buf)) + self._gz.flush())
        self._buf.clear()
        return self._sha.hexdigest()

    def _emit(self, data: bytes) -> None:
        if data:
            self.staged.write(data)
            self._sha.update(data)
