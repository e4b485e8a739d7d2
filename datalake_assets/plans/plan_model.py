"""A tracking plan as the lake reads it: ``TrackingPlan`` (its rules and a stable hash) and
``PlanRule`` (one kind of message, or one version of one track event), with the columns each
rule declares (``PlannedProperty``), named by the lake's own rules (``spec/naming.py``).

A rule's JSON Schema is kept per section of the message it describes (``properties``,
``traits``, ``context``), unwrapped from Segment's draft-07 wrapper (``properties.properties``
...). ``select_rule`` picks the rule a message falls under, as Segment does:
``context.protocols.event_version`` names the version, else the latest one applies.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from datalake_assets.spec import naming

KINDS = ("track", "identify", "group", "page", "screen", "common")
# The sections of a message a rule's schema may describe; the first of each kind's list is
# its main one (the object whose fields a team plans: a track's properties, identify's traits)
SECTIONS = ("properties", "traits", "context")
MAIN_SECTION = {
    "track": "properties",
    "page": "properties",
    "screen": "properties",
    "identify": "traits",
    "group": "traits",
    "common": "properties",
}


class PlanError(Exception):
    """A plan that cannot be read: one line naming the file and the JSON path."""


@dataclass(frozen=True)
class PlannedProperty:
    """One column a rule declares: a leaf of its schema (nested objects flattened as the lake
    flattens them; an array, or an object without planned fields, is one column of JSON text).

    ``path`` is the key path in the message (``("properties", "address", "city")``),
    ``column`` the lake's column for it (``properties_address_city``; None when a key has no
    usable characters). ``required``: required in its object and every object above it,
    within its section."""

    path: tuple[str, ...]
    column: str | None
    json_types: tuple[str, ...]  # () when the schema names no type: any value
    format: str | None = None
    required: bool = False
    enum: tuple | None = None
    pattern: str | None = None
    minimum: float | None = None
    maximum: float | None = None
    min_length: int | None = None
    max_length: int | None = None

    @property
    def nullable(self) -> bool:
        return "null" in self.json_types


@dataclass(frozen=True)
class PlanRule:
    """One rule: ``kind`` (one of ``KINDS``), ``key`` (a track's event name, else ""),
    ``version``; ``schemas``: each section's JSON Schema (draft-07, unwrapped); ``properties``:
    the columns it declares; ``closed``: the object paths with ``additionalProperties:
    false``."""

    kind: str
    key: str
    version: int
    schemas: Mapping[str, dict] = field(compare=False)
    properties: tuple[PlannedProperty, ...] = ()
    closed: tuple[tuple[str, ...], ...] = ()

    @property
    def json_schema(self) -> dict:
        """The schema of the kind's main object (a track's properties, identify's traits)."""
        return self.schemas.get(MAIN_SECTION[self.kind], {})

    @property
    def label(self) -> str:
        return (
            f"{self.kind} {self.key} v{self.version}"
            if self.key
            else f"{self.kind} v{self.version}"
        )

    def canonical(self) -> dict:
        return {
            "kind": self.kind,
            "key": self.key,
            "version": self.version,
            "schemas": dict(self.schemas),
        }


@dataclass(frozen=True)
class TrackingPlan:
    """A plan: ``shape`` is where it came from (``SHAPES``), ``hash`` the sha256 of its rules'
    canonical JSON (independent of key order and rule order), for the tables' code versions."""

    id: str
    name: str
    shape: str
    rules: tuple[PlanRule, ...]
    hash: str
    source: str = ""  # the file or folder it was read from

    def rules_of(self, kind: str) -> tuple[PlanRule, ...]:
        return self._by_kind.get(kind, ())

    @functools.cached_property
    def _by_kind(self) -> dict[str, tuple[PlanRule, ...]]:
        # the sync asks for every message: an index, not a scan of the rules
        out: dict[str, list[PlanRule]] = {}
        for r in self.rules:
            out.setdefault(r.kind, []).append(r)
        return {k: tuple(v) for k, v in out.items()}

    @functools.cached_property
    def by_key(self) -> dict[tuple[str, str], tuple[PlanRule, ...]]:
        """``(kind, key) -> rules`` (every version)."""
        out: dict[tuple[str, str], list[PlanRule]] = {}
        for r in self.rules:
            out.setdefault((r.kind, r.key), []).append(r)
        return {k: tuple(v) for k, v in out.items()}


def plan_hash(rules: tuple[PlanRule, ...]) -> str:
    """sha256 hex of the rules' canonical JSON: sorted keys, sorted rules, no whitespace."""
    canon = sorted(
        (r.canonical() for r in rules), key=lambda c: (c["kind"], c["key"], c["version"])
    )
    text = json.dumps(canon, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def make_plan(
    id: str, name: str, shape: str, rules: list[PlanRule], source: str = ""
) -> TrackingPlan:
    ordered = tuple(sorted(rules, key=lambda r: (KINDS.index(r.kind), r.key, r.version)))
    return TrackingPlan(id, name, shape, ordered, plan_hash(ordered), source)


def make_rule(kind: str, key: str, version: int, schemas: dict[str, dict]) -> PlanRule:
    """A rule with its declared columns flattened from each section's schema."""
    props: list[PlannedProperty] = []
    closed: list[tuple[str, ...]] = []
    for section in SECTIONS:
        if section in schemas:
            _flatten(schemas[section], (section,), True, props, closed)
    return PlanRule(kind, key, version, schemas, tuple(props), tuple(closed))


def _types(schema: dict) -> tuple[str, ...]:
    t = schema.get("type")
    if t is None:
        return ()
    return (t,) if isinstance(t, str) else tuple(t)


def _flatten(
    schema: dict,
    path: tuple[str, ...],
    required: bool,
    out: list[PlannedProperty],
    closed: list[tuple[str, ...]],
) -> None:
    """The leaves of an object schema at ``path``, as the lake flattens a message's objects."""
    if schema.get("additionalProperties") is False:
        closed.append(path)
    needed = set(schema.get("required", ()))
    for key, sub in schema.get("properties", {}).items():
        sub_path = (*path, key)
        sub_required = required and key in needed
        if isinstance(sub, dict) and sub.get("properties"):
            _flatten(sub, sub_path, sub_required, out, closed)
            continue
        sub = sub if isinstance(sub, dict) else {}
        enum = sub.get("enum")
        out.append(
            PlannedProperty(
                path=sub_path,
                column=naming.column_name(sub_path),
                json_types=_types(sub),
                format=sub.get("format"),
                required=sub_required,
                enum=tuple(enum) if enum is not None else None,
                pattern=sub.get("pattern"),
                minimum=sub.get("minimum"),
                maximum=sub.get("maximum"),
                min_length=sub.get("minLength"),
                max_length=sub.get("maxLength"),
            )
        )


def select_rule(
    plan: TrackingPlan, kind: str, event: str, event_version: int | None = None
) -> PlanRule | None:
    """The rule a message of ``kind`` (a track's ``event``) falls under: the version named by
    its ``context.protocols.event_version`` when the plan has it, else the latest version (a
    version the plan lacks also falls back to the latest); None when the plan has no rule for
    it (an unplanned event). ``common`` rules are not selected here: they apply to every
    message (``plan.rules_of("common")``). A page or screen rule keyed by a name applies to
    that name, else the kind's rule without a key."""
    candidates = plan.by_key.get((kind, event), ())
    if not candidates and kind != "track":  # a page or screen rule for every name
        candidates = plan.by_key.get((kind, ""), ())
    if not candidates:
        return None
    if event_version is not None:
        for r in candidates:
            if r.version == event_version:
                return r
    return max(candidates, key=lambda r: r.version)
