"""The web source's traffic for ``bench_collector.py --web``: many browsers, one small event per
request on analytics.js's short paths (``/v1/t``, ``/v1/p``, ``/v1/i``), with its headers
(``text/plain``, Basic auth and ``writeKey`` in the body, ``Origin``).

One load process drives all the connections with non-blocking sockets (``selectors``): a Python
process per client (as the batch mode does) would spend more CPU than the collector on 2 cores.
Each connection is a browser tab: it sends a request, waits for the whole reply, sends the
next."""

from __future__ import annotations

import base64
import json
import selectors
import socket
import time
from datetime import UTC, datetime

PATHS = (("/v1/t", "track"), ("/v1/p", "page"), ("/v1/i", "identify"))
UA = (
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "HeadlessChrome/156.0.0.0 Safari/537.36"
)


def request_templates(host: str, port: int, write_key: str) -> list[bytes]:
    """Whole HTTP requests as analytics.js sends them; ``@@IDID@@`` (8 characters) is
    replaced with a unique id per request, so the length never changes."""
    auth = base64.b64encode(f"{write_key}:".encode()).decode()
    now = datetime.now(UTC).isoformat(timespec="milliseconds")[:-6] + "Z"
    out = []
    for path, kind in PATHS:
        m = {
            "messageId": "ajs-next-@@IDID@@",
            "anonymousId": "5f0d8c1a-7c3e-4e5b-9a51-0e6f2d4c1b2a",
            "type": kind,
            "timestamp": now,
            "sentAt": now,
            "writeKey": write_key,
            "integrations": {},
            "userId": None,
            "context": {
                "page": {
                    "path": "/products/42",
                    "referrer": "https://www.google.com/",
                    "search": "",
                    "title": "Product 42 - Shop",
                    "url": "https://shop.example.com/products/42",
                },
                "userAgent": UA,
                "locale": "en-US",
                "library": {"name": "analytics.js", "version": "next-1.84.3"},
            },
        }
        if kind == "track":
            m.update(event="Product Viewed", properties={"sku": "SKU-42", "price": 19.99})
        elif kind == "page":
            m.update(name="Product", properties={"path": "/products/42"})
        else:
            m.update(userId="user-42", traits={"plan": "pro"})
        body = json.dumps(m, separators=(",", ":")).encode()
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: text/plain\r\n"
            f"Authorization: Basic {auth}\r\nOrigin: https://shop.example.com\r\n"
            f"User-Agent: {UA}\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        out.append(head + body)
    return out


def run(
    host: str,
    port: int,
    write_key: str,
    connections: int,
    start_at: float,
    seconds: float,
    max_requests: int,
    lid: int = 0,
) -> dict:
    """Drives ``connections`` keep-alive connections until ``seconds`` pass; the counts and
    latencies. ``lid`` makes the ids unique across load processes."""
    templates = request_templates(host, port, write_key)
    sel = selectors.DefaultSelector()
    socks = []
    for _ in range(connections):
        s = socket.create_connection((host, port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setblocking(False)
        socks.append(s)
    while time.time() < start_at:
        time.sleep(0.001)
    state: dict[socket.socket, list] = {}
    counter = 0
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    deadline = t0 + seconds

    def send(s: socket.socket) -> None:
        nonlocal counter
        req = templates[counter % len(templates)].replace(
            b"@@IDID@@", f"{lid:02d}{counter:06x}".encode(), 1
        )
        counter += 1
        state[s] = [time.perf_counter(), b""]
        s.sendall(req)  # small: fits the socket buffer

    for s in socks:
        send(s)
        sel.register(s, selectors.EVENT_READ)
    open_socks = len(socks)
    while open_socks:
        for key, _ in sel.select(timeout=5):
            s = key.fileobj
            data = s.recv(65536)
            st = state[s]
            st[1] += data
            buf = st[1]
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                continue
            i = buf.find(b"Content-Length:", 0, end)
            length = int(buf[i + 15 : buf.index(b"\r\n", i)]) if i >= 0 else 0
            if len(buf) < end + 4 + length:
                continue
            now = time.perf_counter()
            latencies.append(now - st[0])
            status = int(buf[9:12])
            statuses[status] = statuses.get(status, 0) + 1
            if now < deadline and counter < max_requests:
                send(s)
            else:
                sel.unregister(s)
                s.close()
                open_socks -= 1
    elapsed = time.perf_counter() - t0
    return {
        "requests": len(latencies),
        "accepted_events": statuses.get(200, 0),
        "statuses": statuses,
        "latencies": latencies,
        "elapsed": elapsed,
        "cpu_s": time.process_time() - cpu0,
        "errors": 0,
    }
