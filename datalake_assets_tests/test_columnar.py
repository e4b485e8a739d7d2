"""The whole-column rules give exactly what the per-value rules of ``types.py`` give."""

import math

import pyarrow as pa
import pytest

from datalake_assets.spec import columnar as C
from datalake_assets.spec import types as T

TEXTS = [
    "42", "-0", "007", "-12", "9223372036854775807", "9223372036854775808",
    "-9223372036854775808", "-9223372036854775809", "123456789012345678901234567890",
    "1.5", "-1.5e3", "1e999", "1E5", ".5", "5.", "1e", "0x10", " 1", "1 ", "+1", "NaN",
    "true", "False", "TRUE", "tRuE", "t", "yes", "f",
    "2026-11-21T10:00:00Z", "2026-11-21T10:00:00.123Z", "2026-11-21 10:00:00+02:00",
    "2026-11-21T10:00:00+0200", "2026-11-21T10:00:00-05", "2026-11-21T10:00Z",
    "2026-11-21T10:00", "2026-11-21T10:00:00", "2026-11-21T10:00:00.123456789Z",
    "2026-11-21T10:00:00.1z", "2026-11-21T10:00:00.12+05:30", "2026-13-21T10:00:00Z",
    "2026-02-30T10:00:00Z", "2026-11-21T24:00:00Z", "2026-11-21T23:59:60Z",
    "0000-01-01T00:00:00Z", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999999Z",
    "2026-11-21T10:00:00+24:00", "2026-11-21T10:00:00+23:59", "2026-11-21", "2026-11-21T1:00:00Z",
    "", "hello", "-", "--1", "tomorrow", "Ünïcödé", "2026-11-21T10:00:00Zjunk",
    "-2026-11-21T10:00:00Z",
]

VALUES = [1, -5, 0, 2**63 - 1, -(2**63), 1.5, -0.0, 1e-7, 1e20, 2.0**70, float("nan"),
          float("inf"), float("-inf"), True, False] + TEXTS


def test_string_kinds_match_kind_of_text():
    got = C.string_kinds(pa.array(TEXTS + [None])).to_pylist()
    want = [T.kind_of_text(t) for t in TEXTS] + [None]
    assert [(t, g) for t, g in zip(TEXTS, got)] == [(t, w) for t, w in zip(TEXTS, want)]


def test_parse_timestamps_match_parse_timestamp():
    arr = C.parse_timestamps(pa.array(TEXTS)).cast(pa.int64()).to_pylist()
    assert [(t, a) for t, a in zip(TEXTS, arr)] == [(t, T.parse_timestamp(t)) for t in TEXTS]


def test_parse_timestamps_isolates_bad_values_in_long_arrays():
    good = [f"2026-11-21T10:{m:02d}:00Z" for m in range(60)] * 20
    texts = good[:500] + ["2026-02-30T10:00:00Z"] + good[500:]
    got = C.parse_timestamps(pa.array(texts)).cast(pa.int64()).to_pylist()
    assert got == [T.parse_timestamp(t) for t in texts]
    assert got[500] is None and got.count(None) == 1


@pytest.mark.parametrize("values", [
    [1, 2, None, 3], [1.5, None, 2.5], [True, None, False], ["a", None, "42"], [None, None],
    [1, 2.5], [1, "2"], [True, 1], ["x", 1.5, False, None], [1, None, True, "2026-11-21T10:00:00Z"],
])
def test_column_array_and_counts_match_per_value_kinds(values):
    arr = C.column_array(values)
    want = [0] * T.N_KINDS
    for v in values:
        if v is not None:
            want[T.kind_of(v)] += 1
    assert C.kind_counts(arr) == want
    assert len(arr) == len(values) and arr.null_count == values.count(None)


def test_mixed_columns_keep_the_exact_text_of_each_value():
    arr = C.column_array([1, 2.5, "3", True, None])
    assert C.is_mixed(arr)
    assert arr.field("text").to_pylist() == ["1", "2.5", "3", "true", None]


def _same(a, b):
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b and type(a) is type(b)


@pytest.mark.parametrize("typ", T.TYPES)
@pytest.mark.parametrize("shape", ["native", "mixed"])
def test_cast_array_matches_cast_value_by_value(typ, shape):
    groups = {  # values grouped by the JSON type a plain array can hold
        "int": [v for v in VALUES if type(v) is int],
        "float": [v for v in VALUES if type(v) is float],
        "bool": [v for v in VALUES if type(v) is bool],
        "str": [v for v in VALUES if type(v) is str],
    }
    batches = list(groups.values()) if shape == "native" else [VALUES]
    for values in batches:
        values = values + [None]
        arr = C.column_array(values) if shape == "native" else C.mixed_array(values)
        assert C.is_mixed(arr) == (shape == "mixed")
        out, misfits = C.cast_array(arr, typ)
        assert out.type == C.ARROW_TYPES[typ]
        got = out.to_pylist()
        if typ == T.TIMESTAMP:
            got = out.cast(pa.int64()).to_pylist()
        bad = {row for row, _, _ in misfits}
        for i, v in enumerate(values):
            if v is None:
                assert got[i] is None
                continue
            try:
                want = T.cast(v, typ)
            except T.CastError as e:
                assert i in bad, (v, typ)
                assert got[i] is None
                assert str(e) in [r for row, _, r in misfits if row == i]
                continue
            assert i not in bad, (v, typ)
            assert _same(got[i], want), (v, typ, got[i], want)
