"""``datalake plan``: ``validate FILE`` (a tracking plan read as the sync will read it, and what
it declares), ``check`` (what it would do to archived hours: ``lake/plan_preview.py``),
``diff OLD NEW`` (what a change does to the tables: ``plans/plan_diff.py``) and ``infer`` (a
first plan from what a source sent: ``lake/plan_infer.py``). A plan that cannot be read is one
line and exit code 1."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path

from datalake_assets.cli_parser import UsageError, chosen_source
from datalake_assets.lake.plan_infer import infer
from datalake_assets.lake.plan_preview import preview
from datalake_assets.plans.plan_diff import diff
from datalake_assets.plans.plan_load import load_plan
from datalake_assets.plans.plan_model import PlanError, TrackingPlan
from datalake_assets.plans.plan_policy import PlanPolicy, policy_of
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
    """``validate``, ``check``, ``diff`` or ``infer`` (``cli_parser.py`` says what each
    prints); a plan that cannot be read is one line on stderr, exit code 1."""
    try:
        return _ACTIONS[args.action](settings, args)
    except PlanError as e:
        print(f"invalid: {e}", file=sys.stderr)
        return 1


def _validate(settings: LakeSettings, args: argparse.Namespace) -> int:
    print("\n".join(summary_lines(load_plan(args.file))))
    return 0


def _check(settings: LakeSettings, args: argparse.Namespace) -> int:
    source = chosen_source(settings, args)
    if args.plan:
        policy = PlanPolicy(
            load_plan(args.plan),
            unplanned_events=source.unplanned_events,
            unplanned_properties=source.unplanned_properties,
            violations=source.violations,
        )
    else:
        policy = policy_of(source)
        if policy is None:
            raise UsageError(
                f"source {source.id} has no tracking_plan in its settings: give --plan FILE"
            )
    found = preview(
        policy, settings.archive_root, source.id, args.hours, settings.sync.max_message_bytes
    )
    if args.json:
        print(json.dumps({"source": source.id, "plan_hash": policy.plan.hash, **found.to_dict()}))
    else:
        print("\n".join(_check_lines(source.id, policy, found)))
    return 1 if found.by_type else 0


def _check_lines(source_id: str, policy: PlanPolicy, found) -> list[str]:
    share = found.messages_with_violations / found.messages if found.messages else 0.0
    lines = [
        f"{source_id}: {found.messages} messages in {found.lines} lines, "
        f"{found.messages_with_violations} ({share:.1%}) break plan {policy.plan.name} "
        f"({policy.plan.hash[:12]}); modes: unplanned_events={policy.unplanned_events}, "
        f"unplanned_properties={policy.unplanned_properties}, violations={policy.violations}"
    ]
    for title, counts in (
        ("violations by type", found.by_type),
        ("violations by event", found.by_event),
        ("lines it would quarantine", found.lines_quarantined),
        ("values it would omit", found.values_omitted),
    ):
        if counts:
            lines.append(f"{title}:")
            lines += [f"  {n:>10,}  {name}" for name, n in counts.most_common(20)]
    return lines


def _diff(settings: LakeSettings, args: argparse.Namespace) -> int:
    changes = diff(load_plan(args.old), load_plan(args.new))
    print("\n".join(changes.lines()))
    return 1 if changes.narrows else 0


def _infer(settings: LakeSettings, args: argparse.Namespace) -> int:
    source = chosen_source(settings, args)
    found = infer(
        settings.archive_root,
        source.id,
        datetime.now(UTC),
        args.days,
        args.max_messages,
        settings.sync.max_message_bytes,
    )
    text = json.dumps(found.document, indent=2, ensure_ascii=False)
    summary = (
        f"{len(found.document['rules'])} rules from {found.messages} messages of "
        f"{found.hours} archive hours of {source.id}"
    )
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
        print(f"{summary}: written to {args.out}")
    else:
        print(text)
        print(summary, file=sys.stderr)
    return 0


_ACTIONS = {"validate": _validate, "check": _check, "diff": _diff, "infer": _infer}
