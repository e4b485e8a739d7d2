"""Browsers: CORS (preflight and requests, admitted and refused origins) and the settings
endpoint analytics.js loads (known and unknown write keys)."""

from __future__ import annotations

import json

import pytest

from datalake_assets.ingest.collector import Collector
from datalake_assets.ingest.collector.cors import KeyTable, origin_matches
from datalake_assets.ingest.collector.settings_endpoint import UNKNOWN_KEY_MESSAGE
from datalake_assets.settings import LakeSettings, SourceSettings
from datalake_assets.settings.ingest_section import CollectorSettings
from datalake_assets_tests.ingest.collector.helpers import (
    KEY,
    WEB_KEY,
    archive_lines,
    basic,
    request,
)

SHOP = "https://shop.example.com"


@pytest.fixture()
def web(tmp_path):
    """src1 admits any origin (the default); web admits only the shop and its subdomains."""
    settings = LakeSettings(
        str(tmp_path / "archive"),
        str(tmp_path / "lake"),
        (
            SourceSettings("src1", write_keys=(KEY,)),
            SourceSettings(
                "web", write_keys=(WEB_KEY,), cors_origins=(SHOP, "https://*.cdn.example.com:8443")
            ),
        ),
        collector=CollectorSettings(port=0, spool_dir=str(tmp_path / "spool")),
    )
    c = Collector(settings).start()
    yield c
    c.stop()


def _restricted(tmp_path, **collector):
    """Only one source, which admits only the shop."""
    settings = LakeSettings(
        str(tmp_path / "archive"),
        str(tmp_path / "lake"),
        (SourceSettings("web", write_keys=(WEB_KEY,), cors_origins=(SHOP,)),),
        collector=CollectorSettings(port=0, spool_dir=str(tmp_path / "spool"), **collector),
    )
    return Collector(settings).start()


def test_origin_patterns():
    assert origin_matches("*", "null")
    assert origin_matches(SHOP, "https://Shop.Example.com")
    assert not origin_matches(SHOP, "http://shop.example.com")
    assert not origin_matches(SHOP, "https://shop.example.com:444")
    assert origin_matches("https://*.example.com", "https://a.b.example.com")
    assert not origin_matches("https://*.example.com", "https://example.com")
    assert not origin_matches("https://*.example.com", "https://evil-example.com")
    assert not origin_matches("https://*.example.com", "https://x.example.com:8443")
    assert origin_matches("https://*.example.com:8443", "https://x.example.com:8443")
    keys = KeyTable({"k1": "s1"})
    assert keys.source_of("k1") == "s1" and keys.source_of("k2") is None
    assert keys.source_of(None) is None and keys.source_of("") is None


def test_preflight_from_an_admitted_origin(web):
    for path in ("/v1/t", "/v1/b", "/v1/batch", "/v1/projects/x/settings"):
        status, body, h = request(
            web.url,
            "OPTIONS",
            path,
            headers={
                "Origin": "https://anything.test",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization,content-type,x-retry-count",
            },
        )
        assert (status, body) == (204, b""), path
        assert h["Access-Control-Allow-Origin"] == "https://anything.test"
        assert "POST" in h["Access-Control-Allow-Methods"]
        assert h["Access-Control-Allow-Headers"] == "authorization,content-type,x-retry-count"
        assert int(h["Access-Control-Max-Age"]) > 0 and "Origin" in h["Vary"]
    # Chromium's Private Network Access preflight
    _, _, h = request(
        web.url,
        "OPTIONS",
        "/v1/t",
        headers={
            "Origin": SHOP,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Private-Network": "true",
        },
    )
    assert h["Access-Control-Allow-Private-Network"] == "true"
    assert "Authorization" in h["Access-Control-Allow-Headers"]  # nothing requested: the list
    status, _, h = request(web.url, "OPTIONS", "/v1/t")  # no Origin: not a preflight
    assert status == 204 and "Access-Control-Allow-Origin" not in h and "POST" in h["Allow"]
    assert request(web.url, "OPTIONS", "/v1/nothing", headers={"Origin": SHOP})[0] == 404


