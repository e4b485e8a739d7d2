"""The Hive backend on the suite's shared Spark session (embedded Derby metastore in a temp
folder): real Parquet files in a temp lake, registered, then queried with Spark SQL."""

from __future__ import annotations

import os
import uuid
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from datalake_assets.catalog.catalog_interface import CatalogError, PartitionSpec
from datalake_assets.catalog.hive import HiveCatalog, swap_table_name
from datalake_assets.catalog.register import read_schemas, register_sync
from datalake_assets.catalog.reports import (
    register_quarantine,
    register_reports,
    write_report_table,
)
from datalake_assets.spec import layout
from datalake_assets.spec.layout import ArchiveHour

pytestmark = pytest.mark.spark
H9, H10 = ArchiveHour.parse("2026-11-21T09"), ArchiveHour.parse("2026-11-21T10")
ARROW = {
    "string": pa.string(),
    "bigint": pa.int64(),
    "double": pa.float64(),
    "boolean": pa.bool_(),
    "timestamp": pa.timestamp("us", tz="UTC"),
}


@pytest.fixture()
def hive(spark):
    return HiveCatalog(spark, batch_size=2)  # small batches: several ADD PARTITION statements


@pytest.fixture()
def db():
    return f"hv_{uuid.uuid4().hex[:10]}"


def write_hour(
    lake: str,
    table: str,
    hour: ArchiveHour,
    columns,
    rows: list[dict],
    layout_name: str = "day_hour",
) -> str:
    """One Parquet file as the sync writes it (snappy, timestamps in UTC microseconds)."""
    folder = layout.table_partition_dir(lake, "web", table, layout_name, hour)
    os.makedirs(folder, exist_ok=True)
    schema = pa.schema([(n, ARROW[t]) for n, t in columns])
    path = f"{folder}/{layout.data_file_name(hour, 'run1', 0, 0)}"
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path, compression="snappy")
    return path


def ts(hour: ArchiveHour, minute: int) -> datetime:
    return hour.start.replace(minute=minute)


def sync(hive, db, lake, tables, partitions, **kw):
    return register_sync(
        hive,
        database=db,
        table_prefix=kw.pop("table_prefix", ""),
        lake_root=lake,
        source_dir="web",
        date_layout="day_hour",
        tables=tables,
        partitions=partitions,
        **kw,
    )


def one(spark, sql):
    rows = spark.sql(sql).collect()
    assert len(rows) == 1, rows
    return tuple(rows[0])


@pytest.mark.slow
def test_session_metastore_stays_out_of_the_repo(spark, hive_metastore_dir):
    assert spark.conf.get("spark.sql.catalogImplementation") == "hive"
    spark.sql("SHOW DATABASES").collect()  # the metastore is created lazily: make sure it is
    assert (Path(hive_metastore_dir) / "metastore_db").is_dir()
    assert (Path(hive_metastore_dir) / "derby.log").is_file()
    repo = Path(__file__).resolve().parents[2]
    for junk in ("metastore_db", "derby.log", "spark-warehouse"):
        assert not (repo / junk).exists(), junk
        assert not (Path.cwd() / junk).exists(), junk
    java_options = spark.sparkContext.getConf().get("spark.driver.extraJavaOptions")
    assert "-Duser.timezone=UTC" in java_options


