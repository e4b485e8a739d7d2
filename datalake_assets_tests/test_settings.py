"""Settings: defaults, the shipped lake.toml, roots, environment overrides, validation."""

from __future__ import annotations

import dataclasses
import os
import re
import textwrap
from pathlib import Path

import pytest

import datalake_assets
from datalake_assets import settings as st
from datalake_assets.catalog.config import config_from_settings
from datalake_assets.settings import LakeSettings, SourceSettings, load_settings
from datalake_assets.settings.catalog_section import CatalogSettings
from datalake_assets.settings.fields import SettingsError, default_home, file_keys
from datalake_assets.settings.ingest_section import CollectorSettings
from datalake_assets.settings.models_section import ModelsSettings
from datalake_assets.settings.orchestration_section import AutomationSettings
from datalake_assets.settings.transform_section import (
    DEFAULT_SPARK_CONF,
    SparkSettings,
    SyncSettings,
)
from datalake_assets.spec.layout import DATE_LAYOUTS

SHIPPED = Path(datalake_assets.__file__).with_name("lake.toml")


def write(tmp_path: Path, text: str, name: str = "lake.toml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def home_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"DATALAKE_HOME": str(tmp_path / "home"), **extra}


# ------------------------------------------------------------------------------------ defaults


def test_defaults_without_a_file(tmp_path):
    s = load_settings(env=home_env(tmp_path))
    home = str(tmp_path / "home")
    assert s.archive_root == f"{home}/archive"
    assert s.lake_root == f"{home}/lake"
    assert s.settings_file is None
    assert s.sources == (SourceSettings("demo", "demo", "demo"),)
    demo = s.sources[0]
    assert (demo.table_prefix, demo.date_layout, demo.path_by_slug, demo.start) == (
        "",
        "day_hour",
        False,
        "auto",
    )
    assert s.spark == SparkSettings(
        "local[2]", "4g", 4, {"spark.sql.files.maxPartitionBytes": "64m"}
    )
    assert s.sync == SyncSettings(32768, 16)
    assert s.catalog == CatalogSettings("hive", "segment_datalake_meta", f"{home}/metastore")
    assert s == LakeSettings(
        f"{home}/archive",
        f"{home}/lake",
        (SourceSettings("demo"),),
        catalog=CatalogSettings(metastore_dir=f"{home}/metastore"),
        collector=CollectorSettings(spool_dir=f"{home}/spool"),
        models=ModelsSettings(user_models_dir=f"{home}/models", build_dir=f"{home}/dbt"),
    )


def test_default_home(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert default_home({}) == str(tmp_path / ".datalake")
    assert default_home({"DATALAKE_HOME": ""}) == str(tmp_path / ".datalake")
    assert default_home({"DATALAKE_HOME": "rel"}) == str(tmp_path / "rel")
    assert load_settings(env={}).lake_root == str(tmp_path / ".datalake" / "lake")
    with pytest.raises(SettingsError, match="DATALAKE_HOME"):
        default_home({"DATALAKE_HOME": "s3://b/h"})


def test_settings_file_from_environment(tmp_path):
    path = write(tmp_path, 'lake_root = "out"\n')
    s = load_settings(env=home_env(tmp_path, DATALAKE_SETTINGS=str(path)))
    assert s.settings_file == str(path)
    assert s.lake_root == str(tmp_path / "out")
    # an explicit path wins over $DATALAKE_SETTINGS
    other = write(tmp_path, 'lake_root = "other"\n', "other.toml")
    s = load_settings(other, env=home_env(tmp_path, DATALAKE_SETTINGS=str(path)))
    assert s.lake_root == str(tmp_path / "other")
    # empty variable: no file
    assert load_settings(env=home_env(tmp_path, DATALAKE_SETTINGS="")).settings_file is None


def test_shipped_lake_toml_is_exactly_the_defaults(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    copy = home / "lake.toml"
    copy.write_text(SHIPPED.read_text(encoding="utf-8"), encoding="utf-8")
    env = home_env(tmp_path)
    defaults = load_settings(env=env)
    loaded = load_settings(copy, env=env)
    assert loaded.settings_file == str(copy)
    assert loaded == dataclasses.replace(defaults, settings_file=str(copy))
    # loaded in place, only the roots (next to the file) differ
    in_place = load_settings(SHIPPED, env=env)
    assert in_place.archive_root == str(SHIPPED.parent / "archive")
    assert (in_place.sources, in_place.spark, in_place.sync) == (
        defaults.sources,
        defaults.spark,
        defaults.sync,
    )
    assert st.default_settings_text() == SHIPPED.read_text(encoding="utf-8")


def test_shipped_lake_toml_documents_every_key():
    text = SHIPPED.read_text(encoding="utf-8")
    keys = (
        list(st._TOP_KEYS)
        + list(st._SPARK_KEYS)
        + list(st._SYNC_KEYS)
        + list(st._SOURCE_KEYS)
        + list(st._AUTOMATION_KEYS)
        + list(st._CATALOG_KEYS)
        + list(st._COMPUTE_KEYS)
        + list(st._COLLECTOR_KEYS)
        + list(st._PRIVACY_KEYS)
        + list(st._ICEBERG_KEYS)
        + list(st._ALERTS_KEYS)
        + list(file_keys(ModelsSettings))
    )
    for key in keys:
        if key in (
            "spark",
            "sync",
            "sources",
            "conf",
            "automation",
            "catalog",
            "compute",
            "collector",
            "privacy",
            "iceberg",
            "models",
            "alerts",
            "freshness",
        ):
            continue
        assert re.search(rf"^(# )?{key} = ", text, re.M), key
    for section in (
        "[spark]",
        "[spark.conf]",
        "[sync]",
        "[automation]",
        "[catalog]",
        "[compute]",
        "[compute.conf]",
        "[collector]",
        "[privacy]",
        "[iceberg]",
        "[models]",
        "[alerts]",
        "[freshness]",
        "[[sources]]",
    ):
        assert section in text
    for layout in DATE_LAYOUTS:
        assert f'"{layout}"' in text


# --------------------------------------------------------------------------------------- roots


@pytest.mark.parametrize(
    "written, expected",
    [
        ("data/archive", "{dir}/data/archive"),
        ("./a/../b/", "{dir}/b"),
        ("../up", "{parent}/up"),
        ("/abs/path/", "/abs/path"),
        ("s3://bucket/prefix/", "s3://bucket/prefix"),
        ("s3://bucket", "s3://bucket"),
        ("s3a://bucket/a/../b", "s3a://bucket/a/../b"),  # URIs are never touched by os.path
        ("gs://b/p//", "gs://b/p"),
        ("file:///data/lake/", "file:///data/lake"),
    ],
)
def test_roots_resolve_against_the_settings_folder(tmp_path, written, expected):
    folder = tmp_path / "conf"
    folder.mkdir()
    path = write(folder, f'archive_root = "{written}"\nlake_root = "{written}"\n')
    s = load_settings(path, env=home_env(tmp_path))
    want = expected.format(dir=folder, parent=tmp_path)
    assert (s.archive_root, s.lake_root) == (want, want)


def test_home_tilde_is_expanded(tmp_path):
    path = write(tmp_path, 'lake_root = "~/my-lake"\n')
    assert load_settings(path, env=home_env(tmp_path)).lake_root == os.path.expanduser("~/my-lake")


def test_relative_settings_path_is_made_absolute(tmp_path, monkeypatch):
    write(tmp_path, 'lake_root = "x"\n')
    monkeypatch.chdir(tmp_path)
    s = load_settings("lake.toml", env=home_env(tmp_path))
    assert s.settings_file == str(tmp_path / "lake.toml")
    assert s.lake_root == str(tmp_path / "x")


# ----------------------------------------------------------------------------------------- env


def test_environment_overrides_the_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = write(
        tmp_path,
        """
        archive_root = "s3://from-file/archive"
        lake_root = "lake"
        [spark]
        master = "local[1]"
        driver_memory = "1g"
        [sync]
        max_message_bytes = 100
        max_depth = 3
    """,
    )
    env = home_env(
        tmp_path,
        DATALAKE_ARCHIVE_ROOT="s3://from-env/archive/",
        DATALAKE_LAKE_ROOT="env-lake",  # relative to the current folder
        DATALAKE_SPARK_MASTER="local[*]",
        DATALAKE_SPARK_DRIVER_MEMORY="8g",
        DATALAKE_MAX_MESSAGE_BYTES=" 65536 ",
    )
    s = load_settings(path, env=env)
    assert s.archive_root == "s3://from-env/archive"
    assert s.lake_root == str(tmp_path / "env-lake")
    assert (s.spark.master, s.spark.driver_memory) == ("local[*]", "8g")
    assert s.sync == SyncSettings(65536, 3)
    assert s.settings_file == str(path)
    # empty variables count as unset
    blank = {k: "" for k in env if k != "DATALAKE_HOME"}
    s = load_settings(path, env=home_env(tmp_path, **blank))
    assert (s.archive_root, s.spark.master, s.sync.max_message_bytes) == (
        "s3://from-file/archive",
        "local[1]",
        100,
    )


def test_environment_overrides_without_a_file(tmp_path):
    s = load_settings(env=home_env(tmp_path, DATALAKE_LAKE_ROOT="s3://b/lake"))
    assert s.lake_root == "s3://b/lake"
    assert s.archive_root == str(tmp_path / "home" / "archive")


@pytest.mark.parametrize(
    "var, value, fragment",
    [
        ("DATALAKE_MAX_MESSAGE_BYTES", "abc", "'abc'"),
        ("DATALAKE_MAX_MESSAGE_BYTES", "0", "0"),
        ("DATALAKE_MAX_MESSAGE_BYTES", "-5", "-5"),
        ("DATALAKE_SPARK_DRIVER_MEMORY", "lots", "'lots'"),
        ("DATALAKE_SPARK_MASTER", " local ", "' local '"),
        ("DATALAKE_ARCHIVE_ROOT", "s3://", "'s3://'"),
        ("DATALAKE_LAKE_ROOT", "s3:/bucket", "'s3:/bucket'"),
    ],
)
def test_bad_environment_values(tmp_path, var, value, fragment):
    with pytest.raises(SettingsError) as err:
        load_settings(env=home_env(tmp_path, **{var: value}))
    msg = str(err.value)
    assert msg.startswith(f"environment: {var}: ")
    assert fragment in msg
    assert err.value.key == var


# ---------------------------------------------------------------------------------- validation

SOURCE = '[[sources]]\nid = "web"\n'

# (TOML text, key path in the message, fragments that must appear in the message)
INVALID = [
    # unknown keys, with the allowed ones listed
    (
        'archive_rot = "x"\n',
        "archive_rot",
        [
            "'archive_rot'",
            "did you mean 'archive_root'",
            "allowed keys: alerts, archive_root, automation,",
            "lake_root, models, privacy, sources",
        ],
    ),
    (
        "[spark]\nshufle_partitions = 2\n",
        "spark.shufle_partitions",
        ["'shufle_partitions'", "[spark]", "'shuffle_partitions'", "conf, driver_memory"],
    ),
    ("[sync]\nmax_bytes = 2\n", "sync.max_bytes", ["'max_bytes'", "max_depth, max_message_bytes"]),
    (
        SOURCE + 'sluggo = "w"\n',
        "sources[0].sluggo",
        ["'sluggo'", "did you mean 'slug'", "date_layout", "path_by_slug", "table_prefix"],
    ),
    # wrong types
    ("archive_root = 5\n", "archive_root", ["must be a string", "integer 5"]),
    ('spark = "local"\n', "spark", ["must be a table", "'local'"]),
    ('[spark]\nshuffle_partitions = "4"\n', "spark.shuffle_partitions", ["integer", "'4'"]),
    ("[spark]\nshuffle_partitions = 0\n", "spark.shuffle_partitions", [">= 1", "got 0"]),
    ("[spark]\nshuffle_partitions = true\n", "spark.shuffle_partitions", ["boolean True"]),
    ('[spark]\nmaster = ""\n', "spark.master", ["''", "local[2]"]),
    ('[spark]\ndriver_memory = "4 gigs"\n', "spark.driver_memory", ["'4 gigs'", "'4g'"]),
    ("[spark]\nconf = 3\n", "spark.conf", ["must be a table", "3"]),
    ('[spark.conf]\n"sql.x" = "1"\n', 'spark.conf."sql.x"', ["'sql.x'", "'spark.'"]),
    (
        '[spark.conf]\n"spark.master" = "local"\n',
        'spark.conf."spark.master"',
        ["'spark.master'", "master instead"],
    ),
    ('[spark.conf]\n"spark.x" = 1.5\n', 'spark.conf."spark.x"', ["strings", "float 1.5"]),
    ('[spark.conf]\nspark.sql.x = "1"\n', "spark.conf.spark", ["quote Spark keys"]),
    ("[sync]\nmax_message_bytes = 0\n", "sync.max_message_bytes", [">= 1", "got 0"]),
    ("[sync]\nmax_depth = 65\n", "sync.max_depth", ["from 1 to 64", "got 65"]),
    ("[sync]\nmax_depth = 0\n", "sync.max_depth", ["from 1 to 64", "got 0"]),
    (
        "[automation]\nsettle = 5\n",
        "automation.settle",
        ["'settle'", "did you mean 'settle_minutes'", "recheck_hours"],
    ),
    ('[automation]\nsensors = "on"\n', "automation.sensors", ["'on'", "'running' or 'stopped'"]),
    ("[automation]\nsettle_minutes = -1\n", "automation.settle_minutes", ["0 to 1440", "got -1"]),
    ('[automation]\nsettle_minutes = "5"\n', "automation.settle_minutes", ["integer", "'5'"]),
    ("[automation]\nrecheck_hours = 0\n", "automation.recheck_hours", ["1 to 720", "got 0"]),
    ("[automation]\ninterval_seconds = 1\n", "automation.interval_seconds", ["10 to 86400"]),
    ("[automation]\nmax_queued_runs = 0\n", "automation.max_queued_runs", ["1 to 10000"]),
    ("automation = 1\n", "automation", ["must be a table", "1"]),
    # catalog
    ('[catalog]\nbackend = "athena"\n', "catalog.backend", ["'athena'", "'glue', 'hive', 'none'"]),
    ('[catalog]\nbakend = "glue"\n', "catalog.bakend", ["did you mean 'backend'", "glue_region"]),
    ("catalog = 1\n", "catalog", ["must be a table", "1"]),
    (
        '[catalog]\nreports_database = "Meta-DB"\n',
        "catalog.reports_database",
        ["'Meta-DB'", "[a-z0-9_]"],
    ),
    (
        '[catalog]\nmetastore_dir = "s3://b/meta"\n',
        "catalog.metastore_dir",
        ["local folder", "hive_metastore_uri"],
    ),
    ('[catalog]\nmetastore_dir = ""\n', "catalog.metastore_dir", ["must not be empty"]),
    ('[catalog]\nmetastore_dir = "my meta"\n', "catalog.metastore_dir", ["spaces"]),
    (
        '[catalog]\nhive_metastore_uri = "http://h:9083"\n',
        "catalog.hive_metastore_uri",
        ["'http://h:9083'", "thrift://host:port"],
    ),
    ('[catalog]\nglue_region = "US East"\n', "catalog.glue_region", ["'US East'", "us-east-1"]),
    ('[catalog]\nglue_catalog_id = "12345"\n', "catalog.glue_catalog_id", ["12-digit"]),
    (
        '[catalog]\nglue_endpoint_url = "localhost:5000"\n',
        "catalog.glue_endpoint_url",
        ["'localhost:5000'", "http://"],
    ),
    ("[catalog]\nglue_region = 1\n", "catalog.glue_region", ["must be a string", "integer 1"]),
    (SOURCE + "path_by_slug = 1\n", "sources[0].path_by_slug", ["true or false", "integer 1"]),
    (SOURCE + "slug = 7\n", "sources[0].slug", ["must be a string", "integer 7"]),
    # sources list
    ("sources = []\n", "sources", ["at least one source"]),
    ('[sources]\nid = "web"\n', "sources", ["[[sources]]"]),
    ('sources = ["web"]\n', "sources[0]", ["must be a table", "'web'"]),
    ('[[sources]]\nslug = "web"\n', "sources[0].id", ["missing required key 'id'"]),
    # names
    ('[[sources]]\nid = "a/b"\n', "sources[0].id", ["'a/b'", "[A-Za-z0-9_-]"]),
    ('[[sources]]\nid = ".."\n', "sources[0].id", ["'..'", "[A-Za-z0-9_-]"]),
    ('[[sources]]\nid = ""\n', "sources[0].id", ["''", "1-128"]),
    ('[[sources]]\nid = "' + "x" * 129 + '"\n', "sources[0].id", ["1-128"]),
    ('[[sources]]\nid = "---"\n', "sources[0].slug", ["'---'", "set slug explicitly", "[a-z0-9_]"]),
    ('[[sources]]\nid = "' + "x" * 65 + '"\n', "sources[0].slug", ["set slug explicitly", "1-64"]),
    (SOURCE + 'slug = "Web"\n', "sources[0].slug", ["'Web'", "[a-z0-9_]"]),
    (SOURCE + 'slug = ""\n', "sources[0].slug", ["must not be empty"]),
    (SOURCE + 'database = "web-db"\n', "sources[0].database", ["'web-db'", "[a-z0-9_]"]),
    (SOURCE + 'database = ""\n', "sources[0].database", ["must not be empty"]),
    (SOURCE + 'table_prefix = "Web_"\n', "sources[0].table_prefix", ["'Web_'", "[a-z0-9_]"]),
    (SOURCE + 'table_prefix = "__"\n', "sources[0].table_prefix", ["'__'", "no letter or digit"]),
    (
        SOURCE + 'date_layout = "weekly"\n',
        "sources[0].date_layout",
        ["'weekly'", "'day'", "'day_hour'", "'year_month_day'", "'year_month_day_hour'"],
    ),
    (
        SOURCE + 'start = "2025-01-01T00"\n',
        "sources[0].start",
        ["'2025-01-01T00'", "YYYY-MM-DD-HH:00"],
    ),
    (SOURCE + 'start = "2025-13-01-00:00"\n', "sources[0].start", ["'2025-13-01-00:00'"]),
    (SOURCE + 'start = "2025-01-01-24:00"\n', "sources[0].start", ["'2025-01-01-24:00'"]),
    (SOURCE + 'start = "2025-01-01-05:30"\n', "sources[0].start", ["'2025-01-01-05:30'"]),
    (SOURCE + "start = 2025-01-01T00:00:00Z\n", "sources[0].start", ["quote it"]),
    # roots
    ('lake_root = ""\n', "lake_root", ["must not be empty"]),
    ('lake_root = "s3://"\n', "lake_root", ["'s3://'", "scheme://bucket"]),
    ('lake_root = "s3:/bucket/x"\n', "lake_root", ["'s3:/bucket/x'", "missing a '/'"]),
    ('lake_root = " /data"\n', "lake_root", ["' /data'", "spaces"]),
    # sources that would overwrite each other
    (SOURCE + SOURCE, "sources[1].id", ["duplicate source id 'web'", "sources[0].id"]),
    (
        SOURCE + '[[sources]]\nid = "Web"\n',
        "sources[1].slug",
        ["duplicate source slug 'web'", "sources[0].slug"],
    ),
    (
        SOURCE + 'slug = "shop"\n[[sources]]\nid = "shop"\nslug = "s2"\n',
        "sources[1].id",
        ["id 'shop' is the slug of sources[0]"],
    ),
    (
        SOURCE + 'database = "lake"\n[[sources]]\nid = "app"\ndatabase = "lake"\n',
        "sources[1].database",
        ["'lake'", "no table_prefix", "collide", "sources[0]"],
    ),
    (
        SOURCE + 'database = "lake"\ntable_prefix = "x"\n[[sources]]\nid = "app"\n'
        'database = "lake"\ntable_prefix = "x_"\n',
        "sources[1].database",
        ["'lake'", "same table_prefix", "collide"],
    ),
]


@pytest.mark.parametrize(
    "text, key, fragments", INVALID, ids=[f"{k}-{i}" for i, (_, k, _) in enumerate(INVALID)]
)
def test_invalid_settings_files(tmp_path, text, key, fragments):
    path = write(tmp_path, text)
    with pytest.raises(SettingsError) as err:
        load_settings(path, env=home_env(tmp_path))
    msg = str(err.value)
    assert msg.startswith(f"settings file {path}: {key}: "), msg
    assert err.value.key == key
    assert err.value.origin == f"settings file {path}"
    for fragment in fragments:
        assert fragment in msg, (fragment, msg)


@pytest.mark.parametrize(
    "text",
    [
        # same database is fine with a prefix on one of them, or different prefixes
        SOURCE + 'database = "lake"\n[[sources]]\nid = "app"\ndatabase = "lake"\n'
        'table_prefix = "app"\n',
        SOURCE + 'database = "lake"\ntable_prefix = "w"\n'
        '[[sources]]\nid = "app"\ndatabase = "lake"\ntable_prefix = "a"\n',
        # slug equal to its own id, ids differing only by characters snake() folds, with slugs set
        SOURCE + 'slug = "web"\n[[sources]]\nid = "Web"\nslug = "web_upper"\n',
    ],
)
def test_valid_multi_source_files(tmp_path, text):
    assert len(load_settings(write(tmp_path, text), env=home_env(tmp_path)).sources) == 2


@pytest.mark.parametrize(
    "name, how",
    [
        ("missing.toml", "given as path"),
        ("missing.toml", "given by $DATALAKE_SETTINGS"),
        ("dir", None),
    ],
)
def test_unreadable_files(tmp_path, name, how):
    (tmp_path / "dir").mkdir()
    target = tmp_path / name
    with pytest.raises(SettingsError) as err:
        if how == "given by $DATALAKE_SETTINGS":
            load_settings(env=home_env(tmp_path, DATALAKE_SETTINGS=str(target)))
        else:
            load_settings(target, env=home_env(tmp_path))
    assert str(target) in str(err.value)
    if how:
        assert "not found" in str(err.value) and how in str(err.value)


def test_invalid_toml_names_the_file(tmp_path):
    path = write(tmp_path, "lake_root = \n")
    with pytest.raises(SettingsError, match=re.escape(f"settings file {path}: invalid TOML")):
        load_settings(path, env=home_env(tmp_path))


# ------------------------------------------------------------------------------ full file, lookup


FULL = """
    archive_root = "s3://segment-archive/raw/"
    lake_root = "s3://my-lake"
    [spark]
    master = "local[*]"
    driver_memory = "2048m"
    shuffle_partitions = 8
    [spark.conf]
    "spark.sql.files.maxPartitionBytes" = "128m"
    "spark.sql.adaptive.enabled" = true
    "spark.sql.files.openCostInBytes" = 1048576
    [sync]
    max_message_bytes = 1000
    max_depth = 64
    [[sources]]
    id = "Ab12-Web_Prod"
    [[sources]]
    id = "ios"
    slug = "ios_app"
    database = "mobile"
    table_prefix = "ios"
    date_layout = "year_month_day"
    path_by_slug = true
    start = "2026-11-21-09:00"
"""


def test_full_file(tmp_path):
    s = load_settings(write(tmp_path, FULL), env=home_env(tmp_path))
    assert (s.archive_root, s.lake_root) == ("s3://segment-archive/raw", "s3://my-lake")
    assert s.spark == SparkSettings(
        "local[*]",
        "2048m",
        8,
        {
            "spark.sql.files.maxPartitionBytes": "128m",
            "spark.sql.adaptive.enabled": "true",
            "spark.sql.files.openCostInBytes": "1048576",
        },
    )
    assert s.sync == SyncSettings(1000, 64)
    web, ios = s.sources
    assert web == SourceSettings("Ab12-Web_Prod", "ab12_web_prod", "ab12_web_prod")
    assert ios == SourceSettings(
        "ios", "ios_app", "mobile", "ios", "year_month_day", True, "2026-11-21-09:00"
    )
    assert hash(s) == hash(dataclasses.replace(s))  # usable as a cache key


def test_automation_section(tmp_path):
    assert load_settings(env=home_env(tmp_path)).automation == AutomationSettings(
        "running", 60, 5, 48, 24
    )
    s = load_settings(
        write(
            tmp_path, "[automation]\nsensors = 'stopped'\nsettle_minutes = 0\nrecheck_hours = 6\n"
        ),
        env=home_env(tmp_path),
    )
    assert s.automation == AutomationSettings("stopped", 60, 0, 6, 24)


def test_catalog_section(tmp_path, monkeypatch):
    folder = tmp_path / "conf"
    folder.mkdir()
    path = write(
        folder,
        """
        [catalog]
        backend = "glue"
        reports_database = "meta"
        metastore_dir = "../meta"
        glue_region = "eu-west-1"
        glue_catalog_id = "123456789012"
        glue_endpoint_url = "http://127.0.0.1:5000"
        hive_metastore_uri = "thrift://hms-1:9083,thrift://hms-2:9083"
    """,
    )
    s = load_settings(path, env=home_env(tmp_path))
    assert s.catalog == CatalogSettings(
        "glue",
        "meta",
        str(tmp_path / "meta"),
        "thrift://hms-1:9083,thrift://hms-2:9083",
        "eu-west-1",
        "123456789012",
        "http://127.0.0.1:5000",
    )
    cfg = config_from_settings(s.catalog)
    assert (cfg.backend, cfg.glue_region, cfg.glue_catalog_id, cfg.glue_endpoint_url) == (
        "glue",
        "eu-west-1",
        "123456789012",
        "http://127.0.0.1:5000",
    )
    assert (cfg.reports_database, cfg.metastore_dir) == ("meta", str(tmp_path / "meta"))
    assert type(cfg).from_args(cfg.to_args()) == cfg  # survives spark-submit's argv
    # the environment picks the backend; a bad one names the variable
    env = home_env(tmp_path, DATALAKE_CATALOG_BACKEND="none")
    assert load_settings(path, env=env).catalog.backend == "none"
    with pytest.raises(SettingsError) as err:
        load_settings(path, env=home_env(tmp_path, DATALAKE_CATALOG_BACKEND="hdfs"))
    assert str(err.value).startswith("environment: DATALAKE_CATALOG_BACKEND: ")
    assert "'hdfs'" in str(err.value)
    # a directly built CatalogSettings resolves the metastore under the home when used
    monkeypatch.setenv("DATALAKE_HOME", str(tmp_path / "h"))
    assert config_from_settings(CatalogSettings()).metastore_dir == str(
        tmp_path / "h" / "metastore"
    )


def test_spark_conf_is_added_to_the_defaults(tmp_path):
    s = load_settings(
        write(tmp_path, '[spark.conf]\n"spark.ui.enabled" = "false"\n'), env=home_env(tmp_path)
    )
    assert s.spark.extra_conf == {
        "spark.sql.files.maxPartitionBytes": "64m",
        "spark.ui.enabled": "false",
    }


@pytest.mark.parametrize(
    "name, expected_id",
    [
        ("Ab12-Web_Prod", "Ab12-Web_Prod"),
        ("ab12_web_prod", "Ab12-Web_Prod"),
        ("ios", "ios"),
        ("ios_app", "ios"),
    ],
)
def test_source_by_id_or_slug(tmp_path, name, expected_id):
    s = load_settings(write(tmp_path, FULL), env=home_env(tmp_path))
    assert s.source(name).id == expected_id


def test_unknown_source_lists_the_known_ones(tmp_path):
    path = write(tmp_path, FULL)
    s = load_settings(path, env=home_env(tmp_path))
    with pytest.raises(SettingsError) as err:
        s.source("android")
    msg = str(err.value)
    assert str(path) in msg and "'android'" in msg
    assert "Ab12-Web_Prod (slug ab12_web_prod)" in msg and "ios (slug ios_app)" in msg
    with pytest.raises(SettingsError, match="known sources: demo$"):
        load_settings(env=home_env(tmp_path)).source("web")


@pytest.mark.parametrize(
    "source, lake_dir",
    [
        (SourceSettings("Web-Prod"), "Web-Prod"),
        (SourceSettings("Web-Prod", path_by_slug=True), "web_prod"),
        (SourceSettings("ios", "ios_app", path_by_slug=True), "ios_app"),
        (SourceSettings("ios", "ios_app"), "ios"),
    ],
)
def test_lake_dir(source, lake_dir):
    assert source.lake_dir == lake_dir


# ------------------------------------------------------------------------- direct construction


def test_direct_construction_validates_and_copies():
    conf = {"spark.x": "1"}
    spark = SparkSettings(extra_conf=conf)
    conf["spark.x"] = "2"
    assert spark.extra_conf == {"spark.x": "1"}
    assert SparkSettings().extra_conf == dict(DEFAULT_SPARK_CONF)
    s = LakeSettings("/a", "/l", [SourceSettings("demo")])
    assert isinstance(s.sources, tuple)
    with pytest.raises(SettingsError, match=r"^date_layout: unknown date layout 'hourly'"):
        SourceSettings("x", date_layout="hourly")
    with pytest.raises(SettingsError, match=r"^sources\[1\]\.id: duplicate source id 'x'"):
        LakeSettings("/a", "/l", (SourceSettings("x"), SourceSettings("x", "y", "z")))
    with pytest.raises(SettingsError, match=r"^sources: at least one source"):
        LakeSettings("/a", "/l", ())
    with pytest.raises(SettingsError, match=r"^max_depth: "):
        SyncSettings(max_depth=100)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.lake_root = "/x"  # type: ignore[misc]


def test_cross_id_slug_clash_is_reported_at_the_later_source(tmp_path):
    text = '[[sources]]\nid = "shop"\nslug = "s1"\n[[sources]]\nid = "web"\nslug = "shop"\n'
    with pytest.raises(SettingsError) as err:
        load_settings(write(tmp_path, text), env=home_env(tmp_path))
    assert err.value.key == "sources[1].slug"
    assert "slug 'shop' is the id of sources[0]" in str(err.value)
