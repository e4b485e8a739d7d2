"""The models on an Iceberg lake, on the default engine (DuckDB): the four days of
``traffic.py`` synced as Iceberg tables, the models built through Dagster, and every model
read back as a reader would, through the lake's Iceberg catalog (pyiceberg's own SQL
catalog, never our code) and DuckDB's ``iceberg_scan``: the same rows as the pandas oracle;
a day built again is one commit that replaces exactly its days; a privacy request rebuilds
the touched days and proves every stored file of the model tables."""

from __future__ import annotations

import pytest
from dagster import AssetKey, DagsterInstance, materialize

from datalake_assets.definitions import build_definitions
from datalake_assets.lake.formats.iceberg_read import attach_tables, duckdb_connection
from datalake_assets.models.engines import can_run
from datalake_assets.models.erasure import reach_models
from datalake_assets.orchestration.dbt.model_assets import build_model_assets
from datalake_assets.privacy.forget import forget
from datalake_assets.privacy.forget_request import ForgetRequest
from datalake_assets.spec.identity import identity
from datalake_assets_tests.models import traffic as tr
from datalake_assets_tests.support.iceberg_reader import sql_catalog
from datalake_assets_tests.support.settings_files import load_lake_toml

pytestmark = [pytest.mark.spark, pytest.mark.dagster]
SLUG = "modelice"
DAILY = {"dagster/asset_partition_range_start": tr.D0, "dagster/asset_partition_range_end": tr.D3}


@pytest.fixture(scope="module")
def built(spark, tmp_path_factory):
    home = tmp_path_factory.mktemp("models-iceberg")
    settings = load_lake_toml(
        home,
        (
            'archive_root = "archive"\nlake_root = "lake"\ntable_format = "iceberg"\n'
            '[catalog]\nbackend = "none"\n[models]\nbuild_dir = "dbt"\n'
            f'[[sources]]\nid = "{SLUG}"\nstart = "{tr.D0}-00:00"\n'
        ),
    )
    t = tr.synced(spark, settings)
    defs = build_definitions(settings)
    instance = DagsterInstance.ephemeral()
    daily = defs.resolve_assets_def(AssetKey([SLUG, "sessions"]))
    tables = defs.resolve_assets_def(AssetKey([SLUG, "users"]))
    results = [
        materialize([daily], instance=instance, tags=DAILY),
        materialize([tables], instance=instance),
    ]
    return {
        "settings": settings,
        "defs": defs,
        "traffic": t,
        "results": results,
        "instance": instance,
        "catalog": sql_catalog(settings.lake_root),
    }


def model(built, name: str):
    """The model's current snapshot through pyiceberg's own catalog."""
    return built["catalog"].load_table((SLUG, name)).scan().to_pandas()


def naive(frame, *columns):
    for c in columns:
        frame[c] = frame[c].dt.tz_convert("UTC").dt.tz_localize(None)
    return frame


@pytest.mark.slow
def test_the_builds_succeed_with_their_dbt_tests(built):
    assert all(r.success for r in built["results"])
    checks = [e for r in built["results"] for e in r.get_asset_check_evaluations()]
    assert checks and all(c.passed for c in checks), [c.check_name for c in checks]


@pytest.mark.slow
def test_every_model_is_an_iceberg_table_with_the_oracles_rows(built):
    df = tr.frame(built["traffic"].messages)
    tr.same(
        model(built, "daily_event_counts"), tr.daily_event_counts(df), ["day", "type", "event_name"]
    )
    sessions = naive(model(built, "sessions"), "started_at", "ended_at")
    tr.same(sessions, tr.sessions(df), ["session_id"])
    graph = naive(model(built, "identity_graph"), "first_seen_at", "last_seen_at")
    tr.same(graph, tr.identity_graph(df), ["anonymous_id", "user_id"])
    users = naive(model(built, "users"), "first_seen_at", "last_seen_at")
    tr.same(users, tr.users(df), ["user_id"])
    # in the lake's models folder, partitioned by their day column
    tbl = built["catalog"].load_table((SLUG, "sessions"))
    assert tbl.location().endswith(f"/lake/models/{SLUG}/sessions")
    assert [f.name for f in tbl.spec().fields] == ["session_day"]


