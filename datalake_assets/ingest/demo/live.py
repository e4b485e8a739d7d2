"""The demo's open hour: traffic that arrives as time passes, minute by minute.

``datalake dev`` writes the demo's closed hours at once (yesterday and today's, so the models
have a day to build). The current hour is written the same way, whole, by the same generator,
but into a staging folder, one file per minute of received time (``generate_archive``'s files
are consecutive slices of the hour); each minute's file moves into the raw archive once that
minute is over, as the collector rolls a spool segment. The open hour's batches then take it
in, and ``<slug>/open_hour`` in the UI fills as the hour goes. When the hour ends its last
files arrive, the archive sensor syncs it like any other, and the next hour is staged.

Local archives only (the demo's default); the staging folder is the feed's own
(``DATALAKE_HOME/demo-live``), never read by a sync.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from datalake_assets.ingest.demo.generate import generate_archive
from datalake_assets.spec.layout import ArchiveHour, archive_hour_dir

MINUTES = 60
# A minute's file holds receivedAt up to a few seconds past the minute (the generator's
# jitter: an hour's share per line); it moves once they are past too.
GRACE = timedelta(seconds=10)


class LiveDemo:
    """Moves each due minute's file of the current hour from ``staging`` into the archive."""

    def __init__(
        self,
        archive_root: str,
        source_id: str,
        staging: Path,
        events_per_hour: int,
        seed: int,
    ) -> None:
        self.archive_root, self.source_id, self.staging = archive_root, source_id, staging
        self.events_per_hour, self.seed = events_per_hour, seed
        self.hour: ArchiveHour | None = None
        self.published = 0  # files of ``hour`` in the archive

    def publish_due(self, now: datetime) -> int:
        """Every file whose minute ended (plus ``GRACE``) by ``now``: the rest of an hour that
        ended first, then the current hour's. The number of files moved."""
        moved = 0
        current = ArchiveHour.of(now)
        if self.hour is not None and self.hour != current:
            moved += self._publish(MINUTES)  # the hour ended: all of it
            self.hour = None
        if self.hour is None:
            self._stage(current)
        elapsed = now - GRACE - current.start
        return moved + self._publish(max(0, min(MINUTES, int(elapsed.total_seconds()) // 60)))

    def _stage(self, hour: ArchiveHour) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)
        generate_archive(
            str(self.staging),
            self.source_id,
            [hour],
            events_per_hour=self.events_per_hour,
            files_per_hour=MINUTES,
            seed=self.seed,
        )
        self.hour, self.published = hour, 0

    def _publish(self, upto: int) -> int:
        assert self.hour is not None
        src = Path(archive_hour_dir(str(self.staging), self.source_id, self.hour))
        dst = Path(archive_hour_dir(self.archive_root, self.source_id, self.hour))
        dst.mkdir(parents=True, exist_ok=True)
        moved = 0
        for minute in range(self.published, upto):
            name = f"part-{minute:04d}.jsonl.gz"
            # a dot-name first, then the rename: a reader never sees half a file
            shutil.copyfile(src / name, dst / f".{name}.tmp")
            os.replace(dst / f".{name}.tmp", dst / name)
            moved += 1
        self.published = max(self.published, upto)
        return moved


def start_live_demo(
    feed: LiveDemo,
    say: Callable[[str], None] = print,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    every_s: float = 10.0,
) -> threading.Event:
    """Runs ``feed`` in a daemon thread until the returned event is set; a failure is one
    line and the feed stops (the demo's closed hours are already there)."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            try:
                feed.publish_due(clock())
            except OSError as e:
                say(f"demo traffic stopped: {e}")
                return
            stop.wait(every_s)

    threading.Thread(target=loop, name="demo-live", daemon=True).start()
    return stop
