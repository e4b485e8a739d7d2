"""Stage A's statistics: each task's ``STATS`` row (``stage_a.py``) merged on the driver into
``StageAStats``, what the later phases read (the types, the dedup's key count, the
reconciliation, the work files of stage B)."""

from __future__ import annotations

import marshal
from dataclasses import dataclass, field

from datalake_assets.spec.messages import is_tracks_column
from datalake_assets.spec.naming import TRACKS_TABLE, is_event_table


@dataclass
class StageAStats:
    """Stage A's statistics of all tasks, merged on the driver."""

    lines_in: int
    counts: dict[str, dict[str, list[int]]]  # table -> column -> kind counts
    messages: dict[str, int]
    lines_quarantined: dict[str, int]  # hour -> lines
    work_files: list[tuple[str, str, int, str, int]]  # (table, hour, file_idx, location, rows)
    quarantine_files: list[tuple[str, str, int, int]]  # (hour, location, rows, bytes)
    suppressed: dict[tuple[str, str], int] = field(default_factory=dict)  # (table, hour) -> lines
    identity_parts: list[bytes] = field(default_factory=list)  # IDENTITY rows' payloads
    lines_by_hour: dict[str, int] = field(default_factory=dict)  # hour -> lines in


def merge_stats(payloads: list[bytes]) -> StageAStats:
    """Merge the statistics rows of every stage-A task. The ``tracks`` table's statistics are
    derived here from the track tables' (their columns without ``properties_*``)."""
    out = StageAStats(0, {}, {}, {}, [], [])

    def add(table: str, per_column: dict[str, list[int]], n: int, keep=None) -> None:
        per = out.counts.setdefault(table, {})
        for col, kinds in per_column.items():
            if keep is not None and not keep(col):
                continue
            c = per.get(col)
            if c is None:
                per[col] = list(kinds)
            else:
                for k, v in enumerate(kinds):
                    c[k] += v
        out.messages[table] = out.messages.get(table, 0) + n

    for payload in payloads:
        s = marshal.loads(payload)
        out.lines_in += s["lines_in"]
        for hour, n in s.get("lines_by_hour", {}).items():
            out.lines_by_hour[hour] = out.lines_by_hour.get(hour, 0) + n
        for table, per_column in s["counts"].items():
            n = s["messages"].get(table, 0)  # a side table's rows are no messages
            add(table, per_column, n)
            if is_event_table(table):
                add(TRACKS_TABLE, per_column, n, keep=is_tracks_column)
        for hour, n in s["lines_quarantined"].items():
            out.lines_quarantined[hour] = out.lines_quarantined.get(hour, 0) + n
        out.work_files.extend(tuple(w) for w in s["work_files"])
        out.quarantine_files.extend(tuple(q) for q in s["quarantine_files"])
        for key, n in s.get("suppressed", {}).items():
            out.suppressed[key] = out.suppressed.get(key, 0) + n
    return out
