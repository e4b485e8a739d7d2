"""The tally of what a sync wrote: stage B's manifest and stage A's statistics, summed by
table and hour (``outcome.reconcile`` builds it; ``hour_figures`` sorts it by hour)."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from datalake_assets.lake import identities
from datalake_assets.spec.naming import (
    TRACKS_TABLE,
    holds_messages,
    is_event_table,
)
from datalake_assets.transform.manifest import ManifestEntry


@dataclass
class Tally:
    """What was written, from stage B's manifest and stage A's statistics."""

    lines_in: int
    lines_quarantined: int
    # (table, hour) -> lines of suppressed identities (a line that would have been
    # quarantined counts under lake.identities.QUARANTINE)
    suppressed: Counter[tuple[str, str]] = field(default_factory=Counter)
    rows: Counter[tuple[str, str]] = field(default_factory=Counter)  # (table, hour) -> rows
    files: defaultdict[tuple[str, str], list[ManifestEntry]] = field(
        default_factory=lambda: defaultdict(list)
    )  # (table, hour) -> Parquet files
    values_quarantined: Counter[str] = field(default_factory=Counter)  # by table
    misfits_by_column: defaultdict[str, Counter[str]] = field(
        default_factory=lambda: defaultdict(Counter)
    )
    conformance: defaultdict[str, list[dict]] = field(default_factory=lambda: defaultdict(list))
    quarantine_hours: set[str] = field(default_factory=set)
    index_ids_written: int = 0
    repeated_ids: dict[str, int] = field(default_factory=dict)  # by table
    # Each hour's own share (hours compact, as stage rows carry them): hour_figures.py
    lines_by_hour: dict[str, int] = field(default_factory=dict)  # hour -> lines in
    quarantined_by_hour: dict[str, int] = field(default_factory=dict)  # hour -> lines
    values_by_hour: Counter[tuple[str, str]] = field(default_factory=Counter)  # (table, hour)
    misfits_by_hour: defaultdict[tuple[str, str], Counter[str]] = field(
        default_factory=lambda: defaultdict(Counter)
    )  # (table, hour) -> column -> values
    valued: defaultdict[tuple[str, str], set[str]] = field(
        default_factory=lambda: defaultdict(set)
    )  # (table, hour) -> columns holding a value
    violations: defaultdict[tuple[str, str], Counter[str]] = field(
        default_factory=lambda: defaultdict(Counter)
    )  # (table, hour) -> a tracking plan's violations by type, of the table's messages

    @property
    def messages_written(self) -> int:
        return sum(n for (t, _), n in self.rows.items() if t != TRACKS_TABLE and holds_messages(t))

    @property
    def lines_suppressed(self) -> int:
        return sum(self.suppressed.values())

    def table_suppressed(self, table: str) -> int:
        """Suppressed lines of ``table``; of ``tracks``: those of every track table."""
        if table == TRACKS_TABLE:
            return sum(
                n
                for (t, _), n in self.suppressed.items()
                if is_event_table(t) and t != identities.QUARANTINE
            )
        return sum(n for (t, _), n in self.suppressed.items() if t == table)

    def table_rows(self, table: str) -> int:
        return sum(n for (t, _), n in self.rows.items() if t == table)

    def hours_written(self, table: str) -> list[str]:
        return sorted({h for (t, h), n in self.rows.items() if t == table and n})
