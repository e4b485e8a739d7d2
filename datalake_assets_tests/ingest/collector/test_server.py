"""The collector's HTTP service: auth, errors, partial batches, endpoints, graceful stop."""

from __future__ import annotations

import base64
import dataclasses
import gzip
import http.client
import json

import pytest

from datalake_assets.ingest.collector import Collector
from datalake_assets.settings import SourceSettings
from datalake_assets_tests.ingest.collector.helpers import (
    KEY,
    WEB_KEY,
    archive_lines,
    lake_settings,
    post,
    track,
)
from datalake_assets_tests.support.settings_files import write_lake_toml


def test_unknown_or_missing_write_key_is_401(collector):
    status, reply, headers = post(collector.url, "/v1/track", track("a"), key="wrong")
    assert status == 401 and reply == {
        "success": False,
        "code": "unauthorized",
        "message": "unknown write key",
    }
    assert headers["WWW-Authenticate"].startswith("Basic")
    status, reply, _ = post(collector.url, "/v1/batch", {"batch": [track("a")]}, key=None)
    assert status == 401 and "missing write key" in reply["message"]
    status, reply, _ = post(collector.url, "/v1/batch", {"batch": [], "writeKey": "nope"}, key=None)
    assert status == 401 and reply["code"] == "unauthorized"
    assert collector.stats()["unauthorized"] == 3 and collector.stats()["accepted"] == 0


def test_invalid_and_oversize_requests_get_400_with_json(collector):
    status, reply, _ = post(collector.url, "/v1/batch", None, raw=b'{"batch": [')
    assert status == 400 and reply["code"] == "invalid_json" and not reply["success"]
    status, reply, _ = post(collector.url, "/v1/track", track("big", properties={"x": "y" * 33000}))
    assert status == 400 and reply["code"] == "oversize" and "32768" in reply["message"]
    big = {"batch": [track(f"m{i}", properties={"x": "y" * 20000}) for i in range(30)]}
    status, reply, headers = post(collector.url, "/v1/batch", big)
    assert status == 400 and reply["code"] == "batch_too_large"
    assert headers.get("Connection") != "close"  # drained: the connection stays usable
    huge = http.client.HTTPConnection(collector.url.split("://")[1], timeout=30)
    huge.putrequest("POST", "/v1/batch")  # announces 100 MB, sends none of it
    huge.putheader("Authorization", "Basic " + base64.b64encode(f"{KEY}:".encode()).decode())
    huge.putheader("Content-Length", str(100_000_000))
    huge.endheaders()
    resp = huge.getresponse()
    assert resp.status == 400 and json.loads(resp.read())["code"] == "batch_too_large"
    assert resp.getheader("Connection") == "close"
    huge.close()
    status, reply, _ = post(collector.url, "/v1/nothing", {})
    assert status == 404 and reply["code"] == "not_found"
    assert collector.stats()["accepted"] == 0


def test_partial_batches_keep_the_good_messages(tmp_path, collector):
    status, reply, _ = post(
        collector.url,
        "/v1/batch",
        {
            "batch": [
                track("good-1"),
                {"type": "track", "userId": "u"},
                track("good-2"),
                track("big", properties={"x": "y" * 40000}),
            ],
            "context": {"ip": "1.2.3.4"},
        },
    )
    assert status == 200 and reply["success"] and reply["accepted"] == 2
    assert [(r["index"], r["code"]) for r in reply["rejected"]] == [
        (1, "missing_event"),
        (3, "oversize"),
    ]
    collector.stop()
    msgs = archive_lines(tmp_path / "archive")
    assert [(m["messageId"], m["context"]["ip"]) for m in msgs] == [
        ("good-1", "1.2.3.4"),
        ("good-2", "1.2.3.4"),
    ]


def test_every_endpoint_keep_alive_gzip_and_sources(tmp_path, collector):
    host_port = collector.url.split("://")[1]
    conn = http.client.HTTPConnection(host_port, timeout=30)
    calls = {
        "track": {"userId": "u1", "event": "Signed Up"},
        "identify": {"userId": "u1", "traits": {"email": "a@b.c"}},
        "page": {"anonymousId": "a1", "name": "Home"},
        "screen": {"userId": "u1", "name": "Main"},
        "group": {"userId": "u1", "groupId": "g1"},
        "alias": {"userId": "u1", "previousId": "a1"},
    }
    for t, body in calls.items():  # one keep-alive connection for all of them
        status, reply, _ = post(
            collector.url, f"/v1/{t}", {**body, "messageId": f"m-{t}"}, conn=conn
        )
        assert (status, reply) == (200, {"success": True}), t
    raw = gzip.compress(json.dumps({"batch": [track("gz-1"), track("gz-2")]}).encode())
    status, _, _ = post(
        collector.url, "/v1/batch", None, raw=raw, headers={"Content-Encoding": "gzip"}, conn=conn
    )
    assert status == 200
    status, _, _ = post(
        collector.url, "/v1/batch", {"writeKey": WEB_KEY, "batch": [track("web-1")]}, key=None
    )
    assert status == 200
    conn.close()
    stats = collector.stats()
    assert stats["accepted"] == 9 and stats["fsync_rounds"] >= 1
    assert collector.stop() is True
    by_source = {
        src: {m["messageId"]: m["type"] for m in archive_lines(tmp_path / "archive" / src)}
        for src in ("src1", "web")
    }
    assert by_source["src1"] == {**{f"m-{t}": t for t in calls}, "gz-1": "track", "gz-2": "track"}
    assert by_source["web"] == {"web-1": "track"}
    assert not list((tmp_path / "spool").rglob("*.wal"))


def test_graceful_stop_closes_idle_connections_and_refuses_late_requests(tmp_path):
    c = Collector(lake_settings(tmp_path)).start()
    conn = http.client.HTTPConnection(c.url.split("://")[1], timeout=30)
    assert post(c.url, "/v1/track", track("before"), conn=conn)[0] == 200
    url = c.url
    assert c.stop() is True  # returns although the keep-alive connection is still open
    with pytest.raises((ConnectionError, http.client.HTTPException, OSError)):
        post(url, "/v1/track", track("after"), conn=conn)
    assert [m["messageId"] for m in archive_lines(tmp_path / "archive")] == ["before"]


def test_collector_refuses_to_start_without_write_keys(tmp_path, monkeypatch, capsys):
    from datalake_assets import cli

    s = dataclasses.replace(lake_settings(tmp_path), sources=(SourceSettings("src1"),))
    with pytest.raises(RuntimeError, match="no write keys"):
        Collector(s).start()
    monkeypatch.delenv("DATALAKE_WRITE_KEYS", raising=False)
    path = write_lake_toml(tmp_path, '[collector]\nport = 0\n[[sources]]\nid = "src1"\n')
    assert cli.main(["--settings", str(path), "collect"]) == 2
    assert "no write keys configured" in capsys.readouterr().err
    assert not (tmp_path / "spool" / ".lock").exists()  # refused before touching the spool


def test_a_keep_alive_connection_is_checked_on_every_key_it_sends(collector):
    conn = http.client.HTTPConnection(collector.url.split("://")[1], timeout=30)
    for key, want in (
        (KEY, 200),
        (KEY, 200),
        ("wrong", 401),
        (WEB_KEY, 200),
        (KEY, 200),
        ("", 401),
    ):
        assert post(collector.url, "/v1/t", track(), key=key, conn=conn)[0] == want, key
    conn.close()
