"""The Dagster layer end to end: real materializations on an ephemeral instance, real Spark."""

import duckdb
import pytest
from dagster import (
    AssetCheckKey,
    AssetKey,
    DagsterInstance,
    RunRequest,
    SkipReason,
    build_sensor_context,
    materialize,
)
from dagster._core.definitions.definitions_load_context import (
    DefinitionsLoadContext,
    DefinitionsLoadType,
)
from dagster._core.definitions.repository_definition import RepositoryLoadData

from datalake_assets.definitions import STATE_KEY, build_definitions, loaded_state
from datalake_assets.orchestration.automation.definitions_reload import SENSOR_NAME, state_hash
from datalake_assets.orchestration.compute.spark_compute import LocalSparkCompute
from datalake_assets.orchestration.sync.lake_state import LakeState, read_lake_state
from datalake_assets.orchestration.sync.source_assets import build_source_assets, rules_code_version
from datalake_assets.spec.layout import ArchiveHour
from datalake_assets_tests.support.settings_files import load_lake_toml

pytestmark = [pytest.mark.spark, pytest.mark.dagster]


SETTINGS = (
    'archive_root = "archive"\nlake_root = "lake"\n'
    '[[sources]]\nid = "web-prod"\nslug = "web_prod"\nstart = "2026-11-01-00:00"\n'
)


@pytest.fixture()
def settings(tmp_path):
    return load_lake_toml(tmp_path, SETTINGS)


def test_asset_graph_snapshot(tmp_path):
    defs = build_definitions(load_lake_toml(tmp_path, SETTINGS, models=True))  # with the models
    keys = sorted(k.to_user_string() for k in defs.resolve_all_asset_keys())
    assert keys == [
        "web_prod/aliases",
        "web_prod/catalog",
        "web_prod/daily_event_counts",
        "web_prod/groups",
        "web_prod/identifies",
        "web_prod/identity_graph",
        "web_prod/pages",
        "web_prod/quarantine",
        "web_prod/raw_archive",
        "web_prod/screens",
        "web_prod/sessions",
        "web_prod/sync_reports",
        "web_prod/tracks",
        "web_prod/users",
    ]


def test_the_graph_declares_owners_table_names_uris_and_a_code_version(tmp_path):
    defs = build_definitions(
        load_lake_toml(
            tmp_path,
            '[[sources]]\nid = "web"\nstart = "2026-11-01-00:00"\ntable_prefix = "w"\n'
            'owners = ["team:growth", "ana@example.com"]\n',
        )
    )
    pages = defs.resolve_assets_def(AssetKey(["web", "pages"])).specs_by_key[
        AssetKey(["web", "pages"])
    ]
    assert pages.owners == ["team:growth", "ana@example.com"]
    assert pages.metadata["dagster/table_name"] == "web.w_pages"
    assert pages.metadata["dagster/uri"].value.endswith("/lake/data/web/segment_type=pages")
    assert "`" not in pages.description
    sync = defs.resolve_assets_def(AssetKey(["web", "pages"]))
    assert sync.code_versions_by_key[AssetKey(["web", "pages"])] == rules_code_version()
    assert sync.can_subset
    checks = {k for k in sync.check_keys}
    assert AssetCheckKey(AssetKey(["web", "pages"]), "duplicates") in checks
    assert all(sync.get_spec_for_check_key(k).partitions_def is not None for k in checks)


def test_a_run_rebuilds_the_graph_of_the_load_that_created_it(settings, tmp_path):
    """The code server's load attaches its lake state; a run worker (RECONSTRUCTION) builds its
    graph from that state even when the lake has moved on since."""
    from datalake_assets.lake.records import write_schema_record

    source = settings.sources[0]
    at_load = read_lake_state(settings)
    defs = build_definitions(settings, state=at_load)
    carried = defs.metadata[STATE_KEY].data
    write_schema_record(
        settings.lake_root, source.lake_dir, {"order_completed": [("message_id", "string")]}
    )
    assert "order_completed" in read_lake_state(settings).sources[source.id].tables
    context = DefinitionsLoadContext(
        DefinitionsLoadType.RECONSTRUCTION,
        RepositoryLoadData(cacheable_asset_data={}, reconstruction_metadata=defs.metadata),
    )
    with DefinitionsLoadContext.scoped(context):
        state = loaded_state(settings)
    assert state.to_json() == carried
    assert "order_completed" not in state.sources[source.id].tables
    # A code server loading afresh reads the lake's current state.
    with DefinitionsLoadContext.scoped(DefinitionsLoadContext(DefinitionsLoadType.INITIALIZATION)):
        assert "order_completed" in loaded_state(settings).sources[source.id].tables


