"""The sync job on a real local Spark session, read back with DuckDB and Spark."""

import os

import duckdb
import pytest

from datalake_assets.lake import commit
from datalake_assets.lake.records import read_schema_record
from datalake_assets.spec.layout import ArchiveHour
from datalake_assets.transform.job import SyncError, SyncRequest, run_sync
from datalake_assets_tests.support.archive_builders import msg, write_hour
from datalake_assets_tests.support.lake_reader import LocalStore, compare, read_lake
from datalake_assets_tests.support.oracle import Oracle

pytestmark = pytest.mark.spark
SRC = "src1"


def sync(spark, lake, *hours, **kw):
    return run_sync(
        spark, SyncRequest(lake["lake_root"], lake["archive_root"], SRC, tuple(hours), **kw)
    )


def table_glob(lake, table):
    return f"{lake['lake_root']}/data/{SRC}/segment_type={table}/*/*/*.parquet"


def q(sql):
    return duckdb.sql(sql).fetchall()


def test_messy_demo_hours_reconcile_exactly(spark, lake):
    from datalake_assets.ingest.demo import generate_archive

    hours = [ArchiveHour.parse("2026-11-21T10"), ArchiveHour.parse("2026-11-21T11")]
    summary = generate_archive(
        lake["archive_root"], SRC, hours, events_per_hour=1500, files_per_hour=2, seed=3
    )
    result = sync(spark, lake, "2026-11-21T10", "2026-11-21T11")
    src = result.source
    assert src.lines_in == summary.lines
    assert src.lines_in == src.messages_written + src.duplicates + src.lines_quarantined
    assert src.messages_written == summary.valid_messages
    assert src.duplicates == summary.duplicate_lines
    assert src.lines_quarantined == summary.malformed_lines

    # What the files hold, read back by an independent engine.
    per_type = {
        "identify": "identifies",
        "page": "pages",
        "screen": "screens",
        "group": "groups",
        "alias": "aliases",
    }
    for mtype, table in per_type.items():
        ((n,),) = q(f"select count(*) from read_parquet('{table_glob(lake, table)}')")
        assert n == summary.by_type.get(mtype, 0), table
    ((tracks,),) = q(f"select count(*) from read_parquet('{table_glob(lake, 'tracks')}')")
    assert tracks == summary.by_type["track"]
    ((order_completed,),) = q(
        f"select count(*) from read_parquet('{table_glob(lake, 'order_completed')}')"
    )
    assert order_completed == summary.by_event["Order Completed"]
    # Every message exactly once across the event tables.
    union = " union all ".join(
        f"select message_id from read_parquet('{table_glob(lake, t)}')"
        for t in sorted(result.tables)
        if t != "tracks"
    )
    ((total, distinct),) = q(f"select count(*), count(distinct message_id) from ({union})")
    assert total == distinct == summary.valid_messages
    # Quarantined lines are there with their reasons and raw text.
    qglob = f"{lake['lake_root']}/quarantine/{SRC}/*/*/*.parquet"
    ((lines_q,),) = q(f"select count(*) from read_parquet('{qglob}') where level = 'line'")
    assert lines_q == summary.malformed_lines
    ((no_reason,),) = q(
        f"select count(*) from read_parquet('{qglob}') where reason is null or reason = ''"
    )
    assert no_reason == 0