@pytest.mark.slow
def test_two_hours_registered_and_queried(spark, hive, db, tmp_path):
    lake = str(tmp_path / "lake")
    v1 = [("message_id", "string"), ("received_at", "timestamp"), ("amount", "bigint")]
    v2 = v1 + [("coupon", "string")]
    write_hour(
        lake,
        "orders",
        H9,
        v1,
        [{"message_id": f"a{i}", "received_at": ts(H9, i), "amount": i} for i in range(5)],
    )
    write_hour(
        lake,
        "orders",
        H10,
        v2,
        [
            {"message_id": f"b{i}", "received_at": ts(H10, i), "amount": 10 + i, "coupon": f"c{i}"}
            for i in range(3)
        ],
    )

    first = sync(hive, db, lake, {"orders": v1}, {"orders": [H9]})
    assert first["orders"]["partitions_added"] == 1 and first["orders"]["is_new"]
    second = sync(hive, db, lake, {"orders": v2}, {"orders": [H10]})
    assert second["orders"]["new_columns"] == [("coupon", "string")]
    assert second["orders"]["partitions"] == 2

    q = f"SELECT count(*) FROM {db}.orders WHERE day='2026-11-21' AND hr="
    assert one(spark, q + "'09'") == (5,)
    assert one(spark, q + "'10'") == (3,)
    assert one(spark, f"SELECT count(*), count(coupon) FROM {db}.orders WHERE hr='09'") == (5, 0)
    assert one(spark, f"SELECT min(coupon), sum(amount) FROM {db}.orders WHERE hr='10'") == (
        "c0",
        33,
    )
    assert one(spark, f"SELECT max(received_at) FROM {db}.orders WHERE hr='09'") == (
        datetime(2026, 11, 21, 9, 4),
    )  # the session's time zone is UTC
    info = hive.get_table(db, "orders")
    assert info.columns == v2 and info.partition_keys == ["day", "hr"]
    assert info.location == f"{lake}/data/web/segment_type=orders"
    assert read_schemas(hive, db, "", ["orders", "pages"]) == {"orders": v2}

    # idempotent: the same hours again add nothing
    again = sync(hive, db, lake, {"orders": v2}, {"orders": [H9, H10, H9]})
    assert again["orders"]["partitions_added"] == 0
    assert hive.partition_count(db, "orders") == 2
    assert one(spark, f"SELECT count(*) FROM {db}.orders") == (8,)


@pytest.mark.slow
def test_more_partitions_than_a_batch_and_a_moved_partition(spark, hive, db, tmp_path):
    lake = str(tmp_path / "lake")
    cols = [("message_id", "string")]
    hours = layout.hour_range(H9, ArchiveHour.parse("2026-11-21T13"))
    for h in hours:
        write_hour(lake, "pages", h, cols, [{"message_id": str(h)}])
    result = sync(hive, db, lake, {"pages": cols}, {"pages": hours})  # batch_size=2: 3 statements
    assert (result["pages"]["partitions_added"], result["pages"]["partitions"]) == (5, 5)
    assert one(spark, f"SELECT count(DISTINCT hr) FROM {db}.pages") == (5,)
    # re-registering a partition at another location moves it (a lake that moved)
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    pq.write_table(pa.table({"message_id": ["x", "y"]}), moved / "part-0.parquet")
    assert hive.add_partitions(db, "pages", [PartitionSpec(("2026-11-21", "09"), str(moved))]) == 0
    assert one(spark, f"SELECT count(*) FROM {db}.pages WHERE hr='09'") == (2,)
    locations = {p.values: p.location for p in hive.list_partitions(db, "pages")}
    assert locations[("2026-11-21", "09")] == str(moved)
    assert hive.list_tables(db) == ["pages"]
    # relocate=False (a caller whose partitions cannot have moved): an existing partition
    # stays where it is, a new one is still added where it is asked for
    h14 = ArchiveHour.parse("2026-11-21T14")
    write_hour(lake, "pages", h14, cols, [{"message_id": str(h14)}])
    at_14 = layout.table_partition_dir(lake, "web", "pages", "day_hour", h14)
    asked = [
        PartitionSpec(("2026-11-21", "10"), str(moved)),
        PartitionSpec(("2026-11-21", "14"), at_14),
    ]
    assert HiveCatalog(spark).add_partitions(db, "pages", asked, relocate=False) == 1
    locations = {p.values: p.location for p in hive.list_partitions(db, "pages")}
    assert locations[("2026-11-21", "10")] != str(moved)
    assert locations[("2026-11-21", "14")] == at_14
    assert one(spark, f"SELECT count(*) FROM {db}.pages WHERE hr IN ('10', '14')") == (2,)


