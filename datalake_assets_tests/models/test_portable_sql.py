"""The shipped models are portable SQL (``models/project/macros/portable.sql``): the same project
compiles on dbt-spark, dbt-duckdb and dbt-athena without a connection to Spark or AWS, and
built with dbt-duckdb on a DuckDB file whose views read a Segment-layout lake (synced once by
Spark) it gives the rows the pandas oracle (``traffic.py``) gives, as dbt-spark does
(``test_models.py``), the ids (md5) included. The engine integration (Dagster assets on DuckDB)
has its own tests; this is about the SQL."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from datalake_assets.models.workspace import DBT_QUIET_ENV, project_files, source_tables
from datalake_assets.spec import layout
from datalake_assets_tests.models import traffic as tr
from datalake_assets_tests.support.settings_files import load_lake_toml

SLUG = "portable"
STANDARD = ["aliases", "groups", "identifies", "pages", "screens", "tracks"]
MODELS = ["daily_event_counts", "sessions", "identity_graph", "users"]
NO_INTROSPECTION = '{"datalake_introspect": false}'
LATEST_PLAN = """{{ config(materialized='table') }}
select user_id,
       {{ latest_value('traits_plan', ['coalesce(' ~ adapter.quote('timestamp') ~ ', received_at)',
                                       'message_id']) }} as plan
from {{ source('lake', 'identifies') }}
group by user_id
"""


def dbt(*args: str):
    """One dbt command in this process, as ``workspace.parse`` runs it (no phoning home)."""
    from dbt.cli.main import dbtRunner

    for name, value in DBT_QUIET_ENV.items():
        os.environ.setdefault(name, value)
    done = dbtRunner().invoke([*args, "--quiet"])
    assert done.success, done.exception or done.result
    return done


def write_project(folder: Path, settings, source, tables: list[str], profile: dict) -> Path:
    """The source's project as ``workspace.project_files`` assembles it, with ``profile`` (one
    output) in place of its dbt-spark profile."""
    for path, body in project_files(settings, source, tables).items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_bytes(body)
    profiles = {"datalake": {"target": "local", "outputs": {"local": profile}}}
    (folder / "profiles.yml").write_text(json.dumps(profiles))
    return folder


def project_args(folder: Path) -> list[str]:
    return ["--project-dir", str(folder), "--profiles-dir", str(folder)]


def compiled(folder: Path, model: str) -> str:
    name = folder.name
    hits = list((folder / "target" / "compiled").rglob(f"{model}.sql"))
    assert len(hits) == 1, (name, model, hits)
    return hits[0].read_text()


# --------------------------------------------------------------------------- compile, 3 engines


@pytest.fixture()
def plain_settings(tmp_path):
    return load_lake_toml(
        tmp_path,
        f'[catalog]\nbackend = "none"\n[[sources]]\nid = "{SLUG}"\nstart = "{tr.D0}-00:00"\n',
    )


def _no_connection(monkeypatch, manager):
    def refuse(cls, connection):
        raise AssertionError(f"{manager.__name__} opened a connection")

    monkeypatch.setattr(manager, "open", classmethod(refuse))


@pytest.mark.slow
def test_the_project_compiles_on_spark_duckdb_and_athena(plain_settings, tmp_path, monkeypatch):
    """dbt compile of the shipped models for each adapter. Spark and Athena must open no
    connection (no Spark started, nothing of AWS reached): the lake's columns are not asked
    (``datalake_introspect: false``: each table is taken to have the columns the models want)
    and dbt's relation cache is not filled (``--no-populate-cache``)."""
    from dbt.adapters.athena.connections import AthenaConnectionManager
    from dbt.adapters.spark.connections import SparkConnectionManager

    _no_connection(monkeypatch, SparkConnectionManager)
    _no_connection(monkeypatch, AthenaConnectionManager)
    source = plain_settings.sources[0]
    profiles = {
        "spark": {"type": "spark", "method": "session", "host": "NA", "schema": source.database},
        "duckdb": {
            "type": "duckdb",
            "path": str(tmp_path / "compile.duckdb"),
            "schema": source.database,
        },
        "athena": {
            "type": "athena",
            "s3_staging_dir": "s3://x/",
            "region_name": "us-east-1",
            "database": "awsdatacatalog",
            "schema": source.database,
        },
    }
    out = {}
    for engine, profile in profiles.items():
        folder = tmp_path / engine
        folder.mkdir()
        write_project(folder, plain_settings, source, STANDARD, profile)
        # users.sql reads the traits the lake has: none without introspection; this model
        # compiles the same aggregate
        (folder / "models" / "user").mkdir(parents=True, exist_ok=True)
        (folder / "models" / "user" / "latest_plan.sql").write_text(LATEST_PLAN)
        args = project_args(folder)
        dbt("parse", *args)
        dbt("compile", *args, "--no-populate-cache", "--vars", NO_INTROSPECTION)
        out[engine] = {m: compiled(folder, m) for m in [*MODELS, "latest_plan"]}
    # each engine's own spelling of what differs (macros/portable.sql)
    assert "unix_micros(" in out["spark"]["sessions"]
    assert "epoch_us(" in out["duckdb"]["sessions"]
    assert "to_unixtime(" in out["athena"]["sessions"]
    assert "first_value(page_url, true) over" in out["spark"]["sessions"]
    assert "first_value(page_url ignore nulls) over" in out["duckdb"]["sessions"]
    assert "first_value(page_url) ignore nulls over" in out["athena"]["sessions"]
    assert "`timestamp`" in out["spark"]["identity_graph"]
    for engine in ("duckdb", "athena"):
        assert "`" not in "".join(out[engine].values()), engine
        assert '"timestamp"' in out[engine]["identity_graph"]
    assert "lower(to_hex(md5(to_utf8(" in out["athena"]["identity_graph"]
    assert "collect_set(" in out["spark"]["identity_graph"]
    assert "element_at(array_sort(collect_list(" in out["spark"]["latest_plan"]
    for engine in ("duckdb", "athena"):
        assert "max_by(traits_plan, row(" in out[engine]["latest_plan"], engine
    assert "string_agg(distinct" in out["duckdb"]["identity_graph"]
    assert "array_distinct(" in out["athena"]["identity_graph"]
    # the daily models' config: Spark's insert_overwrite, elsewhere a table of the days built
    for engine in profiles:
        nodes = json.loads((tmp_path / engine / "target" / "manifest.json").read_text())["nodes"]
        config = {n["name"]: n["config"] for n in nodes.values() if n["name"] in MODELS}
        assert config["sessions"]["meta"]["datalake"] == {
            "day_column": "session_day",
            "days_before": 1,
        }
        assert config["daily_event_counts"]["meta"]["datalake"] == {
            "day_column": "day",
            "days_before": 0,
        }
        assert "datalake" not in config["users"]["meta"]
        for name in ("sessions", "daily_event_counts"):
            assert "daily" in config[name]["tags"]
            if engine == "spark":
                assert config[name]["materialized"] == "incremental"
                assert config[name]["incremental_strategy"] == "insert_overwrite"
                assert config[name]["pre-hook"], name
            else:
                assert config[name]["materialized"] == "table"
                assert not config[name]["pre-hook"], (engine, name)
                assert config[name].get("partition_by") is None, (engine, name)
        assert config["users"]["materialized"] == "table"


