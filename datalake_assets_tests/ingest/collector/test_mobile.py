"""The mobile libraries' wire format, as their sources build it (segmentio/analytics-kotlin
``HTTPClient.kt``, ``EventsFileManager.kt``, ``DateTimeUtils.kt``; segmentio/analytics-swift
``HTTPClient.swift``, ``DirectoryStore.swift``), and the tracking API's other paths."""

from __future__ import annotations

import gzip
import http.client
import json
from datetime import UTC, datetime, timedelta

from datalake_assets.spec.types import parse_timestamp
from datalake_assets_tests.ingest.collector.helpers import (
    KEY,
    WEB_KEY,
    archive_lines,
    basic,
    request,
)


def _event(i: int, kind: str, lib: str, version: str, ts: str) -> dict:
    e = {
        "messageId": f"{lib}-{i}",
        "anonymousId": f"anon-{lib}",
        "timestamp": ts,
        "integrations": {},
        "context": {
            "library": {"name": lib, "version": version},
            "app": {"name": "Demo", "version": "3.1", "build": "42"},
            "device": {"manufacturer": "Google", "model": "Pixel 8"},
            "os": {"name": "Android" if "kotlin" in lib else "iOS", "version": "14"},
            "network": {"wifi": True},
            "locale": "en-US",
            "timezone": "Europe/Paris",
        },
    }
    kind_fields = {
        "track": {"event": "Product Viewed", "properties": {"sku": f"s{i}"}},
        "screen": {"name": "Home", "properties": {}},
        "identify": {"userId": "user-1", "traits": {"plan": "pro"}},
        "group": {"userId": "user-1", "groupId": "g1", "traits": {}},
        "alias": {"userId": "user-1", "previousId": f"anon-{lib}"},
    }
    return {**e, "type": kind, **kind_fields[kind]}


KINDS = ("track", "screen", "identify", "group", "alias", "track")


def _kotlin_time(dt: datetime) -> str:
    """``SegmentInstant.now()``: ``yyyy-MM-dd'T'HH:mm:ss.SSS`` + ``Z``."""
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def test_analytics_kotlin_batch_chunked_gzip_with_the_key_in_the_body(tmp_path, collector):
    # the device's clock is an hour behind: sentAt and the events' timestamps with it
    device_now = datetime.now(UTC) - timedelta(hours=1)
    events = [
        _event(
            i, k, "analytics-kotlin", "1.24.1", _kotlin_time(device_now - timedelta(seconds=10 - i))
        )
        for i, k in enumerate(KINDS)
    ]
    # EventsFileManager: {"batch":[<event>,<event>...],"sentAt":"...","writeKey":"..."}
    body = (
        '{"batch":['
        + ",".join(json.dumps(e, separators=(",", ":")) for e in events)
        + f'],"sentAt":"{_kotlin_time(device_now)}","writeKey":"{KEY}"}}'
    ).encode()
    packed = gzip.compress(body)
    conn = http.client.HTTPConnection(collector.url.split("://")[1], timeout=30)
    headers = {
        "User-Agent": "analytics-kotlin/1.24.1",
        "Content-Type": "text/plain",
        "Content-Encoding": "gzip",
        "Transfer-Encoding": "chunked",
    }
    # HttpURLConnection.setChunkedStreamingMode(0): the gzip stream in chunks, no length
    conn.request(
        "POST",
        "/v1/b",
        body=iter([packed[:100], packed[100:]]),
        headers=headers,
        encode_chunked=True,
    )
    resp = conn.getresponse()
    assert (resp.status, json.loads(resp.read())) == (200, {"success": True})
    # a retry of the same file (the reply was lost): X-Retry-Count, same messageIds
    conn.request(
        "POST",
        "/v1/b",
        body=iter([packed]),
        headers={**headers, "X-Retry-Count": "1"},
        encode_chunked=True,
    )
    resp = conn.getresponse()
    assert resp.status == 200 and resp.read()
    conn.close()
    assert collector.stop() is True
    archived = archive_lines(tmp_path / "archive" / "src1")
    # at least once in the archive (the sync's dedup keeps one: test_backpressure)
    assert sorted(m["messageId"] for m in archived) == sorted([e["messageId"] for e in events] * 2)
    for m in archived:
        assert m["context"]["library"] == {"name": "analytics-kotlin", "version": "1.24.1"}
        assert m["sentAt"] == _kotlin_time(device_now) and "writeKey" not in m
        # skew corrected: timestamp is the server's time minus the event's age (<= 10 s)
        age = parse_timestamp(m["receivedAt"]) - parse_timestamp(m["timestamp"])
        assert 0 < age <= 11_000_000, m
        assert m["originalTimestamp"].startswith(device_now.strftime("%Y-%m-%dT%H"))


