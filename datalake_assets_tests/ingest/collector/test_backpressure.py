"""Back-pressure as the libraries expect it: overload is 429 with Retry-After, a spool fault 503,
a bug 500; a client that retries (as every official library does) gets every message into the
lake exactly once, even when a reply is lost after the messages were made durable."""

from __future__ import annotations

import http.client
import itertools
import json
import threading
import time
from collections import Counter

import pytest

from datalake_assets.ingest.collector import Collector, http_handler
from datalake_assets.ingest.collector.spool import SpoolError
from datalake_assets_tests.ingest.collector.helpers import KEY, archive_lines, basic, lake_settings

CLIENTS, BATCHES, PER_BATCH = 8, 15, 20


def _client(url: str, n: int, statuses: Counter, lock: threading.Lock) -> None:
    """A library's retry loop: retry 429/5xx after Retry-After (shortened here) and broken
    connections, with X-Retry-Count; stop on 200."""
    host = url.split("://")[1]
    conn = http.client.HTTPConnection(host, timeout=30)
    for b in range(BATCHES):
        body = json.dumps(
            {
                "batch": [
                    {
                        "type": "track",
                        "userId": f"u{n}",
                        "event": "Order Completed",
                        "messageId": f"c{n}-b{b}-m{i}",
                        "properties": {"i": i},
                    }
                    for i in range(PER_BATCH)
                ]
            }
        ).encode()
        for attempt in itertools.count():
            headers = {"Authorization": basic(KEY), "Content-Type": "application/json"}
            if attempt:
                headers["X-Retry-Count"] = str(attempt)
            try:
                conn.request("POST", "/v1/batch", body=body, headers=headers)
                resp = conn.getresponse()
                reply = json.loads(resp.read())
            except (OSError, http.client.HTTPException):
                with lock:
                    statuses["connection lost"] += 1
                conn.close()
                conn = http.client.HTTPConnection(host, timeout=30)
                continue
            with lock:
                statuses[resp.status] += 1
            if resp.status == 200:
                break
            assert resp.status in (429, 500, 503), reply
            assert reply["code"] and reply["message"]
            if resp.status in (429, 503):
                assert int(resp.getheader("Retry-After")) >= 1
            if resp.will_close:
                conn.close()
                conn = http.client.HTTPConnection(host, timeout=30)
            time.sleep(0.005)  # a real client waits Retry-After seconds
    conn.close()


@pytest.mark.slow
@pytest.mark.spark
def test_retrying_clients_get_every_message_in_exactly_once(tmp_path, spark, monkeypatch):
    import duckdb

    from datalake_assets.transform.job import SyncRequest, run_sync

    c = Collector(lake_settings(tmp_path, max_pending_requests=2)).start()
    calls = itertools.count()
    real_append = c.spool.append

    def flaky_append(source_id, hour, payload):
        k = next(calls)
        time.sleep(0.003)  # a slow disk: requests pile up, the third in progress gets 429
        if k % 9 == 4:
            raise SpoolError("injected: disk full")  # nothing written: 503
        return real_append(source_id, hour, payload)

    monkeypatch.setattr(c.spool, "append", flaky_append)
    real_reply = http_handler._Handler._reply
    replies = itertools.count()
    lost_replies = []  # one entry per 200 reply dropped after its messages were spooled

    def lossy_reply(self, status, body, close=False, headers=()):
        if status == 200 and next(replies) % 11 == 5:
            lost_replies.append(status)
            raise ConnectionResetError("injected: the reply is lost after the fsync")
        return real_reply(self, status, body, close, headers)

    monkeypatch.setattr(http_handler._Handler, "_reply", lossy_reply)
    statuses: Counter = Counter()
    lock = threading.Lock()
    threads = [
        threading.Thread(target=_client, args=(c.url, n, statuses, lock)) for n in range(CLIENTS)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads)
    assert c.stop() is True
    total = CLIENTS * BATCHES * PER_BATCH
    assert statuses[200] == CLIENTS * BATCHES
    assert statuses[429] > 0 and statuses[503] > 0 and lost_replies, statuses
    assert statuses["connection lost"] >= len(lost_replies)
    assert c.stats()["busy"] == statuses[429]

    archived = Counter(m["messageId"] for m in archive_lines(tmp_path / "archive" / "src1"))
    assert len(archived) == total  # every message at least once ...
    # ... and again only after a lost reply: a batch's retry may itself lose its reply, so a
    # message can be archived three times; the copies beyond the first are exactly the lost
    # replies' batches
    extra = sum(n - 1 for n in archived.values())
    assert extra == len(lost_replies) * PER_BATCH

    hours = sorted(
        {
            f"{m['receivedAt'][:10]}T{m['receivedAt'][11:13]}"
            for m in archive_lines(tmp_path / "archive" / "src1")
        }
    )
    lake = str(tmp_path / "lake")
    result = run_sync(spark, SyncRequest(lake, str(tmp_path / "archive"), "src1", tuple(hours)))
    assert (result.source.messages_written, result.source.duplicates) == (total, extra)
    rows = duckdb.sql(
        f"select message_id from read_parquet("
        f"'{lake}/data/src1/segment_type=order_completed/*/*/*.parquet')"
    ).fetchall()
    assert Counter(r for (r,) in rows) == Counter(dict.fromkeys(archived, 1))


def test_a_fault_is_a_500_the_libraries_retry(tmp_path, monkeypatch):
    c = Collector(lake_settings(tmp_path)).start()
    try:
        monkeypatch.setattr(c.spool, "append", lambda *a: 1 / 0)
        conn = http.client.HTTPConnection(c.url.split("://")[1], timeout=30)
        conn.request(
            "POST",
            "/v1/t",
            body=b'{"userId":"u","event":"E"}',
            headers={"Authorization": basic(KEY)},
        )
        resp = conn.getresponse()
        assert resp.status == 500 and json.loads(resp.read())["code"] == "internal_error"
        conn.close()
    finally:
        monkeypatch.undo()
        c.stop()
