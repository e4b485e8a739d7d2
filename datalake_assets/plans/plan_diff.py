"""What changing a tracking plan does (``datalake plan diff OLD NEW``): the rules added,
removed and changed, and for each table the planned columns added, retyped or no longer
planned. A retyped column that narrows (``double`` to ``bigint``, anything to ``boolean``...)
is what the sync refuses once the table holds the older type: the diff says so before a team
ships the plan."""

from __future__ import annotations

from dataclasses import dataclass, field

from datalake_assets.plans.plan_columns import planned_columns
from datalake_assets.plans.plan_model import TrackingPlan
from datalake_assets.spec import naming
from datalake_assets.spec.types import is_widening


@dataclass
class PlanDiff:
    rules_added: list[str] = field(default_factory=list)  # rule labels
    rules_removed: list[str] = field(default_factory=list)
    rules_changed: list[str] = field(default_factory=list)
    # table -> [(column, old type or None, new type or None, what)]
    columns: dict[str, list[tuple[str, str | None, str | None, str]]] = field(default_factory=dict)

    @property
    def narrows(self) -> bool:
        return any(what == NARROWS for cols in self.columns.values() for *_, what in cols)

    def lines(self) -> list[str]:
        out = [f"rule added: {r}" for r in self.rules_added]
        out += [f"rule removed: {r}" for r in self.rules_removed]
        out += [f"rule changed: {r}" for r in self.rules_changed]
        for table, cols in sorted(self.columns.items()):
            for column, old, new, what in cols:
                out.append(f"{table}.{column}: {old or '-'} -> {new or '-'} ({what})")
        return out or ["no change"]


ADDED = "new planned column"
WIDENS = "widens: the sync widens the table's column"
NARROWS = "narrows: the sync refuses it once the table holds the older type"
UNPLANNED = "no longer planned: the column stays, typed by the data"


def diff(old: TrackingPlan, new: TrackingPlan) -> PlanDiff:
    out = PlanDiff()
    before = {(r.kind, r.key, r.version): r for r in old.rules}
    after = {(r.kind, r.key, r.version): r for r in new.rules}
    out.rules_added = [after[k].label for k in sorted(after.keys() - before.keys())]
    out.rules_removed = [before[k].label for k in sorted(before.keys() - after.keys())]
    out.rules_changed = [
        after[k].label
        for k in sorted(after.keys() & before.keys())
        if after[k].canonical() != before[k].canonical()
    ]
    for table in sorted(_tables(old) | _tables(new)):
        was, now = planned_columns(old, table), planned_columns(new, table)
        changes = []
        for column in sorted(was.keys() | now.keys()):
            a, b = was.get(column), now.get(column)
            if a == b:
                continue
            if a is None:
                what = ADDED
            elif b is None:
                what = UNPLANNED
            else:
                what = WIDENS if is_widening(a, b) else NARROWS
            changes.append((column, a, b, what))
        if changes:
            out.columns[table] = changes
    return out


def _tables(plan: TrackingPlan) -> set[str]:
    """The tables a plan's rules type columns of."""
    out = {naming.TRACKS_TABLE}
    for r in plan.rules:
        if r.kind == "track":
            if (name := naming.event_table_name(r.key)) is not None:
                out.add(name)
        elif r.kind == "common":
            out |= naming.STANDARD_TABLES
        else:
            out.add(naming.TYPE_TABLES[r.kind])
    return out
