"""Helpers of the collector tests: settings, requests, messages, the archive's lines, the
metrics."""

from __future__ import annotations

import base64
import gzip
import http.client
import json
from pathlib import Path

import orjson
from prometheus_client.parser import text_string_to_metric_families

from datalake_assets.settings import LakeSettings, SourceSettings
from datalake_assets.settings.ingest_section import CollectorSettings
from datalake_assets.spec.layout import ArchiveHour, is_archive_file

REPO = Path(__file__).resolve().parents[3]
KEY, WEB_KEY = "key-src1", "key-web"
H10 = ArchiveHour.parse("2026-11-21T10")


def lake_settings(tmp_path: Path, **collector: object) -> LakeSettings:
    return LakeSettings(
        str(tmp_path / "archive"),
        str(tmp_path / "lake"),
        (SourceSettings("src1", write_keys=(KEY,)), SourceSettings("web", write_keys=(WEB_KEY,))),
        collector=CollectorSettings(
            **{"port": 0, "spool_dir": str(tmp_path / "spool"), **collector}
        ),
    )


def archive_lines(archive_root: str | Path) -> list[dict]:
    """Every message in the archive's visible files (what the sync reads)."""
    out = []
    for path in sorted(Path(archive_root).rglob("*")):
        if path.is_file() and is_archive_file(path.name):
            out += [orjson.loads(line) for line in gzip.decompress(path.read_bytes()).splitlines()]
    return out


def post(
    url: str,
    path: str,
    body: object,
    key: str | None = KEY,
    raw: bytes | None = None,
    headers: dict[str, str] | None = None,
    conn: http.client.HTTPConnection | None = None,
):
    """``(status, reply JSON, response headers)``."""
    host_port = url.split("://", 1)[1]
    own = conn is None
    conn = conn or http.client.HTTPConnection(host_port, timeout=30)
    data = raw if raw is not None else json.dumps(body).encode()
    h = {"Content-Type": "application/json", **(headers or {})}
    if key is not None:
        h["Authorization"] = "Basic " + base64.b64encode(f"{key}:".encode()).decode()
    try:
        conn.request("POST", path, body=data, headers=h)
        resp = conn.getresponse()
        payload = resp.read()
        return resp.status, json.loads(payload), dict(resp.getheaders())
    finally:
        if own:
            conn.close()


def track(mid: str | None = None, **kw) -> dict:
    m = {"type": "track", "event": "Order Completed", "userId": "u1", "properties": {"revenue": 10}}
    if mid is not None:
        m["messageId"] = mid
    m.update(kw)
    return m


def request(
    url: str,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
):
    """``(status, reply bytes, response headers)`` of any request."""
    conn = http.client.HTTPConnection(url.split("://", 1)[1], timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.read(), dict(resp.getheaders())
    finally:
        conn.close()


def basic(key: str) -> str:
    return "Basic " + base64.b64encode(f"{key}:".encode()).decode()


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """``/metrics`` parsed by prometheus-client's parser: ``(sample name, sorted labels) ->
    value``."""
    status, body, headers = request(url, "GET", "/metrics")
    assert status == 200
    assert headers["Content-Type"].startswith("text/plain")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
    }


def value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((f"datalake_collector_{name}", tuple(sorted(labels.items()))), 0.0)
