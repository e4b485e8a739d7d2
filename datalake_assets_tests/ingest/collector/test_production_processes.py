"""``datalake collect`` run as in production, as real processes: SIGTERM drains it (``/ready``
failing while new requests are still accepted for ``drain_seconds``, then no new connection,
the request in flight answered, the spool archived, exit 0), and two replicas behind one
address write one archive, every accepted message exactly once."""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import threading
import time
from collections import Counter
from pathlib import Path

from datalake_assets_tests.ingest.collector.helpers import (
    KEY,
    REPO,
    archive_lines,
    basic,
    post,
    request,
    scrape,
    track,
    value,
)
from datalake_assets_tests.ingest.collector.processes import CollectorProcess
from datalake_assets_tests.ingest.collector.round_robin import RoundRobin
from datalake_assets_tests.support.settings_files import write_lake_toml

SETTINGS = """
archive_root = "archive"
lake_root = "lake"
[collector]
port = 0
spool_dir = "{spool}"
segment_max_bytes = {segment_max_bytes}
segment_max_age_seconds = {segment_max_age}
drain_seconds = {drain_seconds}
[[sources]]
id = "src1"
"""


def start(
    tmp_path: Path, name: str, segment_max_bytes: int, segment_max_age: int, drain_seconds: int = 0
):
    settings_file = write_lake_toml(
        tmp_path,
        SETTINGS.format(
            spool=f"spool-{name}",
            segment_max_bytes=segment_max_bytes,
            segment_max_age=segment_max_age,
            drain_seconds=drain_seconds,
        ),
        name=f"{name}.toml",
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "DATALAKE_WRITE_KEYS": f"{KEY}=src1"}
    return CollectorProcess(settings_file, env)


def stopped_line(output: str) -> tuple[int, int]:
    """``(messages accepted, segments rolled)`` of the collector's last line."""
    m = re.search(r"stopped: (\d+) messages accepted, \d+ rejected, (\d+) segments rolled", output)
    assert m, output
    return int(m.group(1)), int(m.group(2))


