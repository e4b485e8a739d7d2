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
"""

from __future__ import annotations

from itertools import repeat

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from datalake_assets.spec.types import (
    BIGINT,
    BOOLEAN,
    CASTABLE,
    DOUBLE,
    INT64_MAX,
    INT64_MIN,
    K_BIGNUM,
    K_BOOL,
    K_BOOLSTR,
    K_FLOAT,
    K_FLOATSTR,
    K_INT,
    K_INTSTR,
    K_NONFINITE,
    K_STR,
    K_TS,
    KIND_NAMES,
    N_KINDS,
    STRING,
    TIMESTAMP,
    cast,
    kind_of,
    parse_timestamp,
    value_text,
)

MIXED = pa.struct([("text", pa.string()), ("kind", pa.int8())])
TS_TYPE = pa.timestamp("us", tz="UTC")
ARROW_TYPES = {
    BIGINT: pa.int64(),
    DOUBLE: pa.float64(),
    BOOLEAN: pa.bool_(),
    STRING: pa.string(),
    TIMESTAMP: TS_TYPE,
}
_PLAIN = (pa.string(), pa.int64(), pa.float64(), pa.bool_(), pa.null())

# The same patterns as types.py (RE2 syntax: "$" is the end of the text).
_INT_RE = r"^-?(?:0|[1-9][0-9]*)$"
_FLOAT_RE = r"^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?$"
_TS_RE = (
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]{1,9})?)?"
    r"(?:Z|z|[-+][0-9]{2}(?::?[0-9]{2})?)?$"
)
# Stricter than the pattern above: the fields of a real date-time. Arrow's parser is only
# trusted with text that passes it (e.g. it would read "24:00" as the next day); anything else
# that looks like a timestamp is decided by types.parse_timestamp, one value at a time.
_TS_STRICT_RE = (
    r"^(?:[0-9]{3}[1-9]|[0-9]{2}[1-9]0|[0-9][1-9]00|[1-9]000)-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])[T ](?:[01][0-9]|2[0-3]):"
    r"[0-5][0-9](?::[0-5][0-9](?:\.[0-9]{1,9})?)?(?:Z|z|[-+](?:[01][0-9]|2[0-3])(?::?[0-5][0-9])?)?$"
)
# The common case, which Arrow's own ISO-8601 parser reads exactly as parse_timestamp does:
# a real date-time with an explicit zone (upper-case Z or an offset) and at most 6 decimals.
_TS_FAST_RE = (
    r"^(?:[0-9]{3}[1-9]|[0-9]{2}[1-9]0|[0-9][1-9]00|[1-9]000)-(?:0[1-9]|1[0-2])-"
    r"(?:0[1-9]|[12][0-9]|3[01])[T ](?:[01][0-9]|2[0-3]):[0-5][0-9](?::[0-5][0-9](?:\.[0-9]{1,6})?)?"
    r"(?:Z|[-+](?:[01][0-9]|2[0-3])(?::?[0-5][0-9])?)$"
)
_HAS_ZONE_RE = r"(?:Z|z|[-+][0-9]{2}(?::?[0-9]{2})?)$"
_LOOKS_TYPED_RE = r"^[-0-9tTfF]"  # text that may be a number, a timestamp or a boolean
_BOOL_WORDS = pa.array(["true", "false"])
_BISECT_LEAF = 32

# kinds that fit each type (the inverse of types.CASTABLE)
FITS: dict[str, pa.Array] = {
    t: pa.array([k for k in range(N_KINDS) if t in CASTABLE[k]], pa.int8())
    for t in (BIGINT, DOUBLE, BOOLEAN, TIMESTAMP, STRING)
}


# ----------------------------------------------------------------------------------- build


def column_array(values: list) -> pa.Array:
    """One column of flattened values (``str``/``int``/``float``/``bool`` or ``None``)."""
    try:
        arr = pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return mixed_array(values)
    t = arr.type
    if t == pa.float64():
        # [1, 2.5] infers double: the integer's text would change ("1" -> "1.0")
        if any(type(v) is int for v in values):
            return mixed_array(values)
    elif t not in _PLAIN:
        return mixed_array(values)
    return arr


def mixed_array(values: list) -> pa.Array:
    texts: list[str | None] = []
    kinds: list[int | None] = []
    for v in values:
        if v is None:
            texts.append(None)
            kinds.append(None)
        else:
            texts.append(cast(v, STRING))  # type: ignore[arg-type]
            kinds.append(kind_of(v))
    mask = pa.array([v is None for v in values], pa.bool_())
    return pa.StructArray.from_arrays(
        [pa.array(texts, pa.string()), pa.array(kinds, pa.int8())], fields=list(MIXED), mask=mask
    )


def is_mixed(arr: pa.Array) -> bool:
    return arr.type == MIXED


# ----------------------------------------------------------------------------------- kinds


def _scatter(mask: pa.Array, values: pa.Array, default) -> pa.Array:
    """An array as long as ``mask``: ``values`` (one per true of ``mask``) in order, else
    ``default``."""
    idx = pc.subtract(pc.cumulative_sum(pc.cast(mask, pa.int64())), 1)
    idx = pc.if_else(mask, idx, pa.scalar(None, pa.int64()))
    taken = values.take(idx) if len(values) else pa.nulls(len(mask), values.type)
    if default is None:
        return taken
    return pc.if_else(mask, taken, pa.scalar(default, values.type))


def _int_in_range(texts: pa.Array) -> pa.Array:
    """For integer text: whether it fits 64 bits (checked in Python only past 18 digits)."""
    long = pc.greater(pc.utf8_length(texts), 18)
    if not pc.any(long).as_py():
        return pc.is_valid(texts)
    out = [
        None if t is None else (not lg or INT64_MIN <= int(t) <= INT64_MAX)
        for t, lg in zip(texts.to_pylist(), long.to_pylist())
    ]
    return pa.array(out, pa.bool_())


def _finite_double(texts: pa.Array) -> pa.Array:
    try:
        return pc.is_finite(pc.cast(texts, pa.float64()))
    except pa.ArrowInvalid:  # pragma: no cover - the pattern only lets numbers through
        return pa.array([None if t is None else _py_finite(t) for t in texts.to_pylist()])


def _py_finite(t: str) -> bool:
    import math

    try:
        return math.isfinite(float(t))
    except ValueError:
        return False


def parse_timestamps(texts: pa.Array) -> pa.Array:
    """``timestamp[us, UTC]`` of each text, NULL where ``types.parse_timestamp`` says it is
    not a timestamp."""
    n = len(texts)
    if n == 0:
        return pa.array([], TS_TYPE)
    if texts.null_count < n and pc.all(pc.match_substring_regex(texts, _TS_FAST_RE)).as_py():
        try:  # every text is of the common form: one Arrow cast (a bad date falls through)
            return pc.cast(texts, TS_TYPE)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
    strict = pc.fill_null(pc.match_substring_regex(texts, _TS_STRICT_RE), False)
    loose = pc.fill_null(pc.match_substring_regex(texts, _TS_RE), False)
    other = pc.and_(loose, pc.invert(strict))
    s = texts.filter(strict)
    out = pa.nulls(n, TS_TYPE)
    if len(s):
        s = pc.replace_substring_regex(s, r"z$", "Z")
        s = pc.replace_substring_regex(s, r"(\.[0-9]{6})[0-9]+", r"\1")
        zoned = pc.match_substring_regex(s, _HAS_ZONE_RE)
        s = pc.if_else(zoned, s, pc.binary_join_element_wise(s, "Z", ""))
        out = _scatter(strict, _cast_ts(s, texts.filter(strict)), None)
    if pc.any(other).as_py():
        slow = texts.filter(other)
        parsed = pa.array([parse_timestamp(t) for t in slow.to_pylist()], pa.int64()).cast(TS_TYPE)
        out = pc.if_else(other, _scatter(other, parsed, None), out)
    return out


def _cast_ts(normalized: pa.Array, original: pa.Array) -> pa.Array:
    """Arrow's parser on the whole array; where it refuses one value, halves until the bad
    values are found and decides those in Python."""
    try:
        return pc.cast(normalized, TS_TYPE)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    n = len(normalized)
    if n <= _BISECT_LEAF:
        micros = [None if t is None else parse_timestamp(t) for t in original.to_pylist()]
        return pa.array(micros, pa.int64()).cast(TS_TYPE)
    mid = n // 2
    return pa.concat_arrays([
        _cast_ts(normalized.slice(0, mid), original.slice(0, mid)),
        _cast_ts(normalized.slice(mid), original.slice(mid)),
    ])


def timestamp_like(texts: pa.Array) -> pa.Array | None:
    """Whether each text is a timestamp for ``types.parse_timestamp`` (``None``: none is),
    without parsing the common case: the strict pattern decides, except days 29-31 (is the
    date real?) and the rare forms only the loose pattern allows, which are parsed."""
    strict = pc.fill_null(pc.match_substring_regex(texts, _TS_STRICT_RE), False)
    if pc.all(strict).as_py():
        loose = strict
    else:  # the loose pattern only where the strict one failed
        loose = pc.or_(strict, pc.fill_null(pc.match_substring_regex(
            pc.if_else(strict, pa.scalar(None, pa.string()), texts), _TS_RE), False))
        if not pc.any(loose).as_py():
            return None
    late_day = pc.and_(strict, pc.greater_equal(pc.utf8_slice_codeunits(texts, 8, 10), "29"))
    unsure = pc.or_(pc.and_(loose, pc.invert(strict)), late_day)
    ok = pc.and_(strict, pc.invert(late_day))
    if pc.any(unsure).as_py():
        parsed = parse_timestamps(pc.if_else(unsure, texts, pa.scalar(None, pa.string())))
        ok = pc.or_(ok, pc.is_valid(parsed))
    return ok


_TYPED_FIRST = np.zeros(256, dtype=bool)
for _c in b"-0123456789tTfF":
    _TYPED_FIRST[_c] = True


def _looks_typed(texts: pa.Array) -> pa.Array:
    """``^[-0-9tTfF]`` on each text, from the first byte of the string data (no regex)."""
    if texts.offset or len(texts) == 0:
        return pc.fill_null(pc.match_substring_regex(texts, _LOOKS_TYPED_RE), False)
    lengths, (first,) = _bytes_at(texts, (0,))
    looks = _TYPED_FIRST[first] & (lengths > 0)
    return pc.and_(pa.array(looks), pc.is_valid(texts))


def _bytes_at(texts: pa.Array, positions: tuple[int, ...]) -> tuple[np.ndarray, list[np.ndarray]]:
    """``(lengths, [byte at each position])`` of an offset-0 string array (0 past the end)."""
    _, offsets, data = texts.buffers()
    starts = np.frombuffer(offsets, dtype=np.int32, count=len(texts) + 1)
    lengths = starts[1:] - starts[:-1]
    body = np.frombuffer(data, dtype=np.uint8) if data is not None and len(data) else np.zeros(1, np.uint8)
    out = []
    for p in positions:
        idx = np.minimum(starts[:-1] + p, len(body) - 1)
        out.append(np.where(lengths > p, body[idx], 0))
    return lengths, out


_DIGIT = np.zeros(256, dtype=bool)
_DIGIT[ord("0"):ord("9") + 1] = True
_NUMBER_FIRST = _DIGIT.copy()
_NUMBER_FIRST[ord("-")] = True
_BOOL_FIRST = np.zeros(256, dtype=bool)
for _c in b"tTfF":
    _BOOL_FIRST[_c] = True


def string_kinds(texts: pa.Array) -> pa.Array:
    """The kind (``types.K_*``) of each text, as ``types.kind_of_text`` decides it.

    Cheap byte tests route each text to the patterns it may match (a number, a timestamp:
    ``YYYY-`` and 16+ characters, a boolean word), so most texts meet no regex at all."""
    looks = _looks_typed(texts)
    kinds = pc.if_else(pc.is_valid(texts), pa.scalar(K_STR, pa.int8()), pa.scalar(None, pa.int8()))
    if not pc.any(looks).as_py():
        return kinds
    t = texts.filter(looks)
    lengths, (b0, b4) = _bytes_at(t, (0, 4))
    ts_route = (lengths >= 16) & _DIGIT[b0] & (b4 == ord("-"))
    num_route = _NUMBER_FIRST[b0] & ~ts_route
    bool_route = _BOOL_FIRST[b0] & ((lengths == 4) | (lengths == 5))
    k = np.full(len(t), K_STR, dtype=np.int8)
    if num_route.any():
        cand = t.filter(pa.array(num_route))
        is_int = pc.fill_null(pc.match_substring_regex(cand, _INT_RE), False)
        is_float = pc.and_(pc.fill_null(pc.match_substring_regex(cand, _FLOAT_RE), False),
                           pc.invert(is_int))
        ck = np.full(len(cand), K_STR, dtype=np.int8)
        if pc.any(is_float).as_py():
            finite = _finite_double(cand.filter(is_float)).to_numpy(zero_copy_only=False)
            ck[np.flatnonzero(is_float.to_numpy(zero_copy_only=False))] = np.where(finite, K_FLOATSTR, K_STR)
        if pc.any(is_int).as_py():
            in_range = _int_in_range(cand.filter(is_int)).to_numpy(zero_copy_only=False)
            ck[np.flatnonzero(is_int.to_numpy(zero_copy_only=False))] = np.where(in_range, K_INTSTR, K_BIGNUM)
        k[np.flatnonzero(num_route)] = ck
    if ts_route.any():
        cand = t.filter(pa.array(ts_route))
        ok = timestamp_like(cand)
        if ok is not None:
            k[np.flatnonzero(ts_route)] = np.where(ok.to_numpy(zero_copy_only=False), K_TS, K_STR)
    if bool_route.any():
        cand = t.filter(pa.array(bool_route))
        is_bool = pc.is_in(pc.utf8_lower(cand), value_set=_BOOL_WORDS).to_numpy(zero_copy_only=False)
        k[np.flatnonzero(bool_route)] = np.where(is_bool, K_BOOLSTR, K_STR)
    return pc.if_else(looks, _scatter(looks, pa.array(k), None), kinds)


def value_kinds(arr: pa.Array) -> pa.Array:
    """The kind of each value of a column (NULL where the value is missing)."""
    t = arr.type
    if t == MIXED:
        return pc.struct_field(arr, "kind")
    if t == pa.string():
        return string_kinds(arr)
    if t == pa.int64():
        return _const_kind(arr, K_INT)
    if t == pa.bool_():
        return _const_kind(arr, K_BOOL)
    if t == pa.float64():
        return pc.if_else(pc.is_finite(arr), pa.scalar(K_FLOAT, pa.int8()), pa.scalar(K_NONFINITE, pa.int8()))
    if t == pa.null():
        return pa.nulls(len(arr), pa.int8())
    raise TypeError(f"not a column array: {t}")


def _const_kind(arr: pa.Array, kind: int) -> pa.Array:
    return pc.if_else(pc.is_valid(arr), pa.scalar(kind, pa.int8()), pa.scalar(None, pa.int8()))


def kind_counts(arr: pa.Array) -> list[int]:
    """How many values of each kind the column holds (``N_KINDS`` counters)."""
    counts = [0] * N_KINDS
    t = arr.type
    valid = len(arr) - arr.null_count
    if valid == 0:
        return counts
    if t == pa.int64():
        counts[K_INT] = valid
    elif t == pa.bool_():
        counts[K_BOOL] = valid
    elif t == pa.float64():
        finite = pc.sum(pc.cast(pc.is_finite(arr), pa.int64())).as_py() or 0
        counts[K_FLOAT] = finite
        counts[K_NONFINITE] = valid - finite
    else:
        vc = pc.value_counts(value_kinds(arr))
        for kind, n in zip(vc.field("values").to_pylist(), vc.field("counts").to_pylist()):
            if kind is not None:
                counts[kind] += n
    return counts


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
    # int64, double, bool: each fits a fixed set of types
    kind = {pa.int64(): K_INT, pa.bool_(): K_BOOL}.get(t)
    if t == pa.float64():
        if typ == DOUBLE:
            return arr, []
        if typ == STRING:
            return pa.array([None if v is None else cast(v, STRING) for v in arr.to_pylist()], pa.string()), []
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


# ----------------------------------------------------------------------------- columnize


class NeedsRowPath(Exception):
    """The batch needs the exact per-row rules (``messages.flatten_values``): two keys share a
    column, a key is unusable, nesting reaches ``max_depth``, or a float may be a rounded
    integer wider than 64 bits."""


_SUSPECT = 2.0**63
_NO_KEYS: dict = {}  # stands for "not an object here" (never written to)
_INT64_LO, _INT64_HI = -(2**63), 2**63
_LEAF_TYPES = (pa.string(), pa.int64(), pa.float64(), pa.bool_())


def columnize(objs: list[dict], max_depth: int, child_name) -> dict[str, pa.Array]:
    """The columns of a batch of decoded messages, as ``messages.flatten_values`` on each
    message followed by ``column_array`` on each column would give them, but converted by
    Arrow's C++ (one ``pa.array`` per top-level key; a subtree whose values disagree in type
    is split key by key, so only the disagreeing leaves are handled value by value).

    ``child_name(parent_full_name, key) -> (column name or None, full name)`` is the naming
    rule (``messages.child_name``). Raises ``NeedsRowPath`` when the per-row rules must
    decide."""
    out: dict[str, pa.Array] = {}
    keys: dict = {}
    for o in objs:
        keys.update(o)
    for k in keys:
        values = list(map(dict.get, objs, repeat(k)))  # a C loop: no Python frame per row
        _column(values, objs, (k,), "", 1, max_depth, child_name, out)
    return out


def _put(out: dict, name: str, arr: pa.Array) -> None:
    if name in out:
        raise NeedsRowPath  # two keys share a column: the per-row rules pick the winner
    out[name] = arr


def _values_at(objs: list[dict], path: tuple) -> list:
    out = []
    for o in objs:
        v = o
        for k in path:
            if type(v) is not dict:
                v = None
                break
            v = v.get(k)
        out.append(v)
    return out


def _column(values: list, objs: list[dict], path: tuple, parent: str, depth: int,
            max_depth: int, child_name, out: dict) -> None:
    name, full = child_name(parent, path[-1])
    if name is None:
        raise NeedsRowPath
    try:
        arr = pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        arr = None
    if arr is not None:
        _emit(arr, values, objs, path, name, full, depth, max_depth, child_name, out)
        return
    dicts = [v if type(v) is dict else _NO_KEYS for v in values]
    others = [None if (v is None or type(v) is dict) else v for v in values]
    if any(v is not None for v in others):
        _put(out, name, _leaf(others))
    sub: dict = {}
    for d in dicts:
        if d:
            sub.update(d)
    if sub:
        if depth >= max_depth:
            raise NeedsRowPath
        for k in sub:
            child = list(map(dict.get, dicts, repeat(k)))
            _column(child, objs, path + (k,), full, depth + 1, max_depth, child_name, out)


def _emit(arr: pa.Array, values: list | None, objs: list[dict], path: tuple, name: str,
          full: str, depth: int, max_depth: int, child_name, out: dict) -> None:
    t = arr.type
    if pa.types.is_struct(t):
        if t.num_fields == 0:
            return  # only empty objects: no column
        if depth >= max_depth:
            raise NeedsRowPath
        # All children at once (parent nulls applied): pc.struct_field per field is quadratic
        # in the number of fields (10,000 properties took 80 s).
        children = arr.flatten()
        for i in range(t.num_fields):
            key = t.field(i).name
            cname, cfull = child_name(full, key)
            if cname is None:
                raise NeedsRowPath
            _emit(children[i], None, objs, path + (key,), cname, cfull,
                  depth + 1, max_depth, child_name, out)
        return
    if t == pa.null():
        return
    if t in _LEAF_TYPES:
        if t == pa.float64() and arr.null_count < len(arr):
            integral = pc.equal(pc.floor(arr), arr)
            if pc.any(pc.and_(integral, pc.greater_equal(pc.abs(arr), _SUSPECT))).as_py():
                raise NeedsRowPath
            if pc.any(integral).as_py():  # were some of these JSON integers? ([1, 2.5])
                raw = values if values is not None else _values_at(objs, path)
                if any(type(v) is int for v in raw):
                    _put(out, name, mixed_array(raw))
                    return
        _put(out, name, arr)
        return
    # arrays (and anything else): the JSON text of the original values
    raw = values if values is not None else _values_at(objs, path)
    _put(out, name, _leaf(raw))


def _leaf(values: list) -> pa.Array:
    """Values of one column that Arrow could not convert as they are (mixed types, arrays,
    integers beyond 64 bits): normalized as ``flatten_values`` does, then ``column_array``."""
    import orjson

    norm = []
    for v in values:
        tv = type(v)
        if v is None or tv is str or tv is bool:
            norm.append(v)
        elif tv is int:
            norm.append(v if _INT64_LO <= v < _INT64_HI else str(v))
        elif tv is float:
            if (v >= _SUSPECT or v <= -_SUSPECT) and v.is_integer():
                raise NeedsRowPath
            norm.append(v)
        elif tv is list or tv is dict:
            try:
                text = orjson.dumps(v).decode()
            except (TypeError, orjson.JSONEncodeError):  # wide integers / very deep nesting
                raise NeedsRowPath from None
            if "e+" in text:  # a float >= 1e16 inside: maybe a rounded wide integer
                raise NeedsRowPath
            norm.append(text)
        else:
            norm.append(str(v))
    return column_array(norm)
