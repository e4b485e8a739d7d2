"""``conforms(schema, value)``: whether a value keeps to a plan's JSON Schema, with no
violation to describe. The verdict (``plan_verdict.py``) asks it first and describes only what
fails: most messages keep to their plan, and describing a message costs several times more
than checking it.

Each schema is compiled once into a tree of closures (a keyword looked up once, not at every
value), kept by the schema object's identity. The tests hold ``conforms`` to the verdict, and
the verdict to ``jsonschema``, on generated schemas and values: a value conforms exactly when
``check`` finds nothing.
"""

from __future__ import annotations

from collections.abc import Callable

from datalake_assets.plans.json_values import is_date_time, is_type, json_equal, regex

Test = Callable[[object], bool]
_COMPILED: dict[int, tuple[dict, Test]] = {}


def conforms(schema: dict, value: object) -> bool:
    entry = _COMPILED.get(id(schema))
    if entry is None or entry[0] is not schema:
        entry = _COMPILED[id(schema)] = (schema, compile_schema(schema))
    return entry[1](value)


def compile_schema(schema: dict) -> Test:
    tests: list[Test] = []
    types = schema.get("type")
    strings = _string_test(schema)
    if types == "string" and strings is not None:  # the common case, as one test
        text = strings
        tests.append(lambda v: isinstance(v, str) and text(v))
        strings = None
    elif types is not None:
        tests.append(_type_test([types] if isinstance(types, str) else list(types)))
    if "enum" in schema:
        enum = schema["enum"]
        tests.append(lambda v: any(json_equal(each, v) for each in enum))
    if strings is not None:
        tests.append(lambda v: not isinstance(v, str) or strings(v))
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is not None or high is not None:
        tests.append(
            lambda v: (
                not is_type(v, "number")
                or ((low is None or not v < low) and (high is None or not v > high))
            )
        )
    if objects := _object_test(schema):
        tests.append(lambda v: not isinstance(v, dict) or objects(v))
    if "items" in schema:
        item = compile_schema(schema["items"])
        tests.append(lambda v: not isinstance(v, list) or all(item(x) for x in v))
    return _all_of(tests)


def _all_of(tests: list[Test]) -> Test:
    """One test of several (a loop: ``all()`` over a generator costs twice as much here)."""
    if not tests:
        return lambda v: True
    if len(tests) == 1:
        return tests[0]
    first, *rest = tests

    def test(v: object) -> bool:
        if not first(v):
            return False
        for t in rest:
            if not t(v):
                return False
        return True

    return test


def _type_test(names: list[str]) -> Test:
    if names == ["string"]:
        return lambda v: isinstance(v, str)
    if names == ["boolean"]:
        return lambda v: isinstance(v, bool)
    if names == ["object"]:
        return lambda v: isinstance(v, dict)
    return lambda v: any(is_type(v, n) for n in names)


def _string_test(schema: dict) -> Test | None:
    checks: list[Test] = []
    if "pattern" in schema:
        search = regex(schema["pattern"]).search
        checks.append(lambda v: search(v) is not None)
    if "minLength" in schema:
        n = schema["minLength"]
        checks.append(lambda v: len(v) >= n)
    if "maxLength" in schema:
        m = schema["maxLength"]
        checks.append(lambda v: len(v) <= m)
    if schema.get("format") == "date-time":
        checks.append(is_date_time)
    return _all_of(checks) if checks else None


def _object_test(schema: dict) -> Test | None:
    required = tuple(schema.get("required", ()))
    properties = {k: compile_schema(sub) for k, sub in schema.get("properties", {}).items()}
    closed = schema.get("additionalProperties") is False
    if not required and not properties and not closed:
        return None

    get = properties.get

    def test(v: dict) -> bool:
        for key in required:
            if key not in v:
                return False
        # the value's keys, not the plan's: a message sends fewer than its rule plans
        for key, item in v.items():
            sub = get(key)
            if sub is None:
                if closed:
                    return False
            elif not sub(item):
                return False
        return True

    return test
