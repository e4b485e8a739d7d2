"""The sync report's file read back typed and written again as it was (``lake/report.py``,
``lake/hour_report.py``): the reports in a lake were written by earlier versions, and the
``sync_reports`` table, ``datalake status`` and the Dagster checks read them."""

from __future__ import annotations

import json

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from datalake_assets.lake.hour_report import CatalogHour, SourceHour, SourceHourEntry, TableHour
from datalake_assets.lake.report import SyncReport

# A report as the version before typed hour entries wrote it (the shapes of
# transform/hour_figures.py and catalog/step.py then): a batch of two hours, the second
# registered with a problem, one table.
WRITTEN = [
    {
        "type": "event",
        "table_name": "pages",
        "run_id": "r1",
        "source_id": "web",
        "row_count": 5,
        "by_hour": [
            {
                "hour": "2026-11-20T10",
                "rows": 3,
                "duplicates": 1,
                "cross_hour_duplicates": 0,
                "suppressed": 0,
                "values_quarantined": 2,
                "files": 1,
                "bytes": 900,
                "new_columns": [{"name": "title", "type": "string"}],
                "widened_columns": [],
                "misfits_by_column": {"price": 2},
                "conformance_failures": [],
            },
            {
                "hour": "2026-11-20T11",
                "rows": 2,
                "duplicates": 0,
                "cross_hour_duplicates": 1,
                "suppressed": 1,
                "values_quarantined": 0,
                "files": 1,
                "bytes": 700,
                "new_columns": [],
                "widened_columns": [{"name": "price", "from": "bigint", "to": "double"}],
                "misfits_by_column": {},
                "conformance_failures": [],
                "written_by": "a later version",  # a key this version does not know
            },
        ],
    },
    {
        "type": "source",
        "run_id": "r1",
        "source_id": "web",
        "lines_in": 10,
        "messages_written": 5,
        "duplicates": 2,
        "lines_quarantined": 2,
        "suppressed": 1,
        "hours_synced": ["2026-11-20T10", "2026-11-20T11"],
        "by_hour": [
            {
                "hour": "2026-11-20T10",
                "lines_in": 6,
                "messages_written": 3,
                "duplicates": 1,
                "cross_hour_duplicates": 0,
                "lines_quarantined": 2,
                "suppressed": 0,
                "values_quarantined": 2,
                "reconciled": True,
            },
            {
                "hour": "2026-11-20T11",
                "lines_in": 4,
                "messages_written": 2,
                "duplicates": 1,
                "cross_hour_duplicates": 1,
                "lines_quarantined": 0,
                "suppressed": 1,
                "values_quarantined": 0,
                "reconciled": True,
                "catalog": {
                    "kind": "glue",
                    "database": "web_db",
                    "tables": ["pages"],
                    "tables_created": [],
                    "columns_added": [],
                    "columns_widened": ["price"],
                    "partitions_registered": 1,
                    "problems": ["pages: partition 2026-11-20/11 missing"],
                    "error": "ThrottlingException",
                },
            },
            {"hour": "2026-11-20T12", "catalog": {"kind": "glue", "database": "web_db"}},
        ],
    },
]


def _parse(rows: list[dict]) -> SyncReport:
    return SyncReport.parse(b"".join(orjson.dumps(r) + b"\n" for r in rows))


def test_a_written_report_reads_typed_and_writes_back_as_it_was():
    report = _parse(WRITTEN)
    pages = report.tables["pages"]
    first = pages.hour("2026-11-20T10")
    assert (
        isinstance(first, TableHour) and first.rows == 3 and first.misfits_by_column == {"price": 2}
    )
    assert first.repeated_message_ids is None  # counted per hour only by a re-check
    assert pages.hour("2026-11-20T11").extra == {"written_by": "a later version"}
    assert pages.hour("2026-11-20T12") is None

    src = report.source
    eleven = src.hour("2026-11-20T11")
    assert eleven.figures == SourceHour(
        lines_in=4,
        messages_written=2,
        duplicates=1,
        cross_hour_duplicates=1,
        suppressed=1,
    )
    assert eleven.figures.reconciled
    assert isinstance(eleven.catalog, CatalogHour) and eleven.catalog.error == "ThrottlingException"
    # a catalog-only run's entry: the catalog's word on the hour, no figures read
    twelve = src.hour("2026-11-20T12")
    assert twelve.figures is None and twelve.catalog.database == "web_db"

    # the file is the same after the types: the sync_reports table and earlier readers
    assert [r["by_hour"] for r in report.rows()] == [
        WRITTEN[0]["by_hour"],
        [
            *WRITTEN[1]["by_hour"][:2],
            {"hour": "2026-11-20T12", "catalog": twelve.catalog.to_dict()},
        ],
    ]


def test_a_report_before_by_hour_has_its_totals_as_its_one_hour():
    old = [dict(WRITTEN[1], by_hour=[], hours_synced=["2026-11-20T10"])]
    old[0].pop("by_hour")
    src = _parse(old).source
    assert src.by_hour == []
    assert src.hour_entries() == [SourceHourEntry("2026-11-20T10", src.totals())]
    assert src.totals().lines_in == 10 and src.reconciled
    two_hours = _parse([dict(old[0], hours_synced=["2026-11-20T10", "2026-11-20T11"])]).source
    assert two_hours.hour_entries() == []  # the batch's totals are no hour's


_names = st.text("abcdefgh_", min_size=1, max_size=8)
_counts = st.integers(0, 10**9)
_table_hours = st.builds(
    TableHour,
    hour=st.sampled_from(["2026-11-20T10", "2026-11-20T11", "2026-12-31T23"]),
    rows=_counts,
    duplicates=_counts,
    cross_hour_duplicates=_counts,
    suppressed=_counts,
    values_quarantined=_counts,
    files=_counts,
    bytes=_counts,
    new_columns=st.lists(st.fixed_dictionaries({"name": _names, "type": _names}), max_size=3),
    widened_columns=st.lists(
        st.fixed_dictionaries({"name": _names, "from": _names, "to": _names}), max_size=2
    ),
    misfits_by_column=st.dictionaries(_names, _counts, max_size=3),
    repeated_message_ids=st.none() | _counts,
)
_catalogs = st.none() | st.builds(
    CatalogHour,
    kind=_names,
    database=_names,
    tables=st.lists(_names, max_size=3),
    tables_created=st.lists(_names, max_size=2),
    columns_added=st.lists(_names, max_size=2),
    columns_widened=st.lists(_names, max_size=2),
    partitions_registered=_counts,
    problems=st.lists(_names, max_size=2),
    error=st.none() | _names,
)
_source_hours = st.builds(
    SourceHourEntry,
    hour=st.sampled_from(["2026-11-20T10", "2026-11-20T11"]),
    figures=st.none() | st.builds(SourceHour, *[_counts] * 7),
    catalog=_catalogs,
)


@settings(max_examples=60, deadline=None)
@given(tables=st.lists(_table_hours, max_size=4), hours=st.lists(_source_hours, max_size=3))
def test_typed_hour_entries_survive_the_file(tables, hours):
    """Whatever a sync puts in its hours' entries is what a reader of the file gets."""
    rows = [
        {"type": "event", "table_name": "t", "by_hour": [e.to_dict() for e in tables]},
        {"type": "source", "by_hour": [e.to_dict() for e in hours]},
    ]
    report = SyncReport.parse(b"".join(json.dumps(r).encode() + b"\n" for r in rows))
    assert report.tables["t"].by_hour == tables
    assert report.source.by_hour == hours
    assert SyncReport.parse(report.to_json_lines()).rows() == report.rows()
