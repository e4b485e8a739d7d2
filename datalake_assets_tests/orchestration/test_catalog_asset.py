"""The catalog as an asset (issue #34), through Dagster in-process with Glue in moto:
registration and its check, a partition deleted by hand, a registration that fails after the
commit and its repair by the catalog asset alone, and no such asset without a catalog."""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest
from dagster import (
    AssetCheckKey,
    AssetKey,
    AssetRecordsFilter,
    AssetSelection,
    DagsterInstance,
    materialize,
)

from datalake_assets.definitions import build_definitions
from datalake_assets.orchestration.compute.spark_compute import LocalSparkCompute
from datalake_assets.orchestration.sync.source_assets import build_source_assets
from datalake_assets_tests.support.archive_builders import msg, write_hour
from datalake_assets_tests.support.settings_files import load_lake_toml

pytestmark = [pytest.mark.dagster]
HOUR, KEY = "2026-11-21T10", "2026-11-21-10:00"
CATALOG = AssetKey(["web", "catalog"])
IN_STEP = AssetCheckKey(CATALOG, "in_step")


@pytest.fixture()
def glue_settings(tmp_path, mocked_aws, monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    boto3.setup_default_session()  # the sync's Glue client comes from boto3's default session
    return load_lake_toml(
        tmp_path,
        'archive_root = "archive"\nlake_root = "lake"\n'
        '[catalog]\nbackend = "glue"\nglue_region = "eu-west-1"\n'
        '[[sources]]\nid = "web"\nstart = "2026-11-01-00:00"\n',
    )


def run(settings, instance, selection=None, partition_key=KEY):
    return materialize(
        build_source_assets(settings, settings.sources[0]),
        selection=selection,
        partition_key=partition_key,
        instance=instance,
        resources={"compute": LocalSparkCompute()},
        raise_on_error=False,
    )


def latest(instance, key: AssetKey):
    records = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=key, asset_partitions=[KEY]), limit=1
    ).records
    return records[0] if records else None


def in_step(result):
    found = [e for e in result.get_asset_check_evaluations() if e.asset_check_key == IN_STEP]
    assert len(found) == 1, found
    return found[0]


def deny(operation: str):
    """Glue answers ``AccessDenied`` to ``operation`` (on boto3's default session)."""

    def refuse(**kwargs):
        from botocore.exceptions import ClientError

        raise ClientError(
            {"Error": {"Code": "AccessDeniedException", "Message": "denied"}}, operation
        )

    boto3.DEFAULT_SESSION.events.register(f"before-call.glue.{operation}", refuse)
    return lambda: boto3.DEFAULT_SESSION.events.unregister(f"before-call.glue.{operation}", refuse)


def test_registration_its_check_and_a_partition_deleted_by_hand(glue_settings):
    write_hour(
        glue_settings.archive_root,
        "web",
        HOUR,
        [msg(f"p{i}", type="page", name="Home", event=None) for i in range(5)]
        + [msg(f"o{i}", properties={"total": i}) for i in range(3)],
    )
    instance = DagsterInstance.ephemeral()
    result = run(glue_settings, instance)
    assert result.success
    md = {k: v.value for k, v in latest(instance, CATALOG).asset_materialization.metadata.items()}
    assert md["catalog"] == "glue" and md["database"] == "web"
    assert set(md["tables"]) == {"pages", "order_completed", "tracks"}
    assert md["partitions_registered"] == 3 and "pages" in md["tables_created"]
    check = in_step(result)
    assert check.passed and check.partition == KEY, check.metadata
    # the catalog loses a partition behind our back: the check, run alone, names it
    glue = boto3.client("glue", region_name="eu-west-1")
    glue.delete_partition(
        DatabaseName="web", TableName="pages", PartitionValues=["2026-11-21", "10"]
    )
    # as "Execute all" launches it: no partition (the latest synced hours are checked)
    alone = run(glue_settings, instance, AssetSelection.checks(IN_STEP), partition_key=None)
    assert alone.success and not alone.get_asset_materialization_events()
    check = in_step(alone)
    assert not check.passed
    assert check.metadata["problems"].value == [
        "partition day=2026-11-21/hr=10 of web.pages is not in the catalog"
    ]


def test_a_failed_registration_and_its_repair_by_the_catalog_asset_alone(glue_settings):
    write_hour(
        glue_settings.archive_root,
        "web",
        HOUR,
        [msg(f"p{i}", type="page", name="Home", event=None) for i in range(4)],
    )
    instance = DagsterInstance.ephemeral()
    allow = deny("BatchCreatePartition")
    try:
        result = run(glue_settings, instance)
    finally:
        allow()
    assert not result.success  # the run fails, saying the data is committed
    failure = result.get_step_failure_events()[0].event_specific_data.error.message
    assert "data committed" in failure and "materialize the source's catalog asset" in failure
    pages = latest(instance, AssetKey(["web", "pages"]))
    assert pages is not None and pages.event_log_entry.run_id == result.run_id
    assert latest(instance, CATALOG) is None  # the catalog's hour is not materialized
    assert not in_step(result).passed
    glue = boto3.client("glue", region_name="eu-west-1")
    assert glue.get_partitions(DatabaseName="web", TableName="pages")["Partitions"] == []
    reports = sorted(Path(glue_settings.lake_root, "reports").rglob("report.json"))

    repair = run(glue_settings, instance, AssetSelection.assets(CATALOG))
    assert repair.success
    assert {e.asset_key for e in repair.get_asset_materialization_events()} == {CATALOG}
    assert in_step(repair).passed
    parts = glue.get_partitions(DatabaseName="web", TableName="pages")["Partitions"]
    assert [p["Values"] for p in parts] == [["2026-11-21", "10"]]
    assert parts[0]["StorageDescriptor"]["Location"].endswith(
        "/data/web/segment_type=pages/day=2026-11-21/hr=10"
    )
    # nothing was synced again: no new report, the pages' latest materialization unchanged
    assert sorted(Path(glue_settings.lake_root, "reports").rglob("report.json")) == reports
    assert latest(instance, AssetKey(["web", "pages"])).storage_id == pages.storage_id


def test_no_catalog_asset_without_a_catalog(tmp_path):
    settings = load_lake_toml(
        tmp_path,
        '[catalog]\nbackend = "none"\n[[sources]]\nid = "web"\nstart = "2026-11-01-00:00"\n',
    )
    keys = build_definitions(settings).resolve_all_asset_keys()
    assert AssetKey(["web", "pages"]) in keys and CATALOG not in keys
