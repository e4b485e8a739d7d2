"""An Iceberg table's hours: the filter a sync's commit replaces them by, and the files that
hold them (live in the current snapshot, stored under the table's folders, committed by the
last sync).

The table is partitioned by ``identity(day), identity(hr)``; stage B and pyiceberg write an
hour's files in ``<location>/data/day=/hr=/``, compaction writes coarser ones (a day's in
``data/day=/``, a month's in ``data/``), and a lake converted from the Segment layout keeps its
files where that layout wrote them until the hour is synced again. The erasure and the
reconciliation ask these questions through ``IcebergFormat`` (``iceberg.py``)."""

from __future__ import annotations

from datalake_assets.lake import storage
from datalake_assets.lake.formats import segment
from datalake_assets.lake.formats.format_interface import SourceTables
from datalake_assets.lake.formats.iceberg_catalog import _location
from datalake_assets.lake.formats.iceberg_in_place import HOURLY_SPEC
from datalake_assets.spec import layout

HOURS_A_DAY = 24


def hours_filter(hours: list[str] | tuple[str, ...]):
    """The rows of these hours (compact), on the partition columns (prunes whole files): the
    whole days in one ``day IN (...)``, each other day ``day = d AND hr IN (...)``, the terms
    joined as a balanced tree. pyiceberg visits an expression recursively, so a chain of one
    ``OR`` an hour (a month synced in one run: 720) overflowed Python's stack."""
    from pyiceberg.expressions import And, EqualTo, In

    by_day: dict[str, set[str]] = {}
    for h in {layout.ArchiveHour.parse(x) for x in hours}:
        by_day.setdefault(h.day, set()).add(h.hr)
    whole = sorted(d for d, hrs in by_day.items() if len(hrs) == HOURS_A_DAY)
    terms = [In("day", whole)] if whole else []
    terms += [
        And(EqualTo("day", d), In("hr", sorted(hrs)))
        for d, hrs in sorted(by_day.items())
        if len(hrs) < HOURS_A_DAY
    ]
    return _any_of(terms)


def _any_of(terms: list):
    """``OR`` of ``terms``, nested ``log2(len(terms))`` deep (pyiceberg's ``Or(*terms)`` nests
    them one a level)."""
    from pyiceberg.expressions import Or

    while len(terms) > 1:
        terms = [
            Or(*terms[i : i + 2]) if i + 1 < len(terms) else terms[i]
            for i in range(0, len(terms), 2)
        ]
    return terms[0]


def hour_location(table_location: str, hour: str) -> str:
    """Where the hour's files are written: ``<location>/data/day=/hr=/``."""
    h = layout.ArchiveHour.parse(hour)
    return layout.join(table_location, "data", f"day={h.day}", f"hr={h.hr}")


def live_files(tbl, hour: str) -> list[tuple[str, int]]:
    """The files of the table's current snapshot that may hold the hour's rows."""
    if tbl is None or tbl.current_snapshot() is None:
        return []
    return sorted(
        (_location(task.file.file_path), task.file.file_size_in_bytes)
        for task in tbl.scan(row_filter=hours_filter([hour])).plan_files()
    )


def hour_rows(tbl, hour: str) -> int | None:
    """The rows of the hour by the manifests' record counts; ``None`` when a compacted file
    holds some of them with other hours' (only a closed hour is ever compacted)."""
    if tbl is None or tbl.current_snapshot() is None:
        return 0
    specs = tbl.metadata.specs()
    rows = 0
    for task in tbl.scan(row_filter=hours_filter([hour])).plan_files():
        if [x.name for x in specs[task.file.spec_id].fields] != HOURLY_SPEC:
            return None
        rows += task.file.record_count
    return rows


def stored_files(
    lake_root: str, src: SourceTables, table: str, table_location: str, hour: str
) -> list[tuple[str, int]]:
    """Every file under the table's partition folder of the hour: live, replaced but still in
    an old snapshot, or left by a writer that died; and the coarse and converted files that may
    hold the hour's rows with others'."""
    hourly = [
        (loc, size)
        for loc, size in storage.list_files(hour_location(table_location, hour))
        if loc.endswith(".parquet")
    ]
    return (
        hourly + _coarse_files(table_location, hour) + _converted_files(lake_root, src, table, hour)
    )


def _converted_files(lake_root: str, src: SourceTables, table: str, hour: str):
    """A converted lake's files of the hour where the Segment layout wrote them
    (``iceberg_convert.py`` registers them in place): live until the hour is synced again,
    then stored until ``maintain`` deletes them."""
    return segment.hour_files(lake_root, src, table, layout.ArchiveHour.parse(hour))


def _coarse_files(table_location: str, hour: str) -> list[tuple[str, int]]:
    """The files compaction wrote that may hold the hour's rows, with others'
    (``iceberg_compact.py``): its day's (``data/day=/``) and the month files (``data/``,
    unpartitioned; which month a file holds is in the metadata, not its name)."""
    data = layout.join(table_location, "data")
    day = layout.join(data, f"day={layout.ArchiveHour.parse(hour).day}")
    return [
        (loc, size)
        for folder in (day, data)
        for loc, size in storage.list_files(folder)
        if loc.endswith(".parquet")
    ]


def committed_files(tbl, hours: list[str]) -> dict[str, list[tuple[str, int]]]:
    """pyiceberg wrote the table's files itself: one scan plan for all ``hours``' days
    (an ``In`` on ``day``: pyiceberg evaluates a filter of many hours' ``Or`` per file,
    seconds for 72 hours), each hourly file under the hour of its partition (after a
    commit, the synced hours are in hourly files: a compacted file that held one was
    rewritten by the commit's overwrite)."""
    from pyiceberg.expressions import In

    out: dict[str, list[tuple[str, int]]] = {}
    if tbl is None or tbl.current_snapshot() is None or not hours:
        return out
    wanted = {layout.ArchiveHour.parse(h).compact for h in hours}
    days = sorted({layout.ArchiveHour.parse(h).day for h in hours})
    specs = tbl.metadata.specs()
    for task in tbl.scan(row_filter=In("day", days)).plan_files():
        f = task.file
        if [x.name for x in specs[f.spec_id].fields] != HOURLY_SPEC:
            continue
        hour = f"{f.partition[0].replace('-', '')}{f.partition[1]}"
        if hour in wanted:
            out.setdefault(hour, []).append((_location(f.file_path), f.file_size_in_bytes))
    return out
