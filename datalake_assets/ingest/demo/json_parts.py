"""The parts of demo messages that many messages share (a user's context, a page, a catalogue
entry), serialized once."""

from __future__ import annotations

import orjson

_Fragment = getattr(orjson, "Fragment", None)  # orjson >= 3.10


def _frozen(obj: dict):
    """``obj`` serialized once (an ``orjson.Fragment``; ``obj`` itself with an older orjson):
    the same output bytes, without re-serializing a shared part for every message."""
    return obj if _Fragment is None else _Fragment(orjson.dumps(obj))