# --------------------------------------------------------------------------- built on DuckDB


@pytest.fixture(scope="module")
def lake(spark, tmp_path_factory):
    """The four days of ``traffic.py`` synced once by Spark into a Segment-layout lake (no
    catalog: DuckDB reads the files)."""
    home = tmp_path_factory.mktemp("portable")
    settings = load_lake_toml(
        home,
        'archive_root = "archive"\nlake_root = "lake"\n[catalog]\nbackend = "none"\n'
        f'[[sources]]\nid = "{SLUG}"\nstart = "{tr.D0}-00:00"\n',
    )
    source = settings.sources[0]
    t = tr.synced(spark, settings)
    return {"settings": settings, "source": source, "traffic": t, "home": home}


def lake_database(lake, path: Path) -> list[str]:
    """A DuckDB file whose schema ``<database>`` has a view per table of the lake over its
    Parquet files (``segment_type=<table>/<date partitions>/*.parquet``, the partition keys as
    strings, as Spark reads them): what the DuckDB engine gives dbt. Returns the tables."""
    settings, source = lake["settings"], lake["source"]
    depth = len(layout.DATE_LAYOUTS[source.date_layout])
    tables = []
    with duckdb.connect(str(path)) as con:
        con.execute(f'create schema "{source.database}"')
        for table in source_tables(settings, source):
            root = layout.table_root(settings.lake_root, source.lake_dir, table)
            if not os.path.isdir(root):
                continue  # a table without files: no view, as in a lake where it never came
            name = (
                f"{source.effective_table_prefix}_{table}"
                if source.effective_table_prefix
                else table
            )
            files = "/".join([root, *["*"] * depth, "*.parquet"])
            con.execute(
                f'create view "{source.database}"."{name}" as select * from read_parquet('
                f"'{files}', hive_partitioning = true, union_by_name = true, "
                "hive_types_autocast = false)"
            )
            tables.append(table)
    return tables


def duckdb_project(lake, folder: Path) -> Path:
    folder.mkdir()
    db = folder / "lake.duckdb"
    tables = lake_database(lake, db)
    profile = {
        "type": "duckdb",
        "path": str(db),
        "schema": lake["source"].database,
        "threads": 1,
        # not UTC, as on a laptop: the lake's timestamps (timestamptz in DuckDB) must still come
        # out as their UTC wall time, the days as Spark's UTC session sees them
        "settings": {"TimeZone": "America/New_York"},
    }
    return write_project(folder, lake["settings"], lake["source"], tables, profile)


