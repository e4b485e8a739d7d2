"""Whole-column versions of ``types.py``'s per-value rules, on Arrow arrays.

A sync classifies and casts *columns*, not values: stage A turns each table's buffered rows
into one Arrow array per column (``column_array``) and counts the kinds in it
(``kind_counts``); stage B casts each array to the column's decided type (``cast_array``) and
gets back the values that do not fit, for the quarantine. The results are those of
``types.kind_of`` and ``types.cast`` applied value by value (``test_columnar.py`` checks it on
tricky values); only the speed differs: Arrow's C++ kernels instead of a Python call per value.

A column whose values are all of one JSON type becomes a plain Arrow array (``int64``,
``double``, ``bool``, ``string``, or ``null`` when every value is missing). A column that mixes
JSON types (``1`` and ``"1"``, ``1`` and ``1.5``, ``true`` and ``"yes"``) becomes a ``MIXED``
struct array: each value's text (``types.cast(v, "string")``) and its kind, computed per value.
Modules: ``column_build`` (column arrays, ``MIXED``), ``column_kinds`` (kinds, timestamps),
``columnize`` (a batch to its columns); here, the cast to a column's type, and the kernels' API.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from datalake_assets.spec.column_build import (
    ARROW_TYPES,
    MIXED,
    TS_TYPE,
    column_array,
    is_mixed,
    mixed_array,
)
from datalake_assets.spec.column_kinds import (
    kind_counts,
    kind_counts_of,
    parse_timestamps,
    string_kinds,
    timestamp_like,
    value_kinds,
)
from datalake_assets.spec.columnize import NeedsRowPath, columnize
from datalake_assets.spec.types import (
    BIGINT,
    BOOLEAN,
    CASTABLE,
    DOUBLE,
    K_BOOL,
    K_INT,
    KIND_NAMES,
    N_KINDS,
    STRING,
    TIMESTAMP,
    cast,
    kind_of,
    value_text,
)

# The column kernels' API (the sync's stages use these names from here).
__all__ = [
    "ARROW_TYPES",
    "FITS",
    "MIXED",
    "TS_TYPE",
    "NeedsRowPath",
    "cast_array",
    "column_array",
    "columnize",
    "is_mixed",
    "kind_counts",
    "kind_counts_of",
    "mixed_array",
    "parse_timestamps",
    "string_kinds",
    "timestamp_like",
    "value_kinds",
]

# kinds that fit each type (the inverse of types.CASTABLE)
FITS: dict[str, pa.Array] = {
    t: pa.array([k for k in range(N_KINDS) if t in CASTABLE[k]], pa.int8())
    for t in (BIGINT, DOUBLE, BOOLEAN, TIMESTAMP, STRING)
}


# ------------------------------------------------------------------------------------ cast


def cast_array(arr: pa.Array, typ: str) -> tuple[pa.Array, list[tuple[int, str, str]]]:
    """The column cast to ``typ`` (a ``types`` name) and its misfits: ``(row, value text,
    reason)`` for each value that does not fit and is NULL in the result."""
    target = ARROW_TYPES[typ]
    t = arr.type
    n = len(arr)
    if t == pa.null() or arr.null_count == n:
        return pa.nulls(n, target), []
    if t == MIXED:
        texts = pc.struct_field(arr, "text")
        kinds = pc.struct_field(arr, "kind")
        fits = pc.fill_null(pc.is_in(kinds, value_set=FITS[typ]), False)
        return _from_text(texts, fits, typ, kinds), _misfits(arr, fits, typ)
    if t == pa.string():
        if typ == STRING:
            return arr, []
        if typ == TIMESTAMP:
            out = parse_timestamps(arr)
            fits = pc.is_valid(out)
            return out, _misfits(arr, fits, typ)
        kinds = string_kinds(arr)
        fits = pc.fill_null(pc.is_in(kinds, value_set=FITS[typ]), False)
        return _from_text(arr, fits, typ, kinds), _misfits(arr, fits, typ)
    if pa.types.is_timestamp(t):  # a stored column's values (an Iceberg widening's rewrite)
        if typ == TIMESTAMP:
            return arr, []
        if typ == STRING:  # ISO-8601 in UTC, to the microsecond: 2026-11-21T10:00:00.000000Z
            return pc.strftime(pc.cast(arr, TS_TYPE), format="%Y-%m-%dT%H:%M:%SZ"), []
        return pa.nulls(n, target), _misfits(arr, pa.array([False] * n), typ)
    # int64, double, bool: each fits a fixed set of types
    kind = {pa.int64(): K_INT, pa.bool_(): K_BOOL}.get(t)
    if t == pa.float64():
        if typ == DOUBLE:
            return arr, []
        if typ == STRING:
            return pa.array(
                [None if v is None else cast(v, STRING) for v in arr.to_pylist()], pa.string()
            ), []
    elif kind is None:
        raise TypeError(f"not a column array: {t}")
    elif typ in CASTABLE[kind]:
        return pc.cast(arr, target, safe=False), []
    fits = pa.array([False] * n)  # nothing of this JSON type fits the column
    return pa.nulls(n, target), _misfits(arr, fits, typ)


def _from_text(texts: pa.Array, fits: pa.Array, typ: str, kinds: pa.Array) -> pa.Array:
    """Text values that fit ``typ`` converted to it; NULL elsewhere."""
    kept = pc.if_else(fits, texts, pa.scalar(None, pa.string()))
    if typ == STRING:
        return kept
    if typ == BIGINT:
        return pc.cast(kept, pa.int64())
    if typ == DOUBLE:
        return pc.cast(kept, pa.float64())
    if typ == BOOLEAN:
        return pc.equal(pc.utf8_lower(kept), "true")
    return parse_timestamps(kept)


def _misfits(arr: pa.Array, fits: pa.Array, typ: str) -> list[tuple[int, str, str]]:
    bad = pc.and_(pc.is_valid(arr), pc.invert(fits))
    rows = pc.indices_nonzero(bad).to_pylist()
    if not rows:
        return []
    values = arr.take(pa.array(rows, pa.int64())).to_pylist()
    out = []
    for row, v in zip(rows, values):
        if isinstance(v, dict):  # MIXED: the text and kind were kept
            text, kind = v["text"], v["kind"]
        else:
            text, kind = value_text(v), kind_of(v)
        out.append((row, text, f"{KIND_NAMES[kind]} does not fit {typ}"))
    return out
