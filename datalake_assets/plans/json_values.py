"""JSON values as JSON Schema draft-07 sees them, exactly as the ``jsonschema`` package's
``Draft7Validator`` (with its format checker) does: types, equality (``enum``), ``format:
date-time`` and patterns. Shared by the verdict (``plan_verdict.py``) and its compiled fast
path (``plan_conforms.py``)."""

from __future__ import annotations

import calendar
import functools
import numbers
import re
from collections.abc import Mapping, Sequence


@functools.lru_cache(maxsize=1024)
def regex(pattern: str) -> re.Pattern:
    return re.compile(pattern)


def is_type(value: object, name: str) -> bool:
    """JSON Schema draft-07's types, as ``jsonschema``'s draft-07 type checker has them."""
    if name == "string":
        return isinstance(value, str)
    if name == "object":
        return isinstance(value, dict)
    if name == "array":
        return isinstance(value, list)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "null":
        return value is None
    if isinstance(value, bool):
        return False
    if name == "number":
        return isinstance(value, numbers.Number)
    if name == "integer":
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    return False


def json_kind(value: object) -> str:
    """The value's JSON kind, as a description names it (``integer`` for a whole number)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, numbers.Number):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else type(value).__name__


def json_equal(one: object, two: object) -> bool:
    """JSON equality as ``enum`` compares: numbers by value, booleans apart from numbers,
    arrays and objects member by member."""
    if one is two:
        return True
    if isinstance(one, str) or isinstance(two, str):
        return one == two
    if isinstance(one, Sequence) and isinstance(two, Sequence):
        return len(one) == len(two) and all(json_equal(a, b) for a, b in zip(one, two))
    if isinstance(one, Mapping) and isinstance(two, Mapping):
        return len(one) == len(two) and all(
            k in two and json_equal(v, two[k]) for k, v in one.items()
        )
    if isinstance(one, bool) or isinstance(two, bool):
        return isinstance(one, bool) and isinstance(two, bool) and one == two
    return one == two


# RFC 3339's date-time, as rfc3339-validator 0.1.4 matches it (on the upper-cased string)
_RFC3339 = re.compile(
    r"^(\d{4})-(0[1-9]|1[0-2])-(\d{2})T(?:[01]\d|2[0123]):(?:[0-5]\d):(?:[0-5]\d)(?:\.\d+)?"
    r"(?:Z|[+-](?:[01]\d|2[0123]):[0-5]\d)$",
    re.ASCII,
)


def is_date_time(value: str) -> bool:
    """``format: date-time``: what ``jsonschema``'s format checker accepts."""
    m = _RFC3339.match(value.upper())
    if m is None:
        return False
    year, month, day = map(int, m.groups())
    return year > 0 and 1 <= day <= calendar.monthrange(year, month)[1]
