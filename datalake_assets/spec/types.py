"""Column types: what each value is, how a column's type is chosen, how values are cast.

Types (Hive / Glue names): ``bigint``, ``double``, ``boolean``, ``timestamp``, ``string``.

Lattice (a column's type only ever moves up, never down)::

    bigint ──► double ──► string
    boolean ─────────────► string
    timestamp ───────────► string

Each non-null value has a *kind* (``K_*`` below): what JSON said plus what a string looks like.
A kind is castable to a set of types (``CASTABLE``); casting never guesses beyond that:
``"42"`` fits bigint, ``"007"`` does not (leading zeros are kept as text: zip codes),
``"2026-11-21T10:00:00Z"`` fits timestamp, ``"2026-11-21"`` does not (a date is not an instant),
integers beyond 64 bits fit only string (their exact digits), ``NaN``/``Infinity`` fit double.

Choosing a column's type for one sync (``decide_type``), from the counts of kinds in the batch:

1. Start from the table's existing type; for a new column, from the non-string type with the
   most *natural* votes (JSON numbers vote numeric, booleans boolean, timestamp strings
   timestamp); a column of only other strings is ``string``. Numbers sent as strings do not
   vote: ``[1, 2, "3"]`` is bigint, ``["3", "4"]`` is string.
2. Numeric widening is free: a bigint column that sees fractional numbers becomes double.
3. Values that do not fit are *misfits*. If misfits outnumber the values that fit, the column
   widens to ``string`` (everything fits a string). Otherwise the type stays and each misfit
   goes to quarantine with its table, column, value, reason and message id; the row keeps
   NULL in that column. Nothing is dropped.

Some columns have a fixed type whatever the data says (``FIXED_TYPES``): ids are strings, the
four Segment timestamps are timestamps.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime

import orjson

BIGINT, DOUBLE, BOOLEAN, TIMESTAMP, STRING = "bigint", "double", "boolean", "timestamp", "string"
TYPES = (BIGINT, DOUBLE, BOOLEAN, TIMESTAMP, STRING)

# Value kinds. Small ints so per-task statistics are compact lists of counters.
K_INT, K_FLOAT, K_BOOL, K_TS, K_INTSTR, K_FLOATSTR, K_BOOLSTR, K_STR, K_BIGNUM, K_NONFINITE = range(
    10
)
N_KINDS = 10
KIND_NAMES = (
    "int",
    "float",
    "bool",
    "timestamp_text",
    "int_text",
    "float_text",
    "bool_text",
    "text",
    "int_beyond_64_bits",
    "non_finite_number",
)

CASTABLE: tuple[frozenset[str], ...] = (
    frozenset({BIGINT, DOUBLE, STRING}),  # K_INT
    frozenset({DOUBLE, STRING}),  # K_FLOAT
    frozenset({BOOLEAN, STRING}),  # K_BOOL
    frozenset({TIMESTAMP, STRING}),  # K_TS
    frozenset({BIGINT, DOUBLE, STRING}),  # K_INTSTR
    frozenset({DOUBLE, STRING}),  # K_FLOATSTR
    frozenset({BOOLEAN, STRING}),  # K_BOOLSTR
    frozenset({STRING}),  # K_STR
    frozenset({STRING}),  # K_BIGNUM
    frozenset({DOUBLE, STRING}),  # K_NONFINITE
)
NATURAL: tuple[str, ...] = (
    BIGINT,
    DOUBLE,
    BOOLEAN,
    TIMESTAMP,
    STRING,
    STRING,
    STRING,
    STRING,
    STRING,
    DOUBLE,
)

FIXED_TYPES: dict[str, str] = {
    "message_id": STRING,
    "type": STRING,
    "event": STRING,
    "user_id": STRING,
    "anonymous_id": STRING,
    "group_id": STRING,
    "previous_id": STRING,
    "channel": STRING,
    "received_at": TIMESTAMP,
    "sent_at": TIMESTAMP,
    "timestamp": TIMESTAMP,
    "original_timestamp": TIMESTAMP,
}

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_INT_TEXT = re.compile(r"-?(?:0|[1-9][0-9]*)\Z")
_FLOAT_TEXT = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?\Z")
_TS_TEXT = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]{1,9})?)?"
    r"(?:Z|z|[-+][0-9]{2}(?::?[0-9]{2})?)?\Z"
)
_NUMBER_START = frozenset("-0123456789")
_BOOL_TEXT = {"true": True, "false": False}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def parse_timestamp(text: str) -> int | None:
    """ISO-8601 date-time text to microseconds since the epoch (UTC); ``None`` if not one.

    Accepted: ``YYYY-MM-DD[T or space]HH:MM[:SS[.fraction]]`` with ``Z``, ``±HH:MM``, ``±HHMM``,
    ``±HH`` or no zone (taken as UTC). Fractions beyond microseconds are truncated.
    """
    if not _TS_TEXT.match(text):
        return None
    t = text
    if t[-1] in "Zz":
        t = t[:-1] + "+00:00"
    # datetime.fromisoformat takes at most 6 fraction digits on every 3.11 patch: cut the rest.
    dot = t.find(".", 19)
    if dot != -1:
        end = dot + 1
        while end < len(t) and t[end].isdigit():
            end += 1
        if end - dot - 1 > 6:
            t = t[: dot + 7] + t[end:]
    try:
        dt = datetime.fromisoformat(t)
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    try:
        delta = dt - _EPOCH
    except OverflowError:
        return None
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


_UTC_TEXT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,6})?Z\Z")


def is_timestamp(text: str) -> bool:
    """``parse_timestamp(text) is not None``, cheaper for the form the collector and Segment
    stamp (``2026-11-21T10:00:00.123Z``): only the calendar check (a UTC time of years 1-9999
    is always in range). The sync asks this of every message's ``receivedAt``."""
    if _UTC_TEXT.match(text):
        try:
            datetime.fromisoformat(text[:-1] + "+00:00")
        except ValueError:
            return False
        return True
    return parse_timestamp(text) is not None


