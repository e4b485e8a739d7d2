"""The sync registers what it commits in the catalog: Hive (the test session's embedded
metastore) queried by name with Spark SQL, and Glue through moto."""

import os

import boto3
import pytest
from moto import mock_aws

from datalake_assets.catalog.config import CatalogConfig
from datalake_assets.transform.job import SyncError, SyncRequest, run_sync
from datalake_assets_tests.support.archive_builders import msg, write_hour

pytestmark = pytest.mark.spark
SRC = "web"


def sync(spark, lake, *hours, catalog, **kw):
    return run_sync(
        spark,
        SyncRequest(
            lake_root=lake["lake_root"],
            archive_root=lake["archive_root"],
            source_id=SRC,
            hours=hours,
            catalog=catalog,
            **kw,
        ),
    )


@pytest.mark.slow
def test_hive_tables_partitions_and_reports_queryable_by_name(spark, lake):
    db = "hive_sync_test"
    write_hour(
        lake["archive_root"],
        SRC,
        "2026-11-21T10",
        [msg(f"a{i}", properties={"n": i}) for i in range(5)],
    )
    write_hour(
        lake["archive_root"],
        SRC,
        "2026-11-21T11",
        [msg(f"b{i}", hour="2026-11-21T11", properties={"n": i, "plan": "pro"}) for i in range(3)],
    )
    cfg = CatalogConfig(backend="hive")
    first = sync(spark, lake, "2026-11-21T10", catalog=cfg, database=db)
    result = sync(spark, lake, "2026-11-21T11", catalog=cfg, database=db)
    assert result.tables["order_completed"].catalog["partitions"] == 2

    def count(hr):
        return (
            spark.sql(
                f"SELECT count(*) AS n FROM {db}.order_completed WHERE day='2026-11-21' AND hr='{hr}'"
            )
            .first()
            .n
        )

    assert (count("10"), count("11")) == (5, 3)
    plans = {
        (r.hr, r.properties_plan)
        for r in spark.sql(f"SELECT hr, properties_plan FROM {db}.order_completed").collect()
    }
    assert plans == {("10", None), ("11", "pro")}  # added in hour 11: NULL in hour 10
    assert spark.sql(f"SELECT count(*) AS n FROM {db}.tracks").first().n == 8

    rows = spark.sql(
        "SELECT type, status, count(*) AS n FROM segment_datalake_meta.sync_reports "
        # this test's two runs: the suite's shared metastore also holds other tests' reports
        # of the same source id (on another day's partitions after midnight)
        f"WHERE source_id='{SRC}' AND run_id IN ('{first.source.run_id}', "
        f"'{result.source.run_id}') GROUP BY type, status ORDER BY type"
    ).collect()
    assert [(r.type, r.status, r.n) for r in rows] == [
        ("event", "finished", 4),
        ("source", "finished", 2),
    ]


@pytest.mark.slow
def test_glue_permission_error_fails_before_anything_is_committed(
    spark, lake, fake_aws_credentials, monkeypatch
):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    write_hour(lake["archive_root"], SRC, "2026-11-21T10", [msg("a1")])
    with mock_aws():
        client = boto3.client("glue", region_name="eu-west-1")

        def deny(**kwargs):
            from botocore.exceptions import ClientError

            raise ClientError(
                {"Error": {"Code": "AccessDeniedException", "Message": "denied"}}, "CreateDatabase"
            )

        # the sync builds its client from boto3's default session: AWS answers "denied" there
        boto3.setup_default_session()
        boto3.DEFAULT_SESSION.events.register("before-call.glue.CreateDatabase", deny)
        with pytest.raises(SyncError) as e:
            sync(
                spark,
                lake,
                "2026-11-21T10",
                catalog=CatalogConfig(backend="glue", glue_region="eu-west-1"),
            )
        assert e.value.code == "insufficient_permissions"
        assert "nothing committed" in str(e.value)
        assert client.get_databases()["DatabaseList"] == []
        boto3.DEFAULT_SESSION.events.unregister("before-call.glue.CreateDatabase", deny)
    assert not os.path.exists(f"{lake['lake_root']}/data")


def test_glue_registers_tables_and_partitions(spark, lake, fake_aws_credentials, monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    write_hour(lake["archive_root"], SRC, "2026-11-21T10", [msg("a1", properties={"n": 1})])
    with mock_aws():
        cfg = CatalogConfig(backend="glue", glue_region="eu-west-1")
        sync(spark, lake, "2026-11-21T10", catalog=cfg, table_prefix="web_")
        sync(spark, lake, "2026-11-21T10", catalog=cfg, table_prefix="web_")  # a replay
        glue = boto3.client("glue", region_name="eu-west-1")
        t = glue.get_table(DatabaseName=SRC, Name="web_order_completed")["Table"]
        cols = {c["Name"]: c["Type"] for c in t["StorageDescriptor"]["Columns"]}
        assert cols["properties_n"] == "bigint" and cols["received_at"] == "timestamp"
        assert [k["Name"] for k in t["PartitionKeys"]] == ["day", "hr"]
        parts = glue.get_partitions(DatabaseName=SRC, TableName="web_order_completed")["Partitions"]
        assert [p["Values"] for p in parts] == [["2026-11-21", "10"]]  # the replay added none