def test_requests_from_admitted_and_refused_origins(tmp_path, web):
    event = {"userId": "u1", "event": "Signed Up"}
    # analytics.js's request: text/plain, Authorization, writeKey in the body too
    status, body, h = request(
        web.url,
        "POST",
        "/v1/t",
        json.dumps({**event, "writeKey": WEB_KEY, "messageId": "shop"}).encode(),
        {"Origin": SHOP, "Content-Type": "text/plain", "Authorization": basic(WEB_KEY)},
    )
    assert (status, json.loads(body)) == (200, {"success": True})
    assert h["Access-Control-Allow-Origin"] == SHOP and h["Vary"] == "Origin"
    assert "Retry-After" in h["Access-Control-Expose-Headers"]
    status, _, h = request(
        web.url,
        "POST",
        "/v1/t",
        json.dumps({**event, "writeKey": WEB_KEY, "messageId": "sub"}).encode(),
        {"Origin": "https://img.cdn.example.com:8443", "Content-Type": "text/plain"},
    )
    assert status == 200 and h["Access-Control-Allow-Origin"] == "https://img.cdn.example.com:8443"
    # another site's page with web's key: web refuses it, src1 (any origin) takes it
    for key, want in ((WEB_KEY, 403), (KEY, 200)):
        status, body, h = request(
            web.url,
            "POST",
            "/v1/t",
            json.dumps({**event, "writeKey": key, "messageId": f"evil-{key}"}).encode(),
            {"Origin": "https://evil.test", "Content-Type": "text/plain"},
        )
        assert status == want, key
        if want == 403:
            assert json.loads(body)["code"] == "origin_not_allowed"
            assert not any(k.startswith("Access-Control") for k in h)  # the browser blocks it
    # without an Origin (a server, an app): the list does not apply
    status, _, h = request(
        web.url,
        "POST",
        "/v1/track",
        json.dumps({**event, "messageId": "server"}).encode(),
        {"Authorization": basic(WEB_KEY)},
    )
    assert status == 200 and "Access-Control-Allow-Origin" not in h
    assert web.stats()["refused_origins"] == 1
    web.stop()
    got = {m["messageId"]: m for m in archive_lines(tmp_path / "archive" / "web")}
    assert sorted(got) == ["server", "shop", "sub"]
    assert not any("writeKey" in m for m in got.values())


def test_origin_admitted_by_no_source(tmp_path):
    c = _restricted(tmp_path)
    try:
        status, body, h = request(
            c.url,
            "OPTIONS",
            "/v1/t",
            headers={"Origin": "https://evil.test", "Access-Control-Request-Method": "POST"},
        )
        assert status == 403 and json.loads(body)["code"] == "origin_not_allowed"
        assert not any(k.startswith("Access-Control") for k in h)
        status, body, h = request(
            c.url,
            "GET",
            f"/v1/projects/{WEB_KEY}/settings",
            headers={"Origin": "https://evil.test"},
        )
        assert status == 403 and "Access-Control-Allow-Origin" not in h
        status, _, h = request(
            c.url,
            "OPTIONS",
            "/v1/t",
            headers={"Origin": SHOP, "Access-Control-Request-Method": "POST"},
        )
        assert status == 204 and h["Access-Control-Allow-Origin"] == SHOP
    finally:
        c.stop()


def test_settings_endpoint_points_analytics_js_at_the_collector(web):
    host = web.url.split("://")[1]
    status, body, h = request(
        web.url, "GET", f"/v1/projects/{WEB_KEY}/settings", headers={"Origin": SHOP, "Host": host}
    )
    assert status == 200 and h["Access-Control-Allow-Origin"] == SHOP
    s = json.loads(body)
    seg = s["integrations"]["Segment.io"]
    assert (seg["apiKey"], seg["apiHost"], seg["protocol"]) == (WEB_KEY, f"{host}/v1", "http")
    assert list(s["integrations"]) == ["Segment.io"] and s["metrics"]["sampleRate"] == 0
    # behind a TLS proxy that says so
    _, body, _ = request(
        web.url,
        "GET",
        f"/v1/projects/{WEB_KEY}/settings",
        headers={"Host": "collect.example.com", "X-Forwarded-Proto": "https"},
    )
    seg = json.loads(body)["integrations"]["Segment.io"]
    assert (seg["apiHost"], seg["protocol"]) == ("collect.example.com/v1", "https")


def test_settings_endpoint_uses_public_url(tmp_path):
    c = _restricted(tmp_path, public_url="https://collect.example.com/seg")
    try:
        _, body, _ = request(c.url, "GET", f"/v1/projects/{WEB_KEY}/settings")
        seg = json.loads(body)["integrations"]["Segment.io"]
        assert (seg["apiHost"], seg["protocol"]) == ("collect.example.com/seg/v1", "https")
    finally:
        c.stop()


def test_unknown_write_keys_all_get_the_same_answer(web):
    answers = set()
    for key in ("nope", WEB_KEY[:-1], WEB_KEY + "x", "x" * 300, "%2F..%2F", KEY.upper()):
        status, body, h = request(
            web.url,
            "GET",
            f"/v1/projects/{key}/settings",
            headers={"Origin": "https://anything.test"},
        )
        answers.add((status, body))
        assert h["Access-Control-Allow-Origin"] == "https://anything.test"  # readable: a 404
    assert answers == {
        (
            404,
            json.dumps(
                {"success": False, "code": "not_found", "message": UNKNOWN_KEY_MESSAGE},
                separators=(",", ":"),
            ).encode(),
        )
    }
    # a known key of a source that refuses the origin: refused like any other request
    status, _, h = request(
        web.url, "GET", f"/v1/projects/{WEB_KEY}/settings", headers={"Origin": "https://evil.test"}
    )
    assert status == 403 and "Access-Control-Allow-Origin" not in h
