"""Building column arrays: the flattened values of one column as a plain Arrow array when they
share a JSON type, else as a ``MIXED`` struct array (each value's text and kind); and the Arrow
type of each ``types`` column type. ``columnar.py`` says what the column kernels are for."""

from __future__ import annotations

import pyarrow as pa

from datalake_assets.spec.types import (
    BIGINT,
    BOOLEAN,
    DOUBLE,
    STRING,
    TIMESTAMP,
    cast,
    kind_of,
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


def column_array(values: list) -> pa.Array:
    """One column of flattened values (``str``/``int``/``float``/``bool`` or ``None``)."""
    try:
        arr = pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return mixed_array(values)
    t = arr.type
    if t == pa.float64():
        # [1, 2.5] infers double: the integer's text would change ("1" -> "1.0"); [1.5, True]
        # infers double too, with true as 1.0
        if any(type(v) is int or type(v) is bool for v in values):
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
