"""Each synced hour's own figures, for the report's ``by_hour`` entries.

A sync may cover a batch of hours (the archive sensor's batched run, a backfill chunk), but
Dagster shows one materialization per hourly partition: each must carry that hour's rows,
duplicates, quarantined values, files, bytes and columns, never the batch's totals (issue
#27). Everything here is already counted per hour by the stages (stage A's lines, stage B's
manifest entries, the dedup's ``(table, hour)`` counts); this module only sorts it by hour.

Columns: a batch decides one type per column for all its hours, so a *new* column is
attributed to the first hour of the batch whose rows hold a value in it (where it would
have appeared had the hours been synced one by one), and a *widened* column to every hour
whose rows hold a value in it (they were written with the wider type). Each new or widened
column of the batch is attributed to at least one hour.
"""

from __future__ import annotations

from datalake_assets.lake import identities
from datalake_assets.lake.hour_report import SourceHour, SourceHourEntry, TableHour
from datalake_assets.spec import layout
from datalake_assets.spec.naming import (
    TRACKS_TABLE,
    VIOLATIONS,
    holds_messages,
    is_event_table,
)
from datalake_assets.spec.schema import TableChange
from datalake_assets.transform.dedup import Duplicates
from datalake_assets.transform.tally import Tally


def _readable(hour: str) -> str:
    return str(layout.ArchiveHour.parse(hour))


def _suppressed(tally: Tally, table: str, hour: str) -> int:
    """As ``Tally.table_suppressed``, for one hour."""
    if table == TRACKS_TABLE:
        return sum(
            n
            for (t, h), n in tally.suppressed.items()
            if h == hour and is_event_table(t) and t != identities.QUARANTINE
        )
    return tally.suppressed.get((table, hour), 0)


def table_hours(
    table: str, change: TableChange, tally: Tally, duplicates: Duplicates, hours: list[str]
) -> list[TableHour]:
    """``table``'s figures for each of ``hours`` (compact) that it has anything in."""
    valued = {h: tally.valued.get((table, h), set()) for h in hours}
    with_rows = [h for h in hours if tally.rows.get((table, h))]
    new_in: dict[str, list[dict[str, str]]] = {}
    for name, typ in change.new_columns:
        first = next(
            (h for h in hours if name in valued[h]), with_rows[0] if with_rows else hours[0]
        )
        new_in.setdefault(first, []).append({"name": name, "type": typ})
    widened_in: dict[str, list[dict[str, str]]] = {}
    for name, old, new in change.widened:
        holding = [
            h
            for h in hours
            if name in valued[h] or tally.misfits_by_hour.get((table, h), {}).get(name)
        ]
        for h in holding or [with_rows[0] if with_rows else hours[0]]:
            widened_in.setdefault(h, []).append({"name": name, "from": old, "to": new})
    out = []
    for h in hours:
        files = tally.files.get((table, h), [])
        misfits = tally.misfits_by_hour.get((table, h), {})
        figures = {
            "rows": tally.rows.get((table, h), 0),
            "duplicates": duplicates.counts.get((table, h), 0),
            "cross_hour_duplicates": duplicates.cross_hour.get((table, h), 0),
            "suppressed": _suppressed(tally, table, h),
            "values_quarantined": tally.values_by_hour.get((table, h), 0),
            "files": len(files),
            "bytes": sum(m.bytes for m in files),
        }
        readable = _readable(h)
        conformance = [f for f in tally.conformance.get(table, []) if f.get("hour") == readable]
        violations = tally.violations.get((table, h), {})
        if (
            not violations
            and not any(figures.values())
            and h not in new_in
            and h not in widened_in
            and not misfits
            and not conformance
        ):
            continue  # nothing of this table in this hour
        out.append(
            TableHour(
                hour=readable,
                **figures,
                new_columns=new_in.get(h, []),
                widened_columns=widened_in.get(h, []),
                misfits_by_column=dict(sorted(misfits.items())),
                conformance_failures=conformance,
                violations=dict(sorted(violations.items())),
            )
        )
    return out


def source_hours(tally: Tally, duplicates: Duplicates, hours: list[str]) -> list[SourceHourEntry]:
    """The reconciliation of each of ``hours`` (compact): every line of an hour is a row of
    that hour, a duplicate counted there, quarantined from its file or suppressed, so each
    hour reconciles on its own (``reconciled``)."""
    return [
        SourceHourEntry(
            _readable(h),
            SourceHour(
                lines_in=tally.lines_by_hour.get(h, 0),
                messages_written=sum(
                    n
                    for (t, hh), n in tally.rows.items()
                    if hh == h and t != TRACKS_TABLE and holds_messages(t)
                ),
                duplicates=sum(n for (_, hh), n in duplicates.counts.items() if hh == h),
                cross_hour_duplicates=sum(
                    n for (_, hh), n in duplicates.cross_hour.items() if hh == h
                ),
                lines_quarantined=tally.quarantined_by_hour.get(h, 0),
                suppressed=sum(n for (_, hh), n in tally.suppressed.items() if hh == h),
                values_quarantined=sum(n for (_, hh), n in tally.values_by_hour.items() if hh == h),
                violations=tally.rows.get((VIOLATIONS, h), 0),
            ),
        )
        for h in hours
    ]