@pytest.mark.slow
def test_the_definitions_sensor_asks_for_a_reload_only_when_the_lake_changed(tmp_path):
    from datalake_assets.lake.records import write_schema_record

    def defs_for(url: str):
        settings = load_lake_toml(
            tmp_path, f'[automation]\nwebserver_url = "{url}"\n[[sources]]\nid = "web"\n'
        )
        return settings, build_definitions(settings)

    settings, defs = defs_for("http://127.0.0.1:3999")
    sensor = defs.resolve_sensor_def(SENSOR_NAME)
    with DagsterInstance.ephemeral() as instance:
        context = build_sensor_context(instance=instance, definitions=defs)
        first = sensor(context)
        assert isinstance(first, SkipReason) and "match the lake" in first.skip_message
        write_schema_record(settings.lake_root, "web", {"cart_viewed": [("message_id", "string")]})
        request = sensor(context)
        assert isinstance(request, RunRequest)
        assert request.run_key == f"reload:{state_hash(read_lake_state(settings))}"
        assert "web: new tables cart_viewed" in request.tags["datalake/changes"]
        assert request.tags["datalake/webserver_url"] == "http://127.0.0.1:3999"
        # The load that follows the reload has the table: nothing more to do.
        reloaded = defs_for("http://127.0.0.1:3999")[1]
        assert AssetKey(["web", "cart_viewed"]) in reloaded.resolve_all_asset_keys()
        again = reloaded.resolve_sensor_def(SENSOR_NAME)(context)
        assert isinstance(again, SkipReason) and "match the lake" in again.skip_message
        # Without a webserver URL the sensor says what changed and what to click.
        without = defs_for("")[1]
        write_schema_record(
            settings.lake_root,
            "web",
            {"cart_viewed": [("message_id", "string")], "signed_up": [("message_id", "string")]},
        )
        skipped = without.resolve_sensor_def(SENSOR_NAME)(context)
        assert isinstance(skipped, SkipReason)
        assert "new tables signed_up" in skipped.skip_message
        assert "Reload definitions" in skipped.skip_message


@pytest.mark.slow
def test_auto_start_is_the_archive_first_hour(tmp_path):
    from datalake_assets.ingest.demo import generate_archive

    settings = load_lake_toml(tmp_path, '[[sources]]\nid = "web"\n')
    empty = read_lake_state(settings, now=lambda: ArchiveHour.parse("2026-11-23T08").start)
    assert empty.sources["web"].start == "2026-11-23-08:00"  # nothing older exists yet
    # An hour later, still empty: the start stays where it was loaded (no reload every hour).
    later = read_lake_state(
        settings, now=lambda: ArchiveHour.parse("2026-11-23T09").start, previous=empty
    )
    assert later.changes_since(empty) == []
    generate_archive(
        settings.archive_root,
        "web",
        [ArchiveHour.parse("2026-11-20T05"), ArchiveHour.parse("2026-11-21T09")],
        events_per_hour=5,
        files_per_hour=1,
    )
    # An older hour folder holding only an in-progress file does not count, nor stop the search.
    early = tmp_path / "archive" / "web" / "day=2026-11-19" / "hr=03"
    early.mkdir(parents=True)
    (early / ".part-0.jsonl.gz").write_bytes(b"")
    state = read_lake_state(settings)
    assert state.sources["web"].start == "2026-11-20-05:00"
    assert state.changes_since(empty) == [
        "web: partitions start at 2026-11-20-05:00 (was 2026-11-23-08:00)"
    ]
    job = build_definitions(settings, state=state).resolve_job_def("web_sync_job")
    assert job.partitions_def.get_first_partition_key() == "2026-11-20-05:00"
    assert LakeState.from_json(state.to_json()) == state


