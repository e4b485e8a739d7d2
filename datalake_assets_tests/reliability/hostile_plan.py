"""A tracking plan for the hostile corpus (issue #56): rules over the corpus's own events, so
that its hostile messages meet a plan too, and the lake's ``violations`` table can be held to
the oracle (``support/oracle_plan.py``).

The plan changes no column's type: no property schema has a ``type`` keyword (a planned type
fixes its column's type, and the corpus checks the inferred ones). It checks what needs no
type: ``required``, ``enum``, ``pattern``, ``minLength``/``maxLength``, ``minimum``/
``maximum``, ``format``, ``additionalProperties``, ``items`` and nested ``properties``. Rules
are derived from the corpus (one in four of the cases' own track events is left out, an
``Unplanned-Event``),
deterministically, so any corpus change keeps a plan that fits it.
"""

from __future__ import annotations

import json

from datalake_assets.plans.plan_load import plan_from_document
from datalake_assets.plans.plan_model import TrackingPlan

# keywords a planned property gets in turn (none of them a type)
PROPERTY_KEYWORDS = (
    {"minLength": 2, "maxLength": 12},
    {"pattern": "^[a-z]"},
    {"minimum": -1000, "maximum": 1000},
    {"enum": [0, 1, "a", True, None, [1, 2], {"v": 1}]},
    {"format": "date-time"},
    {"items": {"maximum": 5, "pattern": "^x"}},
    {
        "properties": {"v": {"minimum": 2}, "max": {"maximum": 1000}, "min": {"minimum": 0}},
        "required": ["v"],
        "additionalProperties": False,
    },
    {},  # planned, any value
)
NEVER_SENT = "planned_but_never_sent"


def _messages(cases) -> list[dict]:
    out = []
    for case in cases:
        for line in case.lines:
            try:
                obj = json.loads(line.raw)
            except (ValueError, RecursionError):
                continue
            if isinstance(obj, dict):
                out.append(obj)
    return out


def corpus_plan_document(cases) -> dict:
    """Segment's Public API rules for the corpus's track events, identify, group and pages,
    and a common rule on ``context.library``."""
    sent: dict[str, set[str]] = {}  # track event -> the property keys its messages send
    count: dict[str, int] = {}  # track event -> its messages
    pages: set[str] = set()
    for obj in _messages(cases):
        if obj.get("type") == "track" and isinstance(obj.get("event"), str) and obj["event"]:
            keys = sent.setdefault(obj["event"], set())
            count[obj["event"]] = count.get(obj["event"], 0) + 1
            if isinstance(obj.get("properties"), dict):
                keys.update(obj["properties"])
        if obj.get("type") == "page" and isinstance(obj.get("name"), str):
            pages.add(obj["name"])
    rules = []
    for i, event in enumerate(sorted(sent)):
        if i % 4 == 3 and count[event] <= 2:
            continue  # an unplanned event (the shared events are all planned)
        keys = sorted(sent[event])
        declared = keys[::2] if i % 3 == 0 else keys  # the others: additional properties
        schema: dict = {
            "properties": {
                k: PROPERTY_KEYWORDS[(i + 3 * j) % len(PROPERTY_KEYWORDS)]
                for j, k in enumerate(declared)
            }
        }
        if i % 3 == 0:
            schema["additionalProperties"] = False
        if i % 5 == 1:
            schema["required"] = [NEVER_SENT]
        elif keys and i % 2 == 0:
            schema["required"] = [keys[-1]]
        rules.append(_rule("TRACK", event, 1 + i % 2, {"properties": schema}))
    rules.append(
        _rule(
            "IDENTIFY",
            None,
            1,
            {"traits": {"required": ["email"], "properties": {"email": {"pattern": "@"}}}},
        )
    )
    rules.append(_rule("GROUP", None, 1, {"traits": {"properties": {"name": {"minLength": 3}}}}))
    for name in sorted(pages)[:1]:  # the corpus's other page names are unplanned
        rules.append(_rule("PAGE", name, 1, {"properties": {"required": ["path"]}}))
    rules.append(
        _rule(
            "COMMON",
            None,
            1,
            {
                "context": {
                    "properties": {
                        "library": {
                            "required": ["name", "version"],
                            "properties": {
                                "name": {"enum": ["hostile-corpus"]},
                                "version": {"pattern": "^[0-9]+$"},
                            },
                        }
                    }
                }
            },
        )
    )
    return {"id": "tp_hostile", "name": "hostile corpus", "rules": rules}


def _rule(kind: str, key: str | None, version: int, sections: dict) -> dict:
    rule = {"type": kind, "version": version, "jsonSchema": {"properties": sections}}
    if key is not None:
        rule["key"] = key
    return rule


def corpus_plan(cases) -> TrackingPlan:
    return plan_from_document(corpus_plan_document(cases), "hostile corpus plan")
