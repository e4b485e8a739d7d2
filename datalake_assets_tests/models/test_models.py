"""The models on a synced lake of four days (the Segment layout, a Hive catalog), built through
Dagster on each engine: DuckDB (the default: the models published into the lake and registered
in the catalog, ``models/engines/duckdb_engine.py``) and Spark (dbt-spark on the suite's Spark
session, served to dbt over Spark Connect: ``models/engines/spark_engine.py``). Every model
is read back through the catalog with Spark and compared row by row with the same models
computed in pandas from the messages (``traffic.py``), so the two engines give the same rows;
then a privacy request reaches them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
from dagster import AssetKey, DagsterInstance, TimeWindowPartitionMapping, materialize

from datalake_assets.catalog.hive import HiveCatalog
from datalake_assets.definitions import build_definitions
from datalake_assets.models.erasure import reach_models
from datalake_assets.privacy.audit import read_audit_rows
from datalake_assets.privacy.forget import forget
from datalake_assets.privacy.forget_request import ForgetRequest
from datalake_assets.privacy.state import load_state
from datalake_assets.spec.identity import identity
from datalake_assets_tests.models import traffic as tr
from datalake_assets_tests.support.settings_files import load_lake_toml

pytestmark = [pytest.mark.spark, pytest.mark.dagster]
# each engine's source is its own database in the suite's shared metastore
SLUGS = {"duckdb": "modelduck", "spark": "modelshop"}
SIGNUPS = """{{ config(materialized='table') }}
select user_id, min({{ adapter.quote('timestamp') }}) as signed_up_at
from {{ source('lake', 'tracks') }}
where event = 'Signed Up' and user_id is not null
group by user_id
"""


def readme_model() -> str:
    """The README's example of a user's own model, as it is printed there."""
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    return readme.split("-- my_models/daily_active_users.sql\n", 1)[1].split("```", 1)[0]


@pytest.fixture(scope="module", params=sorted(SLUGS))
def built(request, spark, hive_metastore_dir, tmp_path_factory):
    """The four days synced in one batch, then the models built through Dagster: the days
    D0..D3 in one dbt invocation (a backfill's single run), the whole tables in another. The
    build of one day after the others is the erasure's (last test)."""
    engine = request.param
    slug = SLUGS[engine]
    home = tmp_path_factory.mktemp(f"models-{engine}")
    (home / "my_models").mkdir()
    (home / "my_models" / "signups.sql").write_text(SIGNUPS)
    (home / "my_models" / "daily_active_users.sql").write_text(readme_model())
    settings = load_lake_toml(
        home,
        (
            'archive_root = "archive"\nlake_root = "lake"\n'
            f'[catalog]\nmetastore_dir = "{hive_metastore_dir}"\n'
            '[models]\nbuild_dir = "dbt"\nuser_models_dir = "my_models"\n'
            f'engine = "{engine}"\n'
            f'[[sources]]\nid = "{slug}"\nstart = "{tr.D0}-00:00"\n'
        ),
    )
    t = tr.synced(spark, settings)
    defs = build_definitions(settings)
    daily = defs.resolve_assets_def(AssetKey([slug, "sessions"]))
    tables = defs.resolve_assets_def(AssetKey([slug, "users"]))
    instance = DagsterInstance.ephemeral()
    results = [
        materialize(
            [daily],
            instance=instance,
            tags={
                "dagster/asset_partition_range_start": tr.D0,
                "dagster/asset_partition_range_end": tr.D3,
            },
        ),
        materialize([tables], instance=instance),
    ]
    return {
        "slug": slug,
        "engine": engine,
        "settings": settings,
        "defs": defs,
        "traffic": t,
        "results": results,
        "instance": instance,
    }


def model(spark, built, name: str) -> pd.DataFrame:
    """A model as the catalog serves it: ``SELECT * FROM <database>.<model>`` (refreshed: this
    session lists a table's files once, and a rebuild replaces them)."""
    spark.catalog.refreshTable(f"{built['slug']}.{name}")
    return spark.sql(f"SELECT * FROM {built['slug']}.{name}").toPandas()


@pytest.mark.slow
def test_the_runs_succeed_and_the_dbt_tests_are_passing_asset_checks(built):
    for result in built["results"]:
        assert result.success
    checks = [e for r in built["results"] for e in r.get_asset_check_evaluations()]
    names = {(c.asset_key.path[-1], c.check_name) for c in checks}
    assert ("sessions", "unique_sessions_session_id") in names
    assert ("users", "unique_users_user_id") in names
    assert any(n.startswith("relationships_identity_graph_user_id") for _, n in names)
    assert all(c.passed for c in checks), [c.check_name for c in checks if not c.passed]


@pytest.mark.slow
def test_daily_event_counts_row_by_row(spark, built):
    expected = tr.daily_event_counts(tr.frame(built["traffic"].messages))
    actual = model(spark, built, "daily_event_counts")
    tr.same(actual, expected, ["day", "type", "event_name"])


@pytest.mark.slow
def test_sessions_row_by_row_and_the_named_cases(spark, built):
    expected = tr.sessions(tr.frame(built["traffic"].messages))
    actual = model(spark, built, "sessions")
    for c in ("started_at", "ended_at"):
        actual[c] = pd.to_datetime(actual[c]).dt.tz_localize(None)
    tr.same(actual, expected, ["session_id"])
    by = {v: g.sort_values("started_at") for v, g in actual.groupby("visitor")}
    assert list(by["a1"].event_count) == [2, 1]  # exactly 30 min continues; 30:01 does not
    assert list(by["a2"].session_day) == [tr.D0] and list(by["a2"].event_count) == [2]
    assert list(by["a3"].session_day) == [tr.D1] and list(by["a3"].event_count) == [2]
    assert list(by["a4"].event_count) == [2]  # late within the lookback joins
    assert list(by["a5"].event_count) == [1, 1]  # beyond it: at its receipt
    assert list(by["a6"].event_count) == [2] and list(by["a6"].session_day) == [tr.D1]
    assert list(by["user:u4"].event_count) == [1, 1]


def test_identity_graph_and_users_row_by_row(spark, built):
    df = tr.frame(built["traffic"].messages)
    graph = model(spark, built, "identity_graph")
    for c in ("first_seen_at", "last_seen_at"):
        graph[c] = pd.to_datetime(graph[c]).dt.tz_localize(None)
    tr.same(graph, tr.identity_graph(df), ["anonymous_id", "user_id"])
    assert sorted(graph[graph.user_id == "u2"].anonymous_id) == ["b1", "b2", "b3"]
    assert graph[graph.user_id == "u3"].seen_in.tolist() == ["alias_previous_id,track"]
    users = model(spark, built, "users")
    for c in ("first_seen_at", "last_seen_at"):
        users[c] = pd.to_datetime(users[c]).dt.tz_localize(None)
    tr.same(users, tr.users(df), ["user_id"])
    assert users.set_index("user_id").loc["u1", "traits_plan"] == "pro"
    assert users.set_index("user_id").loc["u1", "traits_email"] == "u1@example.com"


def test_models_are_assets_downstream_of_the_hourly_tables(built):
    defs, graph = built["defs"], built["defs"].resolve_asset_graph()
    sessions = graph.get(AssetKey([built["slug"], "sessions"]))
    assert {k.path[-1] for k in sessions.parent_keys} == {"pages", "screens", "tracks"}
    assert sessions.partitions_def.get_partition_keys()[0] == tr.D0
    mapping = sessions.assets_def.get_partition_mapping(AssetKey([built["slug"], "pages"]))
    assert isinstance(mapping, TimeWindowPartitionMapping)
    users = graph.get(AssetKey([built["slug"], "users"]))
    assert (
        users.partitions_def is None
        and AssetKey([built["slug"], "identity_graph"]) in users.parent_keys
    )
    # the user's model, from the folder, with its lineage; sources include the event tables
    signups = graph.get(AssetKey([built["slug"], "signups"]))
    assert signups.parent_keys == {AssetKey([built["slug"], "tracks"])}
    assert AssetKey([built["slug"], "signed_up"]) in defs.resolve_all_asset_keys()


def test_a_user_model_is_built_on_the_lake(spark, built):
    assert model(spark, built, "signups").user_id.tolist() == ["u3"]


def test_the_readmes_daily_user_model_is_daily_and_counts_the_sessions(spark, built):
    dau = built["defs"].resolve_assets_def(AssetKey([built["slug"], "daily_active_users"]))
    assert dau.partitions_def is not None  # daily, like sessions, which it reads
    sessions = model(spark, built, "sessions")
    want = sessions.groupby("session_day").visitor.nunique()
    got = model(spark, built, "daily_active_users").set_index("day").active_visitors
    assert got.sort_index().to_dict() == want.sort_index().to_dict()


@pytest.mark.slow
@pytest.mark.parametrize("built", ["duckdb"], indirect=True)  # publishing is DuckDB's step
def test_a_broken_user_model_fails_its_own_asset_and_the_others_build(spark, built, tmp_path):
    """A user model that parses but fails on the engine: the run fails with dbt's message,
    the models that built are materialized and published (the lake's copy is replaced).
    DuckDB only: publishing is that engine's step (Spark writes the lake's copy as it builds)."""
    settings = built["settings"]
    broken = tmp_path / "broken_models"
    broken.mkdir()
    (broken / "broken.sql").write_text(
        "{{ config(materialized='table') }}\nselect no_such_column from {{ ref('users') }}\n"
    )
    with_broken = replace(settings, models=replace(settings.models, user_models_dir=str(broken)))
    defs = build_definitions(with_broken)
    tables = defs.resolve_assets_def(AssetKey([built["slug"], "users"]))
    users_before = model(spark, built, "users")
    result = materialize([tables], instance=built["instance"], raise_on_error=False)
    assert not result.success
    done = {e.asset_key.path[-1] for e in result.get_asset_materialization_events()}
    assert {"identity_graph", "users"} <= done and "broken" not in done
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    text = str(failure.step_failure_data.error)
    assert "broken" in text and "no_such_column" in text, text
    tr.same(model(spark, built, "users"), users_before, ["user_id"])


@pytest.mark.slow
def test_forget_reaches_every_model_and_one_day_rebuilds_alone(spark, built):
    """The last test of the module: it erases a person from the lake it shares. The person is
    only on D2 and D3, so the models are rebuilt for those days alone: everyone else's rows
    must come out as the four-day build made them, the sessions of D1 that D2 continues or
    completes (a3 across midnight, a6's late event) included; D3, where only the person was
    seen, has no rows left (a dynamic insert_overwrite alone would have kept them)."""
    settings, t = built["settings"], built["traffic"]
    before = {m: model(spark, built, m) for m in ("sessions", "identity_graph", "users")}
    request = ForgetRequest("forget-u9", (identity("user_id", "u9"),), follow_links=True)
    result = forget(settings, request, catalog=HiveCatalog(spark))
    assert result.status == "completed" and result.rows_remaining == 0
    erased = reach_models(settings, result)  # what datalake forget and the job do next
    assert erased["models_errors"] == [] and erased["models_rows_remaining"] == 0
    assert erased["models_rebuilt_days"][built["slug"]] == [tr.D2, tr.D3]
    # the request's audit row carries the models' proof with the lake's
    assert load_state(settings.lake_root, "forget-u9").remaining["models"] == 0
    (row,) = [r for r in read_audit_rows(settings.lake_root) if r["request_id"] == "forget-u9"]
    assert (row["status"], row["rows_remaining"]) == ("completed", 0), row
    assert tr.D3 in set(before["sessions"].session_day)
    assert tr.D3 not in set(model(spark, built, "sessions").session_day)
    assert tr.D3 not in set(model(spark, built, "daily_event_counts").day)
    assert tr.D3 not in set(
        model(spark, built, "daily_active_users").day
    )  # the README's, emptied too
    assert {"sessions", "users", "identity_graph", "daily_event_counts", "signups"} <= set(
        erased["models_checked"][built["slug"]]
    )
    person = {"u9", "e1", "e2"}
    for m in ("sessions", "identity_graph", "users", "daily_event_counts"):
        after = model(spark, built, m)
        for c in {"user_id", "anonymous_id", "visitor"} & set(after.columns):
            assert not set(after[c].dropna()) & person, (m, c)
    for m, keys in (
        ("sessions", ["session_id"]),
        ("identity_graph", ["link_id"]),
        ("users", ["user_id"]),
    ):
        was = before[m]
        assert was.user_id.isin(person).any()  # the person was there
        ids = was.get("anonymous_id", was.user_id)
        tr.same(model(spark, built, m), was[~was.user_id.isin(person) & ~ids.isin(person)], keys)
    rest = [
        m
        for m in t.messages
        if m.get("userId") not in person and m.get("anonymousId") not in person
    ]
    tr.same(
        model(spark, built, "daily_event_counts"),
        tr.daily_event_counts(tr.frame(rest)),
        ["day", "type", "event_name"],
    )
