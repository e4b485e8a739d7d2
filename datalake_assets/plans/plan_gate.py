"""What the sync does to one message under a source's plan (``PlanGate.judge``): its
violations (``plan_verdict.verdict``), and, as the policy says (``plan_policy.PlanPolicy``),
the whole line to the quarantine, or the violating and unplanned values omitted (each kept in
the quarantine with its reason, as a value that does not fit its column is).

Stage A asks the gate of every message of a planned source that reaches a table (valid, not
suppressed); a message with nothing to report or change (``judge`` returns None) goes on
untouched. ``violation_rows`` makes the ``violations`` table's rows of a judged message.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from datalake_assets.plans.plan_model import MAIN_SECTION, PlanRule, select_rule
from datalake_assets.plans.plan_policy import OMIT, QUARANTINE, PlanPolicy
from datalake_assets.plans.plan_verdict import (
    NAMED_KINDS,
    REQUIRED_MISSING,
    UNPLANNED_EVENT,
    Violation,
    event_version,
    field_path,
    verdict,
)
from datalake_assets.spec import naming
from datalake_assets.spec.types import value_text

# the quarantine's reasons (``docs/concepts/quarantine.md``)
REASON_UNPLANNED_EVENT = "tracking_plan_unplanned_event"  # a line: unplanned_events = quarantine
REASON_VIOLATION = "tracking_plan_violation"  # a line: violations = quarantine
REASON_OMITTED = "tracking_plan_omitted"  # a value: violations = omit
REASON_UNPLANNED_PROPERTY = "tracking_plan_unplanned_property"  # a value: unplanned_properties

# what the sync did about a violation (the violations table's ``action``)
KEPT, OMITTED, QUARANTINED = "kept", "omitted", "quarantined"

# the violations table's columns, in order (Segment's ``Violation Generated`` properties,
# snake-cased: ``eventMessageID`` is ``message_id``, so erasure finds a person's rows)
VIOLATION_COLUMNS = (
    "message_id",
    "event_name",
    "event_type",
    "event_table",
    "violation_type",
    "violation_field",
    "violation_description",
    "action",
    "tracking_plan_id",
    "tracking_plan_version",
    "tracking_plan_hash",
    "user_id",
    "anonymous_id",
    "received_at",
)


@dataclass
class Judged:
    """A message after the gate: ``obj`` as its table will hold it, its ``violations`` (each
    with what was done about it: ``actions``), the values omitted for the quarantine
    (``omitted``: ``(column, value text, "reason: detail")``, as flattening reports a value
    it cannot keep), or the reason and detail that send the whole line to the quarantine."""

    obj: dict
    violations: list[Violation]
    actions: list[str]
    omitted: list[tuple[str, str, str]] = field(default_factory=list)
    quarantine: tuple[str, str] | None = None
    removed: list[tuple] = field(default_factory=list)  # the omitted values' paths


class PlanGate:
    def __init__(self, policy: PlanPolicy) -> None:
        self.policy = policy
        self.plan = policy.plan

    def judge(self, obj: dict) -> Judged | None:
        """The gate's verdict on a decoded, valid message; None: nothing to report or do."""
        policy = self.policy
        violations = verdict(self.plan, obj)
        unplanned: list[tuple] = []
        if policy.unplanned_properties == OMIT:
            rule = self._rule(obj)
            if rule is not None:
                unplanned = _unplanned_paths(rule, obj)
        if not violations and not unplanned:
            return None
        unplanned_event = any(v.violation_type == UNPLANNED_EVENT for v in violations)
        others = [v for v in violations if v.violation_type != UNPLANNED_EVENT]
        if unplanned_event and policy.unplanned_events == QUARANTINE:
            return Judged(
                obj,
                violations,
                [QUARANTINED] * len(violations),
                quarantine=(REASON_UNPLANNED_EVENT, _detail(violations, UNPLANNED_EVENT)),
            )
        if others and policy.violations == QUARANTINE:
            return Judged(
                obj,
                violations,
                [QUARANTINED] * len(violations),
                quarantine=(REASON_VIOLATION, _detail(others)),
            )
        if policy.violations == OMIT or unplanned:
            # the message as sent stays whole (identities, erasure): ``_omit`` copies each
            # object on the way to a value it removes, and only those
            obj = dict(obj)
        judged = Judged(obj, violations, [KEPT] * len(violations))
        if policy.violations == OMIT:
            for i, v in enumerate(violations):
                if v.violation_type == UNPLANNED_EVENT or not v.path:
                    continue
                if v.violation_type == REQUIRED_MISSING and _stored_path(v.path) == v.path:
                    continue  # a missing key of an object: nothing to omit (in an array's
                    # item, the array is the column's value that breaks the rule)
                reason = f"{REASON_OMITTED}: {v.violation_type}: {v.description}"
                if _omit(judged, v.path, reason):
                    judged.actions[i] = OMITTED
                elif _already_omitted(v.path, judged):
                    judged.actions[i] = OMITTED
        for path in unplanned:
            reason = f"{REASON_UNPLANNED_PROPERTY}: {field_path(path)} is not in the plan"
            _omit(judged, path, reason)
        return judged

    def _rule(self, obj: dict) -> PlanRule | None:
        kind = obj.get("type")
        kind = kind.lower() if isinstance(kind, str) else ""
        if kind not in NAMED_KINDS and kind not in ("identify", "group"):
            return None
        name = obj.get(NAMED_KINDS[kind]) if kind in NAMED_KINDS else ""
        return select_rule(
            self.plan, kind, name if isinstance(name, str) else "", event_version(obj)
        )

    def violation_rows(self, obj: dict, table: str, judged: Judged) -> list[tuple]:
        """The ``violations`` table's rows of a judged message, in ``VIOLATION_COLUMNS``
        order."""
        kind = obj.get("type")
        plan = self.plan
        common = (
            _text(obj.get("messageId")),
            kind.lower() if isinstance(kind, str) else None,
            table,
        )
        ids = (_text(obj.get("userId")), _text(obj.get("anonymousId")))
        received = obj.get("receivedAt")
        received = received if isinstance(received, str) else None
        return [
            (
                common[0],
                v.event,
                common[1],
                common[2],
                v.violation_type,
                v.field,
                v.description,
                action,
                plan.id,
                v.rule_version,
                plan.hash,
                *ids,
                received,
            )
            for v, action in zip(judged.violations, judged.actions)
        ]


