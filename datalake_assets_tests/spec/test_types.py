import math

import pytest

from datalake_assets.spec import types as T
from datalake_assets.spec.types import (
    BIGINT,
    BOOLEAN,
    DOUBLE,
    STRING,
    TIMESTAMP,
    CastError,
    cast,
    decide_type,
    kind_of,
    parse_timestamp,
)


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (1, T.K_INT),
        (2**63, T.K_BIGNUM),
        (1.5, T.K_FLOAT),
        (float("nan"), T.K_NONFINITE),
        (True, T.K_BOOL),
        ("42", T.K_INTSTR),
        ("-7", T.K_INTSTR),
        ("007", T.K_STR),  # leading zeros stay text (zip codes)
        ("+7", T.K_STR),
        ("4.5", T.K_FLOATSTR),
        ("1e3", T.K_FLOATSTR),
        ("true", T.K_BOOLSTR),
        ("FALSE", T.K_BOOLSTR),
        ("2026-11-21T10:00:00Z", T.K_TS),
        ("2026-11-21 10:00:00", T.K_TS),
        ("2026-11-21", T.K_STR),  # a date is not an instant
        ("2026-13-01T00:00:00Z", T.K_STR),
        ("123456789012345678901234567890", T.K_BIGNUM),
        ("NaN", T.K_STR),
        ("hello", T.K_STR),
        ("", T.K_STR),
    ],
)
def test_kind_of(value, kind):
    assert kind_of(value) == kind


@pytest.mark.parametrize(
    ("text", "micros"),
    [
        ("1970-01-01T00:00:00Z", 0),
        ("1970-01-01T00:00:01.5Z", 1_500_000),
        ("1970-01-01T02:00:00+02:00", 0),
        ("1970-01-01T02:00:00+0200", 0),
        ("1970-01-01 00:00:00", 0),  # no zone: UTC
        ("1970-01-01T00:00:00.1234567Z", 123_456),  # beyond microseconds: truncated
        ("1970-01-01T00:00Z", 0),
        ("not a time", None),
        ("1970-01-01", None),
    ],
)
def test_parse_timestamp(text, micros):
    assert parse_timestamp(text) == micros


def counts(**kw):
    c = [0] * T.N_KINDS
    names = {
        "int": T.K_INT,
        "float": T.K_FLOAT,
        "bool": T.K_BOOL,
        "ts": T.K_TS,
        "intstr": T.K_INTSTR,
        "floatstr": T.K_FLOATSTR,
        "boolstr": T.K_BOOLSTR,
        "str": T.K_STR,
        "bignum": T.K_BIGNUM,
    }
    for k, n in kw.items():
        c[names[k]] = n
    return c


@pytest.mark.parametrize(
    ("existing", "kw", "expected"),
    [
        (None, dict(int=10), (BIGINT, 0)),
        (None, dict(int=9, intstr=1), (BIGINT, 0)),  # numbers sent as strings are cast
        (None, dict(intstr=5), (STRING, 0)),  # only strings: string
        (None, dict(int=5, float=1), (DOUBLE, 0)),  # numeric widening
        (None, dict(int=5, floatstr=1), (DOUBLE, 0)),
        (None, dict(int=9, str=1), (BIGINT, 1)),  # a minority misfit: quarantined
        (None, dict(int=1, str=5), (STRING, 0)),  # a majority: widen to string
        (None, dict(ts=9, str=1), (TIMESTAMP, 1)),
        (None, dict(bool=3, boolstr=2), (BOOLEAN, 0)),
        (BIGINT, dict(float=1), (DOUBLE, 0)),
        (DOUBLE, dict(int=4), (DOUBLE, 0)),  # never narrows
        (STRING, dict(int=4), (STRING, 0)),
        (BIGINT, dict(str=3, int=1), (STRING, 0)),
        (BIGINT, dict(str=1, int=3), (BIGINT, 1)),
        (TIMESTAMP, dict(int=2), (STRING, 0)),
    ],
)
def test_decide_type(existing, kw, expected):
    assert decide_type(existing, counts(**kw)) == expected


def test_lattice_only_widens():
    for a in T.TYPES:
        for b in T.TYPES:
            w = T.widen(a, b)
            assert w in (a, b, STRING)
            assert T.widen(w, a) == w and T.widen(w, b) == w


@pytest.mark.parametrize(
    ("value", "to", "out"),
    [
        (5, BIGINT, 5),
        ("5", BIGINT, 5),
        (5, DOUBLE, 5.0),
        ("2.5", DOUBLE, 2.5),
        ("true", BOOLEAN, True),
        (True, STRING, "true"),
        (2.5, STRING, "2.5"),
        (7, STRING, "7"),
        ("1970-01-01T00:00:01Z", TIMESTAMP, 1_000_000),
    ],
)
def test_cast(value, to, out):
    assert cast(value, to) == out


@pytest.mark.parametrize(
    ("value", "to"),
    [
        ("abc", BIGINT),
        (2.5, BIGINT),
        ("007", BIGINT),
        (1, BOOLEAN),
        ("2026-11-21", TIMESTAMP),
        ("99999999999999999999999", DOUBLE),
        (True, BIGINT),
    ],
)
def test_cast_refuses(value, to):
    with pytest.raises(CastError):
        cast(value, to)


def test_every_castable_kind_casts_and_no_other():
    samples = {
        T.K_INT: 3,
        T.K_FLOAT: 2.5,
        T.K_BOOL: False,
        T.K_TS: "2026-01-01T00:00:00Z",
        T.K_INTSTR: "12",
        T.K_FLOATSTR: "1.25",
        T.K_BOOLSTR: "true",
        T.K_STR: "x",
        T.K_BIGNUM: "123456789012345678901234567890",
        T.K_NONFINITE: math.inf,
    }
    for kind, value in samples.items():
        assert kind_of(value) == kind
        for typ in T.TYPES:
            if typ in T.CASTABLE[kind]:
                cast(value, typ)
            else:
                with pytest.raises(CastError):
                    cast(value, typ)


def test_is_timestamp_agrees_with_parse_timestamp():
    texts = [
        "1970-01-01T00:00:00Z",
        "1970-01-01T00:00:01.5Z",
        "2026-11-21T10:00:00.123Z",
        "2026-11-21T10:00:00.123456Z",
        "2026-11-21T10:00:00.1234567Z",
        "2026-02-29T00:00:00Z",
        "2024-02-29T00:00:00Z",
        "2026-13-01T00:00:00Z",
        "2026-11-31T00:00:00Z",
        "2026-11-21T24:00:00Z",
        "2026-11-21T10:60:00Z",
        "0000-01-01T00:00:00Z",
        "0001-01-01T00:00:00Z",
        "9999-12-31T23:59:59.999999Z",
        "0001-01-01T00:00:00+01:00",
        "2026-11-21T10:00:00z",
        "2026-11-21 10:00:00Z",
        "2026-11-21T10:00Z",
        "2026-11-21T10:00:00+02:00",
        "2026-11-21",
        "",
        "Z",
        "2026-11-21T10:00:00.Z",
        "٢٠٢٦-11-21T10:00:00Z",
        "2026-11-21T10:00:00.12Z\n",
    ]
    for text in texts:
        assert T.is_timestamp(text) == (parse_timestamp(text) is not None), text