def test_columns_are_typed_for_duckdb_and_spark(spark, lake):
    write_hour(
        lake["archive_root"],
        SRC,
        "2026-11-21T10",
        [
            msg(
                "m1",
                properties={
                    "revenue": 10,
                    "price": 9.5,
                    "paid": True,
                    "when": "2026-11-20T08:00:00Z",
                    "sku": "A1",
                },
            ),
            msg(
                "m2",
                properties={
                    "revenue": "12",
                    "price": 3,
                    "paid": "false",
                    "when": "2026-11-20T09:00:00+01:00",
                    "sku": "B2",
                },
            ),
        ],
    )
    sync(spark, lake, "2026-11-21T10")
    cols = dict(
        q(
            f"select column_name, column_type from (describe select * from read_parquet('{table_glob(lake, 'order_completed')}', hive_partitioning=true))"
        )
    )
    assert cols["properties_revenue"] == "BIGINT"
    assert cols["properties_price"] == "DOUBLE"
    assert cols["properties_paid"] == "BOOLEAN"
    assert cols["properties_when"].startswith("TIMESTAMP")
    assert cols["received_at"].startswith("TIMESTAMP")
    assert cols["properties_sku"] == "VARCHAR"
    rows = q(
        f"select message_id, properties_revenue, properties_paid, epoch(properties_when) from read_parquet('{table_glob(lake, 'order_completed')}') order by 1"
    )
    assert rows == [("m1", 10, True, 1795161600.0), ("m2", 12, False, 1795161600.0)]

    df = spark.read.parquet(f"{lake['lake_root']}/data/{SRC}/segment_type=order_completed")
    types = dict(df.dtypes)
    assert types["properties_revenue"] == "bigint" and types["properties_price"] == "double"
    assert types["properties_when"] == "timestamp" and types["day"] == "date" and "hr" in types
    assert df.filter("day = '2026-11-21' and hr = 10").count() == 2


def test_rerun_replaces_the_hour_without_duplicates(spark, lake):
    write_hour(lake["archive_root"], SRC, "2026-11-21T10", [msg(f"m{i}") for i in range(20)])
    first = sync(spark, lake, "2026-11-21T10")
    files_before = sorted(
        os.listdir(
            f"{lake['lake_root']}/data/{SRC}/segment_type=order_completed/day=2026-11-21/hr=10"
        )
    )
    second = sync(spark, lake, "2026-11-21T10")
    ((n, d),) = q(
        f"select count(*), count(distinct message_id) from read_parquet('{table_glob(lake, 'order_completed')}')"
    )
    assert n == d == 20
    assert first.source.messages_written == second.source.messages_written == 20
    files_after = sorted(
        os.listdir(
            f"{lake['lake_root']}/data/{SRC}/segment_type=order_completed/day=2026-11-21/hr=10"
        )
    )
    assert files_after != files_before and len(files_after) == len(files_before)
    # A late file in the same hour: the re-sync includes it, still no duplicates.
    write_hour(
        lake["archive_root"],
        SRC,
        "2026-11-21T10",
        [msg("m3"), msg("late-1")],
        name="part-late.jsonl.gz",
    )
    third = sync(spark, lake, "2026-11-21T10")
    assert third.source.duplicates == 1
    ((n, d),) = q(
        f"select count(*), count(distinct message_id) from read_parquet('{table_glob(lake, 'order_completed')}')"
    )
    assert n == d == 21


def test_duplicates_keep_the_earliest_delivery_across_hours_of_a_batch(spark, lake):
    write_hour(
        lake["archive_root"],
        SRC,
        "2026-11-21T10",
        [msg("dup", minute=30, properties={"v": "first"})],
    )
    write_hour(
        lake["archive_root"],
        SRC,
        "2026-11-21T11",
        [
            msg("dup", hour="2026-11-21T11", minute=5, properties={"v": "second"}),
            msg("other", hour="2026-11-21T11"),
        ],
    )
    result = sync(spark, lake, "2026-11-21T10", "2026-11-21T11")
    assert result.source.duplicates == 1
    rows = q(
        f"select message_id, properties_v, hr from read_parquet('{table_glob(lake, 'order_completed')}', hive_partitioning=true) order by 1"
    )
    assert rows == [("dup", "first", 10), ("other", None, 11)]


