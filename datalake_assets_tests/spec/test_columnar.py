"""The whole-column rules give exactly what the per-value rules of ``types.py`` give."""

import math

import pyarrow as pa
import pytest

from datalake_assets.spec import columnar as C
from datalake_assets.spec import types as T

TEXTS = [
    "42",
    "-0",
    "007",
    "-12",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "-9223372036854775809",
    "123456789012345678901234567890",
    "1.5",
    "-1.5e3",
    "1e999",
    "1E5",
    ".5",
    "5.",
    "1e",
    "0x10",
    " 1",
    "1 ",
    "+1",
    "NaN",
    "true",
    "False",
    "TRUE",
    "tRuE",
    "t",
    "yes",
    "f",
    "2026-11-21T10:00:00Z",
    "2026-11-21T10:00:00.123Z",
    "2026-11-21 10:00:00+02:00",
    "2026-11-21T10:00:00+0200",
    "2026-11-21T10:00:00-05",
    "2026-11-21T10:00Z",
    "2026-11-21T10:00",
    "2026-11-21T10:00:00",
    "2026-11-21T10:00:00.123456789Z",
    "2026-11-21T10:00:00.1z",
    "2026-11-21T10:00:00.12+05:30",
    "2026-13-21T10:00:00Z",
    "2026-02-30T10:00:00Z",
    "2026-11-21T24:00:00Z",
    "2026-11-21T23:59:60Z",
    "0000-01-01T00:00:00Z",
    "0001-01-01T00:00:00Z",
    "9999-12-31T23:59:59.999999Z",
    "2026-11-21T10:00:00+24:00",
    "2026-11-21T10:00:00+23:59",
    "2026-11-21",
    "2026-11-21T1:00:00Z",
    "",
    "hello",
    "-",
    "--1",
    "tomorrow",
    "Ünïcödé",
    "2026-11-21T10:00:00Zjunk",
    "-2026-11-21T10:00:00Z",
    "2020-02-29T10:00:00Z",
    "2021-02-29T10:00:00Z",
    "2030-04-31T10:00:00Z",
    "2000-12-31 23:59:59",
    "1900-02-29T00:00Z",
    "2026-11-30T10:00:00Z",
]

VALUES = [
    1,
    -5,
    0,
    2**63 - 1,
    -(2**63),
    1.5,
    -0.0,
    1e-7,
    1e20,
    2.0**70,
    float("nan"),
    float("inf"),
    float("-inf"),
    True,
    False,
] + TEXTS


def test_string_kinds_match_kind_of_text():
    got = C.string_kinds(pa.array(TEXTS + [None])).to_pylist()
    want = [T.kind_of_text(t) for t in TEXTS] + [None]
    assert [(t, g) for t, g in zip(TEXTS, got)] == [(t, w) for t, w in zip(TEXTS, want)]


def test_string_kinds_of_a_slice_read_the_slice():
    """Stage A counts kinds over slices of a table's columns (a work file per 32k rows)."""
    texts = TEXTS + [None]
    arr = pa.array(texts * 2)
    for start in range(len(texts)):
        part = texts[start:] + texts[:start]
        want = [None if t is None else T.kind_of_text(t) for t in part]
        assert C.string_kinds(arr.slice(start, len(texts))).to_pylist() == want


def test_kind_counts_of_a_batch_match_each_columns_kind_counts():
    """Stage A counts a batch's string columns as one array (``kind_counts_of``)."""
    texts = TEXTS + [None]
    columns = {
        "a": pa.array(texts),
        "b": pa.array(texts[::-1]).slice(3, 10),
        "c": pa.array([None] * 4, pa.string()),
        "d": pa.array([1, None, 3]),
        "e": C.column_array([1, "x", 2.5, None]),
        "f": pa.array([True, None]),
        "g": pa.array(["2026-11-21T10:00:00Z", "7"]),
    }
    got = C.kind_counts_of(columns)
    assert got == {name: C.kind_counts(arr) for name, arr in columns.items()}
    assert C.kind_counts_of({"a": columns["a"]}) == {"a": C.kind_counts(columns["a"])}


def test_parse_timestamps_match_parse_timestamp():
    arr = C.parse_timestamps(pa.array(TEXTS)).cast(pa.int64()).to_pylist()
    assert [(t, a) for t, a in zip(TEXTS, arr)] == [(t, T.parse_timestamp(t)) for t in TEXTS]


def test_parse_timestamps_isolates_bad_values_in_long_arrays():
    good = [f"2026-11-21T10:{m:02d}:00Z" for m in range(60)] * 20
    texts = good[:500] + ["2026-02-30T10:00:00Z"] + good[500:]
    got = C.parse_timestamps(pa.array(texts)).cast(pa.int64()).to_pylist()
    assert got == [T.parse_timestamp(t) for t in texts]
    assert got[500] is None and got.count(None) == 1


@pytest.mark.parametrize(
    "values",
    [
        [1, 2, None, 3],
        [1.5, None, 2.5],
        [True, None, False],
        ["a", None, "42"],
        [None, None],
        [1, 2.5],
        [1, "2"],
        [True, 1],
        ["x", 1.5, False, None],
        [1, None, True, "2026-11-21T10:00:00Z"],
        [1.5, True],
        [2.5, None, False, 1],  # Arrow reads true as 1.0 after a double
    ],
)
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


