"""A batch of decoded messages straight to its flattened columns (``columnize``), by Arrow's C++
conversion, with the same result as the per-row rules (``messages.flatten_values``) followed by
``column_array``; ``NeedsRowPath`` when only the per-row rules can decide."""

from __future__ import annotations

from itertools import repeat

import pyarrow as pa
import pyarrow.compute as pc

from datalake_assets.spec.column_build import column_array, mixed_array


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


def _column(
    values: list,
    objs: list[dict],
    path: tuple,
    parent: str,
    depth: int,
    max_depth: int,
    child_name,
    out: dict,
) -> None:
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


def _emit(
    arr: pa.Array,
    values: list | None,
    objs: list[dict],
    path: tuple,
    name: str,
    full: str,
    depth: int,
    max_depth: int,
    child_name,
    out: dict,
) -> None:
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
            _emit(
                children[i],
                None,
                objs,
                path + (key,),
                cname,
                cfull,
                depth + 1,
                max_depth,
                child_name,
                out,
            )
        return
    if t == pa.null():
        return
    if t in _LEAF_TYPES:
        if t == pa.float64() and arr.null_count < len(arr):
            integral = pc.equal(pc.floor(arr), arr)
            if pc.any(pc.and_(integral, pc.greater_equal(pc.abs(arr), _SUSPECT))).as_py():
                raise NeedsRowPath
            if pc.any(integral).as_py():  # JSON integers or booleans among them? ([1, 2.5, true])
                raw = values if values is not None else _values_at(objs, path)
                if any(type(v) is int or type(v) is bool for v in raw):
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


def columnize_values(
    values: list, key: str, parent: str, depth: int, max_depth: int, child_name
) -> dict[str, pa.Array]:
    """The columns of one key's decoded values across a batch (``key`` under the column
    ``parent``, in objects at ``depth``), as ``columnize`` gives them; ``NeedsRowPath`` when
    the per-row rules must decide."""
    objs = [_NO_KEYS if v is None else {key: v} for v in values]
    out: dict[str, pa.Array] = {}
    _column(values, objs, (key,), parent, depth, max_depth, child_name, out)
    return out
