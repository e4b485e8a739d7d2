"""The columns a tracking plan types (issue #56): each planned property's column has the
plan's type from the first sync, whatever the first event sends, and never widens for what
a client sends (a value that cannot take the type goes to the quarantine, as a value of a
fixed column does). ``planned_columns(plan, table)``: a table's planned columns and types.

A property's JSON Schema type gives the column's: ``integer`` -> bigint, ``number`` (or
``integer`` and ``number``) -> double, ``boolean``, ``string`` -> string, and ``string`` with
``format: date-time`` -> timestamp; ``null`` beside one of them changes nothing. Any other
type (an array, an object without planned fields, several types) leaves the column to the
lake's inference, as an unplanned property's. A table has one type per column: an event's
latest version types it (a client that sends an older version's value that cannot take the
type has it quarantined, as any value that does not fit); several rules typing one column
(events sharing ``tracks``, a common rule) widen to the type all of them fit.
"""

from __future__ import annotations

from datalake_assets.plans.plan_model import PlannedProperty, PlanRule, TrackingPlan
from datalake_assets.spec import naming
from datalake_assets.spec.types import (
    BIGINT,
    BOOLEAN,
    DOUBLE,
    FIXED_TYPES,
    STRING,
    TIMESTAMP,
    widen,
)

_KIND_TABLES = {
    "identify": naming.TYPE_TABLES["identify"],
    "group": naming.TYPE_TABLES["group"],
    "page": naming.TYPE_TABLES["page"],
    "screen": naming.TYPE_TABLES["screen"],
}
# the sections a table's rows hold (a common rule's columns go where their section is)
_SECTIONS_OF = {
    naming.TRACKS_TABLE: ("context",),
    "identifies": ("traits", "context"),
    "groups": ("traits", "context"),
    "pages": ("properties", "context"),
    "screens": ("properties", "context"),
    "aliases": ("context",),
}
_EVENT_SECTIONS = ("properties", "context")


def lake_type(prop: PlannedProperty) -> str | None:
    """The column type a planned property's JSON types give, or None (inferred)."""
    types = set(prop.json_types) - {"null"}
    if types == {"integer"}:
        return BIGINT
    if types in ({"number"}, {"integer", "number"}):
        return DOUBLE
    if types == {"boolean"}:
        return BOOLEAN
    if types == {"string"}:
        return TIMESTAMP if prop.format == "date-time" else STRING
    return None


def _rules_of_table(plan: TrackingPlan, table: str) -> list[tuple[PlanRule, tuple[str, ...]]]:
    """The rules whose columns ``table`` holds, each with the sections it holds of them."""
    sections = _SECTIONS_OF.get(table, _EVENT_SECTIONS)
    latest: dict[tuple[str, str], PlanRule] = {}
    for rule in plan.rules:
        key = (rule.kind, rule.key)
        if key not in latest or rule.version > latest[key].version:
            latest[key] = rule
    out = []
    for rule in latest.values():
        if rule.kind == "common":
            out.append((rule, sections))
        elif rule.kind == "track":
            if table == naming.TRACKS_TABLE:
                out.append((rule, ("context",)))
            elif naming.event_table_name(rule.key) == table:
                out.append((rule, _EVENT_SECTIONS))
        elif _KIND_TABLES.get(rule.kind) == table:
            out.append((rule, sections))
    return out


def planned_columns(plan: TrackingPlan, table: str) -> dict[str, str]:
    """``column -> type`` of the table's planned properties that the plan types."""
    if not naming.holds_messages(table):
        return {}
    out: dict[str, str] = {}
    for rule, sections in _rules_of_table(plan, table):
        for prop in rule.properties:
            typ = lake_type(prop)
            column = prop.column
            if typ is None or column is None or prop.path[0] not in sections:
                continue
            if column in FIXED_TYPES:  # ids and timestamps keep the lake's own type
                continue
            out[column] = widen(out[column], typ) if column in out else typ
    return out
