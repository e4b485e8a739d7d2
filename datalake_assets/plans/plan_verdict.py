"""``verdict(plan, message)``: what a tracking plan says of one decoded Segment message, as a
list of ``Violation`` (empty: the message keeps to the plan). The reference the sync's fast path
over Arrow batches must equal, message for message.

**Which rules apply.** A track message falls under its event's rule (``select_rule``: the version
named by ``context.protocols.event_version``, else the latest); a track event without a rule is
an ``Unplanned-Event``. A page or screen message falls under the rule keyed by its ``name``, else
its kind's unkeyed rule; when the plan has page (screen) rules but none for that name, it is an
``Unplanned-Event``; a plan without page (screen) rules says nothing of them. An identify or
group message without a rule is planned by absence (no violation), as in Segment, where only
track events are "unplanned". The latest ``common`` rule applies to every message as well
(planned or not, alias included); its violations carry its own version.

**How a rule is checked.** Each section the rule describes (``properties``, ``traits``,
``context``) is checked against the message's section, keyword by keyword, exactly as the
``jsonschema`` package's ``Draft7Validator`` with its format checker does (the tests hold it to
that on generated schemas and messages): every keyword of ``plan_schema.SUPPORTED`` is evaluated
on its own, each only on the JSON kind it applies to (``minimum`` on numbers, ``pattern`` on
strings, ``required`` on objects ...), so one value may fail several. In particular:

* ``type``: booleans are neither ``integer`` nor ``number``; a float with no fraction (``1.0``)
  is an ``integer`` (draft-06 and later); NaN and infinities are numbers, not integers.
* ``enum``: JSON equality (``1 == 1.0``, but ``true`` is not ``1``, recursively in arrays and
  objects).
* ``pattern``: Python's ``re.search``, unanchored.
* ``minLength``/``maxLength``: code points. ``minimum``/``maximum``: inclusive (NaN passes).
* ``format: date-time``: RFC 3339 as ``rfc3339-validator`` (what ``jsonschema`` uses when it is
  installed) checks it: case-insensitive ``T``/``Z``, a fraction of any length, an offset, a
  real calendar day, no year 0, no leap second; its regex ends in ``$``, so one trailing newline
  is accepted too.
* ``additionalProperties: false``: each key the object's ``properties`` do not name.

One difference from Segment's wrapper is by design: the loader keeps each section's schema, not
the wrapper's own ``required: ["properties"]``, so a message without a section is checked as if
it had sent an empty one (Segment's libraries always send ``properties: {}``): a rule that
requires ``order_id`` reports ``properties.order_id`` missing, not ``properties``.

**Violation types** (``VIOLATION_TYPES``): RudderStack's tracking-plan vocabulary
(docs/data-governance/tracking-plans/violation-management: ``Unplanned-Event``,
``Required-Missing``, ``Datatype-Mismatch``, ``Additional-Properties``), the four kinds of
violation Segment Protocols reports too (unplanned event, missing required field, wrong type,
unplanned property). Where RudderStack says ``Unknown-Violation`` ("any other violation") and
Segment "a failed pattern, enum or other keyword", the type names the failed keyword instead,
capitalised the same way: ``Enum``, ``Pattern``, ``Minimum``, ``Maximum``, ``MinLength``,
``MaxLength``, ``Format``. A violation's ``field`` is the value's path in the message
(``field_path``: ``properties.address.city``, ``properties.products[0].sku``,
``properties["Order ID"]``); its ``description`` is one line that never repeats the value itself
(a violations table should not copy what a person sent), only its JSON kind or length.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from datalake_assets.plans.json_values import (
    is_date_time,
    is_type,
    json_equal,
    json_kind,
    regex,
)
from datalake_assets.plans.plan_conforms import conforms
from datalake_assets.plans.plan_model import SECTIONS, PlanRule, TrackingPlan, select_rule

UNPLANNED_EVENT = "Unplanned-Event"
REQUIRED_MISSING = "Required-Missing"
DATATYPE_MISMATCH = "Datatype-Mismatch"
ADDITIONAL_PROPERTIES = "Additional-Properties"
ENUM = "Enum"
PATTERN = "Pattern"
MINIMUM = "Minimum"
MAXIMUM = "Maximum"
MIN_LENGTH = "MinLength"
MAX_LENGTH = "MaxLength"
FORMAT = "Format"
VIOLATION_TYPES = (
    UNPLANNED_EVENT,
    REQUIRED_MISSING,
    DATATYPE_MISMATCH,
    ADDITIONAL_PROPERTIES,
    ENUM,
    PATTERN,
    MINIMUM,
    MAXIMUM,
    MIN_LENGTH,
    MAX_LENGTH,
    FORMAT,
)
# the JSON Schema keyword each keyword violation comes from
KEYWORD_TYPES = {
    "required": REQUIRED_MISSING,
    "type": DATATYPE_MISMATCH,
    "additionalProperties": ADDITIONAL_PROPERTIES,
    "enum": ENUM,
    "pattern": PATTERN,
    "minimum": MINIMUM,
    "maximum": MAXIMUM,
    "minLength": MIN_LENGTH,
    "maxLength": MAX_LENGTH,
    "format": FORMAT,
}
# kinds whose rules are keyed by a name; a message of such a kind without a rule is unplanned
# when the plan has rules of its kind (always, for track)
NAMED_KINDS = {"track": "event", "page": "name", "screen": "name"}


@dataclass(frozen=True)
class Violation:
    """One violation of one message: the per-message fields of Segment's ``Violation
    Generated`` event (``violationType``, ``violationField``, ``violationDescription``,
    ``eventName``) and the version of the rule it broke (None for an unplanned event)."""

    violation_type: str
    field: str
    description: str
    event: str
    rule_version: int | None
    # the value's path in the message (keys and array indexes): what "omit" removes
    path: tuple = dataclasses.field(default=(), compare=False)


def verdict(plan: TrackingPlan, message: dict) -> list[Violation]:
    """The plan's violations by ``message`` (a decoded Segment message), in a stable order:
    its own rule's (sections in ``SECTIONS`` order, depth first, keywords in a fixed order),
    then the common rule's."""
    kind = message.get("type")
    kind = kind.lower() if isinstance(kind, str) else ""
    name_key = NAMED_KINDS.get(kind)
    name = message.get(name_key) if name_key else None
    name = name if isinstance(name, str) else ""
    event = name if kind == "track" or name else kind
    out: list[Violation] = []
    if kind in ("track", "identify", "group", "page", "screen"):
        rule = select_rule(plan, kind, name, event_version(message))
        if rule is not None:
            out.extend(_rule_violations(rule, message, event))
        elif kind == "track" or (name_key and plan.rules_of(kind)):
            what = f"{kind} {json.dumps(name, ensure_ascii=False)}" if name else f"a {kind}"
            where = "event" if kind == "track" else "name"
            if not name:
                what += f" without {'an event name' if kind == 'track' else 'a name'}"
            out.append(
                Violation(
                    UNPLANNED_EVENT, where, f"{what} is not in the tracking plan", event, None
                )
            )
    common = plan.rules_of("common")
    if common:
        out.extend(_rule_violations(max(common, key=lambda r: r.version), message, event))
    return out


