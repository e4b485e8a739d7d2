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
  ``DATALAKE_CATALOG_BACKEND``, ``DATALAKE_COMPUTE_BACKEND``, ``DATALAKE_WEBSERVER_URL``,
  ``DATALAKE_TABLE_FORMAT``, ``DATALAKE_MODELS_ENGINE``, ``DATALAKE_ALERTS_WEBHOOK_URL``, ``DATALAKE_WRITE_KEYS`` (``key=source,key=source``: replaces every source's ``write_keys``;
  keep the keys out of the file this way). An empty variable counts as unset.
* Roots are local folders or URIs (``s3://bucket/prefix``; Azure: ``spec/azure_uri.py``), a
  URI kept as written (minus trailing ``/``; ``os.path`` never touches it), a local path made
  absolute: relative to the settings file's folder (from the file), to the home folder
  (defaults: ``<home>/archive`` and ``<home>/lake``), or to the current directory (from the
  environment). ``~`` is expanded.
* Home: ``$DATALAKE_HOME``, else ``<cwd>/.datalake``.

Everything is validated when loaded: unknown keys (typos), wrong types, invalid names, unknown
date layouts, bad start hours, and sources that would overwrite each other. A ``SettingsError``
names the file (or ``environment``), the key path (``sources[1].date_layout``), the bad value
and what is allowed.

The models are frozen pydantic dataclasses (``fields.py``: the base, the field types and the
errors), also validated when built directly or by ``dataclasses.replace``. This package holds
every section, one module each, and each name has one home, imported from there:
``transform_section.py`` (``[spark]``, ``[sync]``), ``catalog_section.py``,
``orchestration_section.py`` (``[automation]``, ``[compute]``), ``ingest_section.py``
(``[collector]``, write keys, the Segment import), ``privacy_section.py``,
``models_section.py``, ``formats_section.py`` (``table_format``, ``[iceberg]``),
``alerts_section.py``, ``freshness_section.py``;
``environment.py`` the ``DATALAKE_*`` overrides. Here: the sources, the whole and the loader.
Importing the package imports pydantic and the standard library, no data library
(``test_architecture.py`` checks it).
"""

import dataclasses
import os
import re
import tomllib
from collections.abc import Mapping
from datetime import datetime
from importlib import resources
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, PlainValidator, model_validator

from datalake_assets.plans.plan_policy import (
    CHECK_SEVERITIES,
    KEEP,
    UNPLANNED_EVENT_MODES,
    UNPLANNED_PROPERTY_MODES,
    VIOLATION_MODES,
)
from datalake_assets.settings.alerts_section import AlertsSettings
from datalake_assets.settings.catalog_section import (
    CatalogSettings,
)
from datalake_assets.settings.environment import ENV_SETTINGS, ENV_TABLE_FORMAT, apply_env
from datalake_assets.settings.fields import (
    Bool,
    LocalFile,
    Match,
    NotInFile,
    OneOf,
    Root,
    SettingsError,
    Str,
    default_home,
    file_defaults,
    file_keys,
    got,
    load_model,
    settings_model,
)
from datalake_assets.settings.formats_section import IcebergSettings
from datalake_assets.settings.freshness_section import FreshnessSettings, SourceMinutes
from datalake_assets.settings.ingest_section import (
    CollectorSettings,
    CorsOrigins,
    SegmentArchive,
    WriteKeys,
)
from datalake_assets.settings.models_section import ModelsSettings
from datalake_assets.settings.orchestration_section import (
    AutomationSettings,
    ComputeSettings,
    check_compute_fits,
)
from datalake_assets.settings.privacy_section import PrivacySettings
from datalake_assets.settings.transform_section import (
    SparkSettings,
    SyncSettings,
)
from datalake_assets.spec import naming
from datalake_assets.spec.layout import DATE_LAYOUTS, DEFAULT_DATE_LAYOUT
from datalake_assets.spec.table_formats import TABLE_FORMATS, default_table_format

SHIPPED_SETTINGS_FILE = "lake.toml"  # package data of ``datalake_assets``: the documented defaults

DEFAULT_SOURCE_ID = "demo"
# "auto": the first hour of the source's raw archive, read when the code location loads
# (datalake_assets.orchestration.sync.lake_state); an explicit hour fixes it.
AUTO_START = "auto"
DEFAULT_START = AUTO_START
DEFAULT_ARCHIVE_DIR = "archive"  # relative to the home (defaults) or the settings file's folder
DEFAULT_LAKE_DIR = "lake"

_ID_RE = r"[A-Za-z0-9_-]{1,128}"
_ID_RULE = "1-128 characters from [A-Za-z0-9_-] (the id is a folder of the raw archive)"
_SLUG_RE = re.compile(r"[a-z0-9_]{1,64}")
_SLUG_RULE = "1-64 characters from [a-z0-9_] (Glue-safe)"
_DATABASE_RULE = "1-255 characters from [a-z0-9_] (Glue-safe)"
_PREFIX_RULE = "characters from [a-z0-9_], or empty for none"
_START_RE = re.compile(r"(\d{4})-(\d{2})-(\d{2})-(\d{2}):00")
_START_RULE = (
    "'auto' (the archive's first hour) or an hour as 'YYYY-MM-DD-HH:00' (a Dagster hourly "
    "partition key), e.g. '2025-01-01-00:00'"
)
_OWNER_RE = re.compile(r"team:[A-Za-z0-9_-]+|[^@\s]+@[^@\s]+\.[^@\s]+")
_OWNER_RULE = "an email address or 'team:<name>' (Dagster's owner format)"
_NO_SOURCES = "at least one source is required (add a [[sources]] table)"


def _start(start: str) -> str:
    m = _START_RE.fullmatch(start)
    try:
        if start == AUTO_START or m and datetime(*(int(g) for g in m.groups())):
            return start
    except ValueError:  # no such hour
        pass
    raise SettingsError(f"invalid start hour {start!r}; allowed: {_START_RULE}")


def _owners(owners: Any) -> tuple[str, ...]:
    if isinstance(owners, str) or not isinstance(owners, (list, tuple)):
        raise SettingsError(f"must be a list of owners, {got(owners)}")
    for i, owner in enumerate(owners):
        if not isinstance(owner, str) or not _OWNER_RE.fullmatch(owner):
            raise SettingsError(f"invalid owner {owner!r}; allowed: {_OWNER_RULE}", key=f"[{i}]")
    return tuple(owners)


@settings_model
class SourceSettings:
    """One Segment source. ``slug`` and ``database`` left empty are derived (``snake(id)``,
    then ``slug``); the stored values are always the effective ones."""

    # Segment source id: names the raw archive folder <archive_root>/<id>/
    id: Annotated[Match(_ID_RE, "source id", _ID_RULE), Field(description="the Segment source id")]
    slug: Match(_SLUG_RE.pattern, "slug", _SLUG_RULE, empty="snake_case of the id") = ""
    database: Match(r"[a-z0-9_]{1,255}", "database name", _DATABASE_RULE, empty="the slug") = ""
    # prepended to catalog table names ("web" -> web_pages)
    table_prefix: Match(r"[a-z0-9_]*", "table prefix", _PREFIX_RULE) = ""
    date_layout: OneOf(tuple(sorted(DATE_LAYOUTS)), "date layout") = DEFAULT_DATE_LAYOUT
    path_by_slug: Bool = False  # lake folders named by slug instead of id
    # first hourly partition, 'YYYY-MM-DD-HH:00' (UTC), or "auto"
    start: Annotated[Str, AfterValidator(_start)] = DEFAULT_START
    # who answers for the source's assets (shown in the Dagster UI): emails or "team:<name>"
    owners: Annotated[tuple[str, ...], PlainValidator(_owners)] = ()
    # Segment's S3-destination archive to import (datalake_assets.ingest.segment_import): a local
    # folder, s3:// or Azure URI with segment-logs/<segment_source_id>/<day epoch ms>/*.gz; "": none
    segment_archive: SegmentArchive = ""
    # the source's folder in segment-logs/; "" -> id (with an archive)
    segment_source_id: Match(_ID_RE, "Segment source id", _ID_RULE, empty=True) = ""
    # Segment write keys the collector accepts for this source. Secrets: never in a repr or an
    # error message (errors name the key's position, never its value).
    write_keys: WriteKeys = dataclasses.field(default=(), repr=False)
    # Browser origins whose pages may send this source's events to the collector (CORS): "*"
    # (any, the default: write keys are public in browser code anyway), "https://host[:port]",
    # "https://*.domain".
    cors_origins: CorsOrigins = ("*",)
    # minutes between two batches of this source's open hour; absent: [freshness]'s
    freshness_minutes: SourceMinutes = None
    # the source's tracking plan (plans/, docs/guides/tracking-plans.md): a Segment plan export
    # (Public API or Config API JSON) or a folder of JSON Schemas, relative to this file's
    # folder; "": none. What happens to a message the plan does not like, and how the
    # tracking_plan asset check reports an hour with violations:
    tracking_plan: LocalFile = ""
    unplanned_events: OneOf(UNPLANNED_EVENT_MODES, "unplanned events mode") = KEEP
    unplanned_properties: OneOf(UNPLANNED_PROPERTY_MODES, "unplanned properties mode") = KEEP
    violations: OneOf(VIOLATION_MODES, "violations mode") = KEEP
    tracking_plan_check: OneOf(CHECK_SEVERITIES, "tracking plan check severity") = "warn"

    @model_validator(mode="after")
    def _derive(self) -> "SourceSettings":
        if not self.slug:
            derived = naming.snake(self.id)
            if not _SLUG_RE.fullmatch(derived):
                raise SettingsError(
                    f"cannot derive a slug from id {self.id!r} (snake case gives {derived!r}); "
                    f"set slug explicitly: {_SLUG_RULE}",
                    key="slug",
                )
            object.__setattr__(self, "slug", derived)
        if not self.database:
            object.__setattr__(self, "database", self.slug)
        if self.table_prefix and not naming.snake(self.table_prefix):
            raise SettingsError(
                f"invalid table prefix {self.table_prefix!r}: it has no letter or digit, so it "
                f"would add nothing to table names; allowed: {_PREFIX_RULE}",
                key="table_prefix",
            )
        if not self.tracking_plan:
            for key in ("unplanned_events", "unplanned_properties", "violations"):
                if getattr(self, key) != KEEP:
                    raise SettingsError(
                        "only applies with a tracking plan: set tracking_plan too (or remove "
                        "this key)",
                        key=key,
                    )
        if not self.segment_archive:
            if self.segment_source_id:
                raise SettingsError(
                    "only applies to an import: set segment_archive too (or remove this key)",
                    key="segment_source_id",
                )
            return self
        if not self.segment_source_id:
            object.__setattr__(self, "segment_source_id", self.id)
        if self.start == AUTO_START:
            # The import is what fills the archive: its first day cannot come from the archive.
            raise SettingsError(
                "a source that imports Segment's archive needs an explicit start: the first "
                "hour to import, e.g. the day the source began sending to Segment "
                "('YYYY-MM-DD-00:00')",
                key="start",
            )
        return self

    @property
    def lake_dir(self) -> str:
        """The source's folder in the lake (``data/<lake_dir>/...``): slug or id."""
        return self.slug if self.path_by_slug else self.id

    @property
    def effective_table_prefix(self) -> str:
        """The prefix as ``naming.catalog_table_name`` applies it (snake-cased)."""
        return naming.snake(self.table_prefix) if self.table_prefix else ""


def _sources(sources: Any) -> Any:
    if isinstance(sources, Mapping):
        raise SettingsError(
            "must be an array of tables: write [[sources]] (double brackets) for each source"
        )
    if not isinstance(sources, (list, tuple)):
        raise SettingsError(f"must be an array of [[sources]] tables, {got(sources)}")
    if not sources:
        raise SettingsError(_NO_SOURCES)
    return tuple(sources)


@settings_model
class LakeSettings:
    # a settings file's omitted keys and tables (so that each is read as from the file)
    _file_defaults = file_defaults(
        archive_root=DEFAULT_ARCHIVE_DIR,
        lake_root=DEFAULT_LAKE_DIR,
        sources=[{"id": DEFAULT_SOURCE_ID}],
        spark={},
        sync={},
        automation={},
        catalog={},
        compute={},
        collector={},
        privacy={},
        models={},
        iceberg={},
        alerts={},
        freshness={},
    )

    archive_root: Root  # absolute local path or URI (s3://, abfss://, az://), no trailing '/'
    lake_root: Root
    sources: Annotated[tuple[SourceSettings, ...], BeforeValidator(_sources)]
    spark: SparkSettings = dataclasses.field(default_factory=SparkSettings)
    sync: SyncSettings = dataclasses.field(default_factory=SyncSettings)
    settings_file: NotInFile = None  # absolute path of the file loaded; None: no file
    automation: AutomationSettings = dataclasses.field(default_factory=AutomationSettings)
    catalog: CatalogSettings = dataclasses.field(default_factory=CatalogSettings)
    compute: ComputeSettings = dataclasses.field(default_factory=ComputeSettings)
    collector: CollectorSettings = dataclasses.field(default_factory=CollectorSettings)
    privacy: PrivacySettings = dataclasses.field(default_factory=PrivacySettings)
    # the dbt models on the lake (models/): sessions, users, identity graph, daily counts
    models: ModelsSettings = dataclasses.field(default_factory=ModelsSettings)
    # how the tables hold their files (lake/formats/): Iceberg, or Segment's hive-style folders;
    # not named: spec.table_formats.default_table_format of lake_root (set by _fit_together)
    table_format: OneOf(TABLE_FORMATS, "table format") = ""
    iceberg: IcebergSettings = dataclasses.field(default_factory=IcebergSettings)
    # where failed runs, failed blocking checks and stale tables are reported
    alerts: AlertsSettings = dataclasses.field(default_factory=AlertsSettings)
    # how often an open hour's batches run (transform/open_hour.py)
    freshness: FreshnessSettings = dataclasses.field(default_factory=FreshnessSettings)

    @model_validator(mode="after")
    def _fit_together(self) -> "LakeSettings":
        if not self.table_format:
            object.__setattr__(self, "table_format", default_table_format(self.lake_root))
        _check_sources(self.sources)
        check_compute_fits(
            self.compute,
            self.catalog,
            {"archive_root": self.archive_root, "lake_root": self.lake_root},
        )
        return self

    def freshness_minutes(self, source: SourceSettings) -> int:
        """The source's freshness interval in minutes (0: hourly syncs only)."""
        if source.freshness_minutes is not None:
            return source.freshness_minutes
        return self.freshness.interval_minutes

    def write_key_sources(self) -> dict[str, SourceSettings]:
        """Write key -> its source (each key belongs to one source: validated)."""
        return {k: s for s in self.sources for k in s.write_keys}

    def source(self, id_or_slug: str) -> SourceSettings:
        """The source with this id, else the one with this slug (never ambiguous: validated)."""
        found = [s for s in self.sources if s.id == id_or_slug] or [
            s for s in self.sources if s.slug == id_or_slug
        ]
        if found:
            return found[0]
        known = ", ".join(
            s.id if s.id == s.slug else f"{s.id} (slug {s.slug})" for s in self.sources
        )
        file = self.settings_file
        origin = f"settings file {file}" if file else "built-in defaults"
        raise SettingsError(f"unknown source {id_or_slug!r}; known sources: {known}", origin=origin)


def _check_sources(sources: tuple[SourceSettings, ...]) -> None:
    # Every id and slug names exactly one source: lookups by id-or-slug, archive folders, lake
    # folders (id or slug) and asset keys (slug) can then never mix two sources up.
    for i, s in enumerate(sources):
        for j, earlier in enumerate(sources[:i]):
            for what, other in (("id", "id"), ("slug", "slug"), ("id", "slug"), ("slug", "id")):
                value = getattr(s, what)
                if value != getattr(earlier, other):
                    continue
                raise SettingsError(
                    f"duplicate source {what} {value!r} (also sources[{j}].{what})"
                    if what == other
                    else f"{what} {value!r} is the {other} of sources[{j}]: a "
                    "name must refer to one source (lookups by id or slug, lake folders)",
                    key=f"sources[{i}].{what}",
                )
    tables: dict[tuple[str, str], int] = {}
    imports: dict[tuple[str, str], int] = {}
    keys: dict[str, str] = {}
    for i, s in enumerate(sources):
        j = tables.setdefault((s.database, s.effective_table_prefix), i)
        if j != i:
            prefix = (
                f"the same table_prefix {s.table_prefix!r}"
                if s.table_prefix
                else ("no table_prefix")
            )
            raise SettingsError(
                f"sources[{j}] and sources[{i}] both use database {s.database!r} with {prefix}: "
                "their tables would collide; set a different table_prefix or database on one",
                key=f"sources[{i}].database",
            )
        if s.segment_archive:
            j = imports.setdefault((s.segment_archive, s.segment_source_id), i)
            if j != i:
                raise SettingsError(
                    f"sources[{j}] already imports Segment source {s.segment_source_id!r} of "
                    f"{s.segment_archive!r}: its messages would be in two sources of the lake",
                    key=f"sources[{i}].segment_source_id",
                )
        for n, k in enumerate(s.write_keys):
            where = keys.setdefault(k, f"sources[{i}].write_keys[{n}]")
            if where != f"sources[{i}].write_keys[{n}]":
                raise SettingsError(
                    f"write key (value not shown) is also {where}: a key names one source",
                    key=f"sources[{i}].write_keys[{n}]",
                )


# --------------------------------------------------------------------------------------- loader

_TOP_KEYS = file_keys(LakeSettings)
_SPARK_KEYS = file_keys(SparkSettings)
_SYNC_KEYS = file_keys(SyncSettings)
_AUTOMATION_KEYS = file_keys(AutomationSettings)
_CATALOG_KEYS = file_keys(CatalogSettings)
_COMPUTE_KEYS = file_keys(ComputeSettings)
_COLLECTOR_KEYS = file_keys(CollectorSettings)
_PRIVACY_KEYS = file_keys(PrivacySettings)
_ICEBERG_KEYS = file_keys(IcebergSettings)
_ALERTS_KEYS = file_keys(AlertsSettings)
_SOURCE_KEYS = file_keys(SourceSettings)


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
        settings = load_model(LakeSettings, data, base)
    except SettingsError as e:
        raise SettingsError(e.problem, key=e.key, origin=origin) from None
    if settings_file is not None:
        settings = dataclasses.replace(settings, settings_file=settings_file)
    settings = apply_env(settings, env)
    if "table_format" not in data and not env.get(ENV_TABLE_FORMAT):
        # the default follows the lake's root, also when the environment moved it
        default = default_table_format(settings.lake_root)
        if settings.table_format != default:
            settings = dataclasses.replace(settings, table_format=default)
    return settings


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