def test_types_widen_across_syncs_and_misfits_are_quarantined_not_dropped(spark, lake):
    write_hour(
        lake["archive_root"],
        SRC,
        "2026-11-21T10",
        [msg(f"a{i}", properties={"price": i, "size": i}) for i in range(5)],
    )
    write_hour(
        lake["archive_root"],
        SRC,
        "2026-11-21T11",
        [
            *[
                msg(f"b{i}", hour="2026-11-21T11", properties={"price": i + 0.5, "size": i})
                for i in range(5)
            ],
            msg("bad", hour="2026-11-21T11", properties={"price": 1.5, "size": "huge"}),
        ],
    )
    r1 = sync(spark, lake, "2026-11-21T10")
    assert {c["name"]: c["type"] for c in r1.tables["order_completed"].columns}[
        "properties_price"
    ] == "bigint"
    r2 = sync(spark, lake, "2026-11-21T11")
    t = r2.tables["order_completed"]
    assert t.widened_columns == [{"name": "properties_price", "from": "bigint", "to": "double"}]
    assert t.values_quarantined == 1
    schema = dict(read_schema_record(lake["lake_root"], SRC)["order_completed"])
    assert schema["properties_price"] == "double" and schema["properties_size"] == "bigint"
    # The misfit row is written (size NULL) and its value is in quarantine with its context.
    rows = q(
        f"select properties_size from read_parquet('{table_glob(lake, 'order_completed')}') where message_id = 'bad'"
    )
    assert rows == [(None,)]
    qrows = q(
        f"select level, reason, table_name, column_name, value, message_id from read_parquet('{lake['lake_root']}/quarantine/{SRC}/*/*/*.parquet') where level = 'value'"
    )
    assert ("value", "type_mismatch", "order_completed", "properties_size", "huge", "bad") in qrows
    # Both hours read together, by name (old files still hold bigint).
    ((n,),) = q(
        f"select count(*) from read_parquet('{table_glob(lake, 'order_completed')}', union_by_name=true) where properties_price is not null"
    )
    assert n == 11


def test_crash_mid_commit_leaves_old_version_readable_and_rerun_converges(spark, lake, monkeypatch):
    write_hour(
        lake["archive_root"],
        SRC,
        "2026-11-21T10",
        [
            msg("m1"),
            msg("i1", type="identify", traits={"plan": "pro"}),
            msg("p1", type="page", name="Home"),
        ],
    )
    sync(spark, lake, "2026-11-21T10")
    before = {
        t: q(f"select count(*) from read_parquet('{table_glob(lake, t)}')")
        for t in ("order_completed", "identifies", "pages")
    }
    # New data for the hour, then a crash after the first partition swap.
    write_hour(
        lake["archive_root"],
        SRC,
        "2026-11-21T10",
        [msg("m2"), msg("i2", type="identify"), msg("p2", type="page")],
        name="part-0001.jsonl.gz",
    )
    real_apply = commit.apply_swap
    calls = {"n": 0}

    def crash_after_first(swap, run_id):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt("simulated crash mid-commit")
        return real_apply(swap, run_id)

    monkeypatch.setattr(commit, "apply_swap", crash_after_first)
    with pytest.raises(KeyboardInterrupt):
        sync(spark, lake, "2026-11-21T10")
    monkeypatch.setattr(commit, "apply_swap", real_apply)
    # Every partition is whole: either its old version (1 row) or its new one (2 rows).
    for t in before:
        ((n,),) = q(f"select count(*) from read_parquet('{table_glob(lake, t)}')")
        assert n in (1, 2)
    assert os.listdir(f"{lake['lake_root']}/_commits/{SRC}")  # the journal is left for recovery
    result = sync(spark, lake, "2026-11-21T10")
    assert result.source.recovered_commits
    for t in before:
        ((n, d),) = q(
            f"select count(*), count(distinct message_id) from read_parquet('{table_glob(lake, t)}')"
        )
        assert n == d == 2
    assert not os.listdir(f"{lake['lake_root']}/_commits/{SRC}")


