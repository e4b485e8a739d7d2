"""The official JavaScript libraries, offline on loopback, through the collector and the sync
into the lake: ``@segment/analytics-node`` (``/v1/batch``, Basic auth) and
``@segment/analytics-next`` in headless Chromium (settings from the collector, the short paths
``/v1/t``... with CORS preflights from the page's origin, a batch sent with ``keepalive`` as
the page is left, and the classic snippet's way: ``analytics._cdn`` and ``standalone.js``). Each message is in the lake exactly once, in its table, with its context
(library, page, user agent) flattened."""

from __future__ import annotations

import json
import subprocess
import time
from collections import Counter

import pytest

from datalake_assets.ingest.collector import Collector
from datalake_assets.settings import LakeSettings, SourceSettings
from datalake_assets.settings.ingest_section import CollectorSettings
from datalake_assets_tests.ingest.collector.helpers import KEY, WEB_KEY, archive_lines
from datalake_assets_tests.ingest.collector.js_clients import (
    CHROMIUM,
    JS,
    page_server,
    require_browser,
    require_node_libraries,
)

TYPE_TABLES = {
    "identify": "identifies",
    "page": "pages",
    "screen": "screens",
    "group": "groups",
    "alias": "aliases",
}


def _sync_and_read(spark, tmp_path, source: str) -> list[dict]:
    """Runs the sync over the source's archived hours; every row of the lake's tables but
    ``tracks``, with its table (``segment_type``)."""
    import duckdb

    from datalake_assets.transform.job import SyncRequest, run_sync

    archived = archive_lines(tmp_path / "archive" / source)
    hours = sorted({f"{m['receivedAt'][:10]}T{m['receivedAt'][11:13]}" for m in archived})
    lake = str(tmp_path / "lake")
    result = run_sync(spark, SyncRequest(lake, str(tmp_path / "archive"), source, tuple(hours)))
    assert result.source.lines_quarantined == 0
    rel = duckdb.sql(
        f"select * from read_parquet('{lake}/data/{source}/*/*/*/*.parquet', "
        "hive_partitioning=true, union_by_name=true)"
    )
    rows = [dict(zip(rel.columns, row)) for row in rel.fetchall()]
    # the tracks table holds every track call again (Segment's schema): checked here, then left
    tracks = Counter(r["message_id"] for r in rows if r["segment_type"] == "tracks")
    assert tracks == Counter(
        r["message_id"] for r in rows if r["segment_type"] not in (*TYPE_TABLES.values(), "tracks")
    )
    return [r for r in rows if r["segment_type"] != "tracks"]


def _table(m_type: str, event: str | None) -> str:
    return TYPE_TABLES.get(m_type) or event.lower().replace(" ", "_")


@pytest.mark.spark
def test_analytics_node_through_the_collector_into_the_lake(tmp_path, spark):
    require_node_libraries()
    c = Collector(
        LakeSettings(
            str(tmp_path / "archive"),
            str(tmp_path / "lake"),
            (SourceSettings("src1", write_keys=(KEY,)),),
            collector=CollectorSettings(port=0, spool_dir=str(tmp_path / "spool")),
        )
    ).start()
    try:
        done = subprocess.run(
            ["node", str(JS / "send_node.cjs"), c.url, KEY, "5"],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=JS,
        )
    finally:
        assert c.stop() is True
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["errors"] == [] and len(out["sent"]) == 35
    rows = _sync_and_read(spark, tmp_path, "src1")
    assert Counter(r["message_id"] for r in rows) == Counter(list(out["sent"]))  # once each
    by_id = {r["message_id"]: r for r in rows}
    for mid, m_type in out["sent"].items():
        r = by_id[mid]
        assert r["segment_type"] == _table(m_type, r.get("event")), r
        assert r["context_library_name"] == "@segment/analytics-node"
        assert r["context_library_version"] == "3.1.0"
    assert Counter(r["segment_type"] for r in rows) == {
        "identifies": 5,
        "order_completed": 5,
        "signed_in": 5,
        "pages": 5,
        "screens": 5,
        "groups": 5,
        "aliases": 5,
    }
    assert {r["context_ip"] for r in rows if r["segment_type"] == "signed_in"} == {"203.0.113.9"}


