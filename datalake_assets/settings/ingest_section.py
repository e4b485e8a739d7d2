"""Settings of the ingest: ``[collector]`` (``datalake_assets.ingest.collector``) and the
per-source keys of the collector (``write_keys``) and of the Segment import
(``segment_archive``, ``datalake_assets.ingest.segment_import``)."""

import os
import re
from dataclasses import replace
from typing import Annotated, Any

from pydantic import AfterValidator, PlainValidator, ValidationInfo, model_validator

from datalake_assets.settings.fields import (
    HALF_URI_RE,
    URI_RE,
    Int,
    LocalFolder,
    Match,
    SettingsError,
    Str,
    base_of,
    check_azure_uri,
    default_home,
    file_defaults,
    resolve_root,
    settings_model,
    type_name,
)
from datalake_assets.spec.azure_uri import AZURE_SCHEMES
from datalake_assets.spec.layout import S3_SCHEMES

DEFAULT_SPOOL_DIR = "spool"  # relative like the roots: <home>/spool by default
ENV_WRITE_KEYS = "DATALAKE_WRITE_KEYS"
# Segment write keys are alphanumeric; base64-ish characters are allowed too. Never ':' (the
# key is the user name of HTTP Basic auth) nor ',' (the separator of DATALAKE_WRITE_KEYS).
_WRITE_KEY_RE = re.compile(r"[A-Za-z0-9._~+/=-]{1,256}")
_WRITE_KEY_RULE = "1-256 characters from [A-Za-z0-9._~+/=-]"


def _write_keys(keys: Any) -> tuple[str, ...]:
    """Secrets: errors name a key's position, never its value."""
    if isinstance(keys, str) or not isinstance(keys, (list, tuple)):
        shown = "a string (value not shown)" if isinstance(keys, str) else type_name(keys)
        raise SettingsError(f"must be an array of strings, got {shown}")
    seen: dict[str, int] = {}
    for i, k in enumerate(keys):
        if not isinstance(k, str):
            raise SettingsError(f"must be a string, got {type_name(k)}", key=f"[{i}]")
        if not _WRITE_KEY_RE.fullmatch(k):
            raise SettingsError(
                f"invalid write key (value not shown); allowed: {_WRITE_KEY_RULE}", key=f"[{i}]"
            )
        if k in seen:
            raise SettingsError(f"duplicate write key (also write_keys[{seen[k]}])", key=f"[{i}]")
        seen[k] = i
    return tuple(keys)


# A source's write keys, which the collector accepts for it.
WriteKeys = Annotated[tuple[str, ...], PlainValidator(_write_keys)]

# A browser origin: "*" (any), "scheme://host[:port]", or "scheme://*.domain[:port]" (any
# subdomain of domain, not domain itself).
_ORIGIN_RE = re.compile(r"\*|https?://(\*\.)?[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*(:[0-9]{1,5})?")
_ORIGIN_RULE = (
    '"*", "https://host[:port]", "http://host[:port]" or "https://*.domain" '
    "(lower case, no path, no trailing '/')"
)


def _cors_origins(origins: Any) -> tuple[str, ...]:
    if isinstance(origins, str) or not isinstance(origins, (list, tuple)):
        raise SettingsError(f"must be an array of origins, got {type_name(origins)}")
    for i, o in enumerate(origins):
        if not isinstance(o, str):
            raise SettingsError(f"must be a string, got {type_name(o)}", key=f"[{i}]")
        if not _ORIGIN_RE.fullmatch(o) or o != o.lower():
            raise SettingsError(f"invalid origin {o!r}; allowed: {_ORIGIN_RULE}", key=f"[{i}]")
    return tuple(origins)


# The browser origins whose pages may send a source's events (CORS); ("*",): any.
CorsOrigins = Annotated[tuple[str, ...], PlainValidator(_cors_origins)]


def _public_url(url: str) -> str:
    if url and not re.fullmatch(r"https?://[A-Za-z0-9.\-:\[\]]+(/[A-Za-z0-9._~\-/]*)?", url):
        raise SettingsError(f"invalid URL {url!r}; allowed: http(s)://host[:port][/path]")
    return url.rstrip("/")


# The collector's URL as browsers reach it (through a proxy); "": the request's Host header.
PublicUrl = Annotated[Str, AfterValidator(_public_url)]


def _segment_archive(root: str, info: ValidationInfo) -> str:
    if not root:
        return root
    base = base_of(info)
    if base is not None:  # a local folder: relative to the settings file
        root = resolve_root(root, base)
    if root != root.strip() or root.endswith("/"):
        raise SettingsError(f"has surrounding spaces or a trailing '/': {root!r}")
    m = URI_RE.fullmatch(root)
    if m and m.group(2) and m.group(1).lower() in AZURE_SCHEMES:
        check_azure_uri(root)
    elif m and (m.group(1).lower() not in S3_SCHEMES or not m.group(2)):
        raise SettingsError(
            f"invalid archive {root!r}; allowed: a local folder, "
            "s3://bucket[/prefix], abfss:// or az:// (Azure)"
        )
    if not m and ("://" in root or HALF_URI_RE.match(root)):
        raise SettingsError(f"invalid URI {root!r}; write s3://bucket/prefix")
    return root