def test_analytics_swift_batch_uncompressed(tmp_path, collector):
    device_now = datetime.now(UTC)
    sent_at = device_now.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    events = [_event(i, k, "analytics-swift", "1.8.0", sent_at) for i, k in enumerate(KINDS)]
    # DirectoryStore: one event a line, then the closing line with sentAt and writeKey
    body = (
        '{ "batch": [\n'
        + ",\n".join(json.dumps(e) for e in events)
        + f'\n],"sentAt":"{sent_at}","writeKey":"{WEB_KEY}"}}'
    ).encode()
    status, reply, _ = request(
        collector.url,
        "POST",
        "/v1/b",
        body,
        {
            "Content-Type": "application/json; charset=utf-8",
            "User-Agent": "analytics-ios/1.8.0",
            "Accept-Encoding": "gzip",
        },
    )
    assert (status, json.loads(reply)) == (200, {"success": True})
    assert collector.stop() is True
    archived = archive_lines(tmp_path / "archive" / "web")
    assert sorted((m["messageId"], m["type"]) for m in archived) == sorted(
        (e["messageId"], e["type"]) for e in events
    )
    assert {m["context"]["os"]["name"] for m in archived} == {"iOS"}


def test_import_short_paths_and_basic_auth_gzip(tmp_path, collector):
    """``/v1/import`` (the tracking API's historical batches; analytics-android and -ios 1.x
    post there with Basic auth and gzip) and analytics.js's short paths."""
    old = "2026-01-02T03:04:05.000Z"
    body = gzip.compress(
        json.dumps(
            {
                "batch": [
                    {
                        "type": "track",
                        "userId": "u1",
                        "event": "Imported",
                        "messageId": "imp-1",
                        "timestamp": old,
                    }
                ]
            }
        ).encode()
    )
    status, reply, _ = request(
        collector.url,
        "POST",
        "/v1/import",
        body,
        {"Authorization": basic(KEY), "Content-Encoding": "gzip"},
    )
    assert (status, json.loads(reply)) == (200, {"success": True})
    short = {
        "t": {"event": "E"},
        "p": {"name": "P"},
        "i": {"traits": {}},
        "s": {"name": "S"},
        "g": {"groupId": "g"},
        "a": {"previousId": "x"},
    }
    for p, fields in short.items():
        status, _, _ = request(
            collector.url,
            "POST",
            f"/v1/{p}",
            json.dumps(
                {"userId": "u1", "messageId": f"short-{p}", "writeKey": KEY, **fields}
            ).encode(),
            {"Content-Type": "text/plain"},
        )
        assert status == 200, p
    status, reply, _ = request(
        collector.url,
        "POST",
        "/v1/b",
        json.dumps(
            {"batch": [{"type": "track", "userId": "u1", "event": "B", "messageId": "b-1"}]}
        ).encode(),
        {"Authorization": basic(KEY)},
    )
    assert status == 200
    # a 4xx body says what is wrong
    status, reply, _ = request(
        collector.url, "POST", "/v1/t", b'{"userId": "u1"}', {"Authorization": basic(KEY)}
    )
    assert status == 400 and json.loads(reply)["code"] == "missing_event"
    status, reply, _ = request(
        collector.url,
        "POST",
        "/v1/b",
        b"x",
        {"Authorization": basic(KEY), "Transfer-Encoding": "gzip"},
    )
    assert status == 501 and json.loads(reply)["code"] == "unsupported_transfer_encoding"
    assert collector.stop() is True
    got = {m["messageId"]: m for m in archive_lines(tmp_path / "archive" / "src1")}
    assert got["imp-1"]["timestamp"] == old  # no sentAt: the historical time is kept
    assert {got[f"short-{p}"]["type"][0] for p in short} == set(short)
    assert got["short-a"]["type"] == "alias" and got["b-1"]["event"] == "B"
