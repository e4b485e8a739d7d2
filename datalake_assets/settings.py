"""Lake settings: where the raw archive and the lake live, which sources exist, how Spark runs.

Loading order, later wins::

    built-in defaults  <-  settings file (TOML)  <-  environment

* The settings file is ``path`` if given, else ``$DATALAKE_SETTINGS`` if set (and not empty),
  else there is none and the built-in defaults are used. A file that was asked for but cannot
  be read is an error, never silently skipped.
* Every key of the file is optional except ``id`` in each ``[[sources]]``; an omitted key keeps
  its default (an omitted ``sources`` keeps the default ``demo`` source; ``[spark.conf]`` entries
  are added to the built-in ones). The documented template is the package's ``lake.toml``,
  which loads to exactly the defaults.
* Environment overrides: ``DATALAKE_ARCHIVE_ROOT``, ``DATALAKE_LAKE_ROOT``,
  ``DATALAKE_SPARK_MASTER``, ``DATALAKE_SPARK_DRIVER_MEMORY``, ``DATALAKE_MAX_MESSAGE_BYTES``,
  ``DATALAKE_CATALOG_BACKEND``, ``DATALAKE_COMPUTE_BACKEND``, ``DATALAKE_WRITE_KEYS``
  (``key=source,key=source``: replaces
  every source's ``write_keys``; keep the keys out of the file this way).
  An empty variable counts as unset.
* Roots are local folders or URIs (``s3://bucket/prefix``). A URI is kept as written (minus
  trailing ``/``; ``os.path`` never touches it). A local path is made absolute: relative to the
  settings file's folder (from the file), to the home folder (defaults: ``<home>/archive`` and
  ``<home>/lake``), or to the current directory (from the environment). ``~`` is expanded.
* Home: ``$DATALAKE_HOME``, else ``<cwd>/.datalake``.

Everything is validated when loaded: unknown keys (typos), wrong types, invalid names, unknown
date layouts, bad start hours, and sources that would overwrite each other. A ``SettingsError``
names the file (or ``environment``), the key path (``sources[1].date_layout``), the bad value
and what is allowed.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, time
from importlib import resources
from typing import Any

from datalake_assets.spec import layout, naming
from datalake_assets.spec.layout import DATE_LAYOUTS, DEFAULT_DATE_LAYOUT

ENV_HOME = "DATALAKE_HOME"
ENV_SETTINGS = "DATALAKE_SETTINGS"
ENV_ARCHIVE_ROOT = "DATALAKE_ARCHIVE_ROOT"
ENV_LAKE_ROOT = "DATALAKE_LAKE_ROOT"
ENV_SPARK_MASTER = "DATALAKE_SPARK_MASTER"
ENV_SPARK_DRIVER_MEMORY = "DATALAKE_SPARK_DRIVER_MEMORY"
ENV_MAX_MESSAGE_BYTES = "DATALAKE_MAX_MESSAGE_BYTES"
ENV_CATALOG_BACKEND = "DATALAKE_CATALOG_BACKEND"
ENV_COMPUTE_BACKEND = "DATALAKE_COMPUTE_BACKEND"
ENV_WRITE_KEYS = "DATALAKE_WRITE_KEYS"

SHIPPED_SETTINGS_FILE = "lake.toml"  # package data of ``datalake_assets``: the documented defaults

DEFAULT_SOURCE_ID = "demo"
# "auto": the first hour of the source's raw archive, read when the code location loads
# (datalake_assets.orchestration.lake_state); an explicit hour fixes it.
AUTO_START = "auto"
DEFAULT_START = AUTO_START
ENV_WEBSERVER_URL = "DATALAKE_WEBSERVER_URL"
DEFAULT_ARCHIVE_DIR = "archive"  # relative to the home (defaults) or the settings file's folder
DEFAULT_LAKE_DIR = "lake"


def _default_spark_conf() -> dict[str, str]:
    return {"spark.sql.files.maxPartitionBytes": "64m"}


DEFAULT_SPARK_CONF: Mapping[str, str] = _default_spark_conf()

# Spark keys that have their own setting: one place to set them, never two.
_SPARK_CONF_OWNED = {
    "spark.master": "master",
    "spark.driver.memory": "driver_memory",
    "spark.sql.shuffle.partitions": "shuffle_partitions",
}

MAX_DEPTH_LIMIT = 64

_ID_RE = re.compile(r"[A-Za-z0-9_-]{1,128}")
_SLUG_RE = re.compile(r"[a-z0-9_]{1,64}")
_DATABASE_RE = re.compile(r"[a-z0-9_]{1,255}")
_PREFIX_RE = re.compile(r"[a-z0-9_]*")
_START_RE = re.compile(r"(\d{4})-(\d{2})-(\d{2})-(\d{2}):00")
_MEMORY_RE = re.compile(r"[0-9]+(?:b|[kmgtp]b?)?", re.IGNORECASE)
_URI_RE = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*)://(.*)", re.DOTALL)
_HALF_URI_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]+:/")  # "s3:/bucket": a URI missing a '/'
_BARE_KEY_RE = re.compile(r"[A-Za-z0-9_-]+")

_ID_RULE = "1-128 characters from [A-Za-z0-9_-] (the id is a folder of the raw archive)"
_SLUG_RULE = "1-64 characters from [a-z0-9_] (Glue-safe)"
_DATABASE_RULE = "1-255 characters from [a-z0-9_] (Glue-safe)"
_PREFIX_RULE = "characters from [a-z0-9_], or empty for none"
_START_RULE = (
    "'auto' (the archive's first hour) or an hour as 'YYYY-MM-DD-HH:00' (a Dagster hourly "
    "partition key), e.g. '2025-01-01-00:00'"
)
_OWNER_RE = re.compile(r"team:[A-Za-z0-9_-]+|[^@\s]+@[^@\s]+\.[^@\s]+")
_OWNER_RULE = "an email address or 'team:<name>' (Dagster's owner format)"
_NO_SOURCES = "at least one source is required (add a [[sources]] table)"
_MEMORY_RULE = "a JVM size such as '512m', '4g' or '4096mb'"
# Segment write keys are alphanumeric; base64-ish characters are allowed too. Never ':' (the
# key is the user name of HTTP Basic auth) nor ',' (the separator of DATALAKE_WRITE_KEYS).
_WRITE_KEY_RE = re.compile(r"[A-Za-z0-9._~+/=-]{1,256}")
_WRITE_KEY_RULE = "1-256 characters from [A-Za-z0-9._~+/=-]"


# --------------------------------------------------------------------------------------- errors


class SettingsError(ValueError):
    """Invalid or unreadable settings.

    ``str(e)`` reads ``<origin>: <key path>: <problem>``, e.g.
    ``settings file /srv/lake.toml: sources[1].date_layout: unknown date layout 'weekly'; ...``.
    ``origin`` is ``settings file <path>``, ``environment`` or ``built-in defaults`` (``None``
    for a dataclass built directly); ``key`` the key path (or environment variable), if any.
    """

    def __init__(self, problem: str, *, key: str | None = None, origin: str | None = None):
        self.problem = problem
        self.key = key
        self.origin = origin
        super().__init__(": ".join(p for p in (origin, key, problem) if p))

    def _within(self, *, origin: str | None = None, prefix: str | None = None) -> SettingsError:
        key = self.key
        if prefix:
            key = f"{prefix}.{key}" if key else prefix
        return SettingsError(self.problem, key=key, origin=self.origin or origin)


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "table"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, (datetime, date, time)):
        return "date/time"
    return type(value).__name__


def _got(value: Any) -> str:
    return f"got {_type_name(value)} {value!r}"


def _key(prefix: str, name: str) -> str:
    shown = name if _BARE_KEY_RE.fullmatch(name) else '"' + name.replace('"', '\\"') + '"'
    return f"{prefix}.{shown}" if prefix else shown


def _need_str(value: Any, key: str, hint: str = "") -> str:
    if not isinstance(value, str):
        raise SettingsError(f"must be a string{hint}, {_got(value)}", key=key)
    return value


def _need_int(value: Any, key: str, lo: int, hi: int | None = None) -> int:
    allowed = f"an integer >= {lo}" if hi is None else f"an integer from {lo} to {hi}"
    if isinstance(value, bool) or not isinstance(value, int):
        raise SettingsError(f"must be {allowed}, {_got(value)}", key=key)
    if value < lo or (hi is not None and value > hi):
        raise SettingsError(f"must be {allowed}, got {value!r}", key=key)
    return value


def _need_match(value: str, pattern: re.Pattern[str], key: str, rule: str, what: str) -> None:
    if not pattern.fullmatch(value):
        raise SettingsError(f"invalid {what} {value!r}; allowed: {rule}", key=key)


# ------------------------------------------------------------------------------------- sections


@dataclass(frozen=True)
class SourceSettings:
    """One Segment source. ``slug`` and ``database`` left empty are derived (``snake(id)``,
    then ``slug``); the stored values are always the effective ones."""

    id: str  # Segment source id: names the raw archive folder <archive_root>/<id>/
    slug: str = ""  # Glue-safe name; "" -> naming.snake(id)
    database: str = ""  # catalog database; "" -> slug
    table_prefix: str = ""  # prepended to catalog table names ("web" -> web_pages)
    date_layout: str = DEFAULT_DATE_LAYOUT  # one of layout.DATE_LAYOUTS
    path_by_slug: bool = False  # lake folders named by slug instead of id
    start: str = DEFAULT_START  # first hourly partition, 'YYYY-MM-DD-HH:00' (UTC), or "auto"
    # who answers for the source's assets (shown in the Dagster UI): emails or "team:<name>"
    owners: tuple[str, ...] = ()
    # Segment's S3-destination archive to import (datalake_assets.ingest.segment_import): a local
    # folder or s3:// URI holding segment-logs/<segment_source_id>/<day epoch ms>/*.gz; "": none
    segment_archive: str = ""
    segment_source_id: str = ""  # the source's folder in segment-logs/; "" -> id (with an archive)
    # Segment write keys the collector accepts for this source. Secrets: never in a repr or an
    # error message (errors name the key's position, never its value).
    write_keys: tuple[str, ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        _need_str(self.id, "id")
        _need_match(self.id, _ID_RE, "id", _ID_RULE, "source id")
        for name in ("slug", "database", "table_prefix", "date_layout"):
            _need_str(getattr(self, name), name)
        hint = " (quote it: TOML dates are not accepted)" if not isinstance(self.start, str) else ""
        _need_str(self.start, "start", hint)
        if not isinstance(self.path_by_slug, bool):
            raise SettingsError(
                f"must be true or false, {_got(self.path_by_slug)}", key="path_by_slug"
            )

        if self.slug:
            _need_match(self.slug, _SLUG_RE, "slug", _SLUG_RULE, "slug")
        else:
            derived = naming.snake(self.id)
            if not _SLUG_RE.fullmatch(derived):
                raise SettingsError(
                    f"cannot derive a slug from id {self.id!r} (snake case gives {derived!r}); "
                    f"set slug explicitly: {_SLUG_RULE}",
                    key="slug",
                )
            object.__setattr__(self, "slug", derived)
        if self.database:
            _need_match(self.database, _DATABASE_RE, "database", _DATABASE_RULE, "database name")
        else:
            object.__setattr__(self, "database", self.slug)
        _need_match(self.table_prefix, _PREFIX_RE, "table_prefix", _PREFIX_RULE, "table prefix")
        if self.table_prefix and not naming.snake(self.table_prefix):
            raise SettingsError(
                f"invalid table prefix {self.table_prefix!r}: it has no letter or digit, so it "
                f"would add nothing to table names; allowed: {_PREFIX_RULE}",
                key="table_prefix",
            )
        if self.date_layout not in DATE_LAYOUTS:
            choices = ", ".join(repr(k) for k in sorted(DATE_LAYOUTS))
            raise SettingsError(
                f"unknown date layout {self.date_layout!r}; choose one of {choices}",
                key="date_layout",
            )
        _check_start(self.start)
        object.__setattr__(self, "owners", _check_owners(self.owners))
        object.__setattr__(self, "write_keys", _check_write_keys(self.write_keys))
        self._check_segment_import()

    def _check_segment_import(self) -> None:
        _need_str(self.segment_archive, "segment_archive")
        _need_str(self.segment_source_id, "segment_source_id")
        if not self.segment_archive:
            if self.segment_source_id:
                raise SettingsError(
                    "only applies to an import: set segment_archive too (or remove this key)",
                    key="segment_source_id",
                )
            return
        root = self.segment_archive
        if root != root.strip() or root.endswith("/"):
            raise SettingsError(f"has surrounding spaces or a trailing '/': {root!r}",
                                key="segment_archive")
        m = _URI_RE.fullmatch(root)
        if m and (m.group(1).lower() not in layout.S3_SCHEMES or not m.group(2)):
            raise SettingsError(
                f"invalid archive {root!r}; allowed: a local folder or s3://bucket[/prefix]",
                key="segment_archive",
            )
        if not m and ("://" in root or _HALF_URI_RE.match(root)):
            raise SettingsError(f"invalid URI {root!r}; write s3://bucket/prefix",
                                key="segment_archive")
        if self.segment_source_id:
            _need_match(self.segment_source_id, _ID_RE, "segment_source_id", _ID_RULE,
                        "Segment source id")
        else:
            object.__setattr__(self, "segment_source_id", self.id)
        if self.start == AUTO_START:
            # The import is what fills the archive: its first day cannot come from the archive.
            raise SettingsError(
                "a source that imports Segment's archive needs an explicit start: the first "
                "hour to import, e.g. the day the source began sending to Segment "
                "('YYYY-MM-DD-00:00')",
                key="start",
            )

    @property
    def lake_dir(self) -> str:
        """The source's folder in the lake (``data/<lake_dir>/...``): slug or id."""
        return self.slug if self.path_by_slug else self.id

    @property
    def effective_table_prefix(self) -> str:
        """The prefix as ``naming.catalog_table_name`` applies it (snake-cased)."""
        return naming.snake(self.table_prefix) if self.table_prefix else ""


