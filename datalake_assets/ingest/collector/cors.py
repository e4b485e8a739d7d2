"""Browsers: CORS for the tracking API and the settings endpoint, and the write-key table.

analytics.js posts from the site's pages to the collector, another origin: its requests carry
``Authorization`` and ``Content-Type: text/plain``, so the browser first sends a preflight
(``OPTIONS``), and then reads the reply only if it names the page's origin. Each source has an
allow-list (``cors_origins``: ``"*"``, ``https://host[:port]``, ``https://*.domain``); the
default admits any origin: a write key is public by design (it is in every page's source), so
the list keeps other sites' pages from sending, not anyone with ``curl``.

* A preflight carries no write key: it is answered for an origin that any source admits; the
  request that follows is checked against its own source's list.
* An admitted origin gets ``Access-Control-Allow-Origin: <origin>`` (with ``Vary: Origin``), the
  methods and headers the libraries use, and ``Retry-After`` exposed to the page's code (the
  libraries read it on a 429).
* A refused origin gets no CORS header at all: the browser blocks the request (the console says
  "blocked by CORS policy"); the collector answers 403 ``origin_not_allowed`` and archives
  nothing. Requests without ``Origin`` (servers, mobile apps, ``curl``) are not concerned.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping

ALLOW_METHODS = "POST, GET, OPTIONS"
# what the official libraries send (analytics.js: Content-Type, Authorization, X-Retry-Count)
ALLOW_HEADERS = "Content-Type, Authorization, Content-Encoding, X-Retry-Count"
MAX_AGE_SECONDS = "7200"  # browsers cache a preflight this long (Chromium's maximum)
_HEADER_LIST_RE = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+(\s*,\s*[A-Za-z0-9!#$%&'*+.^_`|~-]+)*")


def _split(origin: str) -> tuple[str, str, str] | None:
    """``(scheme, host, port)`` of ``scheme://host[:port]``."""
    scheme, sep, rest = origin.partition("://")
    if not sep or not rest or "/" in rest:
        return None
    host, _, port = rest.rpartition(":") if rest.count(":") == 1 else (rest, "", "")
    return scheme, host, port


def origin_matches(pattern: str, origin: str) -> bool:
    """``origin`` (as the browser sent it) admitted by ``pattern`` (a ``cors_origins`` item)."""
    if pattern == "*":
        return True
    origin = origin.lower()
    if "*." not in pattern:
        return origin == pattern
    want, got = _split(pattern), _split(origin)
    if want is None or got is None:
        return False
    return (
        got[0] == want[0]
        and got[2] == want[2]
        and got[1].endswith(want[1][1:])
        and len(got[1]) > len(want[1]) - 1
    )


class Cors:
    """Each source's allowed origins: ``{source id: cors_origins}``."""

    def __init__(self, origins_by_source: Mapping[str, Iterable[str]]) -> None:
        self._by_source = {s: tuple(o) for s, o in origins_by_source.items()}
        self._any = tuple(sorted({o for os in self._by_source.values() for o in os}))
        self._cache: dict[tuple[str, str | None], bool] = {}
        self._headers: dict[str, tuple[tuple[str, str], ...]] = {}

    def allows(self, origin: str, source_id: str | None = None) -> bool:
        """``origin`` admitted by the source (``None``: by any source)."""
        key = (origin, source_id)
        hit = self._cache.get(key)
        if hit is None:
            patterns = self._any if source_id is None else self._by_source.get(source_id, ())
            hit = any(origin_matches(p, origin) for p in patterns)
            if len(self._cache) > 4096:
                self._cache.clear()
            self._cache[key] = hit
        return hit

    def headers(self, origin: str) -> tuple[tuple[str, str], ...]:
        """The headers of a reply to an admitted origin."""
        h = self._headers.get(origin)
        if h is None:
            h = (
                ("Access-Control-Allow-Origin", origin),
                ("Vary", "Origin"),
                ("Access-Control-Expose-Headers", "Retry-After"),
            )
            if len(self._headers) > 4096:
                self._headers.clear()
            self._headers[origin] = h
        return h

    @staticmethod
    def preflight_headers(
        origin: str, requested: str | None, private_network: bool = False
    ) -> list[tuple[str, str]]:
        """A preflight's reply to an admitted origin: the requested headers are allowed when
        they are well-formed header names (custom headers a page configured), else the list
        the libraries use."""
        allow = (
            requested.strip()
            if requested and _HEADER_LIST_RE.fullmatch(requested.strip())
            else ALLOW_HEADERS
        )
        out = [
            ("Access-Control-Allow-Origin", origin),
            ("Vary", "Origin, Access-Control-Request-Headers"),
            ("Access-Control-Allow-Methods", ALLOW_METHODS),
            ("Access-Control-Allow-Headers", allow),
            ("Access-Control-Max-Age", MAX_AGE_SECONDS),
        ]
        if private_network:  # Chromium's Private Network Access (a public page, a LAN collector)
            out.append(("Access-Control-Allow-Private-Network", "true"))
        return out


class KeyTable:
    """Write key -> source id. Keys are looked up by their SHA-256: the comparisons a lookup
    makes are between digests, so their timing says nothing about which keys exist."""

    def __init__(self, sources_by_key: Mapping[str, str]) -> None:
        self._by_digest = {self.digest(k): s for k, s in sources_by_key.items()}

    @staticmethod
    def digest(key: str) -> bytes:
        return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()

    def source_of(self, key: object) -> str | None:
        if type(key) is not str or not key:
            return None
        return self._by_digest.get(self.digest(key))

    def __bool__(self) -> bool:
        return bool(self._by_digest)

    def __len__(self) -> int:
        return len(self._by_digest)