def _text(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return value_text(value)


def _detail(violations: list[Violation], only: str | None = None, most: int = 3) -> str:
    shown = [v for v in violations if only is None or v.violation_type == only]
    text = "; ".join(f"{v.violation_type}: {v.description}" for v in shown[:most])
    return text if len(shown) <= most else f"{text}; ... ({len(shown)} violations)"


def _stored_path(path: tuple) -> tuple:
    """The part of a value's path that is one column: an array is one column of JSON text,
    so a violation inside an array omits the whole array."""
    for i, part in enumerate(path):
        if isinstance(part, int):
            return path[:i]
    return path


def _omit(judged: Judged, path: tuple, reason: str) -> bool:
    """Remove the value at ``path`` (its column's part) from the judged message, noted in
    ``omitted`` (and its path in ``removed``); False when it is not there (already removed
    with its parent, or missing)."""
    obj = judged.obj
    path = _stored_path(path)
    if len(path) < 2:  # a section itself (not an object): the section goes
        if path and path[0] in obj:
            value = obj.pop(path[0])
            judged.omitted.append((path[0], value_text(value), reason))
            judged.removed.append(path)
            return True
        return False
    parent = _detach(obj, path)
    if parent is None or path[-1] not in parent:
        return False
    value = parent.pop(path[-1])
    column = naming.column_name(tuple(str(p) for p in path)) or field_path(path)
    judged.omitted.append((column, value_text(value), reason))
    judged.removed.append(path)
    return True


def _detach(obj: dict, path: tuple) -> dict | None:
    """The object holding ``path``'s value, each object on the way copied (the message as
    sent keeps its own); None when the path does not lead through objects."""
    parent = obj
    for part in path[:-1]:
        child = parent.get(part)
        if not isinstance(child, dict):
            return None
        parent[part] = child = dict(child)
        parent = child
    return parent


def without(obj: dict, removed: list[tuple]) -> dict:
    """Another decoding of a judged message (the sync's exact re-parse of a line whose
    numbers need it) without the values the gate omitted (``Judged.removed``)."""
    out = dict(obj)
    for path in removed:
        if len(path) == 1:
            out.pop(path[0], None)
        elif (parent := _detach(out, path)) is not None:
            parent.pop(path[-1], None)
    return out


def _already_omitted(path: tuple, judged: Judged) -> bool:
    """Whether a value's column (or an object holding it) was omitted for another violation
    of the same message (two keywords failing on one value)."""
    stored = _stored_path(path)
    return any(stored[: len(gone)] == gone for gone in judged.removed)


def _unplanned_paths(rule: PlanRule, obj: dict) -> list[tuple]:
    """The keys of the rule's main section (and of its planned objects, at any depth) that the
    rule does not declare."""
    section = MAIN_SECTION[rule.kind]
    schema = rule.schemas.get(section)
    value = obj.get(section)
    if not isinstance(schema, dict) or not isinstance(value, dict):
        return []
    out: list[tuple] = []
    _walk_unplanned(schema, value, (section,), out)
    return out


def _walk_unplanned(schema: dict, value: dict, path: tuple, out: list) -> None:
    declared = schema.get("properties")
    if not isinstance(declared, dict):
        return  # an object without planned fields takes any (one column of JSON text)
    for key, sub_value in value.items():
        sub = declared.get(key)
        if sub is None:
            out.append((*path, key))
        elif isinstance(sub, dict) and isinstance(sub_value, dict) and sub.get("properties"):
            _walk_unplanned(sub, sub_value, (*path, key), out)