@pytest.mark.slow
def test_partitions_it_remembers_are_the_metastore_s(spark, db, tmp_path):
    """A catalog object skips SHOW PARTITIONS for tables it created or listed (one sync): what
    it reports must be what a fresh look at the metastore finds."""
    lake = str(tmp_path / "lake")
    cols = [("message_id", "string")]
    h11 = ArchiveHour.parse("2026-11-21T11")
    for h in (H9, H10, h11):
        write_hour(lake, "pages", h, cols, [{"message_id": str(h)}])
    first = sync(HiveCatalog(spark), db, lake, {"pages": cols}, {"pages": [H9, H10]})
    assert (first["pages"]["partitions_added"], first["pages"]["partitions"]) == (2, 2)
    assert HiveCatalog(spark).partition_count(db, "pages") == 2
    second = HiveCatalog(spark)  # the next sync: an existing table, listed once
    again = sync(second, db, lake, {"pages": cols}, {"pages": [H10, h11]})
    assert (again["pages"]["partitions_added"], again["pages"]["partitions"]) == (1, 3)
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    pq.write_table(pa.table({"message_id": ["x"]}), moved / "part-0.parquet")
    # a partition it remembers, at another location: still moved
    assert (
        second.add_partitions(db, "pages", [PartitionSpec(("2026-11-21", "11"), str(moved))]) == 0
    )
    fresh = HiveCatalog(spark)
    assert fresh.partition_count(db, "pages") == second.partition_count(db, "pages") == 3
    locations = {p.values: p.location for p in fresh.list_partitions(db, "pages")}
    assert locations[("2026-11-21", "11")] == str(moved)
    assert one(spark, f"SELECT count(*) FROM {db}.pages") == (3,)


@pytest.mark.slow
@pytest.mark.parametrize("in_place", [True, False], ids=["alter-schema", "replace-definition"])
def test_widening(spark, db, tmp_path, in_place):
    """bigint -> double and boolean -> string. What Spark reads afterwards is Spark's Parquet
    reader's business: the widened column of the hours written before fails (INT64 cannot be
    read as double); every other column, and everything in the new hours, reads."""
    hive = HiveCatalog(spark, widen_in_place=in_place)
    lake = str(tmp_path / "lake")
    v1 = [("message_id", "string"), ("amount", "bigint"), ("gift", "boolean")]
    v2 = [("message_id", "string"), ("amount", "double"), ("gift", "string")]
    write_hour(lake, "orders", H9, v1, [{"message_id": "a", "amount": 1, "gift": True}])
    write_hour(lake, "orders", H10, v2, [{"message_id": "b", "amount": 1.5, "gift": "yes"}])
    sync(hive, db, lake, {"orders": v1}, {"orders": [H9]})
    result = sync(hive, db, lake, {"orders": v2}, {"orders": [H10]})
    assert result["orders"]["widened_columns"] == [
        ("amount", "bigint", "double"),
        ("gift", "boolean", "string"),
    ]
    assert hive.get_table(db, "orders").columns == v2
    assert hive.partition_count(db, "orders") == 2
    assert hive.list_tables(db) == ["orders"]  # no temporary table left behind
    assert [p.location for p in hive.list_partitions(db, "orders")] == [
        f"{lake}/data/web/segment_type=orders/day=2026-11-21/hr={h}" for h in ("09", "10")
    ]
    assert one(spark, f"SELECT amount, gift FROM {db}.orders WHERE hr='10'") == (1.5, "yes")
    assert one(spark, f"SELECT count(*) FROM {db}.orders") == (2,)
    assert one(spark, f"SELECT message_id FROM {db}.orders WHERE hr='09'") == ("a",)
    with pytest.raises(Exception, match="PARQUET_COLUMN_DATA_TYPE_MISMATCH|INT64"):
        spark.sql(f"SELECT amount FROM {db}.orders WHERE hr='09'").collect()
    # never narrowed
    sync(hive, db, lake, {"orders": v1}, {})
    assert hive.get_table(db, "orders").columns == v2


def test_interrupted_replacement_is_completed(spark, hive, db, tmp_path):
    """A crash after dropping the old definition leaves the new one under its temporary
    name, partitions included: the next look at the table renames it into place."""
    lake = str(tmp_path / "lake")
    cols = [("message_id", "string")]
    write_hour(lake, "pages", H9, cols, [{"message_id": "a"}])
    tmp = swap_table_name("pages")
    hive.ensure_database(db)
    hive.create_or_update_table(db, tmp, cols, ["day", "hr"], f"{lake}/data/web/segment_type=pages")
    hive.add_partitions(
        db,
        tmp,
        [
            PartitionSpec(
                ("2026-11-21", "09"),
                layout.table_partition_dir(lake, "web", "pages", "day_hour", H9),
            )
        ],
    )
    assert hive.list_tables(db) == []  # temporary tables are not listed
    info = hive.get_table(db, "pages")
    assert info is not None and info.columns == cols
    assert one(spark, f"SELECT count(*) FROM {db}.pages WHERE hr='09'") == (1,)
    assert hive.list_tables(db) == ["pages"]