def _check_owners(owners: Any) -> tuple[str, ...]:
    if isinstance(owners, str) or not isinstance(owners, (list, tuple)):
        raise SettingsError(f"must be a list of owners, {_got(owners)}", key="owners")
    for i, owner in enumerate(owners):
        if not isinstance(owner, str) or not _OWNER_RE.fullmatch(owner):
            raise SettingsError(f"invalid owner {owner!r}; allowed: {_OWNER_RULE}",
                                key=f"owners[{i}]")
    return tuple(owners)


def _check_start(start: str) -> None:
    if start == AUTO_START:
        return
    m = _START_RE.fullmatch(start)
    if m:
        try:
            datetime(*(int(g) for g in m.groups()))
            return
        except ValueError:
            pass
    raise SettingsError(f"invalid start hour {start!r}; allowed: {_START_RULE}", key="start")


def _check_write_keys(keys: Any) -> tuple[str, ...]:
    if isinstance(keys, str) or not isinstance(keys, (list, tuple)):
        shown = "a string (value not shown)" if isinstance(keys, str) else _type_name(keys)
        raise SettingsError(f"must be an array of strings, got {shown}", key="write_keys")
    seen: dict[str, int] = {}
    for i, k in enumerate(keys):
        where = f"write_keys[{i}]"
        if not isinstance(k, str):
            raise SettingsError(f"must be a string, got {_type_name(k)}", key=where)
        if not _WRITE_KEY_RE.fullmatch(k):  # never echo a secret, even a malformed one
            raise SettingsError(f"invalid write key (value not shown); allowed: {_WRITE_KEY_RULE}",
                                key=where)
        if k in seen:
            raise SettingsError(f"duplicate write key (also write_keys[{seen[k]}])", key=where)
        seen[k] = i
    return tuple(keys)


