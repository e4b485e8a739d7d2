"""The identities of natively parsed messages (``native_parse.py``), counted per column: what
``IdentityTally.keep`` does message by message, for a table's batch at once.

Each identity column (``userId``, ``anonymousId``, ``previousId``, the listed traits of an
``identify`` call's ``traits`` and of any message's ``context.traits``) is hashed once per
distinct JSON text (``identity.normalize`` and ``identity_hash``, through the tally's cache);
the distinct hashes of each message are counted under (hour, hash, table) with Arrow's
group-by; the links of ``identify`` and ``alias`` calls, a small share of messages, are
counted one message at a time. A message with a suppressed hash is dropped and counted as
suppressed. Where an identity sits inside JSON text (the shape has no object on its path:
``context`` is an object in some messages and text in others), that text is decoded.
"""

from __future__ import annotations

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from datalake_assets.lake.identities import SUPPRESSED
from datalake_assets.spec.identity import (
    ID,
    LINKING_TYPES,
    MAX_IDENTITY_CHARS,
    Identity,
    identity_hash,
    normalize,
    trait_kind,
)
from datalake_assets.transform.identity_tally import MAX_CACHED_VALUES, IdentityTally

_ID_FIELDS = ("userId", "anonymousId", "previousId")
_LINKING_TEXTS = pa.array([f'"{t}"' for t in LINKING_TYPES])


def tally_batch(
    tally: IdentityTally, msgs: pa.StructArray, keep: np.ndarray, table: str, hour: str
) -> tuple[np.ndarray, np.ndarray]:
    """Count the identities of the ``keep`` rows of ``msgs`` (all of ``table``). Returns
    ``(suppressed, unresolved)`` row masks: rows dropped as suppressed (counted), rows left
    to the Python path (not counted)."""
    n = len(msgs)
    unresolved = np.zeros(n, bool)
    mtype = _field_texts(msgs, ("type",), unresolved)
    is_identify = pc.fill_null(pc.equal(mtype, '"identify"'), False).to_numpy(zero_copy_only=False)
    sources: list[tuple[str, str | None, pa.Array, np.ndarray | None]] = []
    for f in _ID_FIELDS:
        sources.append((ID, None, _field_texts(msgs, (f,), unresolved), None))
    for name in tally.traits:
        own = _field_texts(msgs, ("traits", name), unresolved)
        sources.append((trait_kind(name), name, own, is_identify))
        ctx = _field_texts(msgs, ("context", "traits", name), unresolved)
        sources.append((trait_kind(name), name, ctx, None))
    unresolved &= keep
    keep = keep & ~unresolved
    rows, hashes = [], []
    for kind, name, texts, only in sources:
        h = _hashes(tally, kind, name, texts)
        mask = keep & (h != "")
        if only is not None:
            mask &= only
        idx = np.flatnonzero(mask)
        rows.append(idx)
        hashes.append(h[idx])
    row = np.concatenate(rows)
    pairs = pa.table({"row": row, "hash": pa.array(np.concatenate(hashes).tolist(), pa.string())})
    pairs = pairs.group_by(["row", "hash"], use_threads=False).aggregate([])  # a set per row
    suppressed = np.zeros(n, bool)
    if tally.suppressed and pairs.num_rows:
        hit = pc.is_in(pairs.column("hash"), value_set=pa.array(sorted(tally.suppressed)))
        gone = pairs.column("row").filter(hit).to_numpy()
        suppressed[gone] = True
        suppressed &= keep
        if suppressed.any():
            k = (table, hour)
            tally.suppressed_counts[k] = tally.suppressed_counts.get(k, 0) + int(suppressed.sum())
            gone_rows = pc.is_in(
                pairs.column("row"), value_set=pa.array(np.flatnonzero(suppressed))
            )
            # stored nowhere, but named in the index (IdentityTally.keep says why)
            _presence(tally, pairs.filter(gone_rows), hour, SUPPRESSED)
            pairs = pairs.filter(pc.invert(gone_rows))
    _presence(tally, pairs, hour, table)
    _links(tally, pairs, mtype, hour)
    return suppressed, unresolved