def test_duckdb_reads_the_models_as_datalake_sql_does(built):
    con = duckdb_connection()
    names = attach_tables(con, built["catalog"], [SLUG])
    assert f"{SLUG}.daily_event_counts" in names and f"{SLUG}.pages" in names
    per_day = dict(
        con.sql(f"SELECT day, sum(events) FROM {SLUG}.daily_event_counts GROUP BY day").fetchall()
    )
    # each day's messages, counted from the traffic itself
    want: dict[str, int] = {}
    for m in built["traffic"].messages:
        day = m["receivedAt"][:10]
        want[day] = want.get(day, 0) + 1
    assert per_day == want


@pytest.mark.slow
def test_a_day_built_again_is_one_commit_replacing_exactly_its_days(built):
    catalog = built["catalog"]
    before = {m: catalog.load_table((SLUG, m)) for m in ("sessions", "daily_event_counts")}
    rows_before = {m: model(built, m) for m in before}
    daily = built["defs"].resolve_assets_def(AssetKey([SLUG, "sessions"]))
    result = materialize([daily], instance=built["instance"], partition_key=tr.D2)
    assert result.success
    for m, (column, days) in {
        "daily_event_counts": ("day", {tr.D2}),
        "sessions": ("session_day", {tr.D1, tr.D2}),  # and the day before (sessions.sql)
    }.items():
        tbl = catalog.load_table((SLUG, m))
        new = [
            s for s in tbl.snapshots() if s.timestamp_ms > before[m].current_snapshot().timestamp_ms
        ]
        assert len(new) == 1 and new[0].summary.operation.value == "overwrite", m
        added = tbl.inspect.files().to_pylist()
        old = {f["file_path"] for f in before[m].inspect.files().to_pylist()}
        touched = {f["partition"][column] for f in added if f["file_path"] not in old}
        assert touched <= days, (m, touched)
        # the other days' files are the same files
        kept = {f["file_path"] for f in added if f["partition"][column] not in days}
        assert kept <= old
        tr.same(model(built, m), rows_before[m], list(rows_before[m].columns))


def test_the_spark_engine_says_why_it_cannot_read_an_iceberg_lake(built, tmp_path):
    settings = load_lake_toml(
        tmp_path,
        'table_format = "iceberg"\n[models]\nengine = "spark"\n'
        '[[sources]]\nid = "ice"\nstart = "2026-11-01-00:00"\n',
    )
    assert 'engine = "duckdb"' in can_run(settings)
    assert build_model_assets(settings, settings.sources[0], ["pages", "tracks"]) == []


@pytest.mark.slow
def test_forget_rebuilds_the_touched_days_and_proves_every_stored_file(built):
    """The last test of the module: it erases a person from the lake it shares."""
    settings, catalog = built["settings"], built["catalog"]
    request = ForgetRequest("forget-ice-u9", (identity("user_id", "u9"),), follow_links=True)
    result = forget(settings, request)
    assert result.status == "completed" and result.rows_remaining == 0
    erased = reach_models(settings, result)
    assert erased["models_errors"] == [] and erased["models_rows_remaining"] == 0
    assert erased["models_rebuilt_days"][SLUG] == [tr.D2, tr.D3]
    assert {"sessions", "users", "identity_graph", "daily_event_counts"} <= set(
        erased["models_checked"][SLUG]
    )
    person = {"u9", "e1", "e2"}
    for m in ("sessions", "identity_graph", "users", "daily_event_counts"):
        tbl = catalog.load_table((SLUG, m))
        assert len(tbl.snapshots()) == 1, m  # the versions that held the person: expired
        after = model(built, m)
        for c in {"user_id", "anonymous_id", "visitor"} & set(after.columns):
            assert not set(after[c].dropna()) & person, (m, c)
    assert tr.D3 not in set(model(built, "sessions").session_day)
    rest = [
        m
        for m in built["traffic"].messages
        if m.get("userId") not in person and m.get("anonymousId") not in person
    ]
    tr.same(
        model(built, "daily_event_counts"),
        tr.daily_event_counts(tr.frame(rest)),
        ["day", "type", "event_name"],
    )