def _check_spark_conf(conf: Any, key: str) -> dict[str, str]:
    if not isinstance(conf, Mapping):
        raise SettingsError(f"must be a table of Spark settings, {_got(conf)}", key=key)
    out: dict[str, str] = {}
    for name, value in conf.items():
        k = _key(key, name) if isinstance(name, str) else f"{key}[{name!r}]"
        if not isinstance(name, str) or not name.startswith("spark.") or name == "spark.":
            raise SettingsError(
                f"invalid Spark setting name {name!r}; allowed: any key starting with 'spark.'",
                key=k,
            )
        if name in _SPARK_CONF_OWNED:
            raise SettingsError(
                f"{name!r} has its own setting: set [spark] {_SPARK_CONF_OWNED[name]} instead",
                key=k,
            )
        if not isinstance(value, str):
            raise SettingsError(f"Spark setting values must be strings, {_got(value)}", key=k)
        out[name] = value
    return out


@dataclass(frozen=True)
class SparkSettings:
    master: str = "local[2]"
    driver_memory: str = "4g"
    shuffle_partitions: int = 4
    # any spark.* key -> value; defaults to DEFAULT_SPARK_CONF. Callers apply it after
    # master / driver_memory / shuffle_partitions (which it may not contain).
    extra_conf: dict[str, str] = field(default_factory=_default_spark_conf)

    def __post_init__(self) -> None:
        _need_str(self.master, "master")
        if not self.master.strip() or self.master != self.master.strip():
            raise SettingsError(
                f"invalid Spark master {self.master!r}; allowed: a Spark master URL such as "
                "'local[2]', 'local[*]' or 'spark://host:7077' (no surrounding spaces)",
                key="master",
            )
        _need_str(self.driver_memory, "driver_memory")
        _need_match(self.driver_memory, _MEMORY_RE, "driver_memory", _MEMORY_RULE, "driver memory")
        _need_int(self.shuffle_partitions, "shuffle_partitions", 1)
        # a private copy: the caller's dict must not change a frozen settings object
        object.__setattr__(self, "extra_conf", _check_spark_conf(self.extra_conf, "extra_conf"))

    def __hash__(self) -> int:  # extra_conf is a dict: hash its items
        return hash((self.master, self.driver_memory, self.shuffle_partitions,
                     tuple(sorted(self.extra_conf.items()))))


@dataclass(frozen=True)
class SyncSettings:
    max_message_bytes: int = 32768  # larger messages are quarantined
    max_depth: int = 16  # deeper nesting is kept as JSON text
    dedup_lookback_days: int = 7  # messageId unique across this many days of earlier hours

    def __post_init__(self) -> None:
        _need_int(self.max_message_bytes, "max_message_bytes", 1)
        _need_int(self.max_depth, "max_depth", 1, MAX_DEPTH_LIMIT)
        _need_int(self.dedup_lookback_days, "dedup_lookback_days", 0, 90)


SENSOR_STATUSES = ("running", "stopped")


@dataclass(frozen=True)
class AutomationSettings:
    """The archive sensors (``datalake_assets.orchestration.sensors``), one per source."""

    sensors: str = "running"  # default status of the sensors: "running" or "stopped"
    interval_seconds: int = 60  # minimum time between two ticks of a sensor
    settle_minutes: int = 5  # an hour is synced this long after it closes
    recheck_hours: int = 48  # hours this recent are listed again for late files
    max_queued_runs: int = 24  # per source: no new requests while this many sensor runs wait
    backfill_hours_per_run: int = 24  # a backfill (replay) runs one Spark job per this many hours
    definitions_interval_seconds: int = 30  # how often the definitions sensor compares states
    # The Dagster webserver the definitions sensor asks to reload the code location when new
    # event tables appear (GraphQL reloadRepositoryLocation). "": no automatic reload, the
    # sensor says what changed and the UI's "Reload definitions" applies it. `datalake dev`
    # sets it (DATALAKE_WEBSERVER_URL) to the server it starts.
    webserver_url: str = ""

    def __post_init__(self) -> None:
        _need_str(self.sensors, "sensors")
        if self.sensors not in SENSOR_STATUSES:
            raise SettingsError(
                f"invalid sensor status {self.sensors!r}; allowed: 'running' or 'stopped'",
                key="sensors",
            )
        _need_int(self.interval_seconds, "interval_seconds", 10, 86400)
        _need_int(self.settle_minutes, "settle_minutes", 0, 1440)
        _need_int(self.recheck_hours, "recheck_hours", 1, 720)
        _need_int(self.max_queued_runs, "max_queued_runs", 1, 10000)
        _need_int(self.backfill_hours_per_run, "backfill_hours_per_run", 1, 744)
        _need_int(self.definitions_interval_seconds, "definitions_interval_seconds", 10, 86400)
        _need_str(self.webserver_url, "webserver_url")
        if self.webserver_url and not re.fullmatch(r"https?://[^\s'\"\\]+", self.webserver_url):
            raise SettingsError(
                f"invalid URL {self.webserver_url!r}; allowed: http(s)://host:port of the Dagster "
                "webserver, or empty", key="webserver_url")


