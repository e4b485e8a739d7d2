"""``[models]``: the dbt models on the lake (``datalake_assets.models``, ``docs/guides/models.md``)."""

import os

from datalake_assets.settings.fields import (
    Bool,
    Int,
    LocalFolder,
    Match,
    OneOf,
    default_home,
    file_defaults,
    settings_model,
)

DEFAULT_USER_MODELS_DIR = "models"  # next to the settings file, else $DATALAKE_HOME/models
DEFAULT_BUILD_DIR = "dbt"  # the assembled dbt projects, one per source
# which engine runs the models (datalake_assets/models/engines/, one module each)
DUCKDB, SPARK, ATHENA = "duckdb", "spark", "athena"
MODEL_ENGINES = (DUCKDB, SPARK, ATHENA)


@settings_model
class ModelsSettings:
    """The built-in models (sessions, identity graph, users, daily counts) and the user's own.

    ``user_models_dir`` holds the user's ``.sql`` (and ``.yml``) files, added to every
    source's project; ``build_dir`` is where each source's project is assembled and parsed.
    ``engine``: what runs them (``models/engines/``): ``duckdb`` (the default: embedded, no
    JVM, reads the lake in either table format and publishes the models into it),
    ``spark`` (dbt-spark on the platform's Spark; the Segment layout with a Hive catalog,
    or your own profile: EMR's Thrift server, Databricks), ``athena`` (dbt-athena, for a
    lake in Glue). ``profiles_dir`` / ``target``: a dbt ``profiles.yml`` of your own for the
    engine; empty: the engine's local profile."""

    _file_defaults = file_defaults(
        user_models_dir=DEFAULT_USER_MODELS_DIR, build_dir=DEFAULT_BUILD_DIR
    )

    enabled: Bool = True
    engine: OneOf(MODEL_ENGINES, "models engine") = DUCKDB
    # the DuckDB engine's memory limit (DuckDB spills to disk beyond it)
    duckdb_memory_gb: Int(1, 1024) = 2
    # the Athena engine's query results location (s3://...); empty: <lake_root>/_athena/
    athena_staging_dir: Match(r"(s3://[^\s]+)?", "S3 URI", "an s3:// URI", empty=True) = ""
    # a session ends after this many minutes without an event (dbt-segment's cut: a gap of
    # exactly this long still continues the session)
    session_gap_minutes: Int(1, 24 * 60) = 30
    # an event received up to this many hours after its timestamp is placed at its timestamp
    # (it joins the session it belongs to); later ones are placed at their receipt
    late_event_hours: Int(0, 24) = 3
    user_models_dir: LocalFolder(DEFAULT_USER_MODELS_DIR, "the user's dbt models") = ""
    build_dir: LocalFolder(DEFAULT_BUILD_DIR, "the assembled dbt projects") = ""
    profiles_dir: Match(r"[^\n]*", "profiles dir", "a folder holding profiles.yml", empty=True) = ""
    target: Match(
        r"[A-Za-z0-9_-]{0,64}", "dbt target", "a target name of profiles.yml", empty=True
    ) = ""


def user_models_dir(settings: ModelsSettings) -> str:
    return settings.user_models_dir or os.path.join(default_home(), DEFAULT_USER_MODELS_DIR)


def build_dir(settings: ModelsSettings) -> str:
    return settings.build_dir or os.path.join(default_home(), DEFAULT_BUILD_DIR)
