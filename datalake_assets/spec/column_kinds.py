"""The kind (``types.K_*``) of every value of a column, as ``types.kind_of`` decides it value by
value, and the parsing of timestamp text, with Arrow's kernels: regexes and byte tests over the
whole array, Python only for the rare values the fast patterns cannot decide."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from datalake_assets.spec.column_build import MIXED, TS_TYPE
from datalake_assets.spec.types import (
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
    N_KINDS,
    parse_timestamp,
)

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
    if texts.null_count == n:
        return pa.nulls(n, TS_TYPE)
    fast = pc.fill_null(pc.match_substring_regex(texts, _TS_FAST_RE), False)
    n_fast = pc.sum(fast).as_py() or 0
    if n_fast:
        try:  # the common form: one Arrow cast (a bad date falls through to the rules)
            if n_fast == n - texts.null_count:
                return pc.cast(texts, TS_TYPE)
            # Some texts of other forms (a column where a few messages send times without a
            # zone): only those take the rules below, not the whole column (a profile of
            # stage B: 30 % of its time in this function, for 4 % of such values).
            out = _scatter(fast, pc.cast(texts.filter(fast), TS_TYPE), None)
            other = pc.and_(pc.invert(fast), pc.is_valid(texts))
            return pc.if_else(other, _scatter(other, _parse_rules(texts.filter(other)), None), out)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
    return _parse_rules(texts)


def _parse_rules(texts: pa.Array) -> pa.Array:
    """``parse_timestamps`` by the patterns: the strict forms normalized for one Arrow cast,
    the rest (the loose pattern) one by one in Python."""
    n = len(texts)
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
    return pa.concat_arrays(
        [
            _cast_ts(normalized.slice(0, mid), original.slice(0, mid)),
            _cast_ts(normalized.slice(mid), original.slice(mid)),
        ]
    )


def timestamp_like(texts: pa.Array) -> pa.Array | None:
    """Whether each text is a timestamp for ``types.parse_timestamp`` (``None``: none is),
    without parsing the common case: the strict pattern decides, except days 29-31 (is the
    date real?) and the rare forms only the loose pattern allows, which are parsed."""
    strict = pc.fill_null(pc.match_substring_regex(texts, _TS_STRICT_RE), False)
    if pc.all(strict).as_py():
        loose = strict
    else:  # the loose pattern only where the strict one failed
        loose = pc.or_(
            strict,
            pc.fill_null(
                pc.match_substring_regex(
                    pc.if_else(strict, pa.scalar(None, pa.string()), texts), _TS_RE
                ),
                False,
            ),
        )
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
    if len(texts) == 0:
        return pc.fill_null(pc.match_substring_regex(texts, _LOOKS_TYPED_RE), False)
    lengths, (first,) = _bytes_at(texts, (0,))
    looks = _TYPED_FIRST[first] & (lengths > 0)
    return pc.and_(pa.array(looks), pc.is_valid(texts))


def _bytes_at(texts: pa.Array, positions: tuple[int, ...]) -> tuple[np.ndarray, list[np.ndarray]]:
    """``(lengths, [byte at each position])`` of a string array (0 past the end). A slice
    (``offset``; stage A writes a table's rows in slices) reads its own part of the buffers."""
    _, offsets, data = texts.buffers()
    starts = np.frombuffer(offsets, dtype=np.int32, count=texts.offset + len(texts) + 1)[
        texts.offset :
    ]
    lengths = starts[1:] - starts[:-1]
    body = (
        np.frombuffer(data, dtype=np.uint8)
        if data is not None and len(data)
        else np.zeros(1, np.uint8)
    )
    out = []
    for p in positions:
        idx = np.minimum(starts[:-1] + p, len(body) - 1)
        out.append(np.where(lengths > p, body[idx], 0))
    return lengths, out


_DIGIT = np.zeros(256, dtype=bool)
_DIGIT[ord("0") : ord("9") + 1] = True
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
        is_float = pc.and_(
            pc.fill_null(pc.match_substring_regex(cand, _FLOAT_RE), False), pc.invert(is_int)
        )
        ck = np.full(len(cand), K_STR, dtype=np.int8)
        if pc.any(is_float).as_py():
            finite = _finite_double(cand.filter(is_float)).to_numpy(zero_copy_only=False)
            ck[np.flatnonzero(is_float.to_numpy(zero_copy_only=False))] = np.where(
                finite, K_FLOATSTR, K_STR
            )
        if pc.any(is_int).as_py():
            in_range = _int_in_range(cand.filter(is_int)).to_numpy(zero_copy_only=False)
            ck[np.flatnonzero(is_int.to_numpy(zero_copy_only=False))] = np.where(
                in_range, K_INTSTR, K_BIGNUM
            )
        k[np.flatnonzero(num_route)] = ck
    if ts_route.any():
        cand = t.filter(pa.array(ts_route))
        ok = timestamp_like(cand)
        if ok is not None:
            k[np.flatnonzero(ts_route)] = np.where(ok.to_numpy(zero_copy_only=False), K_TS, K_STR)
    if bool_route.any():
        cand = t.filter(pa.array(bool_route))
        is_bool = pc.is_in(pc.utf8_lower(cand), value_set=_BOOL_WORDS).to_numpy(
            zero_copy_only=False
        )
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
        return pc.if_else(
            pc.is_finite(arr), pa.scalar(K_FLOAT, pa.int8()), pa.scalar(K_NONFINITE, pa.int8())
        )
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


def kind_counts_of(columns: dict[str, pa.Array]) -> dict[str, list[int]]:
    """``kind_counts`` of each column of a batch. The string columns are classified as one
    array (``string_kinds`` once, then counted per column): a table has dozens of short string
    columns, and the fixed cost of a dozen kernel calls per column was most of stage A's
    counting (688 calls per 100k bench lines)."""
    out = {name: kind_counts(arr) for name, arr in columns.items() if arr.type != pa.string()}
    texts = {name: arr for name, arr in columns.items() if arr.type == pa.string()}
    if len(texts) < 2:
        return out | {name: kind_counts(arr) for name, arr in texts.items()}
    try:
        joined = pa.concat_arrays(list(texts.values()))
    except pa.ArrowInvalid:  # beyond 2 GiB of text: column by column
        return out | {name: kind_counts(arr) for name, arr in texts.items()}
    kinds = pc.fill_null(string_kinds(joined), N_KINDS).to_numpy(zero_copy_only=False)
    sizes = np.array([len(a) for a in texts.values()])
    column = np.repeat(np.arange(len(texts)), sizes)
    counts = np.bincount(
        column * (N_KINDS + 1) + kinds.astype(np.int64), minlength=len(texts) * (N_KINDS + 1)
    ).reshape(len(texts), N_KINDS + 1)
    for name, row in zip(texts, counts[:, :N_KINDS].tolist()):
        out[name] = row
    return out