CATALOG_BACKENDS = ("glue", "hive", "none")  # = datalake_assets.catalog.config.BACKENDS
DEFAULT_METASTORE_DIR = "metastore"  # relative like the roots: <home>/metastore by default
_REGION_RE = re.compile(r"[a-z]{2}(?:-[a-z]+)+-[0-9]{1,2}")
_CATALOG_ID_RE = re.compile(r"[0-9]{12}")
_ENDPOINT_RE = re.compile(r"https?://[^\s'\"\\;`]+")
_THRIFT_RE = re.compile(r"thrift://[A-Za-z0-9.\-]+:[0-9]{1,5}(?:,thrift://[A-Za-z0-9.\-]+:[0-9]{1,5})*")


@dataclass(frozen=True)
class CatalogSettings:
    """Where the tables are registered (``datalake_assets.catalog``).

    ``backend``: ``"hive"`` (default: an embedded Derby metastore under ``metastore_dir``
    that Spark SQL queries; one JVM at a time, which the ``spark_local`` pool guarantees for
    syncs), ``"glue"`` (AWS Glue, for Athena) or ``"none"`` (files only).
    ``metastore_dir`` is resolved at load like the roots; ``""`` (direct construction only)
    means ``$DATALAKE_HOME/metastore`` when used."""

    backend: str = "hive"
    reports_database: str = "segment_datalake_meta"  # holds the sync_reports table
    metastore_dir: str = ""  # embedded Derby metastore and warehouse (local folder)
    hive_metastore_uri: str = ""  # thrift://host:9083: a remote metastore instead of Derby
    glue_region: str = ""  # "" -> AWS_REGION / ~/.aws/config
    glue_catalog_id: str = ""  # 12-digit account id of the Glue catalog; "" -> your account
    glue_endpoint_url: str = ""  # a VPC endpoint or a test server; "" -> AWS

    def __post_init__(self) -> None:
        for name in (f.name for f in dataclasses.fields(self)):
            _need_str(getattr(self, name), name)
        if self.backend not in CATALOG_BACKENDS:
            raise SettingsError(
                f"unknown catalog backend {self.backend!r}; choose one of "
                f"{', '.join(repr(b) for b in CATALOG_BACKENDS)}",
                key="backend",
            )
        _need_match(self.reports_database, _DATABASE_RE, "reports_database", _DATABASE_RULE,
                    "database name")
        if "://" in self.metastore_dir:
            raise SettingsError(
                f"must be a local folder (an embedded Derby metastore), got {self.metastore_dir!r}"
                "; for a shared metastore set hive_metastore_uri",
                key="metastore_dir",
            )
        if any(c.isspace() or c == ";" for c in self.metastore_dir):
            raise SettingsError(
                f"invalid folder {self.metastore_dir!r}: spaces and ';' are not allowed "
                "(Spark's Java options and Derby's JDBC URL cannot carry them)",
                key="metastore_dir",
            )
        for name, pattern, rule in (
            ("hive_metastore_uri", _THRIFT_RE, "thrift://host:port (comma-separated for several)"),
            ("glue_region", _REGION_RE, "an AWS region such as 'us-east-1'"),
            ("glue_catalog_id", _CATALOG_ID_RE, "a 12-digit AWS account id"),
            ("glue_endpoint_url", _ENDPOINT_RE, "an http:// or https:// URL"),
        ):
            value = getattr(self, name)
            if value:
                _need_match(value, pattern, name, f"{rule}, or empty", name.replace("_", " "))


COMPUTE_BACKENDS = ("local", "emr", "emr_serverless")
DEPLOY_MODES = ("client", "cluster")
_CLUSTER_ID_RE = re.compile(r"j-[A-Za-z0-9]{1,64}")
_APPLICATION_ID_RE = re.compile(r"[0-9a-z]{1,64}")
_ROLE_ARN_RE = re.compile(r"arn:aws[a-z-]*:iam::[0-9]{12}:role/[A-Za-z0-9+=,.@_/-]{1,512}")
_S3_PREFIX_RE = re.compile(r"s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](?:/[^\s]*)?")
# Spark settings the remote job may not take from [compute.conf]: they are set for it.
_COMPUTE_CONF_OWNED = {
    "spark.master": "EMR runs Spark on YARN (or serverless): the master is not ours to set",
    "spark.submit.deployMode": "set [compute] deploy_mode instead",
    "spark.submit.pyFiles": "the job's package is added by the compute resource",
}


@dataclass(frozen=True)
class ComputeSettings:
    """Where the sync's Spark job runs (``datalake_assets.orchestration.resources`` / ``datalake_assets.orchestration.emr``).

    ``backend``: ``"local"`` (default: Spark in the run's process, ``[spark]``), ``"emr"`` (a
    step of the existing cluster ``cluster_id``; replays on ``replay_cluster_id`` if set) or
    ``"emr_serverless"`` (a job run of ``application_id`` as ``execution_role_arn``). The other
    keys only matter for the AWS backends; ``conf`` holds their job's ``spark.*`` settings
    (``[spark]`` is for local Spark only)."""

    backend: str = "local"
    region: str = ""  # "" -> AWS_REGION / ~/.aws/config
    cluster_id: str = ""  # emr: j-...
    replay_cluster_id: str = ""  # emr: replays (backfills) go here; "" -> cluster_id
    application_id: str = ""  # emr_serverless
    execution_role_arn: str = ""  # emr_serverless: the job runtime role
    staging_prefix: str = ""  # s3://bucket/prefix/ for job files; "" -> s3://<lake bucket>/_jobs/
    log_uri: str = ""  # emr_serverless: job run logs; "" -> <staging_prefix>logs/
    deploy_mode: str = "client"  # emr: spark-submit --deploy-mode
    submit_timeout_s: int = 3600  # the job must start within this
    run_timeout_s: int = 4 * 3600  # and finish within this once started
    poll_interval_s: int = 15
    endpoint_url: str = ""  # one endpoint for EMR, EMR Serverless and S3 (tests, gateways)
    conf: dict[str, str] = field(default_factory=dict)  # the remote job's spark.* settings

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            if f.type == "str":
                _need_str(getattr(self, f.name), f.name)
        if self.backend not in COMPUTE_BACKENDS:
            raise SettingsError(
                f"unknown compute backend {self.backend!r}; choose one of "
                f"{', '.join(repr(b) for b in COMPUTE_BACKENDS)}",
                key="backend",
            )
        if self.deploy_mode not in DEPLOY_MODES:
            raise SettingsError(
                f"invalid deploy mode {self.deploy_mode!r}; allowed: 'client' (the driver on "
                "the primary node) or 'cluster' (in a YARN container)",
                key="deploy_mode",
            )
        for name, pattern, rule in (
            ("region", _REGION_RE, "an AWS region such as 'us-east-1'"),
            ("cluster_id", _CLUSTER_ID_RE, "an EMR cluster id such as 'j-2AXXXXXXGAPLF'"),
            ("replay_cluster_id", _CLUSTER_ID_RE, "an EMR cluster id such as 'j-2AXXXXXXGAPLF'"),
            ("application_id", _APPLICATION_ID_RE, "an EMR Serverless application id"),
            ("execution_role_arn", _ROLE_ARN_RE, "an IAM role ARN (arn:aws:iam::<id>:role/..)"),
            ("staging_prefix", _S3_PREFIX_RE, "an S3 URI such as 's3://my-lake/_jobs/'"),
            ("log_uri", _S3_PREFIX_RE, "an S3 URI such as 's3://my-lake/_jobs/logs/'"),
            ("endpoint_url", _ENDPOINT_RE, "an http:// or https:// URL"),
        ):
            value = getattr(self, name)
            if value:
                _need_match(value, pattern, name, f"{rule}, or empty", name.replace("_", " "))
        _need_int(self.submit_timeout_s, "submit_timeout_s", 60, 7 * 86400)
        _need_int(self.run_timeout_s, "run_timeout_s", 60, 7 * 86400)
        _need_int(self.poll_interval_s, "poll_interval_s", 1, 600)
        required = {"emr": ("cluster_id",),
                    "emr_serverless": ("application_id", "execution_role_arn")}
        for name in required.get(self.backend, ()):
            if not getattr(self, name):
                raise SettingsError(f"required when backend = {self.backend!r}", key=name)
        conf = _check_spark_conf_names(self.conf, "conf")
        for name in conf:
            if name in _COMPUTE_CONF_OWNED:
                raise SettingsError(f"{name!r} is not allowed here: {_COMPUTE_CONF_OWNED[name]}",
                                    key=_key("conf", name))
        object.__setattr__(self, "conf", conf)  # a private copy, as for SparkSettings

    def __hash__(self) -> int:  # conf is a dict: hash its items
        return hash(tuple(
            tuple(sorted(v.items())) if isinstance(v, dict) else v
            for v in (getattr(self, f.name) for f in dataclasses.fields(self))))

    @property
    def remote(self) -> bool:
        return self.backend != "local"


