"""A source's tracking plan as the sync applies it: ``PlanPolicy`` (the plan, what happens to
an unplanned event, an unplanned property and a violation, and how the ``tracking_plan``
check reports), made from the settings (``policy_of``) and carried to wherever the sync runs.

The sync reads the plan from the lake, not from the settings' file (``lake/plan_store.py``
keeps each plan a source was synced under, in Segment's Public API shape: ``stored_document``).
"""

from __future__ import annotations

import os
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


def plan_path(settings, source) -> str:
    """The source's plan file or folder: relative to the settings file's folder (to the
    current folder without a file)."""
    path = os.path.expanduser(source.tracking_plan)
    if os.path.isabs(path):
        return path
    base = os.path.dirname(settings.settings_file) if settings.settings_file else os.getcwd()
    return os.path.join(base, path)


def policy_of(settings, source) -> PlanPolicy | None:
    """The source's policy, its plan read now (``PlanError``: one line); None: no plan."""
    if not source.tracking_plan:
        return None
    return PlanPolicy(
        plan=load_plan(plan_path(settings, source)),
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