# ----------------------------------------------------------------------------- columnize


def _row_path(objs, max_depth=16):
    from datalake_assets.spec.messages import flatten_values

    rows = [flatten_values(o, max_depth)[0] for o in objs]
    names = {}
    for r in rows:
        names.update(r)
    return {c: C.column_array([r.get(c) for r in rows]) for c in names}


def _same_columns(objs, max_depth=16):
    from datalake_assets.spec.messages import child_name

    got = C.columnize(objs, max_depth, child_name)
    want = _row_path(objs, max_depth)
    assert sorted(got) == sorted(want)
    for c in want:
        assert got[c].type == want[c].type, c
        assert got[c].to_pylist() == want[c].to_pylist(), c


def test_columnize_matches_the_per_row_rules_on_demo_traffic(tmp_path):
    import gzip

    import orjson

    from datalake_assets.ingest.demo import generate_archive
    from datalake_assets.spec.layout import ArchiveHour
    from datalake_assets.spec.messages import Rejected, decode, validate

    generate_archive(
        str(tmp_path),
        "s",
        [ArchiveHour.parse("2026-11-21T10")],
        events_per_hour=3000,
        files_per_hour=1,
        seed=5,
    )
    by_table = {}
    for f in tmp_path.rglob("*.gz"):
        for line in gzip.open(f):
            try:
                obj = decode(line.rstrip(b"\n"))
                by_table.setdefault(validate(obj)[1], []).append(obj)
            except Rejected:
                pass
    assert len(by_table) > 10
    compared = 0
    for objs in by_table.values():
        try:
            _same_columns(objs)
            compared += 1
        except C.NeedsRowPath:
            pass  # allowed: the sync then takes the per-row path
    # ... but a columnizer that always deferred would compare nothing: most tables must
    # take the fast path on ordinary traffic.
    assert compared > len(by_table) // 2, f"compared {compared} of {len(by_table)} tables"
    del orjson


@pytest.mark.parametrize(
    "objs",
    [
        [{"a": 1}, {"a": "1"}, {"a": None}, {}],  # mixed leaf
        [{"a": {"b": 1}}, {"a": 2}, {"a": {"c": [1, {"d": 2}]}}],  # object and scalar at one path
        [{"p": {"x": 1, "y": 2.5}}, {"p": {"x": 2.5, "y": 3}}],  # ints among doubles
        [{"p": {"list": [1, 2]}}, {"p": {"list": []}}, {"p": {"list": None}}],
        [{"p": {}}, {"p": {"q": {}}}],  # empty objects: no column
        [{"p": {"big": 2**70}}, {"p": {"big": 1}}],  # beyond 64 bits: text
        [{"t": True}, {"t": 1}, {"t": "true"}],
        [{"t": 1.5}, {"t": True}],
        [{"p": {"t": 0.5}}, {"p": {"t": False}}],  # not 1.0 / 0.0
        [{"Day": "monday", "hr": 3}],  # partition-key names
    ],
)
def test_columnize_matches_the_per_row_rules_on_awkward_batches(objs):
    _same_columns(objs)


@pytest.mark.parametrize(
    "objs",
    [
        [{"p": {"firstName": "A", "first_name": "B"}}],  # collision in one message
        [{"p": {"firstName": "A"}}, {"p": {"first_name": "B"}}],  # same column, other rows
        [{"p": {"": 1}}],  # unusable key
        [{"p": {"x": 2.0**70}}],  # a rounded big integer
    ],
)
def test_columnize_hands_exact_cases_to_the_per_row_rules(objs):
    from datalake_assets.spec.messages import child_name

    with pytest.raises(C.NeedsRowPath):
        C.columnize(objs, 16, child_name)


def test_columnize_defers_deep_nesting_to_the_per_row_rules():
    from datalake_assets.spec.messages import child_name

    deep = {"a": {"b": {"c": {"d": 1}}}}
    with pytest.raises(C.NeedsRowPath):
        C.columnize([deep], 3, child_name)
    _same_columns([deep], 8)


@pytest.mark.parametrize(
    "texts",
    [
        [
            "2026-11-21T10:00:00Z",
            "2026-11-21 10:00:00.5+02:00",
            "2026-11-21T10:00:00.123456-0530",
            "2020-02-29T23:59:59Z",
            "2026-11-21T10:00-03",
            None,
        ],
        ["2026-11-21T10:00:00Z", "2026-02-30T10:00:00Z", "2021-02-29T00:00:00+01:00"],  # bad dates
        # the common form with a few of other forms: those alone take the rules
        [
            "2026-11-21T10:00:00Z",
            "2026-11-21 10:00:01",
            None,
            "2026-11-21T10:00:02.123Z",
            "2026-11-21t10:00:03z",
            "2026-11-21T10:00:04.1234567Z",
            "soon",
            "2026-11-21T10:00:05+01",
        ],
        ["2026-11-21T10:00:00Z", "2026-11-21 10:00:01", "2026-02-30T10:00:00Z"],  # and a bad date
    ],
)
def test_parse_timestamps_fast_path_matches_parse_timestamp(texts):
    got = C.parse_timestamps(pa.array(texts, pa.string())).cast(pa.int64()).to_pylist()
    assert got == [None if t is None else T.parse_timestamp(t) for t in texts]