def test_coarse_day_layout_replaces_only_the_synced_hour(spark, lake):
    write_hour(lake["archive_root"], SRC, "2026-11-21T10", [msg("a1"), msg("a2")])
    write_hour(lake["archive_root"], SRC, "2026-11-21T11", [msg("b1", hour="2026-11-21T11")])
    sync(spark, lake, "2026-11-21T10", date_layout="day")
    sync(spark, lake, "2026-11-21T11", date_layout="day")
    glob = f"{lake['lake_root']}/data/{SRC}/segment_type=order_completed/day=2026-11-21/*.parquet"
    assert q(f"select count(*) from read_parquet('{glob}')") == [(3,)]
    sync(spark, lake, "2026-11-21T10", date_layout="day")  # replay hour 10 only
    assert sorted(r[0] for r in q(f"select message_id from read_parquet('{glob}')")) == [
        "a1",
        "a2",
        "b1",
    ]


def test_hours_without_archive_files_are_left_alone(spark, lake):
    write_hour(lake["archive_root"], SRC, "2026-11-21T10", [msg("a1")])
    sync(spark, lake, "2026-11-21T10")
    import shutil

    shutil.rmtree(f"{lake['archive_root']}/{SRC}")
    result = sync(spark, lake, "2026-11-21T10")
    assert result.source.warning == "no_archive_files"
    assert q(f"select count(*) from read_parquet('{table_glob(lake, 'order_completed')}')") == [
        (1,)
    ]


def test_report_is_written_with_segment_fields(spark, lake):
    write_hour(lake["archive_root"], SRC, "2026-11-21T10", [msg("a1"), b"{broken"])
    result = sync(spark, lake, "2026-11-21T10", run_id="run-42")
    reports = q(
        f"select type, table_name, run_id, status, row_count, is_new, partitions from read_json_auto('{lake['lake_root']}/reports/*/source={SRC}/run_id=run-42/report.json')"
    )
    by_table = {r[1]: r for r in reports}
    assert by_table["order_completed"][2:6] == ("run-42", "finished", 1, True)
    assert [(str(p["day"]), p["hr"]) for p in by_table["order_completed"][6]] == [
        ("2026-11-21", "10")
    ]
    assert by_table[None][0] == "source"
    for field in (
        "start_time",
        "finish_time",
        "duration_mins",
        "error",
        "error_code",
        "database",
        "new_columns",
        "replay",
        "replay_from",
        "replay_to",
        "emr_cluster_id",
        "s3_bucket",
    ):
        assert field in result.rows()[0]


@pytest.mark.slow
@pytest.mark.parametrize("path", ["spark", "local"])
def test_reconciliation_failure_commits_nothing(spark, lake, monkeypatch, path):
    from datalake_assets.transform import local_path
    from datalake_assets.transform import sync as sync_module

    write_hour(lake["archive_root"], SRC, "2026-11-21T10", [msg("a1")])
    module = sync_module if path == "spark" else local_path  # where each path merges stats
    real = module.merge_stats

    def one_line_too_many(payloads):
        stats = real(payloads)
        stats.lines_in += 1
        return stats

    monkeypatch.setattr(module, "merge_stats", one_line_too_many)
    with pytest.raises(SyncError, match="reconciliation failed"):
        sync(spark, lake, "2026-11-21T10", local_max_bytes=0 if path == "spark" else 1 << 40)
    assert not os.path.exists(f"{lake['lake_root']}/data")