def _check_spark_conf_names(conf: Any, key: str) -> dict[str, str]:
    """A table of ``spark.*`` name -> string value (no other rule)."""
    if not isinstance(conf, Mapping):
        raise SettingsError(f"must be a table of Spark settings, {_got(conf)}", key=key)
    out: dict[str, str] = {}
    for name, value in conf.items():
        k = _key(key, name) if isinstance(name, str) else f"{key}[{name!r}]"
        if not isinstance(name, str) or not name.startswith("spark.") or name == "spark.":
            raise SettingsError(
                f"invalid Spark setting name {name!r}; allowed: any key starting with 'spark.'",
                key=k,
            )
        if not isinstance(value, str):
            raise SettingsError(f"Spark setting values must be strings, {_got(value)}", key=k)
        out[name] = value
    return out


def _check_compute_fits(settings: LakeSettings) -> None:
    """A job on AWS reads and writes S3, and registers its tables where the cluster can."""
    backend = settings.compute.backend
    if backend == "local":
        return
    for name in ("archive_root", "lake_root"):
        value = getattr(settings, name)
        if not value.startswith("s3://"):
            raise SettingsError(
                f"must be an s3:// URI when [compute] backend = {backend!r} (the job runs on "
                f"AWS and cannot reach {value!r})",
                key=name,
            )
    catalog = settings.catalog
    if catalog.backend == "hive" and not catalog.hive_metastore_uri:
        raise SettingsError(
            f"the embedded Derby metastore of backend 'hive' lives on this machine, but "
            f"[compute] backend = {backend!r} runs the job on AWS: set backend = 'glue' (the "
            "Glue Data Catalog, which EMR uses as its Hive metastore), 'none', or a "
            "hive_metastore_uri the cluster can reach",
            key="catalog.backend",
        )
DEFAULT_SPOOL_DIR = "spool"  # relative like the roots: <home>/spool by default
_HOST_RE = re.compile(r"[A-Za-z0-9.\-:]{1,253}")  # a name, IPv4 or IPv6 (no brackets)


@dataclass(frozen=True)
class CollectorSettings:
    """The Segment-compatible collector (``datalake collect``, ``datalake_assets.ingest.collector``).

    Accepted messages are appended to a write-ahead spool (``spool_dir``, a local folder,
    fsync'd before the reply), then rolled into the raw archive's hourly gzipped files.
    ``spool_dir`` is resolved at load like the roots; ``""`` (direct construction only) means
    ``$DATALAKE_HOME/spool`` when used."""

    host: str = "127.0.0.1"  # listening address; "0.0.0.0" for every interface
    port: int = 8088  # 0: any free port (printed at start)
    spool_dir: str = ""  # write-ahead spool (local folder)
    segment_max_bytes: int = 64 * 1024 * 1024  # a spool segment is rolled at this size
    segment_max_age_seconds: int = 60  # ... or this long after its first message
    max_message_bytes: int = 32768  # one stamped message, as archived (Segment: 32 KB)
    max_batch_bytes: int = 512000  # one request body, uncompressed (Segment: 500 KB)
    workers: int = 1  # processes serving the port (Python decodes JSON on one core each)

    def __post_init__(self) -> None:
        _need_str(self.host, "host")
        if not _HOST_RE.fullmatch(self.host):
            raise SettingsError(
                f"invalid host {self.host!r}; allowed: an IP address or host name such as "
                "'127.0.0.1', '0.0.0.0' or 'localhost'",
                key="host",
            )
        _need_int(self.port, "port", 0, 65535)
        _need_str(self.spool_dir, "spool_dir")
        if "://" in self.spool_dir:
            raise SettingsError(
                f"must be a local folder (the spool is fsync'd before each reply), got "
                f"{self.spool_dir!r}",
                key="spool_dir",
            )
        _need_int(self.segment_max_bytes, "segment_max_bytes", 65536, 1 << 30)
        _need_int(self.segment_max_age_seconds, "segment_max_age_seconds", 1, 3600)
        _need_int(self.max_batch_bytes, "max_batch_bytes", 1024, 64 * 1024 * 1024)
        _need_int(self.max_message_bytes, "max_message_bytes", 256, self.max_batch_bytes)
        _need_int(self.workers, "workers", 1, 64)

    def spool_path(self, home: str | None = None) -> str:
        """The spool folder (``spool_dir``, else ``<home>/spool``)."""
        return self.spool_dir or os.path.join(home or default_home(), DEFAULT_SPOOL_DIR)


