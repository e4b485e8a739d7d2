"""``/metrics`` scraped and parsed as Prometheus does, ``/ready`` against an unwritable spool
and during a drain, ``/health`` staying up meanwhile."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from datalake_assets.ingest.collector import Collector
from datalake_assets.ingest.collector.metrics import endpoint_label
from datalake_assets_tests.ingest.collector.helpers import (
    archive_lines,
    lake_settings,
    post,
    request,
    scrape,
    track,
    value,
)


@pytest.mark.parametrize(
    "path, label",
    [
        ("/v1/track", "track"),
        ("/v1/t/", "track"),
        ("/v1/identify", "identify"),
        ("/v1/p", "page"),
        ("/v1/batch", "batch"),
        ("/v1/b", "batch"),
        ("/v1/import", "import"),
        ("/v1/nope", "other"),
        ("/wp-login.php", "other"),
    ],
)
def test_endpoint_labels_are_segments_names_and_bounded(path, label):
    assert endpoint_label(path) == label


def test_metrics_count_what_was_accepted_and_rejected(collector):
    url = collector.url
    sent = [
        ("/v1/track", track("t1")),
        ("/v1/t", track("t2")),
        ("/v1/identify", {"type": "identify", "userId": "u1", "messageId": "i1"}),
        ("/v1/page", {"type": "page", "userId": "u1", "name": "Home", "messageId": "p1"}),
        ("/v1/batch", {"batch": [track(f"b{i}") for i in range(4)] + [{"type": "track"}] * 2}),
        ("/v1/import", {"batch": [track("imp1"), track("imp2")]}),
        ("/v1/batch", {"batch": [{"type": "track", "event": "x"}] * 3}),  # all rejected: 400
    ]
    statuses = [post(url, path, body)[0] for path, body in sent]
    assert statuses == [200] * 6 + [400]
    assert post(url, "/v1/track", track("nokey"), key="wrong-key")[0] == 401
    assert post(url, "/v1/batch", None, raw=b"{not json")[0] == 400
    assert post(url, "/v1/nope", track("x"))[0] == 404

    m = scrape(url)
    accepted = {
        e: value(m, "events_accepted_total", endpoint=e)
        for e in ("track", "identify", "page", "batch", "import")
    }
    assert accepted == {"track": 2, "identify": 1, "page": 1, "batch": 4, "import": 2}
    assert sum(accepted.values()) == collector.stats()["accepted"] == 10
    assert value(m, "events_rejected_total", endpoint="batch", reason="missing_user_id") == 5
    assert value(m, "requests_rejected_total", reason="unauthorized") == 1
    assert value(m, "requests_rejected_total", reason="invalid_json") == 1
    assert value(m, "requests_rejected_total", reason="not_found") == 1
    assert value(m, "requests_total", endpoint="track", status="200") == 2
    assert value(m, "requests_total", endpoint="track", status="401") == 1
    assert value(m, "requests_total", endpoint="batch", status="200") == 1
    assert value(m, "requests_total", endpoint="batch", status="400") == 2
    assert value(m, "requests_total", endpoint="other", status="404") == 1
    assert value(m, "requests_in_progress") == 0
    # the spool as it is on disk: one open segment (one source, one hour) holding the 10 lines
    wal = list(Path(collector.spool.spool_dir).rglob("*.wal"))
    assert value(m, "spool_segments") == len(wal) == 1
    assert value(m, "spool_bytes") == sum(p.stat().st_size for p in wal) > 0
    assert value(m, "spool_oldest_segment_age_seconds") >= 0
    assert value(m, "segments_rolled_total") == 0
    assert value(m, "archive_upload_failures_total") == 0


def test_two_collectors_in_one_process_count_apart(tmp_path):
    a = Collector(lake_settings(tmp_path / "a")).start()
    b = Collector(lake_settings(tmp_path / "b")).start()
    try:
        assert post(a.url, "/v1/track", track("only-a"))[0] == 200
        assert value(scrape(a.url), "events_accepted_total", endpoint="track") == 1
        assert value(scrape(b.url), "events_accepted_total", endpoint="track") == 0
    finally:
        a.stop()
        b.stop()


def test_an_unreachable_archive_shows_as_upload_failures_and_a_kept_spool(tmp_path):
    (tmp_path / "archive").write_text("a file where the archive's folder should be")
    c = Collector(lake_settings(tmp_path, segment_max_age_seconds=1)).start()
    try:
        assert post(c.url, "/v1/track", track("stuck"))[0] == 200
        deadline = time.monotonic() + 30
        while value(m := scrape(c.url), "archive_upload_failures_total") < 1:
            assert time.monotonic() < deadline, "the failed roll was never counted"
            time.sleep(0.05)
        assert value(m, "spool_segments") == 1
        assert value(m, "spool_bytes") > 0
        assert value(m, "segments_rolled_total") == 0
    finally:
        assert c.stop(timeout=1) is False  # the segment stays in the spool for the next start
    assert len(list((tmp_path / "spool").rglob("*.wal"))) == 1


@contextlib.contextmanager
def unwritable(folder: Path) -> Iterator[None]:
    """``folder`` refuses new files, as a read-only volume would: immutable for root (whom
    file modes do not stop), mode 0555 for anyone else."""
    if os.geteuid() == 0:
        subprocess.run(["chattr", "+i", str(folder)], check=True)
        try:
            yield
        finally:
            subprocess.run(["chattr", "-i", str(folder)], check=True)
    else:
        mode = folder.stat().st_mode
        folder.chmod(0o555)
        try:
            yield
        finally:
            folder.chmod(mode)


def test_ready_fails_with_its_reason_while_the_spool_cannot_be_written(collector):
    url = collector.url
    assert request(url, "GET", "/ready")[:2] == (200, b'{"ready":true}')
    with unwritable(Path(collector.spool.spool_dir)):
        status, body, headers = request(url, "GET", "/ready")
        assert status == 503
        reply = json.loads(body)
        assert reply["ready"] is False
        assert "cannot be written" in reply["reason"]
        assert headers["Retry-After"]
        assert request(url, "GET", "/health")[0] == 200  # alive: no restart would help
    assert request(url, "GET", "/ready")[0] == 200  # writable again: back in rotation
    assert not [p for p in Path(collector.spool.spool_dir).iterdir() if "probe" in p.name]


def test_ready_fails_first_while_draining_then_requests_still_finish(tmp_path):
    """``stop(drain_seconds=...)``: ``/ready`` answers 503 at once, requests are still
    accepted during the drain (each reply closes its connection), then everything accepted is
    in the archive."""
    c = Collector(lake_settings(tmp_path)).start()
    url = c.url
    assert post(url, "/v1/track", track("before"))[0] == 200
    result: list[bool] = []
    stopper = threading.Thread(target=lambda: result.append(c.stop(drain_seconds=3)))
    stopper.start()
    deadline = time.monotonic() + 30
    while (ready := request(url, "GET", "/ready"))[0] != 503:
        assert time.monotonic() < deadline, "/ready never failed"
        time.sleep(0.01)
    assert json.loads(ready[1])["reason"].startswith("draining")
    status, _, headers = post(url, "/v1/track", track("during"))
    assert status == 200
    assert headers["Connection"] == "close"
    stopper.join(60)
    assert result == [True]
    assert sorted(m["messageId"] for m in archive_lines(tmp_path / "archive")) == [
        "before",
        "during",
    ]
