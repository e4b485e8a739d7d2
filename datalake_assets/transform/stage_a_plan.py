"""Stage A's part of a source's tracking plan (``plans/plan_gate.py`` judges; this places):
``PlanLines.diverts`` says which lines leave the native parse for the Python path (the plan
reports or changes them), and ``ViolationRows`` gathers a file's rows of the ``violations``
table, written as its work files: no key rows, since they are no messages (stage B drops a
duplicate's with it, by its line)."""

from __future__ import annotations

from dataclasses import dataclass, field

import orjson
import pyarrow as pa

from datalake_assets.plans.plan_gate import VIOLATION_COLUMNS, Judged, PlanGate
from datalake_assets.plans.plan_policy import PlanPolicy
from datalake_assets.spec.columnar import column_array


class PlanLines:
    def __init__(self, policy: PlanPolicy) -> None:
        self.gate = PlanGate(policy)

    def diverts(self, raw: bytes) -> bool:
        """Whether the plan has anything to say of a line (the native path then leaves it)."""
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return False  # not JSON: the native parse leaves it to the Python path anyway
        if not isinstance(obj, dict):
            return False
        try:
            return self.gate.judge(obj) is not None
        except RecursionError:  # nested past the sync's limit: the Python path rejects it
            return True


@dataclass
class ViolationRows:
    """The violations of one archive file's messages, until written."""

    rows: list[tuple] = field(default_factory=list)  # in ``VIOLATION_COLUMNS`` order
    lines: list[int] = field(default_factory=list)  # each row's message's line

    def add(self, gate: PlanGate, obj: dict, table: str, judged: Judged, line_no: int) -> None:
        rows = gate.violation_rows(obj, table, judged)
        self.rows.extend(rows)
        self.lines.extend([line_no] * len(rows))

    def __len__(self) -> int:
        return len(self.rows)

    def take(self) -> tuple[dict[str, pa.Array], pa.Array]:
        """The rows as work-file columns (a column without a value left out) and their
        lines; the rows are cleared."""
        columns = {}
        for i, name in enumerate(VIOLATION_COLUMNS):
            values = [r[i] for r in self.rows]
            if any(v is not None for v in values):
                columns[name] = column_array(values)
        lines = pa.array(self.lines, pa.int64())
        self.rows, self.lines = [], []
        return columns, lines