@dataclass(frozen=True)
class LakeSettings:
    archive_root: str  # absolute local path or URI (s3://bucket/prefix), no trailing '/'
    lake_root: str
    sources: tuple[SourceSettings, ...]
    spark: SparkSettings = field(default_factory=SparkSettings)
    sync: SyncSettings = field(default_factory=SyncSettings)
    settings_file: str | None = None  # absolute path of the file loaded; None: no file
    automation: AutomationSettings = field(default_factory=AutomationSettings)
    catalog: CatalogSettings = field(default_factory=CatalogSettings)
    compute: ComputeSettings = field(default_factory=ComputeSettings)
    collector: CollectorSettings = field(default_factory=CollectorSettings)

    def __post_init__(self) -> None:
        for name in ("archive_root", "lake_root"):
            value = _need_str(getattr(self, name), name)
            if not value.strip():
                raise SettingsError("must not be empty", key=name)
        if isinstance(self.sources, (list, tuple)):
            object.__setattr__(self, "sources", tuple(self.sources))
        else:
            raise SettingsError(
                f"must be a tuple of SourceSettings, {_got(self.sources)}", key="sources"
            )
        for i, s in enumerate(self.sources):
            if not isinstance(s, SourceSettings):
                raise SettingsError(f"must be a SourceSettings, {_got(s)}", key=f"sources[{i}]")
        if not isinstance(self.spark, SparkSettings):
            raise SettingsError(f"must be a SparkSettings, {_got(self.spark)}", key="spark")
        if not isinstance(self.sync, SyncSettings):
            raise SettingsError(f"must be a SyncSettings, {_got(self.sync)}", key="sync")
        if self.settings_file is not None:
            _need_str(self.settings_file, "settings_file")
        if not isinstance(self.automation, AutomationSettings):
            raise SettingsError(
                f"must be an AutomationSettings, {_got(self.automation)}", key="automation"
            )
        if not isinstance(self.catalog, CatalogSettings):
            raise SettingsError(f"must be a CatalogSettings, {_got(self.catalog)}", key="catalog")
        if not isinstance(self.compute, ComputeSettings):
            raise SettingsError(f"must be a ComputeSettings, {_got(self.compute)}", key="compute")
        if not isinstance(self.collector, CollectorSettings):
            raise SettingsError(
                f"must be a CollectorSettings, {_got(self.collector)}", key="collector"
            )
        _check_sources(self.sources)
        _check_compute_fits(self)

    def write_key_sources(self) -> dict[str, SourceSettings]:
        """Write key -> its source (each key belongs to one source: validated)."""
        return {k: s for s in self.sources for k in s.write_keys}

    def source(self, id_or_slug: str) -> SourceSettings:
        """The source with this id, else the one with this slug (never ambiguous: validated)."""
        for s in self.sources:
            if s.id == id_or_slug:
                return s
        for s in self.sources:
            if s.slug == id_or_slug:
                return s
        known = ", ".join(
            s.id if s.id == s.slug else f"{s.id} (slug {s.slug})" for s in self.sources
        )
        file = self.settings_file
        origin = f"settings file {file}" if file else "built-in defaults"
        raise SettingsError(f"unknown source {id_or_slug!r}; known sources: {known}", origin=origin)


def _check_sources(sources: tuple[SourceSettings, ...]) -> None:
    if not sources:
        raise SettingsError(_NO_SOURCES, key="sources")
    # Every id and slug names exactly one source: lookups by id-or-slug, archive folders, lake
    # folders (id or slug) and asset keys (slug) can then never mix two sources up.
    for what in ("id", "slug"):
        seen: dict[str, int] = {}
        for i, s in enumerate(sources):
            value = getattr(s, what)
            if value in seen:
                raise SettingsError(
                    f"duplicate source {what} {value!r} (also sources[{seen[value]}].{what})",
                    key=f"sources[{i}].{what}",
                )
            seen[value] = i
    for i, s in enumerate(sources):
        for j, earlier in enumerate(sources[:i]):
            for what, value, other in (("id", s.id, "slug"), ("slug", s.slug, "id")):
                if value == getattr(earlier, other):
                    raise SettingsError(
                        f"{what} {value!r} is the {other} of sources[{j}]: a name must refer to "
                        "one source (lookups by id or slug, lake folders)",
                        key=f"sources[{i}].{what}",
                    )
    tables: dict[tuple[str, str], int] = {}
    for i, s in enumerate(sources):
        where = (s.database, s.effective_table_prefix)
        if where in tables:
            j = tables[where]
            prefix = (
                f"the same table_prefix {s.table_prefix!r}" if s.table_prefix else "no table_prefix"
            )
            raise SettingsError(
                f"sources[{j}] and sources[{i}] both use database {s.database!r} with {prefix}: "
                "their tables would collide; set a different table_prefix or database on one",
                key=f"sources[{i}].database",
            )
        tables[where] = i
    imports: dict[tuple[str, str], int] = {}
    for i, s in enumerate(sources):
        if not s.segment_archive:
            continue
        what = (s.segment_archive, s.segment_source_id)
        if what in imports:
            raise SettingsError(
                f"sources[{imports[what]}] already imports Segment source "
                f"{s.segment_source_id!r} of {s.segment_archive!r}: its messages would be in "
                "two sources of the lake",
                key=f"sources[{i}].segment_source_id",
            )
        imports[what] = i
    owners: dict[str, str] = {}
    for i, s in enumerate(sources):
        for j, k in enumerate(s.write_keys):
            if k in owners:
                raise SettingsError(
                    f"write key (value not shown) is also {owners[k]}: a key names one source",
                    key=f"sources[{i}].write_keys[{j}]",
                )
            owners[k] = f"sources[{i}].write_keys[{j}]"


# --------------------------------------------------------------------------------------- loader

_TOP_KEYS = ("archive_root", "lake_root", "spark", "sync", "sources", "automation", "catalog",
             "compute", "collector")
_SPARK_KEYS = ("master", "driver_memory", "shuffle_partitions", "conf")
_SYNC_KEYS = tuple(f.name for f in dataclasses.fields(SyncSettings))
_AUTOMATION_KEYS = tuple(f.name for f in dataclasses.fields(AutomationSettings))
_CATALOG_KEYS = tuple(f.name for f in dataclasses.fields(CatalogSettings))
_COMPUTE_KEYS = tuple(f.name for f in dataclasses.fields(ComputeSettings))
_COLLECTOR_KEYS = tuple(f.name for f in dataclasses.fields(CollectorSettings))
_SOURCE_KEYS = tuple(f.name for f in dataclasses.fields(SourceSettings))


def default_home(env: Mapping[str, str] | None = None) -> str:
    """``$DATALAKE_HOME`` (absolute, ``~`` expanded), else ``<cwd>/.datalake``. Local only."""
    env = os.environ if env is None else env
    home = env.get(ENV_HOME)
    if not home:
        return os.path.join(os.getcwd(), ".datalake")
    if "://" in home:
        raise SettingsError(
            f"must be a local folder, got {home!r}; set {ENV_ARCHIVE_ROOT} and {ENV_LAKE_ROOT} "
            "for URIs",
            key=ENV_HOME,
            origin="environment",
        )
    return os.path.abspath(os.path.expanduser(home))


def default_settings_text() -> str:
    """The shipped, commented ``lake.toml`` (a template to copy and edit)."""
    return resources.files("datalake_assets").joinpath(SHIPPED_SETTINGS_FILE).read_text("utf-8")


