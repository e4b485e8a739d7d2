"""What a tracking plan says of one message (``plans/plan_verdict.py``): each violation type, where
it points (``field``) and what it says, which rule applies (unplanned events, planned-by-absence
identify and group, page and screen names, the common rule), version selection by
``context.protocols.event_version``; and, on generated schemas and messages (Hypothesis), the
verdict held to the reference validator, ``jsonschema``'s ``Draft7Validator`` with its format
checker: the same messages fail, at the same fields, for the same keywords."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft7Validator

from datalake_assets.plans.plan_load import PUBLIC_API, load_plan
from datalake_assets.plans.plan_model import MAIN_SECTION, make_plan, make_rule
from datalake_assets.plans.plan_schema import check_schema
from datalake_assets.plans.plan_verdict import (
    ADDITIONAL_PROPERTIES,
    DATATYPE_MISMATCH,
    ENUM,
    FORMAT,
    KEYWORD_TYPES,
    MAXIMUM,
    MIN_LENGTH,
    MINIMUM,
    PATTERN,
    REQUIRED_MISSING,
    UNPLANNED_EVENT,
    VIOLATION_TYPES,
    Violation,
    event_version,
    field_path,
    is_date_time,
    verdict,
)

SEGMENT = Path(__file__).parent / "data" / "segment_public_api.json"
PLAN = load_plan(SEGMENT)
APP = {"app": {"version": "1.2.0"}}  # what the fixture's common rule requires of every message


def found(violations: list[Violation]) -> set[tuple[str, str]]:
    return {(v.violation_type, v.field) for v in violations}


def plan_of(*rules) -> object:
    return make_plan("tp", "tp", PUBLIC_API, list(rules))


def track_plan(schema: dict, event: str = "E") -> object:
    return plan_of(make_rule("track", event, 1, {"properties": schema}))


def track(properties, event: str = "E", **extra) -> dict:
    return {"type": "track", "event": event, "properties": properties, **extra}


def order(version: int | None = None, **properties) -> dict:
    context = dict(APP)
    if version is not None:
        context["protocols"] = {"event_version": version}
    return track(properties, "Order Completed", context=context)


# ------------------------------------------------------------------ which rule applies


def test_a_message_that_keeps_to_the_plan_has_no_violation():
    message = order(1, order_id="o-1", revenue=12.5, currency="EUR", products=[{"sku": "a"}])
    assert verdict(PLAN, message) == []
    identify = {"type": "identify", "traits": {"email": "a@b.c", "age": 40}, "context": APP}
    assert verdict(PLAN, identify) == []


def test_a_track_event_without_a_rule_is_unplanned():
    [v] = verdict(PLAN, track({"x": 1}, "Order Complete", context=APP))
    assert v == Violation(
        UNPLANNED_EVENT,
        "event",
        'track "Order Complete" is not in the tracking plan',
        "Order Complete",
        None,
    )
    [v] = verdict(PLAN, {"type": "track", "properties": {}, "context": APP})
    assert (v.violation_type, v.field, v.event) == (UNPLANNED_EVENT, "event", "")
    assert "without an event name" in v.description


def test_identify_and_group_without_a_rule_are_planned_by_absence():
    plan = track_plan({"properties": {"a": {"type": "string"}}})
    assert verdict(plan, {"type": "identify", "traits": {"anything": 1}}) == []
    assert verdict(plan, {"type": "group", "traits": {"anything": 1}}) == []
    assert verdict(plan, {"type": "alias", "previousId": "x"}) == []
    assert verdict(plan, {"type": "page", "name": "Home"}) == []  # no page rules: no opinion


def test_group_traits_are_checked_by_the_group_rule():
    [v] = verdict(
        PLAN, {"type": "group", "traits": {"name": "Acme", "employees": -1}, "context": APP}
    )
    assert (v.event, v.rule_version) == ("group", 1)
    assert found(verdict(PLAN, {"type": "group", "traits": {}, "context": APP})) == {
        (REQUIRED_MISSING, "traits.name")
    }


def test_page_and_screen_rules_by_name():
    keyed = plan_of(
        make_rule("page", "Pricing", 1, {"properties": {"required": ["plan"]}}),
        make_rule("screen", "", 1, {"properties": {"required": ["step"]}}),
    )
    assert verdict(keyed, {"type": "page", "name": "Pricing", "properties": {"plan": "x"}}) == []
    assert found(verdict(keyed, {"type": "page", "name": "Pricing", "properties": {}})) == {
        (REQUIRED_MISSING, "properties.plan")
    }
    [v] = verdict(keyed, {"type": "page", "name": "Blog", "properties": {}})
    assert (v.violation_type, v.field, v.event) == (UNPLANNED_EVENT, "name", "Blog")
    assert v.description == 'page "Blog" is not in the tracking plan'
    # an unkeyed screen rule applies to every screen, named or not
    for message in ({"type": "screen", "name": "Cart"}, {"type": "screen"}):
        assert found(verdict(keyed, message)) == {(REQUIRED_MISSING, "properties.step")}


def test_the_common_rule_applies_to_every_message_with_its_own_version():
    no_context = [
        track({"order_id": "o"}, "Order Completed"),
        track({}, "Never Planned"),
        {"type": "identify", "traits": {"email": "a@b"}},
        {"type": "alias", "previousId": "x"},
        {"type": "page", "name": "Home"},
    ]
    for message in no_context:
        common = [v for v in verdict(PLAN, message) if v.field == "context.app"]
        assert [(v.violation_type, v.rule_version) for v in common] == [(REQUIRED_MISSING, 1)]
    [v] = verdict(PLAN, track({"plan": "free"}, "Signed Up", context={"app": {}}))
    assert (v.violation_type, v.field) == (REQUIRED_MISSING, "context.app.version")
    # the latest common rule applies
    common = [
        make_rule("common", "", 1, {"context": {"required": ["a"]}}),
        make_rule("common", "", 3, {"context": {"required": ["b"]}}),
    ]
    [v] = verdict(plan_of(*common), {"type": "alias", "context": {"a": 1}})
    assert (v.field, v.rule_version) == ("context.b", 3)


def test_a_missing_section_is_checked_as_an_empty_one():
    # Segment's libraries always send properties: {}; the rule's own required fields report
    assert found(verdict(PLAN, {"type": "track", "event": "Signed Up", "context": APP})) == {
        (REQUIRED_MISSING, "properties.plan")
    }
    # a section that is there but not an object is a wrong type
    assert found(verdict(PLAN, track(None, "Signed Up", context=APP))) == {
        (DATATYPE_MISMATCH, "properties")
    }


# ------------------------------------------------------------------ version selection


def test_event_version_selects_the_rule_version():
    v1_only = order(1, order_id="o", extra=1)  # v1 allows more properties; v2 does not
    assert verdict(PLAN, v1_only) == []
    latest = order(None, order_id="o", extra=1)
    expected = {
        (REQUIRED_MISSING, "properties.subtotal"),
        (REQUIRED_MISSING, "properties.shipping_address"),
        (ADDITIONAL_PROPERTIES, "properties.extra"),
    }
    assert found(verdict(PLAN, latest)) == expected
    assert {v.rule_version for v in verdict(PLAN, latest)} == {2}
    assert found(verdict(PLAN, order(2, order_id="o", extra=1))) == expected
    # a version the plan lacks falls back to the latest, as select_rule does
    assert found(verdict(PLAN, order(7, order_id="o", extra=1))) == expected
    assert [v.rule_version for v in verdict(PLAN, order(1, revenue=-1))] == [1, 1]


@pytest.mark.parametrize(
    "context, version",
    [
        ({"protocols": {"event_version": 2}}, 2),
        ({"protocols": {"event_version": "2"}}, 2),
        ({"protocols": {"event_version": True}}, None),
        ({"protocols": {"event_version": 2.0}}, None),
        ({"protocols": {"event_version": "v2"}}, None),
        ({"protocols": None}, None),
        ({}, None),
        (None, None),
    ],
)
def test_event_version_read_from_the_message(context, version):
    assert event_version({"type": "track", "context": context}) == version


# ------------------------------------------------------------------ each violation type

ADDRESS = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
    },
    "required": ["city"],
    "additionalProperties": False,
}
SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "minLength": 2, "maxLength": 4},
        "count": {"type": "integer", "minimum": 1, "maximum": 3},
        "price": {"type": "number", "minimum": 0.5},
        "flag": {"type": "boolean"},
        "note": {"type": ["string", "null"]},
        "size": {"enum": ["S", "M", 1, [1, 2]]},
        "code": {"type": "string", "pattern": "ab"},
        "at": {"type": "string", "format": "date-time"},
        "address": ADDRESS,
        "items": {"type": "array", "items": {"type": "object", "properties": {"n": ADDRESS}}},
        "Order ID": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 1}},
    },
    "required": ["id"],
}
TYPED = track_plan(SCHEMA)


@pytest.mark.parametrize(
    "properties, expected",
    [
        ({}, {(REQUIRED_MISSING, "properties.id")}),
        ({"id": "ab", "address": {}}, {(REQUIRED_MISSING, "properties.address.city")}),
        (
            {"id": "ab", "items": [{"n": {"city": "x"}}, {"n": {}}]},
            {(REQUIRED_MISSING, "properties.items[1].n.city")},
        ),
        ({"id": 12}, {(DATATYPE_MISMATCH, "properties.id")}),
        ({"id": "ab", "count": 2.5}, {(DATATYPE_MISMATCH, "properties.count")}),
        ({"id": "ab", "count": True}, {(DATATYPE_MISMATCH, "properties.count")}),
        ({"id": "ab", "price": True}, {(DATATYPE_MISMATCH, "properties.price")}),
        ({"id": "ab", "price": "1"}, {(DATATYPE_MISMATCH, "properties.price")}),
        ({"id": "ab", "flag": 1}, {(DATATYPE_MISMATCH, "properties.flag")}),
        ({"id": "ab", "note": 3}, {(DATATYPE_MISMATCH, "properties.note")}),
        ({"id": "ab", "address": "Paris"}, {(DATATYPE_MISMATCH, "properties.address")}),
        ({"id": "ab", "Order ID": 1}, {(DATATYPE_MISMATCH, 'properties["Order ID"]')}),
        (
            {"id": "ab", "address": {"city": "x", "street": "y"}},
            {(ADDITIONAL_PROPERTIES, "properties.address.street")},
        ),
        ({"id": "ab", "size": "L"}, {(ENUM, "properties.size")}),
        ({"id": "ab", "size": True}, {(ENUM, "properties.size")}),  # true is not 1
        ({"id": "ab", "size": [True, 2]}, {(ENUM, "properties.size")}),
        ({"id": "ab", "code": "b-a"}, {(PATTERN, "properties.code")}),
        (
            {"id": "ab", "address": {"city": "x", "zip": "123456"}},
            {(PATTERN, "properties.address.zip")},
        ),
        ({"id": "ab", "count": 0}, {(MINIMUM, "properties.count")}),
        ({"id": "ab", "price": 0.49}, {(MINIMUM, "properties.price")}),
        ({"id": "ab", "count": 4}, {(MAXIMUM, "properties.count")}),
        ({"id": "a"}, {(MIN_LENGTH, "properties.id")}),
        ({"id": "abcde"}, {("MaxLength", "properties.id")}),
        ({"id": "ab", "tags": ["a", "bc"]}, {("MaxLength", "properties.tags[1]")}),
        ({"id": "ab", "at": "2026-11-29 12:00:00Z"}, {(FORMAT, "properties.at")}),
        # one value, several keywords: each reports
        (
            {"id": "abcde", "count": 9.5},
            {
                ("MaxLength", "properties.id"),
                (MAXIMUM, "properties.count"),
                (DATATYPE_MISMATCH, "properties.count"),
            },
        ),  # fmt: skip
    ],
)
def test_each_violation_type_at_its_field(properties, expected):
    violations = verdict(TYPED, track(properties))
    assert found(violations) == expected
    assert {v.event for v in violations} == {"E"} and {v.rule_version for v in violations} == {1}


@pytest.mark.parametrize(
    "properties",
    [
        {"id": "ab"},
        {"id": "ab", "count": 1, "price": 0.5},  # bounds are inclusive
        {"id": "ab", "count": 3.0},  # a float without a fraction is an integer (draft-06 on)
        {"id": "ab", "price": 7},  # an integer is a number
        {"id": "😀😀"},  # lengths count code points
        {"id": "abcd", "note": None},
        {"id": "ab", "size": 1.0},  # 1.0 is 1
        {"id": "ab", "size": [1, 2.0]},
        {"id": "ab", "code": "xxaby"},  # pattern is unanchored
        {"id": "ab", "at": "2026-11-29t12:00:00.123456+05:30"},
        {"id": "ab", "address": {"city": "x", "zip": "75001"}},
        {"id": "ab", "unplanned": {"deep": 1}},  # open objects take unplanned properties
        {"id": "ab", "items": [], "tags": []},
    ],
)
def test_values_that_keep_to_the_plan(properties):
    assert verdict(TYPED, track(properties)) == []


def test_the_unit_cases_cover_every_violation_type():
    covered = {UNPLANNED_EVENT}
    for mark in test_each_violation_type_at_its_field.pytestmark:
        if mark.name == "parametrize":
            for _, expected in mark.args[1]:
                covered |= {t for t, _ in expected}
    assert covered == set(VIOLATION_TYPES)
    assert set(KEYWORD_TYPES.values()) | {UNPLANNED_EVENT} == set(VIOLATION_TYPES)


@pytest.mark.parametrize(
    "text, ok",
    [
        ("2026-11-29T12:00:00Z", True),
        ("2026-11-29t12:00:00z", True),
        ("2024-02-29T23:59:59.5-01:00", True),
        ("2026-11-29T12:00:00Z\n", True),  # rfc3339-validator's `$`: the reference accepts it
        ("2026-02-29T00:00:00Z", False),  # not a leap year
        ("0000-01-01T00:00:00Z", False),
        ("2026-11-29T24:00:00Z", False),
        ("2026-11-29T12:00:60Z", False),  # no leap seconds
        ("2026-11-29T12:00:00", False),  # an offset is required
        ("2026-11-29 12:00:00Z", False),
        ("2026-11-29", False),
        ("٢٠٢٦-11-29T12:00:00Z", False),  # ASCII digits only
        ("", False),
    ],
)
def test_date_time_as_the_reference_checks_it(text, ok):
    assert is_date_time(text) is ok
    assert Draft7Validator.FORMAT_CHECKER.conforms(text, "date-time") is ok


def test_descriptions_are_one_line_and_never_repeat_the_value():
    secret = "jane.doe@example.com\nsecond line"
    schema = {
        "type": "object",
        "properties": {
            "e\nmail": {"type": "integer", "pattern": "^x$", "maxLength": 2, "enum": ["a\nb"]},
            "at": {"format": "date-time"},
        },
        "additionalProperties": False,
    }
    plan = track_plan(schema)
    violations = verdict(plan, track({"e\nmail": secret, "at": secret, "other": secret}))
    assert {v.violation_type for v in violations} == {
        DATATYPE_MISMATCH,
        PATTERN,
        "MaxLength",
        ENUM,
        FORMAT,
        ADDITIONAL_PROPERTIES,
    }
    for v in violations:
        assert "\n" not in v.description and "\n" not in v.field
        assert "jane" not in v.description
    assert {v.field for v in violations} == {'properties["e\\nmail"]', "properties.at", "properties.other"}  # fmt: skip
    by_type = {v.violation_type: v.description for v in violations}
    assert by_type[DATATYPE_MISMATCH] == 'properties["e\\nmail"] must be integer, not string'
    assert by_type["MaxLength"] == 'properties["e\\nmail"] must be at most 2 characters, not 32'


def test_violation_is_frozen():
    v = Violation(ENUM, "properties.a", "d", "E", 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        v.field = "x"  # type: ignore[misc]


@pytest.mark.parametrize(
    "path, text",
    [
        (("properties", "address", "city"), "properties.address.city"),
        (("properties", "products", 0, "sku"), "properties.products[0].sku"),
        (("properties", "Order ID"), 'properties["Order ID"]'),
        (("traits", "café"), 'traits["café"]'),
        (("properties", "a.b"), 'properties["a.b"]'),
        (("properties", "first-name", "$x"), "properties.first-name.$x"),
    ],
)
def test_field_paths(path, text):
    assert field_path(path) == text


# ------------------------------------------------------------------ held to the reference

KEYS = ["a", "b", "c", "Order ID", "é"]
PATTERNS = ["ab", "^[A-Z]{3}-\\d+$", "^\\d*$", "^.{2}$", "x|y$", "[^@]+@[^@]+"]
TYPES = ["string", "integer", "number", "boolean", "null", "object", "array"]
BOUNDS = st.one_of(st.integers(-3, 3), st.sampled_from([0.5, -1.5, 2.0, 10**20]))
SCALARS = st.one_of(
    st.text(max_size=3),
    st.sampled_from([1.0, 0.0, 1.5, -2.5, 1e20, 10**20, math.nan, math.inf, -math.inf]),
    st.integers(-4, 4),
    st.booleans(),
    st.none(),
)
ENUM_VALUES = st.one_of(SCALARS, st.sampled_from([[1], [True], [1, "a"], {"a": 1}, {"a": True}]))
DATE_TIMES = st.sampled_from(
    [
        "2026-11-29T12:00:00Z",
        "2026-11-29t12:00:00.5z",
        "2024-02-29T00:00:00+01:00",
        "2026-02-29T00:00:00Z",
        "0000-01-01T00:00:00Z",
        "2026-11-29T12:00:00Z\n",
        "2026-11-29T24:00:00Z",
        "2026-11-29 12:00:00Z",
        "2026-11-29T12:00:00",
        "2026-13-01T00:00:00Z",
    ]
)


@st.composite
def date_times(draw) -> str:
    """Strings shaped like RFC 3339 date-times, each part right or wrong, in either case."""
    year = draw(st.sampled_from([2026, 2024, 1900, 0]))
    month = draw(st.sampled_from([11, 2, 13, 0]))
    day = draw(st.sampled_from([29, 30, 31, 1, 32, 0]))
    clock = [draw(st.sampled_from(values)) for values in ([12, 23, 24], [0, 59, 60], [0, 59, 60])]
    text = f"{year:04d}-{month:02d}-{day:02d}{draw(st.sampled_from('tT '))}"
    text += "{:02d}:{:02d}:{:02d}".format(*clock) + draw(st.sampled_from(["", ".5", ".123456"]))
    text += draw(st.sampled_from(["z", "Z", "+01:00", "-23:59", "+24:00", "+0100", ""]))
    return text + draw(st.sampled_from(["", "\n", " "]))


@st.composite
def schemas(draw, depth: int = 2, top: bool = False) -> dict:
    """A schema of the keywords ``plan_schema`` supports: objects, arrays and leaves, keywords
    sometimes on a value of another type (draft-07 lets them be; they then do not apply)."""
    shapes = ["leaf", "leaf", "object", "array"] if depth else ["leaf"]
    shape = "object" if top else draw(st.sampled_from(shapes))
    schema: dict = {}
    if shape == "object":
        keys = st.sampled_from(KEYS)
        props = draw(st.dictionaries(keys, schemas(depth - 1), min_size=2 * top, max_size=4))
        if props or draw(st.booleans()):
            schema["properties"] = props
        if draw(st.booleans()):
            schema["required"] = draw(st.lists(st.sampled_from(KEYS), unique=True, max_size=3))
        if draw(st.booleans()):
            schema["additionalProperties"] = draw(st.booleans())
        if draw(st.booleans()):
            schema["type"] = draw(st.sampled_from(["object", ["object", "null"]]))
        return schema
    if shape == "array":
        schema["items"] = draw(schemas(depth - 1))
        if draw(st.booleans()):
            schema["type"] = "array"
        return schema
    theme = draw(st.sampled_from(["string", "number", "enum", "date-time", "any"]))
    if theme == "string":
        schema = {"type": draw(st.sampled_from(["string", ["string", "null"]]))}
        if draw(st.booleans()):
            schema["pattern"] = draw(st.sampled_from(PATTERNS))
        for key in ("minLength", "maxLength"):
            if draw(st.booleans()):
                schema[key] = draw(st.integers(0, 3))
    elif theme == "number":
        schema = {"type": draw(st.sampled_from(["integer", "number", ["integer", "null"]]))}
        for key in ("minimum", "maximum"):
            if draw(st.booleans()):
                schema[key] = draw(BOUNDS)
    elif theme == "enum":
        schema = {"enum": draw(st.lists(ENUM_VALUES, min_size=1, max_size=4))}
    elif theme == "date-time":
        schema = {"type": "string", "format": "date-time"}
    else:  # any keywords on any types: each applies only to the values of its kind
        if draw(st.booleans()):
            one = st.sampled_from(TYPES)
            schema["type"] = draw(one | st.lists(one, min_size=1, max_size=3, unique=True))
        for key, values in (
            ("enum", st.lists(ENUM_VALUES, min_size=1, max_size=4)),
            ("pattern", st.sampled_from(PATTERNS)),
            ("minLength", st.integers(0, 3)),
            ("maxLength", st.integers(0, 3)),
            ("format", st.just("date-time")),
            ("minimum", BOUNDS),
            ("maximum", BOUNDS),
        ):
            if draw(st.integers(0, 3)) == 0:
                schema[key] = draw(values)
    return schema


def near(schema: dict) -> st.SearchStrategy:
    """Values drawn near ``schema``: of its types and of others, its enum's members and their
    look-alikes, strings that match its pattern or not, of lengths about its bounds, numbers at
    and about its bounds, date-times right and wrong, objects with and without its properties,
    with keys it does not plan (mostly values of the schema's own shape, sometimes any)."""
    options = []
    types = schema.get("type", [])
    types = [types] if isinstance(types, str) else types
    if "enum" in schema:
        options += [st.sampled_from(schema["enum"]), ENUM_VALUES]
    if "pattern" in schema:
        matching = st.from_regex(schema["pattern"])
        options.append(st.one_of(matching, st.tuples(st.sampled_from("_a"), matching).map("".join)))
    # each bound's wrong side first (Hypothesis draws a list's first members more often)
    lengths = [(schema[k], s) for k, s in (("minLength", -1), ("maxLength", 1)) if k in schema]
    if lengths or "string" in types:
        sizes = [n + d * s for d in (1, 0, -1) for n, s in lengths or [(1, 1)]]
        sizes = st.sampled_from([n for n in sizes if n >= 0])
        options.append(
            sizes.flatmap(lambda n: st.text(st.sampled_from("aZ1é😀"), min_size=n, max_size=n))
        )
    if "format" in schema:
        options.append(DATE_TIMES | date_times())
    bounds = [(schema[k], s) for k, s in (("minimum", -1), ("maximum", 1)) if k in schema]
    if bounds or {"integer", "number"} & set(types):
        steps = (1, 0.5, 0, -0.5, -1)
        numbers = [b + d * s for d in steps for b, s in bounds or [(0, 1)]]
        options.append(st.sampled_from([x for n in numbers for x in (n, float(n))]))
    props = schema.get("properties", {})
    if props or "required" in schema or "additionalProperties" in schema or "object" in types:
        options.append(objects(schema))
    if "items" in schema or "array" in types:
        options.append(st.lists(near(schema.get("items", {})), max_size=3))
    if not options:
        return SCALARS
    return st.one_of(st.one_of(options), st.one_of(options), st.one_of(options), SCALARS)


@st.composite
def objects(draw, schema: dict) -> dict:
    """An object for an object schema: each planned key mostly there, each other key (required
    but not described, or not planned at all) sometimes."""
    props = schema.get("properties", {})
    out = {}
    for key in dict.fromkeys([*props, *schema.get("required", ()), *KEYS, "other"]):
        if draw(st.integers(0, 9)) < (8 if key in props else 2):
            out[key] = draw(near(props[key]) if key in props else SCALARS)
    return out


def reference(schema: dict, message: dict) -> set[tuple[str, str]]:
    """``(violation type, field)`` for each error the reference validator finds: a
    ``required`` error per missing key, an ``additionalProperties`` error per extra key."""
    validator = Draft7Validator(schema, format_checker=Draft7Validator.FORMAT_CHECKER)
    out = set()
    for error in validator.iter_errors(message):
        path = tuple(error.absolute_path)
        if error.validator == "required":
            keys = [k for k in error.validator_value if k not in error.instance]
        elif error.validator == "additionalProperties":
            keys = [k for k in error.instance if k not in error.schema.get("properties", {})]
        else:
            out.add((KEYWORD_TYPES[error.validator], field_path(path)))
            continue
        assert keys, error
        out |= {(KEYWORD_TYPES[error.validator], field_path((*path, k))) for k in keys}
    return out


def test_the_reference_checks_date_times():
    # without rfc3339-validator beside it, jsonschema would accept any string as a date-time
    # and the comparison below would not hold the format keyword to anything
    assert not Draft7Validator.FORMAT_CHECKER.conforms("yesterday", "date-time")


@st.composite
def cases(draw) -> tuple[str, dict, dict | None, dict]:
    kind = draw(st.sampled_from(["track", "identify", "group"]))
    main = draw(schemas(top=True))  # a section's schema describes an object
    context = draw(st.none() | schemas(1, top=True))
    # mostly an object, as a section is; sometimes any value
    section = objects(main) | objects(main) | objects(main) | near(main)
    message = {"type": kind, MAIN_SECTION[kind]: draw(section)}
    if kind == "track":
        message["event"] = "E"
    if context is not None:
        message["context"] = draw(objects(context) | near(context))
    return kind, main, context, message


@settings(
    max_examples=200,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(cases())
def test_the_verdict_equals_the_reference_validator(case):
    kind, main, context, message = case
    section = MAIN_SECTION[kind]
    sections = {section: main} if context is None else {section: main, "context": context}
    for schema in sections.values():
        check_schema(schema, "$")  # the generated schema is one a plan may hold
    plan = plan_of(make_rule(kind, "E" if kind == "track" else "", 1, sections))
    wrapper = {"type": "object", "properties": sections}  # Segment's rule, wrapped
    expected = reference(wrapper, message)
    violations = verdict(plan, message)
    assert bool(violations) == bool(expected), json.dumps(message, default=str)
    assert found(violations) == expected
    # and no violation twice
    assert len(violations) == len(set(violations))