def wait_until(condition, what: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def refuses_connections(url: str) -> bool:
    try:
        socket.create_connection(url.split("://", 1)[1].rsplit(":", 1), timeout=5).close()
    except ConnectionRefusedError:
        return True
    except ConnectionResetError:  # it was queued as the port closed: ask again
        return False
    return False


def test_sigterm_drains_the_request_in_flight_and_archives_everything_then_exits_0(tmp_path):
    from segment.analytics.client import Client

    # a segment open for an hour: only the drain can put these messages in the archive
    drain = 2
    collector = start(
        tmp_path, "a", segment_max_bytes=1 << 20, segment_max_age=3600, drain_seconds=drain
    )
    errors: list[object] = []
    client = Client(
        write_key=KEY,
        host=collector.url,
        sync_mode=True,  # each call answered before it returns
        max_retries=0,
        on_error=lambda e, batch: errors.append(e),
    )
    sent: list[str] = []
    in_flight = socket.create_connection(collector.url.split("://", 1)[1].rsplit(":", 1))
    try:
        for u in range(5):
            user = f"user-{u}"
            for ok, msg in (
                client.identify(user, {"plan": "pro"}),
                client.track(user, "Order Completed", {"revenue": 10 + u}),
                client.page(user, "Docs", "Home"),
                client.screen(user, "App", "Main"),
                client.group(user, f"group-{u}"),
                client.alias(f"anon-{u}", user),
            ):
                assert ok
                sent.append(msg["messageId"])
        assert not errors
        assert archive_lines(tmp_path / "archive") == []

        late = [f"in-flight-{i}" for i in range(10)]
        body = json.dumps({"batch": [track(i) for i in late]}).encode()
        head = (
            f"POST /v1/batch HTTP/1.1\r\nHost: collector\r\nAuthorization: {basic(KEY)}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        in_flight.sendall(head + body[:100])  # the rest after SIGTERM
        wait_until(
            lambda: value(scrape(collector.url), "requests_in_progress") == 1,
            "the collector never started on the request in flight",
        )
        collector.proc.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        # out of rotation first: /ready fails while a new client is still served
        wait_until(lambda: request(collector.url, "GET", "/ready")[0] == 503, "/ready never failed")
        assert json.loads(request(collector.url, "GET", "/ready")[1])["reason"].startswith(
            "draining"
        )
        status, _, headers = post(collector.url, "/v1/track", track("during-drain"))
        assert status == 200
        assert headers["Connection"] == "close"  # its next request goes to another replica
        sent.append("during-drain")
        wait_until(lambda: refuses_connections(collector.url), "still accepting after the drain")
        # the port stayed open for drain_seconds after the signal, not about a second
        assert time.monotonic() - signalled >= drain
        assert collector.proc.poll() is None  # still waiting for the request in flight

        in_flight.sendall(body[100:])
        reply = http.client.HTTPResponse(in_flight)
        reply.begin()
        assert reply.status == 200, reply.read()
        assert reply.getheader("Connection") == "close"
        sent += late
        code = collector.proc.wait(60)
    finally:
        in_flight.close()
        if collector.proc.poll() is None:
            collector.proc.kill()
        collector.proc.wait(60)
    collector._reader.join(30)
    out = collector.output()
    assert code == 0, out
    assert stopped_line(out)[0] == len(sent) == 41
    counts = Counter(m["messageId"] for m in archive_lines(tmp_path / "archive"))
    assert counts == Counter(sent)
    assert not list((tmp_path / "spool-a").rglob("*.wal"))


def test_two_replicas_behind_one_address_archive_every_message_exactly_once(tmp_path):
    # small segments: each replica rolls several, which must all have distinct names
    replicas = [start(tmp_path, name, segment_max_bytes=65536, segment_max_age=1) for name in "ab"]
    sent: list[str] = []
    lock = threading.Lock()
    failures: list[object] = []

    def sender(name: str, url: str) -> None:
        for r in range(10):
            ids = [f"{name}-{r}-{j}" for j in range(20)]
            batch = {"batch": [track(i, properties={"pad": "p" * 300}) for i in ids]}
            status, reply, _ = post(url, "/v1/batch", batch)  # a new connection each time
            if status == 200:
                with lock:
                    sent.extend(ids)
            else:
                failures.append((status, reply))

    try:
        with RoundRobin([r.url for r in replicas]) as balancer:
            threads = [
                threading.Thread(target=sender, args=(f"s{i}", balancer.url)) for i in range(4)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join(120)
        assert not failures
        assert len(sent) == 4 * 10 * 20
        # each replica took its turn, and its metrics say what it acknowledged
        per_replica = [
            value(scrape(r.url), "events_accepted_total", endpoint="batch") for r in replicas
        ]
        assert all(n > 0 for n in per_replica), per_replica
        assert sum(per_replica) == len(sent)
        codes = [r.stop(signal.SIGTERM) for r in replicas]
    finally:
        for r in replicas:
            if r.proc.poll() is None:
                r.proc.kill()
                r.proc.wait(60)
    outputs = [r.output() for r in replicas]
    assert codes == [0, 0], outputs
    stopped = [stopped_line(out) for out in outputs]
    assert [accepted for accepted, _ in stopped] == per_replica
    assert all(rolled > 1 for _, rolled in stopped), stopped

    counts = Counter(m["messageId"] for m in archive_lines(tmp_path / "archive"))
    assert counts == Counter(sent)  # every accepted message, each exactly once
    files = [p for p in (tmp_path / "archive").rglob("*.jsonl.gz")]
    # one file per rolled segment: a name shared by two replicas would have left one file
    # for two segments (the roll takes an existing file for its own, already rolled)
    assert len(files) == len({p.name for p in files}) == sum(rolled for _, rolled in stopped)