@pytest.mark.slow
def test_materialize_an_hour_then_reload_picks_up_new_event_tables(spark, settings):
    from datalake_assets.ingest.demo import generate_archive

    source = settings.sources[0]
    summary = generate_archive(
        settings.archive_root,
        source.id,
        [ArchiveHour.parse("2026-11-21T10")],
        events_per_hour=800,
        files_per_hour=2,
        seed=11,
    )
    instance = DagsterInstance.ephemeral()
    assets = build_source_assets(settings, source)
    result = materialize(
        assets,
        resources={"compute": LocalSparkCompute()},
        partition_key="2026-11-21-10:00",
        instance=instance,
    )
    assert result.success

    report = instance.get_latest_materialization_event(AssetKey(["web_prod", "sync_reports"]))
    md = report.asset_materialization.metadata
    assert md["lines_in"].value == summary.lines
    assert md["lines_in"].value == (
        md["messages_written"].value + md["duplicates"].value + md["lines_quarantined"].value
    )
    tracks = instance.get_latest_materialization_event(AssetKey(["web_prod", "tracks"]))
    tmd = tracks.asset_materialization.metadata
    assert tracks.asset_materialization.partition == "2026-11-21-10:00"
    assert tmd["rows"].value == summary.by_type["track"]
    columns = {c.name: c.type for c in tmd["dagster/column_schema"].schema.columns}
    assert columns["received_at"] == "timestamp" and columns["message_id"] == "string"

    # A track event table seen for the first time is recorded under its own key at once...
    new = instance.get_latest_materialization_event(AssetKey(["web_prod", "order_completed"]))
    assert (
        new is not None
        and new.asset_materialization.metadata["rows"].value == summary.by_event["Order Completed"]
    )
    # ...and is a declared asset after a reload of the definitions.
    keys = {k.to_user_string() for k in build_definitions(settings).resolve_all_asset_keys()}
    assert "web_prod/order_completed" in keys

    # The lake is queryable by path with typed columns.
    glob = f"{settings.lake_root}/data/{source.id}/segment_type=order_completed/*/*/*.parquet"
    ((n,),) = duckdb.sql(
        f"select count(*) from read_parquet('{glob}', hive_partitioning=true)"
    ).fetchall()
    assert n == summary.by_event["Order Completed"]

    # Any selection works: one event table alone (its asset page's Materialize) syncs the whole
    # source-hour; the table gets its materialization and every other rewritten table too.
    one = AssetKey(["web_prod", "order_completed"])
    reloaded = build_source_assets(settings, source)
    again = materialize(
        reloaded,
        selection=[one],
        resources={"compute": LocalSparkCompute()},
        partition_key="2026-11-21-10:00",
        instance=instance,
    )
    assert again.success
    selected = instance.get_latest_materialization_event(one)
    assert selected.run_id == again.run_id
    assert (
        selected.asset_materialization.metadata["rows"].value == summary.by_event["Order Completed"]
    )
    for other in ("pages", "sync_reports"):
        event = instance.get_latest_materialization_event(AssetKey(["web_prod", other]))
        assert event.run_id == again.run_id, other
        assert event.asset_materialization.partition == "2026-11-21-10:00"
    assert (
        instance.get_latest_materialization_event(AssetKey(["web_prod", "sync_reports"]))
        .asset_materialization.metadata["lines_in"]
        .value
        == summary.lines
    )


