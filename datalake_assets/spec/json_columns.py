"""Flattened columns from JSON text, per column: what a native JSON parser hands over
(``transform/native_parse.py``) turned into the columns ``columnize`` gives for the same
messages.

The parser returns a batch of messages as one struct array shaped like the objects it was told
about, every non-object value kept as its JSON text (``"abc"``, ``12``, ``1.5``, ``true``, ``[1]``, ``{"a":1}``).
Each leaf column is converted as a whole: strings without escapes, integers, fractions or
booleans by an Arrow kernel; any other column (mixed kinds, arrays, objects where other
messages hold scalars) is decoded value by value and handed to ``columnize`` (the reference
rules). Rows only the per-row rules can decide (two keys sharing a column, an unusable key,
a float that may be a rounded wide integer, objects at ``max_depth``, a value nested near the
decoder's limit) are flagged, never guessed: the caller sends them to the Python path.

``counted_keys`` counts, per message, the keys the struct holds whose value is neither
``null`` nor ``{}``; the caller compares it with ``KEY_COUNT_RE`` counted over the raw line,
which finds every message the struct could not hold (a key it was not told about, a scalar
where it expects an object, a key given twice in one object).
"""

from __future__ import annotations

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from datalake_assets.spec.column_build import MIXED, column_array
from datalake_assets.spec.columnize import NeedsRowPath, columnize_values
from datalake_assets.spec.messages import MAX_NESTING
from datalake_assets.spec.types import K_BOOL, K_FLOAT, K_INT, K_NONFINITE

# A key whose value is neither null nor an empty object (in raw JSON text; the texts handed
# over are minified, with no space around ``:``). Exact only for lines without ``\"`` and
# ``\u`` escapes (a quote inside a string could fake a key): the caller routes those away.
KEY_COUNT_RE = r'"\s*:\s*(?:[^n\s{]|\{\s*[^\s}])'

_SUSPECT = 2.0**63
_QUOTE, _OPEN_OBJ, _OPEN_ARR = ord('"'), ord("{"), ord("[")
_NUMBER_FIRST = np.zeros(256, dtype=bool)
_NUMBER_FIRST[list(b"-0123456789")] = True
_BOOL_FIRST = np.zeros(256, dtype=bool)
_BOOL_FIRST[list(b"tf")] = True


def first_bytes(texts: pa.Array) -> np.ndarray:
    """The first byte of each text (0 where null or empty); any offset."""
    n = len(texts)
    if n == 0:
        return np.zeros(0, np.uint8)
    texts = texts.cast(pa.string()) if texts.type != pa.string() else texts
    _, offsets, data = texts.buffers()
    starts = np.frombuffer(offsets, dtype=np.int32, count=texts.offset + n + 1)[texts.offset :]
    lengths = starts[1:] - starts[:-1]
    if data is None or len(data) == 0:
        return np.zeros(n, np.uint8)
    body = np.frombuffer(data, dtype=np.uint8)
    first = body[np.minimum(starts[:-1], len(body) - 1)]
    valid = texts.is_valid().to_numpy(zero_copy_only=False)
    return np.where((lengths > 0) & valid, first, 0).astype(np.uint8)


def _valid(arr: pa.Array) -> np.ndarray:
    if arr.null_count == 0:
        return np.ones(len(arr), bool)
    return arr.is_valid().to_numpy(zero_copy_only=False)


def counted_keys(struct: pa.StructArray) -> np.ndarray:
    """Per message, the keys ``struct`` holds with a value that is neither null nor ``{}``
    (``KEY_COUNT_RE``'s count of the same message's text when nothing was lost)."""
    out = np.zeros(len(struct), np.int64)
    _count(struct, out)
    return out


def _count(struct: pa.StructArray, out: np.ndarray) -> np.ndarray:
    """Adds the keys under ``struct`` to ``out``; returns whether each row holds any."""
    children = struct.flatten()
    holds = np.zeros(len(struct), bool)
    for i in range(struct.type.num_fields):
        child = children[i]
        if child.null_count == len(child):
            continue
        if pa.types.is_struct(child.type):
            inner = _count(child, out)  # an object counts when it holds something
        else:
            first = first_bytes(child)
            inner = _valid(child)
            containers = (first == _OPEN_OBJ) | (first == _OPEN_ARR)
            if containers.any():
                inner &= (
                    pc.fill_null(pc.not_equal(child, "{}"), True).to_numpy(zero_copy_only=False)
                    | ~containers
                )
                nested = pc.fill_null(pc.count_substring_regex(child, KEY_COUNT_RE), 0)
                out += np.where(containers, nested.to_numpy(zero_copy_only=False), 0)
        out += inner
        holds |= _valid(child)
    return holds