@pytest.mark.slow
@pytest.mark.spark
def test_analytics_next_in_chromium_through_the_collector_into_the_lake(tmp_path, spark):
    require_browser()
    from playwright.sync_api import sync_playwright

    with page_server() as page_port:
        page_origin = f"http://localhost:{page_port}"  # the collector is at 127.0.0.1
        c = Collector(
            LakeSettings(
                str(tmp_path / "archive"),
                str(tmp_path / "lake"),
                (SourceSettings("web", write_keys=(WEB_KEY,), cors_origins=(page_origin,)),),
                collector=CollectorSettings(port=0, spool_dir=str(tmp_path / "spool")),
            )
        ).start()
        page_url = f"{page_origin}/page.html?writeKey={WEB_KEY}&collector={c.url}"
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
                try:
                    page = browser.new_page()
                    page.goto(page_url)
                    user_agent = page.evaluate("navigator.userAgent")
                    assert page.evaluate("window.sendAll('a')") == 6
                    assert page.evaluate("window.sendAll('b')") == 6
                    sent = page.evaluate("window.sent")
                    assert page.evaluate("window.errors") == []
                    # batching mode: calls queued, then the page is left: the batch goes to
                    # /v1/b with keepalive on pagehide
                    page.goto(page_url + "&batching=1")
                    page.evaluate("window.queueAll('unload')")
                    page.wait_for_timeout(300)
                    page.goto("about:blank")
                    deadline = time.monotonic() + 20
                    while c.stats()["accepted"] < 15 and time.monotonic() < deadline:
                        time.sleep(0.05)
                    # the classic snippet: a queue, _writeKey and _cdn, then standalone.js
                    page.goto(f"{page_origin}/classic.html?writeKey={WEB_KEY}&collector={c.url}")
                    deadline = time.monotonic() + 20
                    while c.stats()["accepted"] < 17 and time.monotonic() < deadline:
                        time.sleep(0.05)
                    # a page of another origin: the browser blocks what the collector refuses
                    page.goto(
                        f"http://127.0.0.1:{page_port}/page.html?writeKey={WEB_KEY}"
                        f"&collector={c.url}"
                    )
                    blocked = page.evaluate(
                        "(url) => fetch(url).then(() => 'read', (e) => 'blocked: ' + e)",
                        f"{c.url}/v1/projects/{WEB_KEY}/settings",
                    )
                finally:
                    browser.close()
            stats = c.stats()
        finally:
            assert c.stop() is True
    assert blocked.startswith("blocked")
    assert stats["accepted"] == 17 and stats["preflights"] >= 1 and stats["refused_origins"] >= 1
    assert len(sent) == 12 and sorted(Counter(sent.values()).values()) == [2] * 6

    rows = _sync_and_read(spark, tmp_path, "web")
    ids = Counter(r["message_id"] for r in rows)
    assert max(ids.values()) == 1 and len(ids) == 17 and set(sent) <= set(ids)
    by_id = {r["message_id"]: r for r in rows}
    for mid, m_type in sent.items():
        assert by_id[mid]["segment_type"] == _table(m_type, by_id[mid].get("event"))
    later = [r for r in rows if r["message_id"] not in sent]
    assert sorted(r["segment_type"] for r in later) == [
        "classic_snippet_loaded",
        "identifies",
        "pages",
        "pages",
        "video_played",
    ]
    for r in rows:
        assert r["context_library_name"] == "analytics.js"
        assert r["context_library_version"] == "next-1.84.3", r  # the UMD bundle
        assert r["context_user_agent"] == user_agent
        assert r["context_page_url"].startswith(f"{page_origin}/")
