"""A lookup through the monthly identity summaries (``summary.py`` says what they are): the
hours holding any of some hashes, exactly as reading every per-hour index file would say, at a
few row groups per month."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from datalake_assets.privacy.index_files import HourFiles, Reads, list_index_hours
from datalake_assets.privacy.summary import (
    SUMMARY_SCHEMA,
    _list_summaries,
    _may_hold,
    _open_summary,
    _read_hour_retrying,
)

# ------------------------------------------------------------------------------------ lookup


@dataclass(frozen=True)
class SummaryLookup:
    """The hours of the source whose identity index names one of the hashes, and what finding
    them cost. ``links``: (hash, linked hash) pairs of link rows naming a requested hash."""

    hours: frozenset[str]
    bytes_read: int
    files_read: int
    links: frozenset[tuple[str, str]] = frozenset()
    stale_hours: int = 0  # answered from their per-hour files
    summaries_read: int = 0
    row_groups_read: int = 0
    files_listed: int = 0


def _matches(rows: pa.Table, wanted: pa.Array) -> dict[str, set[tuple[str, str]]]:
    """hour -> the links (hash, linked hash) of the rows naming one of ``wanted``."""
    hit = rows.filter(pc.is_in(rows["identity"], value_set=wanted))
    out: dict[str, set[tuple[str, str]]] = {}
    for hour, ident, linked in zip(
        hit["hour"].to_pylist(), hit["identity"].to_pylist(), hit["linked"].to_pylist()
    ):
        links = out.setdefault(hour, set())
        if linked is not None:
            links.add((ident, linked))
    return out


def find_hours_compacted(lake_root: str, source_dir: str, hashes: Iterable[str]) -> SummaryLookup:
    """The hours holding any of ``hashes``: from the summaries for hours compacted and
    unchanged since, from the per-hour index for the others (module docstring)."""
    wanted = sorted(set(hashes))
    if not wanted:
        return SummaryLookup(frozenset(), 0, 0)
    wanted_array = pa.array(wanted, pa.string())
    reads = Reads()
    manifests: HourFiles = {}
    summary_hits: dict[str, set[tuple[str, str]]] = {}  # hour -> its links (maybe none)
    summaries = 0
    for location in sorted(_list_summaries(lake_root, source_dir).values()):
        pf, manifest = _open_summary(location, reads)
        if pf is None:  # removed since the listing, or damaged: its hours count as stale
            continue
        column = pf.metadata.schema.names.index("identity")
        groups = [
            i
            for i in range(pf.metadata.num_row_groups)
            if _may_hold(pf.metadata.row_group(i), column, wanted)
        ]
        if groups:
            try:
                rows = pf.read_row_groups(groups, columns=SUMMARY_SCHEMA.names)
            except (OSError, ValueError, pa.ArrowException):
                continue  # a damaged body: as above
            reads.row_groups += len(groups)
            summary_hits.update(_matches(rows, wanted_array))  # months hold disjoint hours
        summaries += 1
        manifests.update(manifest)
    # The listing comes after the summaries, so any hour changed since they were written
    # differs from its manifest entry and is read from its own files.
    current, listed = list_index_hours(lake_root, source_dir)
    found: set[str] = set()
    found_links: set[tuple[str, str]] = set()
    stale = []
    for hour, files in current.items():
        if manifests.get(hour) != files:
            stale.append(hour)
        elif hour in summary_hits:
            found.add(hour)
            found_links |= summary_hits[hour]
    for hour in sorted(stale):
        rows = _read_hour_retrying(lake_root, source_dir, hour, current[hour], reads, wanted)
        for hit_hour, links in _matches(rows, wanted_array).items():
            found.add(hit_hour)
            found_links |= links
    return SummaryLookup(
        frozenset(found),
        reads.bytes,
        reads.files,
        frozenset(found_links),
        len(stale),
        summaries,
        reads.row_groups,
        listed,
    )