class _Columns:
    """The columns of one batch being built, and the rows the per-row rules must decide."""

    def __init__(self, n: int, max_depth: int, child_name, escapes: bool) -> None:
        self.escapes = escapes
        self.out: dict[str, pa.Array] = {}
        self.bad = np.zeros(n, bool)
        self.max_depth = max_depth
        self.child_name = child_name

    def put(self, name: str, arr: pa.Array) -> None:
        """Add a column; a second key of the same column (rule 8) is merged into it: rows
        holding both take the per-row rules, the others keep the one value they hold."""
        held = self.out.get(name)
        if held is None:
            self.out[name] = arr
            return
        both = _valid(held) & _valid(arr)
        self.bad |= both
        merged = [
            None if b else (x if x is not None else y)
            for x, y, b in zip(_values(held), _values(arr), both)
        ]
        self.out[name] = column_array(merged)

    def walk(self, struct: pa.StructArray, parent: str, depth: int) -> None:
        children = struct.flatten()
        for i in range(struct.type.num_fields):
            child = children[i]
            if child.null_count == len(child):
                continue
            key = struct.type.field(i).name
            name, full = self.child_name(parent, key)
            if name is None:  # unusable key: a value problem the row path records
                self.bad |= _valid(child)
                continue
            if pa.types.is_struct(child.type):
                self.walk(child, full, depth + 1)
            else:
                self.leaf(child, key, name, parent, depth)

    def leaf(self, texts: pa.Array, key: str, name: str, parent: str, depth: int) -> None:
        first = first_bytes(texts)
        valid = _valid(texts)
        f = first[valid]
        if (f == _QUOTE).all():
            if not self.escapes or not pc.any(pc.match_substring(texts, "\\")).as_py():
                self.put(name, pc.utf8_slice_codeunits(texts, 1, -1))
                return
        elif _NUMBER_FIRST[f].all():
            frac = pc.fill_null(pc.match_substring_regex(texts, r"[.eE]"), False)
            if not pc.any(frac).as_py():
                try:
                    self.put(name, texts.cast(pa.int64()))
                    return
                except pa.ArrowInvalid:  # beyond 64 bits: the exact digits, as text
                    pass
            elif pc.all(pc.or_(frac, pc.is_null(texts))).as_py():
                arr = texts.cast(pa.float64())
                wide = pc.and_(
                    pc.equal(pc.floor(arr), arr), pc.greater_equal(pc.abs(arr), _SUSPECT)
                )
                wide = pc.fill_null(wide, False).to_numpy(zero_copy_only=False)
                if wide.any():  # may be a rounded integer wider than 64 bits
                    self.bad |= wide
                    arr = pc.if_else(pa.array(wide), pa.scalar(None, pa.float64()), arr)
                self.put(name, arr)
                return
        elif _BOOL_FIRST[f].all():
            self.put(name, pc.equal(texts, "true"))
            return
        self.decoded(texts, first, key, parent, depth)

    def decoded(
        self, texts: pa.Array, first: np.ndarray, key: str, parent: str, depth: int
    ) -> None:
        """A column of mixed kinds, arrays or objects: each value decoded, then the reference
        rules (``columnize``)."""
        values: list = []
        bad = self.bad
        containers = (first == _OPEN_OBJ) | (first == _OPEN_ARR)
        for i, t in enumerate(texts.to_pylist()):
            if t is None:
                values.append(None)
                continue
            if containers[i] and t.count("{") + t.count("[") + depth > MAX_NESTING:
                bad[i] = True  # maybe nested too deep: the decoder's rule decides
                values.append(None)
                continue
            try:
                values.append(orjson.loads(t))
            except orjson.JSONDecodeError:
                bad[i] = True
                values.append(None)
        try:
            columns = columnize_values(values, key, parent, depth, self.max_depth, self.child_name)
        except NeedsRowPath:
            columns = self.one_by_one(values, key, parent, depth)
        for name, arr in columns.items():
            self.put(name, arr)

    def one_by_one(self, values: list, key: str, parent: str, depth: int) -> dict[str, pa.Array]:
        """``columnize`` value by value, when the column as a whole needs the per-row rules:
        only the values that need them flag their rows."""
        per: dict[str, list] = {}
        for i, v in enumerate(values):
            if v is None:
                continue
            try:
                one = columnize_values([v], key, parent, depth, self.max_depth, self.child_name)
            except NeedsRowPath:
                self.bad[i] = True
                continue
            for name, arr in one.items():
                per.setdefault(name, [None] * len(values))[i] = _values(arr)[0]
        return {name: column_array(vals) for name, vals in per.items()}


def _values(arr: pa.Array) -> list:
    """A column's flattened values back as Python values (``MIXED``: from text and kind)."""
    if arr.type != MIXED:
        return arr.to_pylist()
    out: list = []
    for v in arr.to_pylist():
        if v is None:
            out.append(None)
        elif v["kind"] == K_INT:
            out.append(int(v["text"]))
        elif v["kind"] in (K_FLOAT, K_NONFINITE):
            out.append(float(v["text"]))
        elif v["kind"] == K_BOOL:
            out.append(v["text"] == "true")
        else:
            out.append(v["text"])
    return out


def flatten_texts(
    struct: pa.StructArray, max_depth: int, child_name, escapes: bool = True
) -> tuple[dict[str, pa.Array], np.ndarray]:
    """``(columns, rows for the per-row rules)`` of a batch of messages (module docstring).
    The columns still hold the flagged rows' values: the caller filters them out.
    ``escapes=False``: the caller knows no message holds a backslash (no string value is
    searched for one)."""
    cols = _Columns(len(struct), max_depth, child_name, escapes)
    cols.walk(struct, "", 1)
    return cols.out, cols.bad
