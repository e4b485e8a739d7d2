"""The official JavaScript libraries for the collector's tests: ``@segment/analytics-node``
(Node) and ``@segment/analytics-next`` (its browser bundle, in Debian's Chromium driven by
Playwright), installed from npm into ``js/node_modules`` (``npm ci``, pinned by
``js/package-lock.json``; ``.ci/run`` does it on a fresh machine). Without them the tests skip
with the reason, except under CI (``CI`` set), where they fail: they are test dependencies."""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

JS = Path(__file__).resolve().parent / "js"
CHROMIUM = "/usr/bin/chromium"
IN_CI = bool(os.environ.get("CI"))


def _missing(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"{reason} (CI: a test dependency, installed by .ci/run)")
    pytest.skip(reason)


@functools.cache
def _npm_ci() -> str | None:
    """Installs js/node_modules if missing (npm ci); the reason it could not, else None."""
    if shutil.which("node") is None:
        return "node is not installed (Node 20)"
    if (JS / "node_modules" / "@segment" / "analytics-next" / "package.json").exists() and (
        JS / "node_modules" / "@segment" / "analytics-node" / "package.json"
    ).exists():
        return None
    if shutil.which("npm") is None:
        return "npm is not installed"
    done = subprocess.run(
        ["npm", "ci", "--no-audit", "--no-fund"],
        cwd=JS,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode:
        return f"npm ci failed in {JS}: {done.stderr[-500:]}"
    return None


def require_node_libraries() -> None:
    reason = _npm_ci()
    if reason:
        _missing(reason)


def require_browser() -> None:
    require_node_libraries()
    if not os.path.exists(CHROMIUM):
        _missing(f"{CHROMIUM} is missing (apt-get install chromium)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        _missing("playwright is not installed (pip install -e '.[test]')")


class _PageHandler(http.server.BaseHTTPRequestHandler):
    files = {
        "/page.html": (JS / "page.html", "text/html"),
        "/classic.html": (JS / "classic.html", "text/html"),
        "/standalone.js": (
            JS / "node_modules/@segment/analytics-next/dist/umd/standalone.js",
            "application/javascript",
        ),
        "/analytics-next.js": (
            JS / "node_modules/@segment/analytics-next/dist/umd/index.js",
            "application/javascript",
        ),
    }

    def do_GET(self) -> None:  # noqa: N802
        found = self.files.get(self.path.split("?", 1)[0])
        if found is None:
            self.send_error(404)
            return
        data = found[0].read_bytes()
        self.send_response(200)
        self.send_header("Content-Type", found[1])
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def page_server() -> Iterator[int]:
    """The site's pages, on loopback: its port (the page's origin differs from the
    collector's)."""
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _PageHandler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield srv.server_address[1]
    finally:
        srv.shutdown()
        srv.server_close()
