"""``datalake demo`` and the demo of ``datalake dev``: the demo source's closed hours written
at once (``ingest/demo``), and its current hour fed minute by minute while ``datalake dev``
runs (``ingest/demo/live.py``)."""

from __future__ import annotations

import argparse
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

from datalake_assets.cli_parser import chosen_source
from datalake_assets.lake import storage
from datalake_assets.settings import LakeSettings, SourceSettings
from datalake_assets.settings.fields import default_home
from datalake_assets.spec import layout


def _last_closed_hours(n: int, now: datetime | None = None) -> list[layout.ArchiveHour]:
    now = now or datetime.now(UTC)
    last = layout.ArchiveHour.of(now - timedelta(hours=1))
    first = layout.ArchiveHour.of(last.start - timedelta(hours=n - 1))
    return layout.hour_range(first, last)


def cmd_demo(settings: LakeSettings, args: argparse.Namespace) -> int:
    from datalake_assets.ingest.demo import generate_archive

    source = chosen_source(settings, args)
    if args.end:
        last = args.end
        hours = layout.hour_range(
            layout.ArchiveHour.of(last.start - timedelta(hours=args.hours - 1)), last
        )
    else:
        hours = _last_closed_hours(args.hours)
    summary = generate_archive(
        settings.archive_root,
        source.id,
        hours,
        events_per_hour=args.events_per_hour,
        files_per_hour=args.files_per_hour,
        seed=args.seed,
    )
    print(
        f"wrote {summary.lines} lines ({summary.valid_messages} messages, "
        f"{summary.duplicate_lines} duplicate deliveries, {summary.malformed_lines} malformed) "
        f"for {len(hours)} hours of source {source.id!r} under {settings.archive_root}"
    )
    return 0


def archive_is_empty(settings: LakeSettings, source_id: str) -> bool:
    return not storage.list_files(layout.join(settings.archive_root, source_id), recursive=True)


DEV_EVENTS_PER_HOUR = 1000


def demo_hours(now: datetime | None = None) -> int:
    """The hours ``datalake dev`` generates: yesterday whole (UTC) and today's closed hours,
    so the daily models have a complete day to build by themselves."""
    now = now or datetime.now(UTC)
    return 24 + now.hour


def start_demo_feed(settings: LakeSettings, source: SourceSettings) -> threading.Event | None:
    """The demo's current hour, a file a minute into the archive (a local one only): the
    event that stops it, or None."""
    from datalake_assets.ingest.demo.live import LiveDemo, start_live_demo

    if "://" in settings.archive_root:
        return None
    staging = Path(default_home()) / "demo-live"
    return start_live_demo(
        LiveDemo(settings.archive_root, source.id, staging, DEV_EVENTS_PER_HOUR, seed=7)
    )


def generate_dev_demo(settings: LakeSettings) -> SourceSettings | None:
    """``datalake dev``'s demo: the source ``demo``'s closed hours when its archive is empty
    (yesterday, UTC, and today's, so the daily models have a complete day to build); that
    source then, whose current hour ``start_demo_feed`` feeds. None when nothing was made."""
    for source in settings.sources:
        if archive_is_empty(settings, source.id) and source.id == "demo":
            hours = demo_hours()
            print(
                f"archive of {source.id!r} is empty: generating {hours} hours of demo traffic "
                f"(yesterday, UTC, and today's closed hours; this hour's arrives minute by "
                f"minute while this command runs)"
            )
            cmd_demo(
                settings,
                argparse.Namespace(
                    source=source.id,
                    hours=hours,
                    end=None,
                    events_per_hour=DEV_EVENTS_PER_HOUR,
                    files_per_hour=2,
                    seed=7,
                ),
            )
            return source
    return None
