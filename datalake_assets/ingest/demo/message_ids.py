"""Message ids of the demo traffic: 122 or 128 random bits of the hour's seeded generator,
shaped like the library of the sender ("ajs-next-<32 hex>" from analytics.js, a v4 uuid from
the other libraries, upper-case from iOS). Different (seed, source, hour) give independent
streams, so ids are unique within and across them with overwhelming probability (about
n^2 / 2^123 for n ids: for 10^9 ids, 10^-19)."""

from __future__ import annotations

_VARIANT = {c: "89ab"[int(c, 16) & 3] for c in "0123456789abcdef"}


def _uuid(x: int) -> str:
    """A version-4 uuid from 128 random bits ``x`` (version and variant bits overwritten)."""
    h = f"{x:032x}"
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{_VARIANT[h[16]]}{h[17:20]}-{h[20:]}"


def _uuid_upper(x: int) -> str:
    return _uuid(x).upper()


def _ajs_id(x: int) -> str:
    return f"ajs-next-{x:032x}"
