"""The open hour's batches, run by themselves: a loop beside the collector and Dagster
(``datalake dev`` starts it in its own process; ``datalake batches`` runs it alone).

Every ``[freshness]`` interval of a source (``LakeSettings.freshness_minutes``, less the
collector's segment age: ``batch_period``), one batch
(``transform/open_hour.py``) of the hours that may still take files: the current hour, and
the hour before until its close (``[automation] settle_minutes`` after its end, when the
archive sensor syncs it whole). A batch runs on the lake's compute, as the hourly syncs do
(``run_batch``): with the local default in this process, where its imports are paid once and a
small batch needs no Spark job (``[sync] local_max_bytes``); a big one starts the loader's
Spark session, kept for the next. One line per batch that read something, one per failure
(the next interval tries again: a killed or failed batch converges, the journal and the
ledger see to it), nothing for a batch that found no new file.

Why a loop and not a Dagster run per batch: ``bench/bench_open_hour.py`` measured a batch in a
fresh process against the same batch in a running one (docs/concepts/freshness.md has the
figures); a Dagster run adds its own process start and event writes on top of the former.
The hourly sync stays Dagster's: the hour's partition is materialized, and its checks run,
when it closes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from datalake_assets.lake.formats import table_format
from datalake_assets.lake.report import SourceReport, SyncReport
from datalake_assets.orchestration.compute.compute_factory import build_compute
from datalake_assets.orchestration.compute.remote_compute import quiet_batch_report
from datalake_assets.orchestration.compute.spark_compute import LocalSparkCompute, SparkCompute
from datalake_assets.settings import LakeSettings, SourceSettings
from datalake_assets.settings.formats_section import FormatConfig
from datalake_assets.spec.layout import ArchiveHour
from datalake_assets.transform import open_hour
from datalake_assets.transform.sync import list_archive_files
from datalake_assets.transform.sync_request import SyncError

# A batch gives way to a run holding its source (the hour's close, a backfill, an erasure)
# instead of waiting up to the sync's 10 minutes: the loop would stall every other source's
# batches meanwhile, and the close takes the hour's files anyway. The next interval tries again.
LOCK_WAIT_S = 5.0


@dataclass(frozen=True)
class BatchedSource:
    """A source the loader batches: its interval (``minutes``), and the seconds between two
    of its batches (``batch_period``)."""

    source: SourceSettings
    minutes: int
    period_s: float


def batch_period(minutes: int, segment_age_s: int) -> float:
    """Seconds between two batches of a source at ``minutes``: the interval less the
    collector's segment age, at least half the interval. An event reaches the archive when
    its spool segment rolls, up to ``[collector] segment_max_age_seconds`` after it arrived;
    batching every interval would let it wait the interval *plus* that age (a p95 of 5.3
    minutes at 5, by the arithmetic of the two waits). So the interval bounds the wait from
    the event's arrival, as a user reads it."""
    return max(minutes * 60 - segment_age_s, minutes * 30)


def open_hours(now: datetime, settle_minutes: int) -> list[str]:
    """The hours a batch at ``now`` looks at: the current one, and the one before while the
    archive sensor has not yet closed it (``settle_minutes`` after its end)."""
    current = ArchiveHour.of(now)
    before = ArchiveHour.of(now - timedelta(hours=1))
    closes = current.start + timedelta(minutes=settle_minutes)
    return [str(before), str(current)] if now < closes else [str(current)]


def batched_sources(settings: LakeSettings, say: Callable[[str], None]) -> list[BatchedSource]:
    """The sources with an interval; none (and one line saying why) when the lake's table
    format cannot append."""
    age = settings.collector.segment_max_age_seconds
    wanted = [
        BatchedSource(s, m, batch_period(m, age))
        for s in settings.sources
        if (m := settings.freshness_minutes(s)) > 0
    ]
    fmt = table_format(FormatConfig.of_settings(settings), settings.lake_root)
    if wanted and not fmt.appends:
        say(
            f"freshness: the {fmt.name} table format replaces whole hours and takes no open "
            "hour's batches: sources are synced hourly ([freshness] interval_minutes = 0 "
            'silences this; table_format = "iceberg" has batches)'
        )
        return []
    return wanted


def run_batch(
    settings: LakeSettings, source: SourceSettings, now: datetime, compute: SparkCompute
) -> SyncReport:
    """One batch of the source's open hours on ``compute``: the compute seam the hourly syncs
    run on (``[compute] backend``, ``orchestration/compute/``). Local: in this process (a
    small batch needs no Spark job; a big one starts the process's session, kept for the
    next). EMR, EMR Serverless, Databricks: a job of the cluster, as an hour's sync, without
    Pipes (the loop is no Dagster run; its record is ``reporter``'s), sent only when the
    open hours have a file no run took in."""
    from datalake_assets.transform.sync_request import request_from_settings

    hours = open_hours(now, settings.automation.settle_minutes)
    request = request_from_settings(settings, source, hours, replay=False, batch=True)
    if not isinstance(compute, LocalSparkCompute):  # a job costs a cluster's step or run
        req = request.resolved()
        if not open_hour.finds_files(req.lake_root, req.source_dir, list_archive_files(req)):
            return quiet_batch_report(req, None)  # what the job would have said
    return compute.run_sync(replace(request, lock_wait_seconds=LOCK_WAIT_S))


def describe(source: SourceSettings, report: SourceReport) -> str:
    """A batch's one line: what it read and wrote."""
    return f"batch {source.id} {', '.join(report.hours_synced)}: {report.summary()}"


def run_loop(
    settings: LakeSettings,
    stop: threading.Event,
    say: Callable[[str], None] = print,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    once: bool = False,
    reporter: Callable[[SourceSettings, SyncReport, datetime], None] | None = None,
) -> None:
    """Batches every source at its interval until ``stop`` is set (``once``: one batch of
    each source, then returns). ``reporter``: told of every batch that ran, empty or not
    (``open_hour_asset.dagster_reporter``: the source's open hour in Dagster)."""
    sources = batched_sources(settings, say)
    if not sources:
        return
    say(
        "freshness: the open hour's events in their tables within "
        + ", ".join(
            f"{b.minutes} min ({b.source.id}: a batch every {b.period_s:g} s)" for b in sources
        )
        + ("" if reporter else "; not recorded in Dagster (no instance: DAGSTER_HOME)")
    )
    compute = build_compute(settings, quiet=True)  # one for the loop: its session is kept
    due = {b.source.id: 0.0 for b in sources}  # monotonic time of each source's next batch
    while not stop.is_set():
        for b in sources:
            if time.monotonic() < due[b.source.id]:
                continue
            due[b.source.id] = time.monotonic() + b.period_s
            at = clock()
            try:
                report = run_batch(settings, b.source, at, compute)
            except Exception as e:  # noqa: BLE001 - one line; the next interval tries again
                busy = isinstance(e, SyncError) and e.code == "locked"
                what = f"waits for the run holding the source ({e})" if busy else f"failed: {e}"
                say(f"batch {b.source.id} {what}".splitlines()[0])
                continue
            if report.source.lines_in:
                say(describe(b.source, report.source))
            if reporter is not None:
                try:
                    reporter(b.source, report, at)
                except Exception as e:  # noqa: BLE001 - the lake has the batch; Dagster, later
                    say(f"batch {b.source.id}: not recorded in Dagster: {e}".splitlines()[0])
        if once:
            return
        stop.wait(max(0.0, min(due.values()) - time.monotonic()))