def load_settings(
    path: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None
) -> LakeSettings:
    """Defaults <- settings file (``path``, else ``$DATALAKE_SETTINGS``) <- environment.

    ``env`` replaces ``os.environ`` entirely when given (including for ``DATALAKE_SETTINGS`` and
    ``DATALAKE_HOME``)."""
    env = os.environ if env is None else env
    home = default_home(env)
    if path is not None:
        asked, how = os.fspath(path), "given as path"
    else:
        asked, how = env.get(ENV_SETTINGS) or None, f"given by ${ENV_SETTINGS}"
    if asked is not None:
        if not asked.strip():
            raise SettingsError("the settings file path is empty", origin="settings file")
        settings_file: str | None = os.path.abspath(os.path.expanduser(asked))
        origin = f"settings file {settings_file}"
        data = _read_toml(settings_file, origin, how)
        base = os.path.dirname(settings_file)
    else:
        settings_file, origin, data, base = None, "built-in defaults", {}, home
    try:
        settings = _from_mapping(data, base, settings_file)
    except SettingsError as e:
        raise e._within(origin=origin) from None
    return _apply_env(settings, env)


def _read_toml(file: str, origin: str, how: str) -> dict[str, Any]:
    try:
        with open(file, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise SettingsError(f"file not found ({how})", origin=origin) from None
    except IsADirectoryError:
        raise SettingsError(f"is a folder, not a TOML file ({how})", origin=origin) from None
    except OSError as e:
        raise SettingsError(f"cannot read: {e.strerror or e}", origin=origin) from None
    except UnicodeDecodeError as e:
        raise SettingsError(f"not UTF-8 text: {e}", origin=origin) from None
    except tomllib.TOMLDecodeError as e:
        raise SettingsError(f"invalid TOML: {e}", origin=origin) from None


def _check_keys(table: Mapping[str, Any], allowed: tuple[str, ...], where: str) -> None:
    unknown = [k for k in table if k not in allowed]
    if not unknown:
        return
    shown = ", ".join(repr(k) for k in unknown)
    hints = [m for k in unknown for m in difflib.get_close_matches(k, allowed, n=1)]
    hint = f" (did you mean {', '.join(repr(h) for h in hints)}?)" if hints else ""
    place = f"[{where}]" if where and not where.endswith("]") else (where or "the top level")
    raise SettingsError(
        f"unknown key{'s' if len(unknown) > 1 else ''} {shown} in {place}{hint}; "
        f"allowed keys: {', '.join(sorted(allowed))}",
        key=_key(where, unknown[0]),
    )


def _table(data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, Mapping):
        raise SettingsError(f"must be a table ([{key}]), {_got(value)}", key=key)
    return value


def _resolve_root(value: Any, base: str, key: str) -> str:
    root = _need_str(value, key)
    if not root.strip():
        raise SettingsError("must not be empty; allowed: a local folder or a URI", key=key)
    if root != root.strip():
        raise SettingsError(f"has leading or trailing spaces: {root!r}", key=key)
    if "://" in root:
        m = _URI_RE.fullmatch(root)
        rest = m.group(2).rstrip("/") if m else ""
        if not m or not rest:
            raise SettingsError(
                f"invalid URI {root!r}; allowed: scheme://bucket/prefix (e.g. s3://my-lake/data) "
                "or a local folder",
                key=key,
            )
        return f"{m.group(1)}://{rest}"
    if _HALF_URI_RE.match(root):
        raise SettingsError(
            f"{root!r} looks like a URI missing a '/' (write scheme://bucket/prefix)", key=key
        )
    return os.path.normpath(os.path.join(base, os.path.expanduser(root)))


def _from_mapping(data: Mapping[str, Any], base: str, settings_file: str | None) -> LakeSettings:
    _check_keys(data, _TOP_KEYS, "")
    archive_root = _resolve_root(
        data.get("archive_root", DEFAULT_ARCHIVE_DIR), base, "archive_root"
    )
    lake_root = _resolve_root(data.get("lake_root", DEFAULT_LAKE_DIR), base, "lake_root")
    spark = _spark_from(_table(data, "spark"))
    sync_raw = _table(data, "sync")
    _check_keys(sync_raw, _SYNC_KEYS, "sync")
    try:
        sync = SyncSettings(**sync_raw)
    except SettingsError as e:
        raise e._within(prefix="sync") from None
    if "sources" in data:
        sources = _sources_from(data["sources"], base)
    else:
        sources = (SourceSettings(DEFAULT_SOURCE_ID),)
    automation_raw = _table(data, "automation")
    _check_keys(automation_raw, _AUTOMATION_KEYS, "automation")
    try:
        automation = AutomationSettings(**automation_raw)
    except SettingsError as e:
        raise e._within(prefix="automation") from None
    catalog = _catalog_from(_table(data, "catalog"), base)
    compute = _compute_from(_table(data, "compute"))
    collector = _collector_from(_table(data, "collector"), base)
    return LakeSettings(archive_root, lake_root, sources, spark, sync, settings_file,
                        automation=automation, catalog=catalog, compute=compute,
                        collector=collector)


def _compute_from(raw: Mapping[str, Any]) -> ComputeSettings:
    """``[compute]`` and its ``[compute.conf]`` table (TOML booleans and integers become the
    strings Spark expects, as in ``[spark.conf]``)."""
    _check_keys(raw, _COMPUTE_KEYS, "compute")
    values = dict(raw)
    if "conf" in values:
        conf = values["conf"]
        if not isinstance(conf, Mapping):
            raise SettingsError(f"must be a table ([compute.conf]), {_got(conf)}",
                                key="compute.conf")
        given: dict[str, Any] = {}
        for name, value in conf.items():
            if isinstance(value, Mapping):
                raise SettingsError(
                    "a table where a value was expected: quote Spark keys, e.g. "
                    '"spark.executor.memory" = "8g"',
                    key=_key("compute.conf", name),
                )
            if isinstance(value, bool):
                value = "true" if value else "false"
            elif isinstance(value, int):
                value = str(value)
            given[name] = value
        values["conf"] = given
    try:
        return ComputeSettings(**values)
    except SettingsError as e:
        raise e._within(prefix="compute") from None


def _local_folder(raw: Mapping[str, Any], name: str, default: str, base: str, key: str) -> Any:
    """A folder setting resolved like the roots (relative to the file's folder, or to the home
    for the defaults); a non-string or a URI is left for the dataclass to reject."""
    folder = raw.get(name, default)
    if isinstance(folder, str):
        if not folder.strip():
            raise SettingsError(f"must not be empty; omit it for the default ({default})", key=key)
        if "://" not in folder:
            folder = os.path.normpath(os.path.join(base, os.path.expanduser(folder)))
    return folder


def _collector_from(raw: Mapping[str, Any], base: str) -> CollectorSettings:
    """``[collector]``; ``spool_dir`` is resolved like ``catalog.metastore_dir``."""
    _check_keys(raw, _COLLECTOR_KEYS, "collector")
    values = dict(raw)
    values["spool_dir"] = _local_folder(raw, "spool_dir", DEFAULT_SPOOL_DIR, base,
                                        "collector.spool_dir")
    try:
        return CollectorSettings(**values)
    except SettingsError as e:
        raise e._within(prefix="collector") from None


def _catalog_from(raw: Mapping[str, Any], base: str) -> CatalogSettings:
    """``[catalog]``; ``metastore_dir`` is resolved like the roots (relative to the file's
    folder, or to the home for the defaults)."""
    _check_keys(raw, _CATALOG_KEYS, "catalog")
    values = dict(raw)
    values["metastore_dir"] = _local_folder(raw, "metastore_dir", DEFAULT_METASTORE_DIR, base,
                                            "catalog.metastore_dir")
    try:
        return CatalogSettings(**values)
    except SettingsError as e:
        raise e._within(prefix="catalog") from None


def _spark_from(raw: Mapping[str, Any]) -> SparkSettings:
    _check_keys(raw, _SPARK_KEYS, "spark")
    conf_raw = raw.get("conf", {})
    if not isinstance(conf_raw, Mapping):
        raise SettingsError(f"must be a table ([spark.conf]), {_got(conf_raw)}", key="spark.conf")
    given: dict[str, Any] = {}
    for name, value in conf_raw.items():
        if isinstance(value, Mapping):
            raise SettingsError(
                "a table where a value was expected: quote Spark keys, e.g. "
                '"spark.sql.files.maxPartitionBytes" = "64m"',
                key=_key("spark.conf", name),
            )
        if isinstance(value, bool):  # TOML true -> Spark's "true"
            value = "true" if value else "false"
        elif isinstance(value, int):
            value = str(value)
        given[name] = value
    conf = {**_default_spark_conf(), **_check_spark_conf(given, "spark.conf")}
    kwargs = {k: raw[k] for k in ("master", "driver_memory", "shuffle_partitions") if k in raw}
    try:
        return SparkSettings(**kwargs, extra_conf=conf)
    except SettingsError as e:
        raise e._within(prefix="spark") from None


def _sources_from(raw: Any, base: str) -> tuple[SourceSettings, ...]:
    if isinstance(raw, Mapping):
        raise SettingsError(
            "must be an array of tables: write [[sources]] (double brackets) for each source",
            key="sources",
        )
    if not isinstance(raw, list):
        raise SettingsError(f"must be an array of [[sources]] tables, {_got(raw)}", key="sources")
    if not raw:
        raise SettingsError(_NO_SOURCES, key="sources")
    out = []
    for i, item in enumerate(raw):
        where = f"sources[{i}]"
        if not isinstance(item, Mapping):
            raise SettingsError(f"must be a table with at least an id, {_got(item)}", key=where)
        _check_keys(item, _SOURCE_KEYS, where)
        if "id" not in item:
            raise SettingsError(
                "missing required key 'id' (the Segment source id)", key=f"{where}.id"
            )
        for name, default in (("slug", "snake_case of the id"), ("database", "the slug")):
            if item.get(name) == "":
                raise SettingsError(f"must not be empty; omit it to default to {default}",
                                    key=f"{where}.{name}")
        if item.get("segment_archive"):  # a local folder: relative to the settings file
            item = {**item, "segment_archive": _resolve_root(
                item["segment_archive"], base, f"{where}.segment_archive")}
        try:
            out.append(SourceSettings(**item))
        except SettingsError as e:
            raise e._within(prefix=where) from None
    return tuple(out)


def _apply_env(settings: LakeSettings, env: Mapping[str, str]) -> LakeSettings:
    def get(name: str) -> str | None:
        return env.get(name) or None

    def failed(e: SettingsError, name: str) -> SettingsError:
        return SettingsError(e.problem, key=name, origin="environment")

    changes: dict[str, Any] = {}
    for name, attr in ((ENV_ARCHIVE_ROOT, "archive_root"), (ENV_LAKE_ROOT, "lake_root")):
        value = get(name)
        if value is not None:
            try:
                changes[attr] = _resolve_root(value, os.getcwd(), name)
            except SettingsError as e:
                raise failed(e, name) from None

    spark = settings.spark
    for name, attr in ((ENV_SPARK_MASTER, "master"), (ENV_SPARK_DRIVER_MEMORY, "driver_memory")):
        value = get(name)
        if value is not None:
            try:
                spark = dataclasses.replace(spark, **{attr: value})
            except SettingsError as e:
                raise failed(e, name) from None
    if spark is not settings.spark:
        changes["spark"] = spark

    value = get(ENV_MAX_MESSAGE_BYTES)
    if value is not None:
        try:
            number = int(value.strip())
        except ValueError:
            raise SettingsError(
                f"must be an integer >= 1, got {value!r}", key=ENV_MAX_MESSAGE_BYTES,
                origin="environment",
            ) from None
        try:
            changes["sync"] = dataclasses.replace(settings.sync, max_message_bytes=number)
        except SettingsError as e:
            raise failed(e, ENV_MAX_MESSAGE_BYTES) from None

    value = get(ENV_CATALOG_BACKEND)
    if value is not None:
        try:
            changes["catalog"] = dataclasses.replace(settings.catalog, backend=value.strip())
        except SettingsError as e:
            raise failed(e, ENV_CATALOG_BACKEND) from None

    value = get(ENV_WEBSERVER_URL)
    if value is not None:
        try:
            changes["automation"] = dataclasses.replace(settings.automation,
                                                        webserver_url=value.strip())
        except SettingsError as e:
            raise failed(e, ENV_WEBSERVER_URL) from None

    value = get(ENV_COMPUTE_BACKEND)
    if value is not None:
        try:
            changes["compute"] = dataclasses.replace(settings.compute, backend=value.strip())
        except SettingsError as e:
            if e.key != "backend":  # the backend is fine, the [compute] section lacks a key
                e = SettingsError(f"[compute] {e.key}: {e.problem}")
            raise failed(e, ENV_COMPUTE_BACKEND) from None

    value = get(ENV_WRITE_KEYS)
    if value is not None:
        changes["sources"] = _sources_with_env_keys(settings, value)

    if not changes:
        return settings
    try:
        return dataclasses.replace(settings, **changes)
    except SettingsError as e:  # the roots or backends changed no longer fit together
        raise SettingsError(e.problem, key=e.key, origin="environment") from None


def _sources_with_env_keys(settings: LakeSettings, value: str) -> tuple[SourceSettings, ...]:
    """``DATALAKE_WRITE_KEYS="key=source,key=source"`` (source: id or slug) replaces every
    source's ``write_keys``. Errors name the pair's position, never a key."""
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
                key=ENV_WRITE_KEYS, origin="environment",
            )
        try:
            source = settings.source(name.strip())
        except SettingsError as e:
            raise SettingsError(f"entry {i + 1}: {e.problem}", key=ENV_WRITE_KEYS,
                                origin="environment") from None
        if key in owner:
            raise SettingsError(
                f"entry {i + 1}: duplicate write key (also entry {owner[key] + 1}; "
                "value not shown)",
                key=ENV_WRITE_KEYS, origin="environment",
            )
        owner[key] = i
        keys[source.id].append(key)
    try:
        return tuple(dataclasses.replace(s, write_keys=tuple(keys[s.id]))
                     for s in settings.sources)
    except SettingsError as e:
        raise SettingsError(e.problem, key=ENV_WRITE_KEYS, origin="environment") from None
