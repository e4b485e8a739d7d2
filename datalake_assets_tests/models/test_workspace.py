"""Each source's dbt project as the code location loads it: sources generated from the lake's
tables, the user's models folder, a model that does not parse, the parse done once per set of
files. dbt parses for real (no Spark: parsing connects to nothing)."""

import json
import logging
import os
import shutil
import subprocess

import pytest
from dagster import AssetKey, Definitions

from datalake_assets.models.build import PARTIAL_PARSE, day_env
from datalake_assets.models.workspace import DBT_QUIET_ENV, dbt_executable, prepare_project
from datalake_assets.orchestration.dbt.model_assets import build_model_assets
from datalake_assets_tests.support.settings_files import load_lake_toml

TABLES = ["aliases", "groups", "identifies", "order_completed", "pages", "screens", "tracks"]


@pytest.fixture()
def settings(tmp_path):
    (tmp_path / "mine").mkdir()
    return load_lake_toml(
        tmp_path,
        '[models]\nuser_models_dir = "mine"\nbuild_dir = "dbt"\n'
        '[[sources]]\nid = "web"\nstart = "2026-11-20-00:00"\n'
        'table_prefix = "w"\n',
    )


def manifest(project) -> dict:
    with open(project.manifest_path) as f:
        return json.load(f)


@pytest.mark.slow
def test_sources_come_from_the_lake_and_user_models_from_the_folder(settings, tmp_path):
    (tmp_path / "mine" / "orders_per_day.sql").write_text(
        "{{ config(tags=['daily'], materialized='incremental', partition_by=['day'], "
        "incremental_strategy='insert_overwrite') }}\n"
        "select count(*) as orders, day from {{ source('lake', 'order_completed') }}\n"
        "where day between {{ min_day() }} and {{ max_day() }} group by day\n"
    )
    source = settings.sources[0]
    project = prepare_project(settings, source, TABLES)
    m = manifest(project)
    sources = {s["name"]: s for s in m["sources"].values()}
    assert sorted(sources) == TABLES  # a new event table is a source, no YAML edited
    assert sources["order_completed"]["identifier"] == "w_order_completed"
    assert sources["order_completed"]["schema"] == "web"
    assets = build_model_assets(settings, source, TABLES)
    graph = Definitions(assets=assets).resolve_asset_graph()
    mine = graph.get(AssetKey(["web", "orders_per_day"]))
    assert mine.parent_keys == {AssetKey(["web", "order_completed"])}
    assert mine.partitions_def is not None  # tagged daily
    # the same files: the same folder, not parsed again
    before = os.stat(project.manifest_path).st_mtime_ns
    assert prepare_project(settings, source, TABLES) == project
    assert os.stat(project.manifest_path).st_mtime_ns == before
    # a new table: a new project, with the new source
    again = prepare_project(settings, source, [*TABLES, "cart_viewed"])
    assert again.project_dir != project.project_dir
    assert "cart_viewed" in {s["name"] for s in manifest(again)["sources"].values()}


@pytest.mark.slow
def test_a_model_that_does_not_parse_leaves_the_models_out_and_says_why(settings, tmp_path, caplog):
    (tmp_path / "mine" / "broken.sql").write_text("select {{ ref('no_such_model') }}\n")
    source = settings.sources[0]
    with caplog.at_level(logging.ERROR):
        assert build_model_assets(settings, source, TABLES) == []
    assert "no_such_model" in caplog.text and "left out of the graph" in caplog.text


def test_the_spark_engine_needs_a_hive_catalog_or_a_profile_duckdb_does_not(tmp_path, caplog):
    toml = '[catalog]\nbackend = "none"\n[[sources]]\nid = "web"\nstart = "2026-11-20-00:00"\n'
    spark = load_lake_toml(
        tmp_path, toml.replace("[[sources]]", '[models]\nengine = "spark"\n[[sources]]')
    )
    with caplog.at_level(logging.WARNING):
        assert build_model_assets(spark, spark.sources[0], TABLES) == []
    said = " ".join(r.getMessage() for r in caplog.records)  # the text, whatever the log format
    assert "profiles_dir" in said and 'engine = "duckdb"' in said
    duck = load_lake_toml(tmp_path, toml, models=True)  # the default engine: any catalog, or none
    assert duck.models.engine == "duckdb"
    assert len(build_model_assets(duck, duck.sources[0], TABLES)) == 2


@pytest.mark.slow
def test_a_build_s_days_reach_the_sql_and_re_parse_nothing(settings, tmp_path):
    """Dagster passes a build's days in dbt's environment (``day_env``), not as ``--vars``,
    whose every change makes dbt parse the whole project again: with the project's saved
    parse, dbt parses no file, and the days are in the SQL it compiles; ``--vars`` by hand
    still work."""
    (tmp_path / "mine" / "orders_per_day.sql").write_text(
        "select count(*) as orders, day from {{ source('lake', 'order_completed') }}\n"
        "where day between {{ min_day(1) }} and {{ max_day() }} group by day\n"
    )
    project = prepare_project(settings, settings.sources[0], TABLES)
    target = tmp_path / "target"
    target.mkdir()
    saved = os.path.join(os.path.dirname(project.manifest_path), PARTIAL_PARSE)
    shutil.copy(saved, target / PARTIAL_PARSE)

    def dbt(*args: str, days: dict | None) -> None:
        cmd = [dbt_executable(), *args, *project.dbt_args, "--target-path", str(target)]
        env = {**os.environ, **DBT_QUIET_ENV, **day_env(days)}
        done = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr

    def compiled() -> str:
        (path,) = target.glob("compiled/**/orders_per_day.sql")
        return path.read_text()

    dbt("parse", days={"min_day": "2026-11-21", "max_day": "2026-11-22"})
    perf = json.loads((target / "perf_info.json").read_text())
    assert perf["is_partial_parse_enabled"] and perf["parsed_path_count"] == 0
    dbt(
        "compile",
        "--select",
        "orders_per_day",
        days={"min_day": "2026-11-21", "max_day": "2026-11-22"},
    )
    assert "between '2026-11-20' and '2026-11-22'" in compiled()
    dbt("compile", "--select", "orders_per_day", days=None)  # every day
    assert "between '0001-01-01' and '9999-12-31'" in compiled()
    vars_ = json.dumps({"min_day": "2026-11-25", "max_day": "2026-11-25"})
    dbt("compile", "--select", "orders_per_day", "--vars", vars_, days=None)
    assert "between '2026-11-24' and '2026-11-25'" in compiled()