def release_duckdb() -> None:
    """dbt-duckdb keeps its database open in the process after an invocation (a class-level
    environment); closed here so that the test opens the file itself."""
    from dbt.adapters.duckdb.connections import DuckDBConnectionManager

    env, DuckDBConnectionManager._ENV = DuckDBConnectionManager._ENV, None
    if env is not None:
        env.close()


def read_model(folder: Path, name: str, database: str) -> pd.DataFrame:
    release_duckdb()
    with duckdb.connect(str(folder / "lake.duckdb"), read_only=True) as con:
        return con.execute(f'select * from "{database}"."{name}"').df()


def same(actual: pd.DataFrame, expected: pd.DataFrame, keys: list[str]) -> None:
    """test_models.py's comparison: the oracle's columns, sorted, None and NaN alike."""
    columns = list(expected.columns)
    a, e = (f[columns].sort_values(keys).reset_index(drop=True) for f in (actual, expected))
    a, e = (f.astype(object).where(f.notna(), None) for f in (a, e))
    pd.testing.assert_frame_equal(a, e, check_dtype=False)


def naive(frame: pd.DataFrame, *columns: str) -> pd.DataFrame:
    for c in columns:
        frame[c] = pd.to_datetime(frame[c]).dt.tz_localize(None)
    return frame


@pytest.fixture(scope="module")
def built(lake, tmp_path_factory):
    """dbt build with dbt-duckdb, as a backfill runs it: days D0..D3 of the daily models in one
    invocation, then the whole tables; and, in a fresh database, day D2 alone."""
    folder = duckdb_project(lake, tmp_path_factory.mktemp("duck") / "all")
    args = project_args(folder)
    days = json.dumps({"min_day": tr.D0, "max_day": tr.D3})
    dbt("build", *args, "--select", "tag:daily", "--vars", days)
    dbt("build", *args, "--exclude", "tag:daily")
    one = duckdb_project(lake, tmp_path_factory.mktemp("duck") / "one")
    dbt(
        "build",
        *project_args(one),
        "--select",
        "tag:daily",
        "--vars",
        json.dumps({"min_day": tr.D2, "max_day": tr.D2}),
    )
    db = lake["source"].database
    return {
        "all": {m: read_model(folder, m, db) for m in MODELS},
        "one": {m: read_model(one, m, db) for m in ("daily_event_counts", "sessions")},
        "df": tr.frame(lake["traffic"].messages),
    }


@pytest.mark.slow
@pytest.mark.spark
def test_duckdb_daily_event_counts_row_by_row(built):
    same(
        built["all"]["daily_event_counts"],
        tr.daily_event_counts(built["df"]),
        ["day", "type", "event_name"],
    )


@pytest.mark.slow
@pytest.mark.spark
def test_duckdb_sessions_row_by_row_with_sparks_ids(built):
    actual = naive(built["all"]["sessions"], "started_at", "ended_at")
    expected = tr.sessions(built["df"])
    same(actual, expected, ["session_id"])  # session_id: the md5 hex Spark's md5 gives
    by = {v: g.sort_values("started_at") for v, g in actual.groupby("visitor")}
    assert list(by["a1"].event_count) == [2, 1]  # exactly 30 min continues; 30:01 does not
    assert list(by["a4"].event_count) == [2] and list(by["a5"].event_count) == [1, 1]
    assert list(by["a6"].session_day) == [tr.D1]


@pytest.mark.spark
def test_duckdb_identity_graph_and_users_row_by_row(built):
    graph = naive(built["all"]["identity_graph"], "first_seen_at", "last_seen_at")
    same(graph, tr.identity_graph(built["df"]), ["anonymous_id", "user_id"])
    assert graph[graph.user_id == "u3"].seen_in.tolist() == ["alias_previous_id,track"]
    # link_id: md5 of "anonymous_id|user_id", the same hex on every engine
    for row in graph.itertuples():
        assert row.link_id == hashlib.md5(f"{row.anonymous_id}|{row.user_id}".encode()).hexdigest()
    users = naive(built["all"]["users"], "first_seen_at", "last_seen_at")
    same(users, tr.users(built["df"]), ["user_id"])
    assert users.set_index("user_id").loc["u1", "traits_plan"] == "pro"


@pytest.mark.spark
def test_a_duckdb_daily_build_holds_exactly_its_days(built):
    """Received day D2 alone: daily_event_counts holds D2, sessions session days D1 and D2
    (meta.datalake: day_column, days_before), each row as the four-day build made it."""
    counts, sessions = built["one"]["daily_event_counts"], built["one"]["sessions"]
    assert set(counts.day) == {tr.D2}
    same(counts, (e := tr.daily_event_counts(built["df"]))[e.day == tr.D2], ["type", "event_name"])
    assert set(sessions.session_day) == {tr.D1, tr.D2}
    expected = tr.sessions(built["df"])
    expected = expected[expected.session_day.isin([tr.D1, tr.D2])]
    same(naive(sessions, "started_at", "ended_at"), expected, ["session_id"])
