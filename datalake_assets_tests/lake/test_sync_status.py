"""``lake/sync_status.py`` (the lake's half of ``datalake status``) against counts read
independently from the lake: DuckDB over the Segment layout's Parquet files, DuckDB's
``iceberg_scan`` over each Iceberg table's current snapshot.

One archive of three hours across a day boundary, synced into a lake of each format on the
driver-local path (no Spark session); the first hour is then synced again, so a re-synced
hour must count once, with its newest report's figures."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from datalake_assets.ingest.demo import generate_archive
from datalake_assets.lake.sync_status import lake_status
from datalake_assets.settings.formats_section import FormatConfig
from datalake_assets.spec.layout import ArchiveHour
from datalake_assets.transform.job import SyncRequest, run_sync
from datalake_assets_tests.support.iceberg_reader import duckdb_with_iceberg, sql_catalog, tables

SRC = "status"
HOURS = ("2026-11-20T22", "2026-11-20T23", "2026-11-21T00")
FORMATS = ("segment", "iceberg")


def no_spark():
    raise AssertionError("the driver-local path started a Spark session")


@pytest.fixture(scope="module")
def lakes(tmp_path_factory) -> dict[str, str]:
    """``{table format: lake root}``, both synced from the same archive."""
    base = tmp_path_factory.mktemp("status")
    archive = str(base / "archive")
    generate_archive(
        archive, SRC, [ArchiveHour.parse(h) for h in HOURS], events_per_hour=200, seed=11
    )
    roots = {}
    for fmt in FORMATS:
        roots[fmt] = str(base / fmt)
        for hours in (HOURS, HOURS[:1]):  # then the first hour again: a newer report of it
            req = SyncRequest(
                roots[fmt],
                archive,
                SRC,
                hours,
                table_format=FormatConfig(format=fmt),
                local_max_bytes=1 << 40,
            )
            run_sync(no_spark, req)
    return roots


def _rows_sql(fmt: str, lake_root: str) -> tuple[str, str]:
    """``(every row's message id and day over every table, the quarantine)`` as SQL."""
    if fmt == "segment":
        parquet = "hive_partitioning = true, hive_types_autocast = false, union_by_name = true"
        return (
            f"SELECT message_id, CAST(day AS VARCHAR) AS day FROM read_parquet("
            f"'{lake_root}/data/{SRC}/*/*/*/*.parquet', {parquet})",
            f"read_parquet('{lake_root}/quarantine/{SRC}/*/*/*.parquet', {parquet})",
        )
    found = tables(sql_catalog(lake_root), SRC)
    quarantine = f"iceberg_scan('{found.pop('quarantine').metadata_location}')"
    rows = " UNION ALL ".join(
        f"SELECT message_id, CAST(day AS VARCHAR) AS day FROM iceberg_scan('{t.metadata_location}')"
        for t in found.values()
    )
    return rows, quarantine


def counted(fmt: str, lake_root: str) -> tuple[dict[str, int], dict[str, int]]:
    """``(messages by day, quarantined lines by hour)`` as a reader of the lake counts them:
    each message once (a track is a row of ``tracks`` and of its event's table)."""
    con = duckdb_with_iceberg()
    rows, quarantine = _rows_sql(fmt, lake_root)
    by_day = con.sql(f"SELECT day, count(DISTINCT message_id) FROM ({rows}) GROUP BY 1")
    lines = con.sql(
        f"SELECT CAST(day AS VARCHAR) || 'T' || CAST(hr AS VARCHAR), count(*) FROM {quarantine} "
        "WHERE level = 'line' GROUP BY 1"
    )
    return dict(by_day.fetchall()), dict(lines.fetchall())


@pytest.mark.slow
@pytest.mark.parametrize("fmt", FORMATS)
def test_the_figures_are_those_a_reader_of_the_lake_counts(lakes, fmt):
    by_day, lines = counted(fmt, lakes[fmt])
    assert set(by_day) == {"2026-11-20", "2026-11-21"} and sum(lines.values()) > 0, (by_day, lines)
    # an hour after the last hour ended: every hour is within the last 24 hours
    status = lake_status(lakes[fmt], SRC, datetime(2026, 11, 21, 2, tzinfo=UTC))
    assert status.last_synced_hour == "2026-11-21T00"
    assert status.lag_seconds == 3600
    assert status.quarantined_lines_24h == sum(lines.values())
    assert list(status.messages_per_day) == [f"2026-11-{d}" for d in range(15, 22)]
    assert {d: n for d, n in status.messages_per_day.items() if n} == by_day
    # a day later only the hours that ended in the 24 hours before count; older days drop out
    later = lake_status(lakes[fmt], SRC, datetime(2026, 11, 21, 23, 30, tzinfo=UTC))
    assert later.quarantined_lines_24h == lines.get("2026-11-21T00", 0) + lines.get(
        "2026-11-20T23", 0
    )
    assert later.lag_seconds == 22 * 3600 + 30 * 60
    week_on = lake_status(lakes[fmt], SRC, datetime(2026, 11, 27, 12, tzinfo=UTC))
    assert week_on.messages_per_day.get("2026-11-21") == by_day["2026-11-21"]
    assert "2026-11-20" not in week_on.messages_per_day
    assert week_on.quarantined_lines_24h == 0


def test_a_lake_without_syncs_has_no_last_hour(tmp_path):
    status = lake_status(str(tmp_path), SRC, datetime(2026, 11, 21, 2, tzinfo=UTC))
    assert status.last_synced_hour is None and status.lag_seconds is None
    assert status.quarantined_lines_24h == 0 and sum(status.messages_per_day.values()) == 0
