"""A source's tracking plan as the sync applies it: ``PlanPolicy`` (the plan, what happens to
an unplanned event, an unplanned property and a violation, and how the ``tracking_plan``
check reports), made from the settings (``policy_of``) and carried to wherever the sync runs.

The sync reads the plan from the lake, not from the settings' file (``lake/plan_store.py``
keeps each plan a source was synced under, in Segment's Public API shape: ``stored_document``).
"""

from __future__ import annotations

from dataclasses import dataclass

from datalake_assets.plans.plan_load import load_plan
from datalake_assets.plans.plan_model import TrackingPlan

KEEP, QUARANTINE, OMIT = "keep", "quarantine", "omit"
UNPLANNED_EVENT_MODES = (KEEP, QUARANTINE)
UNPLANNED_PROPERTY_MODES = (KEEP, OMIT)
VIOLATION_MODES = (KEEP, OMIT, QUARANTINE)
CHECK_SEVERITIES = ("warn", "block")


@dataclass(frozen=True)
class PlanPolicy:
    """``unplanned_events``: keep | quarantine (the whole line); ``unplanned_properties``:
    keep | omit (the value leaves the row for the quarantine, with its reason);
    ``violations``: keep | omit (the violating values, as above) | quarantine (the whole line).
    ``check``: the ``tracking_plan`` asset check's severity when an hour has violations."""

    plan: TrackingPlan
    unplanned_events: str = KEEP
    unplanned_properties: str = KEEP
    violations: str = KEEP
    check: str = "warn"

    @property
    def reports_only(self) -> bool:
        """Whether the plan changes no row (it reports, types columns, and that is all)."""
        return (self.unplanned_events, self.unplanned_properties, self.violations) == (
            KEEP,
            KEEP,
            KEEP,
        )


def policy_of(source) -> PlanPolicy | None:
    """The source's policy, its plan read now (``PlanError``: one line); None: no plan."""
    if not source.tracking_plan:
        return None
    return PlanPolicy(
        plan=load_plan(source.tracking_plan),  # resolved by the settings' loader
        unplanned_events=source.unplanned_events,
        unplanned_properties=source.unplanned_properties,
        violations=source.violations,
        check=source.tracking_plan_check,
    )


def stored_document(plan: TrackingPlan) -> dict:
    """The plan in Segment's Public API shape (what ``store_plan`` writes)."""
    return {
        "id": plan.id,
        "name": plan.name,
        "rules": [
            {
                "key": r.key,
                "type": r.kind.upper(),
                "version": r.version,
                "jsonSchema": {"properties": dict(r.schemas)} if r.schemas else {},
            }
            for r in plan.rules
        ],
    }
