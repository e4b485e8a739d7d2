"""``datalake status``: each source's health in one screen (or one JSON object, ``--json``):
the last synced hour and the lag behind now, the lines quarantined and the rows written per
day, as the lake's sync reports say (``lake/sync_status.py``: the figures a reader of the lake
counts, in either table format), and the source's failed sync runs from the Dagster instance
(``orchestration/sync/run_status.py``), when there is one (``$DAGSTER_HOME``, else the one
``datalake dev`` uses)."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from typing import Any

from datalake_assets.cli_parser import UsageError
from datalake_assets.lake.sync_status import lake_status
from datalake_assets.settings import LakeSettings
from datalake_assets.settings.fields import SettingsError
from datalake_assets.settings.orchestration_section import dagster_home


def _failed_runs(settings: LakeSettings, sources, now: datetime) -> dict[str, list[str]] | None:
    """Each source's failed runs of the last 24 hours, or None without a Dagster instance."""
    if not (dagster_home() / "dagster.yaml").is_file():
        return None  # checked before importing Dagster: ~2 s a command otherwise
    from datalake_assets.orchestration.sync.run_status import failed_runs
    from datalake_assets.orchestration.sync.sync_records import existing_instance

    instance = existing_instance()
    if instance is None:
        return None
    with instance:
        return {s.id: failed_runs(instance, s, now) for s in sources}


def source_statuses(settings: LakeSettings, source_ids: list[str], now: datetime) -> dict[str, Any]:
    """What ``--json`` prints: ``now``, the instance read (or None), one object per source."""
    try:
        sources = [settings.source(s) for s in source_ids] or list(settings.sources)
    except SettingsError as e:
        raise UsageError(f"--source: {e.problem} ({e.origin})") from None
    failed = _failed_runs(settings, sources, now)
    out = []
    for s in sources:
        figures = lake_status(settings.lake_root, s.id, now).to_dict()
        runs = None if failed is None else failed[s.id]
        out.append(
            {
                "source": s.id,
                "slug": s.slug,
                "tracking_plan": s.tracking_plan or None,
                **figures,
                "failed_runs_24h": None if runs is None else len(runs),
                "failed_run_ids": runs,
            }
        )
    return {
        "now": now.isoformat(timespec="seconds"),
        "table_format": settings.table_format,
        "dagster_instance": None if failed is None else str(dagster_home()),
        "sources": out,
    }


def _duration(seconds: int | None) -> str:
    if seconds is None:
        return "-"
    sign, seconds = ("-" if seconds < 0 else ""), abs(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    return sign + (f"{days}d {hours}h" if days else f"{hours}h {rest // 60}m")


def render(status: dict[str, Any]) -> str:
    """The table a person reads: one block per source."""
    lines = [f"as of {status['now']} (table format {status['table_format']})"]
    if status["dagster_instance"] is None:
        lines.append("no Dagster instance found (set DAGSTER_HOME): failed runs not shown")
    for s in status["sources"]:
        failed = s["failed_runs_24h"]
        lines += [
            "",
            f"{s['source']} (slug {s['slug']})",
            f"  last synced hour        {s['last_synced_hour'] or 'none yet'}",
            f"  lag                     {_duration(s['lag_seconds'])}",
            f"  failed runs, 24 h       {'-' if failed is None else failed}",
            f"  quarantined lines, 24 h {s['quarantined_lines_24h']}",
            *(
                [f"  plan violations, 24 h   {s['violations_24h']}"]
                if s.get("tracking_plan")
                else []
            ),
            "  messages (rows) per day",
        ]
        lines += [f"    {day}  {n:>12,}" for day, n in s["messages_per_day"].items()]
        lines += [f"  failed run {run_id}" for run_id in (s["failed_run_ids"] or [])[:5]]
    return "\n".join(lines)


def cmd_status(settings: LakeSettings, args: argparse.Namespace) -> int:
    now = args.at.start if args.at else datetime.now(UTC)
    status = source_statuses(settings, args.source, now)
    print(json.dumps(status, indent=2) if args.json else render(status))
    return 0