def kind_of_text(v: str) -> int:
    c = v[:1]
    if c in _NUMBER_START and c:
        if _INT_TEXT.match(v):
            return K_INTSTR if INT64_MIN <= int(v) <= INT64_MAX else K_BIGNUM
        if _FLOAT_TEXT.match(v):
            return K_FLOATSTR if math.isfinite(float(v)) else K_STR
        if len(v) >= 16 and parse_timestamp(v) is not None:
            return K_TS
        return K_STR
    if c in "tTfF" and v.lower() in _BOOL_TEXT:
        return K_BOOLSTR
    return K_STR


def kind_of(v: object) -> int:
    """The kind of one flattened, non-null value (str, bool, int or float)."""
    t = type(v)
    if t is str:
        return kind_of_text(v)  # type: ignore[arg-type]
    if t is bool:
        return K_BOOL
    if t is int:
        return K_INT if INT64_MIN <= v <= INT64_MAX else K_BIGNUM  # type: ignore[operator]
    if t is float:
        return K_FLOAT if math.isfinite(v) else K_NONFINITE  # type: ignore[arg-type]
    raise TypeError(f"not a flattened value: {t.__name__}")


def decide_type(existing: str | None, counts: list[int]) -> tuple[str, int]:
    """The column's type after this batch and how many of the batch's values won't fit it."""
    total = sum(counts)
    if existing is not None:
        chosen = existing
    else:
        numeric = counts[K_INT] + counts[K_FLOAT] + counts[K_NONFINITE]
        votes = ((numeric, BIGINT), (counts[K_TS], TIMESTAMP), (counts[K_BOOL], BOOLEAN))
        best_votes, best = max(votes, key=lambda vt: vt[0])  # ties: first listed wins
        chosen = best if best_votes > 0 else STRING
    if chosen == BIGINT and (counts[K_FLOAT] or counts[K_FLOATSTR] or counts[K_NONFINITE]):
        chosen = DOUBLE
    fit = sum(n for k, n in enumerate(counts) if chosen in CASTABLE[k])
    misfits = total - fit
    if misfits > fit:
        return STRING, 0
    return chosen, misfits


def widen(old: str, new: str) -> str:
    """Least upper bound in the lattice."""
    if old == new:
        return old
    if {old, new} == {BIGINT, DOUBLE}:
        return DOUBLE
    return STRING


def is_widening(old: str, new: str) -> bool:
    return old != new and widen(old, new) == new


class CastError(ValueError):
    """A value that does not fit its column's type."""


def cast(v: object, to: str) -> object:
    """Cast one non-null flattened value to a column type, or raise ``CastError``.

    Timestamps come back as microseconds since the epoch (UTC).
    """
    t = type(v)
    if to == STRING:
        if t is str:
            return v
        if t is bool:
            return "true" if v else "false"
        if t is float:
            return (
                repr(v)
                if math.isfinite(v)
                else ("NaN" if v != v else ("Infinity" if v > 0 else "-Infinity"))
            )  # type: ignore[operator]
        return str(v)
    if to == BIGINT:
        if t is int and INT64_MIN <= v <= INT64_MAX:  # type: ignore[operator]
            return v
        if t is str and kind_of_text(v) == K_INTSTR:  # type: ignore[arg-type]
            return int(v)  # type: ignore[arg-type]
    elif to == DOUBLE:
        if t is float:
            return v
        if t is int and INT64_MIN <= v <= INT64_MAX:  # type: ignore[operator]
            return float(v)  # type: ignore[arg-type]
        if t is str and kind_of_text(v) in (K_INTSTR, K_FLOATSTR):  # type: ignore[arg-type]
            return float(v)  # type: ignore[arg-type]
    elif to == BOOLEAN:
        if t is bool:
            return v
        if t is str and kind_of_text(v) == K_BOOLSTR:  # type: ignore[arg-type]
            return _BOOL_TEXT[v.lower()]  # type: ignore[union-attr]
    elif to == TIMESTAMP:
        if t is str:
            micros = parse_timestamp(v)  # type: ignore[arg-type]
            if micros is not None:
                return micros
    else:
        raise ValueError(f"unknown column type {to!r}")
    raise CastError(f"{KIND_NAMES[kind_of(v)]} does not fit {to}")


def value_text(v: object) -> str:
    """How a quarantined value is recorded: JSON text of the original value."""
    if isinstance(v, str):
        return v
    try:
        return orjson.dumps(v).decode()
    except (TypeError, orjson.JSONEncodeError):
        return str(v)