def test_get_tables_lists_once_and_completes_an_interrupted_replacement(spark, hive, db, tmp_path):
    lake = str(tmp_path / "lake")
    cols = [("message_id", "string")]
    hive.ensure_database(db)
    hive.create_or_update_table(
        db, "pages", cols, ["day", "hr"], f"{lake}/data/web/segment_type=pages"
    )
    hive.create_or_update_table(
        db, swap_table_name("screens"), cols, ["day", "hr"], f"{lake}/data/web/segment_type=screens"
    )
    found = hive.get_tables(db, ["pages", "screens", "absent"])
    assert sorted(found) == ["pages", "screens"] and found["screens"].columns == cols
    assert hive.list_tables(db) == ["pages", "screens"]
    assert sorted(hive.get_tables(db)) == ["pages", "screens"]
    assert hive.get_tables("no_such_database_here", ["pages"]) == {}


def test_sync_reports_queryable_by_sql(spark, hive, tmp_path):
    lake = str(tmp_path / "lake")
    meta = f"meta_{uuid.uuid4().hex[:8]}"
    base = {
        "run_id": "r1",
        "source_id": "Web-Prod",
        "database": "web",
        "start_time": "2026-11-21T10:00:00+00:00",
        "finish_time": "2026-11-21T10:03:00+00:00",
        "duration_mins": 3.0,
        "status": "finished",
        "error": None,
        "error_code": None,
        "replay": False,
        "replay_from": None,
        "replay_to": None,
        "emr_cluster_id": None,
        "s3_bucket": None,
    }
    report = [
        {
            **base,
            "type": "event",
            "table_name": "pages",
            "row_count": 7,
            "is_new": True,
            "partitions": [{"day": "2026-11-21", "hr": "09"}],
            "new_columns": [{"name": "url", "type": "string"}],
            "duplicates": 1,
            "some_future_field": {"x": 1},
        },
        {**base, "type": "event", "table_name": "tracks", "row_count": 3, "is_new": False},
        {
            **base,
            "type": "source",
            "table_name": None,
            "lines_in": 11,
            "messages_written": 10,
            "duplicates": 1,
            "lines_quarantined": 0,
            "hours_synced": ["2026-11-21T09"],
            "recovered_commits": [],
            "tables": 2,
        },
    ]
    loc = write_report_table(lake, "Web-Prod", "r1", report, "2026-11-21")
    assert loc == f"{lake}/sync_reports/source_id=Web-Prod/day=2026-11-21/r1.parquet"
    failed = [
        {
            "type": "source",
            "run_id": "r2",
            "status": "failed",
            "error": "boom",
            "error_code": "internal",
            "start_time": "2026-11-21T11:00:00Z",
        }
    ]
    write_report_table(lake, "Web-Prod", "r2", failed, "2026-11-21")
    write_report_table(lake, "other", "r3", failed, "2026-11-22")
    assert register_reports(hive, meta, lake, "Web-Prod", "2026-11-21") == 1
    assert register_reports(hive, meta, lake, "other", "2026-11-22") == 1
    assert register_reports(hive, meta, lake, "Web-Prod", "2026-11-21") == 0

    rows = spark.sql(
        f"SELECT status, count(*) AS n FROM {meta}.sync_reports "
        "WHERE source_id='Web-Prod' GROUP BY status ORDER BY status"
    ).collect()
    assert [tuple(r) for r in rows] == [("failed", 1), ("finished", 3)]
    assert one(
        spark,
        f"SELECT lines_in, messages_written, start_time FROM {meta}.sync_reports "
        "WHERE type='source' AND status='finished'",
    ) == (11, 10, datetime(2026, 11, 21, 10, 0))
    pages = spark.sql(
        f"SELECT partitions, new_columns, extra, is_new FROM {meta}.sync_reports "
        "WHERE table_name='pages'"
    ).collect()[0]
    assert pages["partitions"] == '[{"day":"2026-11-21","hr":"09"}]'
    assert pages["extra"] == '{"some_future_field":{"x":1}}'
    assert pages["is_new"] is True
    assert one(spark, f"SELECT count(*) FROM {meta}.sync_reports") == (5,)


