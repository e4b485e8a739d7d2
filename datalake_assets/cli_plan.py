"""``datalake plan validate FILE``: a tracking plan read as the sync will read it
(``plans/plan_load.py``), and what it declares; an invalid plan is one line and exit code 1."""

from __future__ import annotations

import argparse
import sys

from datalake_assets.plans.plan_load import load_plan
from datalake_assets.plans.plan_model import PlanError, TrackingPlan
from datalake_assets.settings import LakeSettings


def summary_lines(plan: TrackingPlan) -> list[str]:
    """The plan in one line, then one line per rule."""
    tracks = {r.key for r in plan.rules_of("track")}

    def has(kind: str) -> str:
        return "yes" if plan.rules_of(kind) else "no"

    lines = [
        f"valid: {plan.shape}, {len(plan.rules)} rules ({len(tracks)} track events, "
        f"identify traits: {has('identify')}, group traits: {has('group')}, "
        f"page: {has('page')}, screen: {has('screen')}, common: {has('common')}), "
        f"plan hash {plan.hash[:12]}"
    ]
    for r in plan.rules:
        required = sum(p.required for p in r.properties)
        n = len(r.properties)
        lines.append(
            f"{r.label}: {n} {'property' if n == 1 else 'properties'} ({required} required)"
        )
    return lines


def cmd_plan(settings: LakeSettings, args: argparse.Namespace) -> int:
    """``validate``: the plan's summary, exit 0; an invalid plan's one line on stderr, exit 1."""
    try:
        plan = load_plan(args.file)
    except PlanError as e:
        print(f"invalid: {e}", file=sys.stderr)
        return 1
    print("\n".join(summary_lines(plan)))
    return 0
