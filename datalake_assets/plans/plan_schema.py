"""The JSON Schema a plan's rule may use, checked before anything compiles it: draft-07's
structure for the keywords the plan compiler supports, and a clear refusal of every other one.

``jsonschema`` is not a runtime dependency of the project (only installed beside other
packages), so the schema is checked here, keyword by keyword, rather than by
``Draft7Validator.check_schema``: each supported keyword's value must be what draft-07 allows.
"""

from __future__ import annotations

import re

from datalake_assets.plans.plan_model import PlanError

JSON_TYPES = frozenset({"string", "number", "integer", "boolean", "object", "array", "null"})
FORMATS = frozenset({"date-time"})
# what the plan compiler turns into column checks
SUPPORTED = (
    "type",
    "required",
    "enum",
    "pattern",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "format",
    "additionalProperties",
    "properties",
    "items",
)
# read and ignored: they say nothing a message is checked against
IGNORED = ("$schema", "title", "description", "id", "$id", "examples", "default")
_KNOWN = frozenset(SUPPORTED + IGNORED)


def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_count(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def check_schema(schema: object, where: str) -> None:
    """Raise ``PlanError`` (``where`` names the file and the JSON path) unless ``schema`` is a
    draft-07 schema that uses only the supported keywords."""
    if not isinstance(schema, dict):
        raise PlanError(f"{where}: a JSON Schema must be an object, not {_kind(schema)}")
    for key, value in schema.items():
        at = f"{where}.{key}"
        if key not in _KNOWN:
            raise PlanError(
                f"{at}: JSON Schema keyword {key!r} is not supported (supported: "
                f"{', '.join(SUPPORTED)}; ignored: {', '.join(IGNORED)})"
            )
        _check_keyword(key, value, at)


def _check_keyword(key: str, value: object, at: str) -> None:
    if key == "type":
        names = [value] if isinstance(value, str) else value
        if (
            not isinstance(names, list)
            or not names
            or len(set(map(str, names))) != len(names)
            or not all(isinstance(n, str) and n in JSON_TYPES for n in names)
        ):
            raise PlanError(
                f"{at}: must be one of {', '.join(sorted(JSON_TYPES))} or a list of them, "
                f"not {value!r}"
            )
    elif key == "required":
        if (
            not isinstance(value, list)
            or not all(isinstance(n, str) for n in value)
            or len(set(value)) != len(value)
        ):
            raise PlanError(f"{at}: must be a list of distinct property names, not {value!r}")
    elif key == "enum":
        if not isinstance(value, list) or not value:
            raise PlanError(f"{at}: must be a non-empty list, not {value!r}")
    elif key == "pattern":
        if not isinstance(value, str):
            raise PlanError(f"{at}: must be a regular expression, not {value!r}")
        try:
            re.compile(value)
        except re.error as e:
            raise PlanError(f"{at}: not a regular expression: {e}") from None
    elif key in ("minimum", "maximum"):
        if not _is_number(value):
            raise PlanError(f"{at}: must be a number, not {value!r}")
    elif key in ("minLength", "maxLength"):
        if not _is_count(value):
            raise PlanError(f"{at}: must be a whole number of at least 0, not {value!r}")
    elif key == "format":
        if value not in FORMATS:
            raise PlanError(f"{at}: format {value!r} is not supported (supported: date-time)")
    elif key == "additionalProperties":
        if not isinstance(value, bool):
            raise PlanError(f"{at}: only true or false is supported, not a schema")
    elif key == "properties":
        if not isinstance(value, dict):
            raise PlanError(f"{at}: must be an object of property schemas")
        for name, sub in value.items():
            check_schema(sub, f"{at}.{name}" if _plain(name) else f"{at}[{name!r}]")
    elif key == "items":
        if isinstance(value, list):
            raise PlanError(f"{at}: a list of schemas (tuple validation) is not supported")
        check_schema(value, at)
    elif key in ("$schema", "title", "description", "id", "$id") and not isinstance(value, str):
        raise PlanError(f"{at}: must be a string, not {value!r}")
    elif key == "examples" and not isinstance(value, list):
        raise PlanError(f"{at}: must be a list, not {value!r}")


def _plain(name: str) -> bool:
    return name.isidentifier()


def _kind(value: object) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), "null" if value is None else "a number"
    )
