"""Steps 3 to 6 of a privacy request (``forget.py`` runs them, in order): follow the links
between identities (``_expand``), erase the collector's spool (``_erase_spool``), and for
each source, under its lock, erase the hours that hold the identities and prove what remains
of them (``_source``). ``_Run`` is what the steps of one run of a request share.

Nothing here logs, stores or raises an identity value: only hashes and counts.
"""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass, field
from datetime import timedelta

from datalake_assets.catalog.catalog_interface import Catalog
from datalake_assets.ingest.collector.spool_erase import erase_spool
from datalake_assets.lake import commit, storage
from datalake_assets.lake.lock import SourceLock
from datalake_assets.privacy.hours import SourcePlace, table_names, unindexed_hours
from datalake_assets.privacy.lookup import find_hours, follow_links, scan_hours
from datalake_assets.privacy.matching import Matcher
from datalake_assets.privacy.rewrite import (
    commit_hour,
    erase_many_hour_index,
    plan_hour,
    prove_hour,
    rewrite_archive,
)
from datalake_assets.privacy.state import HourRecord, RequestState, save_state
from datalake_assets.privacy.summary import compact, month_of, summary_months
from datalake_assets.settings import LakeSettings
from datalake_assets.spec import layout
from datalake_assets.spec.naming import QUARANTINE

MANY_HOURS = "many-hours"  # the state's entry for index files covering many hours


@dataclass
class _Run:
    settings: LakeSettings
    state: RequestState
    key: bytes
    catalog: Catalog | None
    warnings: list[str] = field(default_factory=list)
    hours_examined: int = 0
    bytes_read: int = 0
    files_read: int = 0


def _matcher(run: _Run, hashes: list[str]) -> Matcher:
    s = run.settings
    return Matcher(run.key, hashes, run.state.needles, s.privacy.identity_traits, s.sync.max_depth)


def _expand(run: _Run, places: list[SourcePlace]) -> set[str]:
    """The requested hashes and those linked to them (``lookup.follow_links``), across every
    source: a person's userId linked in one source is the same person in another."""
    depth = run.settings.privacy.link_depth
    found, frontier = set(run.state.requested), set(run.state.requested)
    scanned: set[tuple[str, str]] = set()
    matcher = _matcher(run, run.state.requested)
    for place in places:  # links of hours without an identity index (read once)
        scan = scan_hours(place, unindexed_hours(place), matcher, want_links=True)
        scanned |= scan.links
        run.bytes_read += scan.bytes_read
        run.files_read += scan.files_read
    for _ in range(depth):
        new: set[str] = set()
        for place in places:
            new |= follow_links(place.lake_root, place.source_dir, frozenset(frontier), 1)
        new |= {b for a, b in scanned if a in frontier} | {a for a, b in scanned if b in frontier}
        frontier = new - found
        found |= frontier
        if not frontier:
            break
    return found


def _erase_spool(run: _Run, hashes: list[str]) -> int:
    """The collector's spool, erased by the collector's own code (it knows its segments'
    format). A running collector's segments cannot be rewritten under it (``spool_erase``):
    the suppression list covers them once the collector has re-read it, so a request that
    suppresses waits one reload interval before it erases the archive, and any line rolled
    from then on is dropped by the roller. Without suppression, those lines may reach the
    archive after the erasure: the result says so."""
    settings = run.settings
    spool = settings.collector.spool_path()
    if not os.path.isdir(spool):
        return 0
    done = erase_spool(spool, run.key, frozenset(hashes), settings.privacy.identity_traits)
    if done.skipped_live:
        if run.state.suppress:
            time.sleep(settings.privacy.suppression_reload_seconds + 1)
        else:
            run.warnings.append(
                f"{done.skipped_live} segment(s) of a running collector were not searched and "
                "the request does not suppress: their lines may reach the archive; stop the "
                "collector or suppress, then re-run the request"
            )
    return done.lines_removed


def _source(run: _Run, place: SourcePlace, matcher: Matcher) -> dict[str, int]:
    """Steps 5 and 6 for one source; returns the proof's counts."""
    state = run.state
    rid = state.request_id
    done = state.hours.setdefault(place.source_id, {})
    with SourceLock(place.lake_root, place.source_dir, f"forget-{rid}"):
        commit.recover(place.lake_root, place.source_dir, place.tables_format.apply)
        storage.delete_dir(layout.staging_root(place.lake_root, place.source_dir))
        found = find_hours(place.lake_root, place.source_dir, frozenset(state.hashes))
        scan = scan_hours(place, unindexed_hours(place), matcher)
        run.bytes_read += found.bytes_read + scan.bytes_read
        run.files_read += found.files_read + scan.files_read
        hours = sorted(found.hours | scan.hours | (set(done) - {MANY_HOURS}))
        run.hours_examined += len(hours)
        for hour in hours:
            if not state.erase:
                continue
            prior = done.get(hour)
            plan = plan_hour(
                place,
                hour,
                matcher,
                f"forget-{rid[:40]}-{uuid.uuid4().hex[:8]}",
                set(prior.message_ids) if prior else set(),
            )
            if plan.nothing_to_do:
                if prior is not None or not plan.record.empty or plan.record.message_ids:
                    state.record(place.source_id, hour, plan.record).done = True
                continue
            state.record(place.source_id, hour, plan.record)
            save_state(place.lake_root, state)  # the counts, before the lake changes
            commit_hour(place, plan)
            rewrite_archive(plan, matcher)
            done[hour].done = True
            save_state(place.lake_root, state)
        if state.erase and hours:  # no older version of a table still holds the rows:
            # snapshots expired, unreferenced files deleted now (Iceberg; we hold the lock)
            place.tables_format.maintain(
                place.src, [*table_names(place), QUARANTINE], retention=timedelta(0)
            )
        if state.erase:  # a compacted identity index (files covering many hours), if any
            entries, files = erase_many_hour_index(place, matcher)
            if entries:
                state.record(
                    place.source_id,
                    MANY_HOURS,
                    HourRecord(index_entries=entries, files=files, done=True),
                )
                save_state(place.lake_root, state)
        if state.erase:  # the monthly summaries hold the old hours' hashes: rebuilt from
            # the rewritten per-hour files (a month without a summary gets none)
            months = {month_of(h) for h in hours} & set(
                summary_months(place.lake_root, place.source_dir)
            )
            if months:
                compact(place.lake_root, place.source_dir, sorted(months))
        remaining = {"index_entries": erase_many_hour_index(place, matcher, prove=True)[0]}
        if state.erase:  # the identity index (per hour and summaries) names them nowhere
            remaining["index_hours"] = len(
                find_hours(place.lake_root, place.source_dir, frozenset(state.hashes)).hours
            )
        for hour in hours:
            mids = set(done[hour].message_ids) if hour in done else set()
            for kind, n in prove_hour(place, hour, matcher, mids).items():
                remaining[kind] = remaining.get(kind, 0) + n
    return remaining
