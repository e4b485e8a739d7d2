"""What a tracking plan would do to archived hours, without syncing them (``datalake plan
check``): each message of the hours that the sync would write (valid JSON, a known type, the
ids it needs) judged by the plan's gate (``plans/plan_gate.py``) under the source's modes, and
counted: violations by type and by event, the lines the plan would send to the quarantine and
the values it would omit. Duplicates are counted as the archive holds them (the dedup needs the
lake's id index: a check reads the archive alone)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from datalake_assets.lake import storage
from datalake_assets.plans.plan_gate import PlanGate
from datalake_assets.plans.plan_policy import PlanPolicy
from datalake_assets.spec import layout
from datalake_assets.spec.messages import DEFAULT_MAX_MESSAGE_BYTES, Rejected, decode, validate


@dataclass
class PlanPreview:
    """The counts of a check: ``messages`` judged (lines the sync would write), the
    ``lines`` read, the violations ``by_type`` and ``by_event`` (``"<event>: <type>"``), the
    lines the plan would quarantine (``lines_quarantined``, by reason) and the values it would
    omit (``values_omitted``, by reason)."""

    lines: int = 0
    messages: int = 0
    messages_with_violations: int = 0
    by_type: Counter[str] = field(default_factory=Counter)
    by_event: Counter[str] = field(default_factory=Counter)
    lines_quarantined: Counter[str] = field(default_factory=Counter)
    values_omitted: Counter[str] = field(default_factory=Counter)

    def to_dict(self) -> dict:
        return {
            "lines": self.lines,
            "messages": self.messages,
            "messages_with_violations": self.messages_with_violations,
            "violations_by_type": dict(self.by_type.most_common()),
            "violations_by_event": dict(self.by_event.most_common()),
            "lines_quarantined": dict(self.lines_quarantined.most_common()),
            "values_omitted": dict(self.values_omitted.most_common()),
        }


def preview(
    policy: PlanPolicy,
    archive_root: str,
    source_id: str,
    hours: list[layout.ArchiveHour],
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> PlanPreview:
    """The plan's effect on the source's archived ``hours``."""
    gate = PlanGate(policy)
    out = PlanPreview()
    for hour in hours:
        directory = layout.archive_hour_dir(archive_root, source_id, hour)
        for location, _ in storage.list_files(directory):
            if not layout.is_archive_file(location):
                continue
            for raw in storage.iter_lines(location):
                if raw.strip():
                    out.lines += 1
                    _one(gate, raw, max_message_bytes, out)
    return out


def _one(gate: PlanGate, raw: bytes, max_bytes: int, out: PlanPreview) -> None:
    try:
        obj = decode(raw, max_bytes)
        validate(obj)
    except Rejected:
        return  # the sync quarantines it whatever the plan says
    out.messages += 1
    judged = gate.judge(obj)
    if judged is None:
        return
    if judged.violations:
        out.messages_with_violations += 1
    for v in judged.violations:
        out.by_type[v.violation_type] += 1
        out.by_event[f"{v.event or '(no name)'}: {v.violation_type}"] += 1
    if judged.quarantine is not None:
        out.lines_quarantined[judged.quarantine[0]] += 1
    for _, _, why in judged.omitted:
        out.values_omitted[why.partition(": ")[0]] += 1
