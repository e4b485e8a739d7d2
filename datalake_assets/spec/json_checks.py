"""Checks and fields of messages parsed into JSON-text columns (``json_columns``), per column:
``plainly_valid`` accepts what ``messages.validate`` accepts in its plain form, ``in_table``
checks that a message's type (and a track's event) name the table it was read for. A message
they do not accept is not rejected here: the caller leaves it to the per-line rules."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from datalake_assets.spec.column_kinds import parse_timestamps
from datalake_assets.spec.naming import TRACKS_TABLE, TYPE_TABLES, event_table_name

_TYPE_TEXTS = {f'"{t}"': t for t in TYPE_TABLES}


def _valid(arr: pa.Array) -> np.ndarray:
    return arr.is_valid().to_numpy(zero_copy_only=False)


def field(msgs: pa.StructArray, name: str) -> pa.Array | None:
    """A top-level field's JSON texts (parent nulls applied); None when the shape has no
    such field or holds objects there."""
    t = msgs.type
    i = t.get_field_index(name)
    if i < 0 or pa.types.is_struct(t.field(i).type):
        return None
    return msgs.field(i) if msgs.null_count == 0 else pc.struct_field(msgs, [i])


def unquoted(texts: pa.Array) -> pa.Array:
    """The text of JSON strings without escapes (the routing keeps escapes away)."""
    return pc.utf8_slice_codeunits(texts, 1, -1)


def is_text(texts: pa.Array | None, n: int) -> np.ndarray:
    """Whether each value is a JSON string (no escapes: the routing keeps those away)."""
    if texts is None:
        return np.zeros(n, bool)
    return pc.fill_null(pc.starts_with(texts, '"'), False).to_numpy(zero_copy_only=False)


def present(msgs: pa.StructArray, name: str) -> np.ndarray:
    """``obj.get(name) not in (None, "")``."""
    i = msgs.type.get_field_index(name)
    if i < 0:
        return np.zeros(len(msgs), bool)
    v = pc.struct_field(msgs, [i])
    if pa.types.is_struct(v.type):
        return _valid(v)
    return pc.fill_null(pc.not_equal(v, '""'), False).to_numpy(zero_copy_only=False)


def received(msgs: pa.StructArray) -> pa.Array:
    """Each message's receivedAt in microseconds (``types.parse_timestamp``)."""
    return parse_timestamps(unquoted(field(msgs, "receivedAt"))).cast(pa.int64())


def plainly_valid(msgs: pa.StructArray) -> np.ndarray:
    """Rows that ``messages.validate`` accepts in their plain form: a known type, a text
    messageId of 1-255 characters, a userId or anonymousId, a receivedAt timestamp, and for
    a track an event with a table name."""
    n = len(msgs)
    mtype, mid = field(msgs, "type"), field(msgs, "messageId")
    at = field(msgs, "receivedAt")
    if mtype is None or mid is None or at is None:
        return np.zeros(n, bool)
    ok = pc.fill_null(pc.is_in(mtype, value_set=pa.array(list(_TYPE_TEXTS))), False)
    ok = ok.to_numpy(zero_copy_only=False)
    ok &= is_text(mid, n) & is_text(at, n)
    lengths = pc.fill_null(pc.utf8_length(mid), 0).to_numpy(zero_copy_only=False)
    ok &= (lengths > 2) & (lengths <= 257)
    ok &= present(msgs, "userId") | present(msgs, "anonymousId")
    ts = pc.is_valid(
        parse_timestamps(pc.if_else(pa.array(ok), unquoted(at), pa.scalar(None, pa.string())))
    )
    ok &= ts.to_numpy(zero_copy_only=False)
    return ok


_TABLE_TYPES = {t: f'"{m}"' for m, t in TYPE_TABLES.items() if t != TRACKS_TABLE}


def in_table(msgs: pa.StructArray, table: str) -> np.ndarray:
    """Whether each message's ``type`` (and a track's ``event``) name ``table``."""
    n = len(msgs)
    mtype = field(msgs, "type")
    want = _TABLE_TYPES.get(table, '"track"')
    ok = pc.fill_null(pc.equal(mtype, want), False).to_numpy(zero_copy_only=False)
    if table in _TABLE_TYPES or not ok.any():
        return ok
    event = field(msgs, "event")
    if event is None:
        return np.zeros(n, bool)
    ok &= is_text(event, n)
    enc = pc.if_else(
        pa.array(ok), unquoted(event), pa.scalar(None, pa.string())
    ).dictionary_encode()
    codes = pc.fill_null(enc.indices, -1).to_numpy(zero_copy_only=False)
    same = np.array(
        [bool(e.strip()) and event_table_name(e) == table for e in enc.dictionary.to_pylist()]
        + [False]
    )
    return ok & same[codes]
