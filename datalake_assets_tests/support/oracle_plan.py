"""The oracle's tracking plan (issue #56): what a plan's policy does to a line that would be a row.

A sync under a plan asks of every valid message what the plan says of it. The plan's verdict
itself (which rules apply, which keywords fail, the violation's type and field) is taken from
``plans/plan_verdict.verdict``, the reference the product's tests hold equal to the
``jsonschema`` package; that is the one place the oracle shares the product's code. What the
policy does with a verdict is restated here from the README (issue #56), not from
``plan_gate``:

- ``unplanned_events = quarantine``: a message with an ``Unplanned-Event`` violation is
  quarantined whole (reason ``tracking_plan_unplanned_event``); every violation of it is a row
  of the ``violations`` table with action ``quarantined``;
- else ``violations = quarantine``: a message with any other violation is quarantined whole
  (reason ``tracking_plan_violation``), its violations ``quarantined`` as above;
- ``violations = omit``: each violating value leaves the row (``omitted``), but an unplanned
  event or a missing required field, which have no value to remove (``kept``); a field missing
  from an array's item is ``omitted`` (the array, one column, is the value that breaks it);
- else every violation is ``kept``.

The plan judges a line before the dedup (a quarantined line is no candidate of it); a kept line
that loses the dedup has its violations dropped with it. ``unplanned_properties = omit`` moves
values to the quarantine only: it neither adds a violation nor changes a line's fate.
"""

from __future__ import annotations

import json
from collections import Counter

from datalake_assets.plans.plan_verdict import REQUIRED_MISSING, UNPLANNED_EVENT, verdict
from datalake_assets_tests.support.oracle import QUARANTINED, ROW, UNSURE, Line

REASON_UNPLANNED_EVENT = "tracking_plan_unplanned_event"
REASON_VIOLATION = "tracking_plan_violation"
KEPT, OMITTED, QUARANTINED_ACTION = "kept", "omitted", "quarantined"
QUARANTINE, OMIT = "quarantine", "omit"


def judge(policy, line: Line) -> None:
    """The plan's word on a classified line (``policy``: a ``PlanPolicy``): ``line.violations``
    becomes its ``(type, field, action)`` list, and a line the policy quarantines becomes
    ``quarantined`` with the reason (an ``unsure`` line stays unsure: it may be quarantined
    before the plan is asked). Lines that are no message (quarantined already) are left alone."""
    line.violations = ()
    if line.fate not in (ROW, UNSURE):
        return
    found = verdict(policy.plan, json.loads(line.raw))
    if not found:
        return
    unplanned = any(v.violation_type == UNPLANNED_EVENT for v in found)
    others = any(v.violation_type != UNPLANNED_EVENT for v in found)
    reason = None
    if unplanned and policy.unplanned_events == QUARANTINE:
        reason = REASON_UNPLANNED_EVENT
    elif others and policy.violations == QUARANTINE:
        reason = REASON_VIOLATION
    if reason is not None:
        line.violations = tuple((v.violation_type, v.field, QUARANTINED_ACTION) for v in found)
        if line.fate == ROW:
            line.fate, line.reasons = QUARANTINED, frozenset({reason})
        return
    line.violations = tuple(
        (
            v.violation_type,
            v.field,
            OMITTED if policy.violations == OMIT and _has_value(v) else KEPT,
        )
        for v in found
    )


def _has_value(v) -> bool:
    """Whether omit has a value to remove for the violation (an array holding the item that
    misses a required field is one)."""
    if v.violation_type == REQUIRED_MISSING:
        return any(isinstance(p, int) for p in v.path)
    return v.violation_type != UNPLANNED_EVENT


def expected_violations(lines: list[Line]) -> tuple[dict[str, Counter], dict[str, Counter]]:
    """``(sure, maybe)``, each ``message id -> Counter of (hour, type, field, action)``: the
    ``violations`` table's rows the lake must hold for these lines (kept rows, and lines the
    plan quarantined), and those of unsure lines, which it holds or not (the line is a row,
    or the plan quarantined it; or it was quarantined before the plan was asked)."""
    sure: dict[str, Counter] = {}
    maybe: dict[str, Counter] = {}
    for ln in lines:
        into = sure if ln.fate in (ROW, QUARANTINED) else maybe if ln.fate == UNSURE else None
        if ln.violations and into is not None:
            counts = into.setdefault(ln.message_id, Counter())
            for v in ln.violations:
                counts[(ln.hour, *v)] += 1
    return sure, maybe
