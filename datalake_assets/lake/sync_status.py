"""A source's health as the lake tells it (``datalake status``): its last synced hour, the lag
behind now, the lines quarantined and the rows written per day, read from the sync reports the
lake keeps (``<lake>/reports/day=<finish day>/source=<id>/run_id=/report.json``, in both table
formats).

Each hour counts as the newest finished report that synced it says: a re-synced hour replaces
its rows whole, so its latest figures are the rows a reader of the lake counts for it. An open
hour's batches (``transform/open_hour.py``) add to it: their figures add up, over the newest
sync of the hour if there is one. An hour's data is synced after the hour begins, so the
reports of the hours in the last ``days`` days are in the finish-day folders of those days:
only those are read, never years of reports (the last synced hour alone may look further back,
newest day first).

The lag is how far the lake is behind now: from the end of the last synced hour, or, when
that hour is only batched so far (still open), from the start of its newest batch (the files
it read were in the archive by then).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from pyarrow import fs as pafs

from datalake_assets.lake import storage
from datalake_assets.lake.hour_report import SourceHour
from datalake_assets.lake.report import FINISHED, SourceReport, SyncReport
from datalake_assets.spec import layout

_REPORT_RE = re.compile(r"/day=(\d{4}-\d{2}-\d{2})/source=([^/]+)/run_id=[^/]+/report\.json$")
_DAY_RE = re.compile(r"/day=(\d{4}-\d{2}-\d{2})/?$")
QUARANTINE_WINDOW = timedelta(hours=24)
ROW_DAYS = 7


@dataclass(frozen=True)
class LakeStatus:
    """What the lake says of one source at ``now`` (UTC)."""

    last_synced_hour: str | None  # YYYY-MM-DDTHH, or None: no finished sync yet
    lag_seconds: int | None  # now minus the end of the last synced hour
    quarantined_lines_24h: int  # lines quarantined of the hours that ended in the last 24 h
    messages_per_day: dict[str, int] = field(default_factory=dict)  # the last ROW_DAYS days, UTC
    violations_24h: int = 0  # a tracking plan's violations in the hours of the last 24 h

    def to_dict(self) -> dict[str, Any]:
        return {
            "last_synced_hour": self.last_synced_hour,
            "lag_seconds": self.lag_seconds,
            "quarantined_lines_24h": self.quarantined_lines_24h,
            "messages_per_day": dict(self.messages_per_day),
            "violations_24h": self.violations_24h,
        }


def _report_days(lake_root: str) -> list[str]:
    """The finish days that have reports (``reports/day=``), newest first."""
    root = layout.join(lake_root, "reports")
    if not storage.exists(root):
        return []
    fs, path = storage.resolve(root)
    infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    days = [m.group(1) for i in infos if (m := _DAY_RE.search(i.path + "/"))]
    return sorted(days, reverse=True)


def _reports_of_day(lake_root: str, source_id: str, day: str) -> list[SourceReport]:
    """The finished source rows of ``day``'s reports of the source, newest first."""
    folder = layout.join(lake_root, "reports", f"day={day}", f"source={source_id}")
    if not storage.exists(folder):
        return []
    rows = [
        SyncReport.parse(storage.read_bytes(loc)).source
        for loc, _ in storage.list_files(folder, recursive=True)
        if _REPORT_RE.search(loc)
    ]
    rows = [r for r in rows if r.status == FINISHED]
    return sorted(rows, key=lambda r: r.finish_time or "", reverse=True)


def lake_status(lake_root: str, source_id: str, now: datetime | None = None) -> LakeStatus:
    """The source's figures at ``now`` (default: the current time), from its sync reports."""
    now = (now or datetime.now(UTC)).astimezone(UTC)
    first_day = (now - timedelta(days=ROW_DAYS)).strftime("%Y-%m-%d")
    days = _report_days(lake_root)
    hours: dict[str, SourceHour] = {}  # hour -> its newest sync's figures (+ batches after)
    batched: dict[str, SourceHour] = {}  # hour -> its batches newer than any sync of it
    newest_batch: dict[str, str] = {}  # hour -> its newest batch's start time
    last: str | None = None
    for day in days:
        if day < first_day and last is not None:
            break  # older finish days hold no hour of the window
        for report in _reports_of_day(lake_root, source_id, day):  # newest first
            for entry in report.hour_entries():
                if not entry.hour or entry.hour in hours:  # a catalog-only run: no figures
                    continue  # (or an hour whose newest sync was read: older runs replaced)
                figures = entry.figures or SourceHour()
                if report.batch_id:
                    batched[entry.hour] = batched.get(entry.hour, SourceHour()) + figures
                    newest_batch.setdefault(entry.hour, report.start_time or "")
                else:
                    hours[entry.hour] = figures + batched.pop(entry.hour, SourceHour())
                last = max(last or entry.hour, entry.hour)
    hours.update(batched)  # hours only batched so far
    today = now.date()
    messages_per_day = {
        (today - timedelta(days=n)).isoformat(): 0 for n in range(ROW_DAYS - 1, -1, -1)
    }
    quarantined = violations = 0
    for hour, entry in hours.items():
        start = layout.ArchiveHour.parse(hour).start
        if start.date().isoformat() in messages_per_day:
            messages_per_day[start.date().isoformat()] += entry.messages_written
        if now - QUARANTINE_WINDOW <= start + timedelta(hours=1) <= now:
            quarantined += entry.lines_quarantined
            violations += entry.violations
    lag = None
    if last is not None:
        end = layout.ArchiveHour.parse(last).start + timedelta(hours=1)
        if last in batched and newest_batch.get(last):
            end = min(end, datetime.fromisoformat(newest_batch[last]).astimezone(UTC))
        lag = int((now - end).total_seconds())
    return LakeStatus(last, lag, quarantined, messages_per_day, violations)
