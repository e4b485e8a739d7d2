"""The official Segment Python client, pointed at the collector, through the sync into the lake
tables."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

import pytest

from datalake_assets.ingest.collector import Collector
from datalake_assets_tests.ingest.collector.helpers import KEY, archive_lines, lake_settings


@pytest.mark.spark
def test_official_python_client_through_the_sync_into_the_lake(tmp_path, spark):
    import duckdb
    import segment.analytics as analytics  # a test dependency: never skipped

    from datalake_assets.transform.job import SyncRequest, run_sync

    settings = lake_settings(tmp_path)
    c = Collector(settings).start()
    errors: list[object] = []
    sent: dict[str, str] = {}  # messageId -> type
    analytics.write_key = KEY
    analytics.host = c.url
    analytics.on_error = lambda e, batch: errors.append(e)
    analytics.gzip = True
    analytics.max_retries = 1
    try:
        for u in range(12):
            user, anon = f"user-{u}", f"anon-{u}"
            calls = [
                analytics.identify(user, {"email": f"{user}@example.com", "plan": "pro"}),
                analytics.track(user, "Order Completed", {"revenue": 10.5 + u, "items": [u]}),
                analytics.track(
                    user, "Signed In", {"method": "email"}, context={"ip": "203.0.113.7"}
                ),
                analytics.page(user, "Docs", "Home", {"path": "/home"}),
                analytics.screen(user, "App", "Main", {"variant": "b"}),
                analytics.group(user, f"group-{u % 3}", {"name": "ACME"}),
                analytics.alias(anon, user),
                analytics.track(
                    None,
                    "Video Played",
                    {"seconds": u},
                    anonymous_id=anon,
                    timestamp=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
                ),
            ]
            for ok, msg in calls:
                assert ok
                sent[msg["messageId"]] = msg["type"]
        analytics.flush()
    finally:
        analytics.shutdown()
        analytics.default_client = None
    assert not errors
    assert c.stats()["accepted"] == len(sent) == 96
    assert c.stop() is True

    archived = archive_lines(tmp_path / "archive" / "src1")
    assert sorted(m["messageId"] for m in archived) == sorted(sent)
    assert all(m["context"]["library"]["name"] == "analytics-python" for m in archived)
    assert all(m["receivedAt"].endswith("Z") and "sentAt" in m for m in archived)
    hours = sorted({f"{m['receivedAt'][:10]}T{m['receivedAt'][11:13]}" for m in archived})

    lake = str(tmp_path / "lake")
    result = run_sync(spark, SyncRequest(lake, str(tmp_path / "archive"), "src1", tuple(hours)))
    src = result.source
    assert (src.lines_in, src.messages_written, src.duplicates, src.lines_quarantined) == (
        96,
        96,
        0,
        0,
    )
    tables = sorted(t for t in result.tables if t != "tracks")
    assert tables == [
        "aliases",
        "groups",
        "identifies",
        "order_completed",
        "pages",
        "screens",
        "signed_in",
        "video_played",
    ]
    union = " union all ".join(
        f"select message_id, '{t}' as t from read_parquet("
        f"'{lake}/data/src1/segment_type={t}/*/*/*.parquet')"
        for t in tables
    )
    rows = duckdb.sql(f"select message_id, t from ({union})").fetchall()
    assert Counter(mid for mid, _ in rows) == Counter(list(sent))  # each exactly once
    per_type = Counter(sent.values())
    assert Counter(t for _, t in rows) == {
        "identifies": per_type["identify"],
        "pages": per_type["page"],
        "screens": per_type["screen"],
        "groups": per_type["group"],
        "aliases": per_type["alias"],
        "order_completed": 12,
        "signed_in": 12,
        "video_played": 12,
    }
    # skew correction on loopback: timestamp and the device's originalTimestamp stay close
    ((ips, skew),) = duckdb.sql(
        f'select list(distinct context_ip), max(abs(epoch("timestamp") - '
        f"epoch(original_timestamp))) from read_parquet("
        f"'{lake}/data/src1/segment_type=signed_in/*/*/*.parquet')"
    ).fetchall()
    assert ips == ["203.0.113.7"] and skew < 60
    # an explicit historical timestamp survives the correction (shifted by the latency only)
    ((day,),) = duckdb.sql(
        f'select distinct cast("timestamp" as date) from read_parquet('
        f"'{lake}/data/src1/segment_type=video_played/*/*/*.parquet')"
    ).fetchall()
    assert str(day) == "2026-01-02"