# Segment's S3-destination archive a source imports: a local folder, an s3:// URI or an Azure
# one (a copy of it); "": none.
SegmentArchive = Annotated[Str, AfterValidator(_segment_archive)]


@settings_model
class CollectorSettings:
    """The Segment-compatible collector (``datalake collect``, ``ingest.collector``).

    Accepted messages are appended to a write-ahead spool (``spool_dir``, a local folder,
    fsync'd before the reply), then rolled into the raw archive's hourly gzipped files.
    ``spool_dir`` is resolved at load like the roots; ``""`` (direct construction only) means
    ``$DATALAKE_HOME/spool`` when used."""

    _file_defaults = file_defaults(spool_dir=DEFAULT_SPOOL_DIR)

    # listening address; "0.0.0.0" for every interface (a name, IPv4 or IPv6, no brackets)
    host: Match(
        r"[A-Za-z0-9.\-:]{1,253}",
        "host",
        "an IP address or host name such as '127.0.0.1', '0.0.0.0' or 'localhost'",
    ) = "127.0.0.1"
    port: Int(0, 65535) = 8088  # 0: any free port (printed at start)
    # write-ahead spool (local folder)
    spool_dir: LocalFolder(DEFAULT_SPOOL_DIR, "the spool is fsync'd before each reply") = ""
    segment_max_bytes: Int(65536, 1 << 30) = 64 * 1024 * 1024  # a spool segment rolls at this
    segment_max_age_seconds: Int(1, 3600) = 60  # ... or this long after its first message
    max_message_bytes: Int(256) = 32768  # one stamped message, as archived (Segment: 32 KB)
    max_batch_bytes: Int(1024, 64 * 1024 * 1024) = 512000  # one request body, uncompressed
    workers: Int(1, 64) = 1  # processes serving the port (Python decodes JSON on one core each)
    # the URL browsers reach the collector at (https://collect.example.com), announced by the
    # settings endpoint to analytics.js; "": http://<the request's Host header>
    public_url: PublicUrl = ""
    # requests being processed at once (per worker) beyond which new ones get 429 + Retry-After
    max_pending_requests: Int(1, 1_000_000) = 512
    # seconds SIGTERM keeps requests accepted after /ready starts failing, so a load balancer
    # polling /ready takes the replica out before its port closes. 0 by default: its right
    # length is the balancer's (poll interval x failures), and without one each stop would
    # only wait for nothing
    drain_seconds: Int(0, 300) = 0

    @model_validator(mode="after")
    def _message_fits_a_batch(self) -> "CollectorSettings":
        if self.max_message_bytes > self.max_batch_bytes:
            raise SettingsError(
                f"must be an integer from 256 to {self.max_batch_bytes} "
                f"(max_batch_bytes), got {self.max_message_bytes}",
                key="max_message_bytes",
            )
        return self

    def spool_path(self, home: str | None = None) -> str:
        """The spool folder (``spool_dir``, else ``<home>/spool``)."""
        return self.spool_dir or os.path.join(home or default_home(), DEFAULT_SPOOL_DIR)


def sources_with_env_keys(settings: Any, value: str) -> tuple[Any, ...]:
    """``DATALAKE_WRITE_KEYS="key=source,key=source"`` (source: id or slug) replaces every
    source's ``write_keys`` of ``settings`` (a ``LakeSettings``). Errors name the pair's
    position, never a key."""
    keys: dict[str, list[str]] = {s.id: [] for s in settings.sources}
    owner: dict[str, int] = {}
    for i, pair in enumerate(p.strip() for p in value.split(",")):
        if not pair:
            continue
        key, sep, name = pair.rpartition("=")
        if not sep or not key or not name.strip():
            raise SettingsError(
                f"entry {i + 1}: expected 'key=source' (a write key, '=', a source id or "
                "slug), comma-separated (value not shown)",
                key=ENV_WRITE_KEYS,
                origin="environment",
            )
        try:
            source = settings.source(name.strip())
        except SettingsError as e:
            raise SettingsError(
                f"entry {i + 1}: {e.problem}", key=ENV_WRITE_KEYS, origin="environment"
            ) from None
        if key in owner:
            raise SettingsError(
                f"entry {i + 1}: duplicate write key (also entry {owner[key] + 1}; "
                "value not shown)",
                key=ENV_WRITE_KEYS,
                origin="environment",
            )
        owner[key] = i
        keys[source.id].append(key)
    try:
        return tuple(replace(s, write_keys=tuple(keys[s.id])) for s in settings.sources)
    except SettingsError as e:
        raise SettingsError(e.problem, key=ENV_WRITE_KEYS, origin="environment") from None