def test_sync_reports_written_before_the_suppressed_column_stay_readable(spark, hive, tmp_path):
    from datalake_assets.catalog.reports import REPORT_SCHEMA, report_rows

    lake = str(tmp_path / "lake")
    meta = f"meta_{uuid.uuid4().hex[:8]}"
    src = {
        "type": "source",
        "run_id": "old",
        "status": "finished",
        "lines_in": 3,
        "messages_written": 3,
        "duplicates": 0,
        "lines_quarantined": 0,
    }
    # a file of a version without ``suppressed``: the schema less that column
    old_schema = REPORT_SCHEMA.remove(REPORT_SCHEMA.get_field_index("suppressed"))
    rows = [{k: v for k, v in r.items() if k != "suppressed"} for r in report_rows([src])]
    folder = f"{lake}/sync_reports/source_id=web/day=2026-11-21"
    os.makedirs(folder)
    pq.write_table(pa.Table.from_pylist(rows, schema=old_schema), f"{folder}/old.parquet")
    write_report_table(
        lake, "web", "new", [{**src, "run_id": "new", "lines_in": 5, "suppressed": 2}], "2026-11-21"
    )
    register_reports(hive, meta, lake, "web", "2026-11-21")
    got = spark.sql(
        f"SELECT run_id, lines_in, suppressed FROM {meta}.sync_reports ORDER BY run_id"
    ).collect()
    assert [tuple(r) for r in got] == [("new", 5, 2), ("old", 3, None)]


def test_quarantine_table(spark, hive, db, tmp_path):
    from datalake_assets.lake.records import QUARANTINE_SCHEMA

    lake = str(tmp_path / "lake")
    by_hour = ((H9, ["invalid_json", "invalid_json", "oversize"]), (H10, ["missing_type"]))
    for hour, reasons in by_hour:
        folder = layout.quarantine_dir(lake, "web", hour)
        os.makedirs(folder)
        rows = [
            {f.name: None for f in QUARANTINE_SCHEMA}
            | {"reason": r, "level": "line", "line_number": i}
            for i, r in enumerate(reasons)
        ]
        pq.write_table(
            pa.Table.from_pylist(rows, schema=QUARANTINE_SCHEMA), f"{folder}/part-0.parquet"
        )
    out = register_quarantine(hive, db, "web", lake, "web", [H9, H10])
    assert (out["catalog_table"], out["partitions_added"]) == ("web_quarantine", 2)
    rows = spark.sql(
        f"SELECT reason, count(*) FROM {db}.web_quarantine GROUP BY reason ORDER BY reason"
    ).collect()
    assert [tuple(r) for r in rows] == [("invalid_json", 2), ("missing_type", 1), ("oversize", 1)]


def test_hostile_names_are_refused_before_any_sql(spark, hive, db, tmp_path):
    before = spark.sql("SHOW DATABASES").collect()
    for bad in ("x`; DROP DATABASE default; --", "a'b", "a/b", "caf\u00e9", "A", "a b", ""):
        with pytest.raises(CatalogError) as err:
            hive.ensure_database(bad)
        assert err.value.code == "invalid_settings"
        with pytest.raises(CatalogError):
            hive.create_or_update_table(db, bad, [("a", "string")], ["day"], str(tmp_path))
        with pytest.raises(CatalogError):
            hive.create_or_update_table(db, "t", [(bad, "string")], ["day"], str(tmp_path))
    for location in (
        f"{tmp_path}/x' LOCATION 'y",
        f"{tmp_path}/a;b",
        f"{tmp_path}/a\\b",
        f"{tmp_path}/a\nb",
        f"{tmp_path}/a`b",
    ):
        with pytest.raises(CatalogError, match="location"):
            hive.create_or_update_table(db, "t", [("a", "string")], ["day"], location)
    with pytest.raises(CatalogError, match="type"):
        hive.create_or_update_table(
            db, "t", [("a", "string) STORED AS TEXTFILE --")], ["day"], str(tmp_path)
        )
    assert spark.sql("SHOW DATABASES").collect() == before