@pytest.mark.reliability
def test_a_message_delivered_in_two_hours_is_kept_once_across_syncs(spark, lake, reliability):
    write_hour(lake["archive_root"], SRC, "2026-11-21T10", [msg("a"), msg("b")])
    write_hour(
        lake["archive_root"],
        SRC,
        "2026-11-21T12",
        [msg("b", hour="2026-11-21T12"), msg("c", hour="2026-11-21T12")],
    )
    store = LocalStore()  # the same syncs, by the independent oracle: "b" stays in hour 10
    oracle = Oracle(store, lake["archive_root"], SRC)
    reliability.expect(  # the lake at the end: compared then, or at teardown
        lambda: (
            Oracle(store, lake["archive_root"], SRC)
            .sync(["2026-11-21T10"])
            .sync(["2026-11-21T12"])
            .sync(["2026-11-21T10"])
            .expected()
        ),
        lambda: read_lake(store, lake["lake_root"], SRC),
    )
    sync(spark, lake, "2026-11-21T10")
    second = sync(spark, lake, "2026-11-21T12")
    oracle.sync(["2026-11-21T10"]).sync(["2026-11-21T12"])
    found = compare(oracle.expected(), read_lake(store, lake["lake_root"], SRC))
    assert found.ok, str(found)
    assert second.source.cross_hour_duplicates == 1 and second.source.messages_written == 1
    table = second.tables["order_completed"]
    assert table.cross_hour_duplicates == 1 and table.checks.repeated_message_ids == 0
    # re-syncing the first hour keeps "b" there: it is already in the lake for hour 10 only
    again = sync(spark, lake, "2026-11-21T10")
    assert again.source.cross_hour_duplicates == 0 and again.source.messages_written == 2
    ids = duckdb.sql(
        f"select message_id, hr from read_parquet('{lake['lake_root']}/data/{SRC}/segment_type="
        "order_completed/*/*/*.parquet', hive_partitioning=true) order by 1"
    ).fetchall()
    assert ids == [("a", 10), ("b", 10), ("c", 12)]
    found = reliability.compare()
    assert found.ok, str(found)
    # out of the window, the same id is a new message
    write_hour(lake["archive_root"], SRC, "2026-11-30T10", [msg("a", hour="2026-11-30T10")])
    assert sync(spark, lake, "2026-11-30T10").source.messages_written == 1


def test_lookback_zero_dedups_only_within_the_batch(spark, lake):
    from datalake_assets.transform.job import SyncRequest, run_sync

    write_hour(lake["archive_root"], SRC, "2026-11-21T10", [msg("a")])
    write_hour(lake["archive_root"], SRC, "2026-11-21T11", [msg("a", hour="2026-11-21T11")])
    for h in ("2026-11-21T10", "2026-11-21T11"):
        r = run_sync(
            spark,
            SyncRequest(
                lake_root=lake["lake_root"],
                archive_root=lake["archive_root"],
                source_id=SRC,
                hours=(h,),
                dedup_lookback_hours=0,
            ),
        )
    assert r.source.messages_written == 1 and r.source.cross_hour_duplicates == 0


def test_an_index_without_hashes_and_a_forged_hash_hit_dedup_exactly(spark, lake):
    """A lake written before the id index had ``id_hash`` still dedups; a hash that matches
    a batch id while the index's id differs is not a duplicate."""
    import glob

    import pyarrow as pa
    import pyarrow.parquet as pq

    from datalake_assets.spec.id_index import id_hashes

    root = f"{lake['lake_root']}/_index/{SRC}"
    write_hour(lake["archive_root"], SRC, "2026-11-21T10", [msg("a"), msg("b")])
    sync(spark, lake, "2026-11-21T10")
    files = glob.glob(f"{root}/hour=2026112110/*.parquet")
    assert files and all("id_hash" in pq.read_schema(f).names for f in files)
    for f in files:  # as an earlier version wrote it: the ids only
        pq.write_table(pq.read_table(f, columns=["message_id"]), f)
    os.makedirs(f"{root}/hour=2026112109")  # "zz" under the hash of "c"
    pq.write_table(
        pa.table({"message_id": ["zz"], "id_hash": id_hashes(pa.array(["c"]))}),
        f"{root}/hour=2026112109/part-forged.parquet",
    )
    write_hour(
        lake["archive_root"],
        SRC,
        "2026-11-21T12",
        [msg("b", hour="2026-11-21T12"), msg("c", hour="2026-11-21T12")],
    )
    r = sync(spark, lake, "2026-11-21T12")
    assert r.source.cross_hour_duplicates == 1 and r.source.messages_written == 1
    assert r.tables["order_completed"].checks.repeated_message_ids == 0
    ids = q(
        f"select message_id from read_parquet('{table_glob(lake, 'order_completed')}') order by 1"
    )
    assert ids == [("a",), ("b",), ("c",)]
