"""The Dagster layer end to end: real materializations on an ephemeral instance, real Spark."""

import duckdb
import pytest
from dagster import AssetKey, DagsterInstance, materialize

from datalake_assets.assets import build_source_assets
from datalake_assets.definitions import build_definitions
from datalake_assets.resources import LocalSparkCompute
from datalake_assets.settings import load_settings
from datalake_assets.spec.layout import ArchiveHour

pytestmark = [pytest.mark.spark, pytest.mark.dagster]


@pytest.fixture()
def settings(tmp_path):
    f = tmp_path / "lake.toml"
    f.write_text(
        'archive_root = "archive"\nlake_root = "lake"\n'
        '[[sources]]\nid = "web-prod"\nslug = "web_prod"\nstart = "2026-11-01-00:00"\n'
    )
    return load_settings(str(f), env={})


def test_asset_graph_snapshot(settings):
    defs = build_definitions(settings)
    keys = sorted(k.to_user_string() for k in defs.resolve_all_asset_keys())
    assert keys == [
        "web_prod/aliases", "web_prod/groups", "web_prod/identifies", "web_prod/pages",
        "web_prod/quarantine", "web_prod/raw_archive", "web_prod/screens", "web_prod/sync_reports",
        "web_prod/tracks",
    ]


def test_materialize_an_hour_then_reload_picks_up_new_event_tables(spark, settings):
    from datalake_assets.demo import generate_archive

    source = settings.sources[0]
    summary = generate_archive(settings.archive_root, source.id, [ArchiveHour.parse("2026-11-21T10")],
                               events_per_hour=800, files_per_hour=2, seed=11)
    instance = DagsterInstance.ephemeral()
    assets = build_source_assets(settings, source)
    result = materialize(assets, resources={"compute": LocalSparkCompute()},
                         partition_key="2026-11-21-10:00", instance=instance)
    assert result.success

    report = instance.get_latest_materialization_event(AssetKey(["web_prod", "sync_reports"]))
    md = report.asset_materialization.metadata
    assert md["lines_in"].value == summary.lines
    assert md["lines_in"].value == (md["messages_written"].value + md["duplicates"].value
                                    + md["lines_quarantined"].value)
    tracks = instance.get_latest_materialization_event(AssetKey(["web_prod", "tracks"]))
    tmd = tracks.asset_materialization.metadata
    assert tracks.asset_materialization.partition == "2026-11-21-10:00"
    assert tmd["rows"].value == summary.by_type["track"]
    columns = {c.name: c.type for c in tmd["dagster/column_schema"].schema.columns}
    assert columns["received_at"] == "timestamp" and columns["message_id"] == "string"

    # A track event table seen for the first time is recorded under its own key at once...
    new = instance.get_latest_materialization_event(AssetKey(["web_prod", "order_completed"]))
    assert new is not None and new.asset_materialization.metadata["rows"].value == summary.by_event["Order Completed"]
    # ...and is a declared asset after a reload of the definitions.
    keys = {k.to_user_string() for k in build_definitions(settings).resolve_all_asset_keys()}
    assert "web_prod/order_completed" in keys

    # The lake is queryable by path with typed columns.
    glob = f"{settings.lake_root}/data/{source.id}/segment_type=order_completed/*/*/*.parquet"
    (n,), = duckdb.sql(f"select count(*) from read_parquet('{glob}', hive_partitioning=true)").fetchall()
    assert n == summary.by_event["Order Completed"]


def test_a_24_hour_backfill_is_one_spark_job_and_a_replay(spark, settings):
    from datalake_assets.demo import generate_archive

    source = settings.sources[0]
    hours = [ArchiveHour.parse(f"2026-11-20T{h:02d}") for h in range(24)]
    summary = generate_archive(settings.archive_root, source.id, hours, events_per_hour=40,
                               files_per_hour=1, seed=3)
    instance = DagsterInstance.ephemeral()
    result = materialize(
        build_source_assets(settings, source), resources={"compute": LocalSparkCompute()},
        instance=instance,
        tags={"dagster/asset_partition_range_start": "2026-11-20-00:00",
              "dagster/asset_partition_range_end": "2026-11-20-23:00",
              "dagster/backfill": "replay-test"},
    )
    assert result.success
    md = instance.get_latest_materialization_event(
        AssetKey(["web_prod", "sync_reports"])).asset_materialization.metadata
    assert len(md["hours_synced"].value) == 24  # the 24 hours in one sync, one Spark job
    assert md["replay"].value is True
    assert (md["replay_from"].value, md["replay_to"].value) == ("2026-11-20T00", "2026-11-20T23")
    assert md["lines_in"].value == summary.lines
    assert md["lines_in"].value == (md["messages_written"].value + md["duplicates"].value
                                    + md["lines_quarantined"].value)
    parts = instance.get_materialized_partitions(AssetKey(["web_prod", "tracks"]))
    assert len(parts) == 24