@pytest.mark.slow
def test_a_range_backfill_is_one_spark_job_and_a_replay(spark, settings):
    from datalake_assets.ingest.demo import generate_archive

    source = settings.sources[0]
    # Eight hours, not a day: what is per hour (figures, checks, partitions of every table)
    # holds for eight as for 24, at a third of the Dagster bookkeeping and the writes.
    hours = [ArchiveHour.parse(f"2026-11-20T{h:02d}") for h in range(8)]
    summary = generate_archive(
        settings.archive_root, source.id, hours, events_per_hour=40, files_per_hour=1, seed=3
    )
    instance = DagsterInstance.ephemeral()
    result = materialize(
        build_source_assets(settings, source),
        resources={"compute": LocalSparkCompute()},
        instance=instance,
        tags={
            "dagster/asset_partition_range_start": "2026-11-20-00:00",
            "dagster/asset_partition_range_end": "2026-11-20-07:00",
            "dagster/backfill": "replay-test",
        },
    )
    assert result.success
    md = instance.get_latest_materialization_event(
        AssetKey(["web_prod", "sync_reports"])
    ).asset_materialization.metadata
    assert len(md["batch_hours_synced"].value) == 8  # the 8 hours in one sync, one Spark job
    assert md["batch_lines_in"].value == summary.lines
    assert md["replay"].value is True
    assert (md["replay_from"].value, md["replay_to"].value) == ("2026-11-20T00", "2026-11-20T07")
    # Each hour's materialization carries that hour's own figures, not the batch's (#27).
    lines = archive_lines_by_hour(settings.archive_root, source.id)
    rows = lake_rows_by_hour(settings.lake_root, source.lake_dir, "pages")
    assert len(set(rows.values())) > 1, "the test needs hours of different sizes"
    for h in hours:
        k = h.partition_key
        report = hour_metadata(instance, ["web_prod", "sync_reports"], k)
        assert report["lines_in"] == lines[h.compact], k
        assert report["lines_in"] == (
            report["messages_written"]
            + report["duplicates"]
            + report["lines_quarantined"]
            + report["suppressed"]
        ), k
        pages = hour_metadata(instance, ["web_prod", "pages"], k)
        assert pages["rows"] == pages["dagster/row_count"] == rows.get(h.compact, 0), k
        assert pages.get("files", 0) == (1 if rows.get(h.compact) else 0), k
    parts = instance.get_materialized_partitions(AssetKey(["web_prod", "tracks"]))
    assert len(parts) == len(hours)
    # Every selected table has all the hours, also those without a single event of it (rows 0):
    # a backfill from the UI would otherwise wait for them and end failed.
    for table in ("aliases", "groups", "identifies", "pages", "screens", "quarantine"):
        assert len(instance.get_materialized_partitions(AssetKey(["web_prod", table]))) == len(
            hours
        ), table
    # Each hour has its own check results, each naming the batch that measured it.
    history = instance.event_log_storage.get_asset_check_execution_history(
        AssetCheckKey(AssetKey(["web_prod", "tracks"]), "duplicates"), limit=100
    )
    assert sorted(r.partition for r in history) == [h.partition_key for h in hours]
    evaluation = history[0].event.dagster_event.event_specific_data
    assert evaluation.metadata["batch_first_hour"].value == "2026-11-20T00"
    assert evaluation.metadata["hour"].value == str(ArchiveHour.parse(history[0].partition))
    # ... and is tied to its hour's materialization: the UI counts only such results (#27.2)
    from dagster import AssetRecordsFilter

    latest = instance.fetch_materializations(
        AssetRecordsFilter(
            asset_key=AssetKey(["web_prod", "tracks"]), asset_partitions=[history[0].partition]
        ),
        limit=1,
    ).records[0]
    assert evaluation.target_materialization_data.storage_id == latest.storage_id


def hour_metadata(instance, key: list[str], partition: str) -> dict:
    """The metadata values of an asset's latest materialization of one partition."""
    from dagster import AssetRecordsFilter

    records = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=AssetKey(key), asset_partitions=[partition]), limit=1
    )
    assert records.records, f"{key} {partition}: no materialization"
    md = records.records[0].asset_materialization.metadata
    return {k: v.value for k, v in md.items()}


def archive_lines_by_hour(archive_root: str, source_id: str) -> dict[str, int]:
    """Non-blank lines of each archive hour (compact), read from its gzip files."""
    import gzip
    from pathlib import Path

    out: dict[str, int] = {}
    for f in Path(archive_root, source_id).glob("day=*/hr=*/*.gz"):
        day, hr = f.parent.parent.name[4:], f.parent.name[3:]
        n = sum(1 for line in gzip.open(f) if line.strip())
        key = day.replace("-", "") + hr
        out[key] = out.get(key, 0) + n
    return out


def lake_rows_by_hour(lake_root: str, source_dir: str, table: str) -> dict[str, int]:
    """Rows of each hour (compact) of a lake table, from its Parquet files' footers."""
    from pathlib import Path

    import pyarrow.parquet as pq

    out: dict[str, int] = {}
    for f in Path(lake_root, "data", source_dir, f"segment_type={table}").rglob("part-*.parquet"):
        hour = f.name.split("-")[1]
        out[hour] = out.get(hour, 0) + pq.ParquetFile(f).metadata.num_rows
    return out


@pytest.mark.slow
def test_dg_checks_and_lists_the_code_location(tmp_path):
    """``dg check defs`` and ``dg list defs`` load the project from ``[tool.dg]`` (pyproject)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    dg = Path(sys.executable).with_name("dg")
    env = dict(os.environ, DATALAKE_HOME=str(tmp_path / "home"), DAGSTER_HOME="")
    env.pop("DATALAKE_SETTINGS", None)
    check = subprocess.run(
        [str(dg), "check", "defs"], cwd=repo, env=env, capture_output=True, text=True, timeout=300
    )
    assert check.returncode == 0, check.stdout[-2000:] + check.stderr[-2000:]
    assert "All definitions loaded successfully" in check.stdout + check.stderr
    listed = subprocess.run(
        [str(dg), "list", "defs", "--json"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert "demo/pages" in listed.stdout and "lake_definitions_sensor" in listed.stdout
