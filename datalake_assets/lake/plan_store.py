"""The tracking plans a source was synced under, kept in the lake: ``store_plan`` writes each
plan once at ``<lake>/_plans/<source_dir>/<hash>.json`` (Segment's Public API shape, which
reads back to the same rules and hash: ``plans/plan_policy.stored_document``), so a job on a
cluster reads what the orchestrator read, and a plan's hash in a table's code version names
a file."""

from __future__ import annotations

import json

from datalake_assets.lake import storage
from datalake_assets.plans.plan_load import plan_from_document
from datalake_assets.plans.plan_model import PlanError, TrackingPlan
from datalake_assets.plans.plan_policy import stored_document
from datalake_assets.spec import layout


def stored_location(lake_root: str, source_dir: str, plan_hash: str) -> str:
    return layout.join(lake_root, "_plans", source_dir, f"{plan_hash}.json")


def store_plan(lake_root: str, source_dir: str, plan: TrackingPlan) -> str:
    """Keep the plan in the lake (once per hash); returns its location."""
    location = stored_location(lake_root, source_dir, plan.hash)
    if not storage.exists(location):
        text = json.dumps(stored_document(plan), sort_keys=True, ensure_ascii=False, indent=1)
        storage.write_bytes_atomic(location, text.encode("utf-8"))
    return location


def read_stored(location: str) -> TrackingPlan:
    """A plan ``store_plan`` kept; its rules must hash to its name (a plan is never edited)."""
    try:
        doc = json.loads(storage.read_bytes(location))
    except (OSError, ValueError) as e:
        raise PlanError(f"{location}: the stored tracking plan cannot be read: {e}") from None
    plan = plan_from_document(doc, location)
    expected = location.rsplit("/", 1)[-1].removesuffix(".json")
    if plan.hash != expected:
        raise PlanError(
            f"{location}: the stored plan's rules hash to {plan.hash[:12]}, not to its name"
        )
    return plan