def event_version(message: dict) -> int | None:
    """``context.protocols.event_version`` as a version (a whole number, or its digits as a
    string), else None."""
    context = message.get("context")
    protocols = context.get("protocols") if isinstance(context, dict) else None
    version = protocols.get("event_version") if isinstance(protocols, dict) else None
    if isinstance(version, bool):
        return None
    if isinstance(version, int):
        return version
    if isinstance(version, str) and version.isascii() and version.isdigit():
        return int(version)
    return None


def _rule_violations(rule: PlanRule, message: dict, event: str) -> Iterator[Violation]:
    for section in SECTIONS:
        schema = rule.schemas.get(section)
        if schema is None:
            continue
        value = message[section] if section in message else {}
        if conforms(schema, value):  # the compiled fast path: most messages keep to it
            continue
        for vtype, path, description in check(schema, value, (section,)):
            yield Violation(vtype, field_path(path), description, event, rule.version, path)


# ------------------------------------------------------------------ one schema, one value


def check(schema: dict, value: object, path: tuple = ()) -> Iterator[tuple[str, tuple, str]]:
    """``(violation type, path, description)`` for each keyword of ``schema`` that ``value``
    fails, depth first; ``path`` is the value's path (keys and array indexes)."""
    here = field_path(path) or "the value"
    types = schema.get("type")
    if types is not None:
        names = [types] if isinstance(types, str) else list(types)
        if not any(is_type(value, t) for t in names):
            yield (
                DATATYPE_MISMATCH,
                path,
                f"{here} must be {' or '.join(names)}, not {json_kind(value)}",
            )
    if "enum" in schema and not any(json_equal(each, value) for each in schema["enum"]):
        yield ENUM, path, f"{here} must be one of {_list(schema['enum'])}"
    if isinstance(value, str):
        yield from _check_string(schema, value, path, here)
    if is_type(value, "number"):
        if "minimum" in schema and value < schema["minimum"]:
            yield MINIMUM, path, f"{here} must be at least {schema['minimum']!r}"
        if "maximum" in schema and value > schema["maximum"]:
            yield MAXIMUM, path, f"{here} must be at most {schema['maximum']!r}"
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for key in schema.get("required", ()):
            if key not in value:
                yield REQUIRED_MISSING, (*path, key), f"{field_path((*path, key))} is required"
        for key, sub in properties.items():
            if key in value:
                yield from check(sub, value[key], (*path, key))
        if schema.get("additionalProperties") is False:
            for key in value:
                if key not in properties:
                    yield (
                        ADDITIONAL_PROPERTIES,
                        (*path, key),
                        f"{field_path((*path, key))} is not planned, and {here} has "
                        "additionalProperties false",
                    )
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            yield from check(schema["items"], item, (*path, i))


def _check_string(schema: dict, value: str, path: tuple, here: str) -> Iterator:
    if "pattern" in schema and not regex(schema["pattern"]).search(value):
        yield PATTERN, path, f"{here} must match the pattern {json.dumps(schema['pattern'])}"
    n = len(value)
    if "minLength" in schema and n < schema["minLength"]:
        yield MIN_LENGTH, path, f"{here} must be at least {schema['minLength']} characters, not {n}"
    if "maxLength" in schema and n > schema["maxLength"]:
        yield MAX_LENGTH, path, f"{here} must be at most {schema['maxLength']} characters, not {n}"
    if schema.get("format") == "date-time" and not is_date_time(value):
        yield FORMAT, path, f"{here} must be an RFC 3339 date-time (format date-time)"


_PLAIN_KEY = re.compile(r"[A-Za-z0-9_$-]+", re.ASCII)


def field_path(path: Sequence) -> str:
    """A value's path as a violation names it: ``properties.address.city``, an array's item
    ``[0]``, a key that is not plain letters, digits, ``_``, ``$`` or ``-`` as ``["Order ID"]``
    (JSON-quoted, so the path stays one line)."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_KEY.fullmatch(part):
            out += f".{part}" if out else part
        else:
            out += f"[{json.dumps(part, ensure_ascii=False)}]"
    return out


def _list(values: list, most: int = 10) -> str:
    shown = ", ".join(json.dumps(v, ensure_ascii=False, default=str) for v in values[:most])
    return shown if len(values) <= most else f"{shown}, ... ({len(values)} values)"
