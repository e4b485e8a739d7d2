"""``GET /v1/projects/<writeKey>/settings``: the settings analytics.js loads at start.

analytics.js (``@segment/analytics-next``, and the classic snippet, which loads it) fetches
``<cdnURL>/v1/projects/<writeKey>/settings`` and sends its events to the ``Segment.io``
integration's ``protocol://apiHost`` + ``/t``, ``/p``, ... (``/b`` when batching). The collector
answers with the settings Segment's CDN gives a source with no destinations, pointed back at
the collector, so ``AnalyticsBrowser.load({ writeKey, cdnURL: "<collector URL>" })`` is the
whole setup. Remote metrics are off (``sampleRate`` 0): the collector takes no ``/m`` posts.

The collector's URL is ``[collector] public_url`` when set (behind a TLS proxy), else
``http://`` (``https://`` with ``X-Forwarded-Proto: https``) and the request's ``Host``.

An unknown write key gets 404 ``not_found`` with one generic message whatever the key: the
answer says only that the key asked for is not one of this collector's (as a POST with it
would), never which keys exist, and keys are compared by digest (``cors.KeyTable``).
"""

from __future__ import annotations

import re
from urllib.parse import unquote

_PATH_RE = re.compile(r"/v1/projects/([^/?#]{1,1024})/settings/?")
_HOST_RE = re.compile(r"[A-Za-z0-9.\-]+(:[0-9]{1,5})?|\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?")
UNKNOWN_KEY_MESSAGE = "no settings here: check the write key"


def write_key_of(path: str) -> str | None:
    """The write key of a settings path; ``None`` for another path."""
    m = _PATH_RE.fullmatch(path)
    return unquote(m.group(1)) if m else None


def collector_url(
    public_url: str, host_header: str | None, forwarded_proto: str | None, fallback: str
) -> str:
    """Where browsers reach the collector: ``public_url``, else from the request's ``Host``
    (a malformed one: ``fallback``, the listening address)."""
    if public_url:
        return public_url
    host = (host_header or "").strip()
    if not _HOST_RE.fullmatch(host):
        return fallback
    scheme = "https" if (forwarded_proto or "").strip().lower() == "https" else "http"
    return f"{scheme}://{host}"


def settings_document(write_key: str, url: str) -> dict[str, object]:
    """The settings of one write key, its events going to the collector at ``url``."""
    scheme, _, host = url.partition("://")
    api_host = f"{host.rstrip('/')}/v1"
    return {
        "integrations": {
            "Segment.io": {
                "apiKey": write_key,
                "apiHost": api_host,
                "protocol": scheme,
                "unbundledIntegrations": [],
                "addBundledMetadata": True,
                "maybeBundledConfigIds": {},
                "versionSettings": {"version": "4.4.7", "componentTypes": ["browser"]},
            },
        },
        "plan": {
            "track": {"__default": {"enabled": True, "integrations": {}}},
            "identify": {"__default": {"enabled": True}},
            "group": {"__default": {"enabled": True}},
        },
        "edgeFunction": {},
        "analyticsNextEnabled": True,
        "middlewareSettings": {},
        "enabledMiddleware": {},
        "metrics": {"sampleRate": 0, "host": api_host},
        "legacyVideoPluginsEnabled": False,
        "remotePlugins": [],
    }