def _presence(tally: IdentityTally, pairs: pa.Table, hour: str, table: str) -> None:
    """Each hash's messages among ``pairs`` (a row and hash each), under ``table``."""
    per_hash = pairs.group_by(["hash"], use_threads=False).aggregate([([], "count_all")])
    presence = tally.presence
    for h, c in zip(per_hash.column("hash").to_pylist(), per_hash.column("count_all").to_pylist()):
        k3 = (hour, h, table)
        presence[k3] = presence.get(k3, 0) + c


def _links(tally: IdentityTally, pairs: pa.Table, mtype: pa.Array, hour: str) -> None:
    """One link per pair of distinct identities of each identify or alias call."""
    linking = pc.fill_null(pc.is_in(mtype, value_set=_LINKING_TEXTS), False)
    rows = pairs.column("row").to_numpy()
    sel = linking.to_numpy(zero_copy_only=False)[rows] if len(rows) else np.zeros(0, bool)
    if not sel.any():
        return
    linked = pairs.filter(pa.array(sel))
    by_row: dict[int, list[str]] = {}
    for r, h in zip(linked.column("row").to_pylist(), linked.column("hash").to_pylist()):
        by_row.setdefault(r, []).append(h)
    links = tally.links
    for hashes in by_row.values():
        if len(hashes) < 2:
            continue
        ordered = sorted(hashes)
        for i, a in enumerate(ordered):
            for b in ordered[i + 1 :]:
                k3 = (hour, a, b)
                links[k3] = links.get(k3, 0) + 1


def _hashes(tally: IdentityTally, kind: str, name: str | None, texts: pa.Array) -> np.ndarray:
    """Each row's hash of its value (``""``: none), each distinct text hashed once."""
    enc = texts.dictionary_encode()
    cache = tally._hashes  # shared with the Python path's messages of the task
    if len(cache) > MAX_CACHED_VALUES:
        cache.clear()
    out = []
    for text in enc.dictionary.to_pylist():
        value = orjson.loads(text)
        ck = value if name is None else (name, value)
        h = cache.get(ck) if type(value) is str else None
        if h is None:
            norm = normalize(kind, value)
            h = (
                ""
                if norm is None or len(norm) > MAX_IDENTITY_CHARS
                else identity_hash(tally.key, Identity(kind, norm))
            )
            if type(value) is str:
                cache[ck] = h
        out.append(h)
    table = np.array(out + [""], dtype=object)
    codes = pc.fill_null(enc.indices, -1).to_numpy(zero_copy_only=False)
    return table[codes]


def _field_texts(msgs: pa.StructArray, path: tuple[str, ...], unresolved: np.ndarray) -> pa.Array:
    """The JSON text at ``path`` (objects followed), null where absent or an object. Where a
    step of the path is a leaf (objects in some messages, not in others), the objects in it
    are decoded and followed; a value that cannot be re-encoded marks its row
    ``unresolved``."""
    arr: pa.Array = msgs
    none = pa.nulls(len(msgs), pa.string())
    for depth, key in enumerate(path):
        if arr.type == pa.string():  # a leaf on the way
            return _inside(arr, path[depth:], unresolved) if depth else none
        i = arr.type.get_field_index(key) if pa.types.is_struct(arr.type) else -1
        if i < 0:
            return none
        arr = pc.struct_field(arr, [i])
    return arr if arr.type == pa.string() else none


def _inside(texts: pa.Array, rest: tuple[str, ...], unresolved: np.ndarray) -> pa.Array:
    out: list[str | None] = []
    for i, t in enumerate(texts.to_pylist()):
        v = orjson.loads(t) if t is not None and t.startswith("{") else None
        for key in rest:
            v = v.get(key) if type(v) is dict else None
        if v is None or type(v) is dict:
            out.append(None)
            continue
        try:
            out.append(orjson.dumps(v).decode())
        except orjson.JSONEncodeError:  # an integer beyond 64 bits
            unresolved[i] = True
            out.append(None)
    return pa.array(out, pa.string())
