"""The driver-local path (``transform/local_path.py``) against the Spark path: the same archive
synced through each, into two lakes, must give the same lakes, file by file content, row by
row (tables, quarantine, id and identity indexes, schema record) and the same reports; and
the local lake must hold what the oracle says."""

from __future__ import annotations

import json
import os
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from datalake_assets.ingest.demo import generate_archive
from datalake_assets.lake.identities import lake_key
from datalake_assets.lake.records import read_schema_record
from datalake_assets.spec import layout
from datalake_assets.spec.layout import ArchiveHour
from datalake_assets.transform.dedup import _duplicates_by_spark, duplicates_of
from datalake_assets.transform.job import SyncRequest, run_sync
from datalake_assets.transform.keys import KEY_ROW_DDL, KEY_SCHEMA
from datalake_assets_tests.support.archive_builders import msg, write_hour
from datalake_assets_tests.support.lake_reader import LocalStore, compare, read_lake
from datalake_assets_tests.support.oracle import Oracle

pytestmark = pytest.mark.spark
SRC = "smallsrc"
H10, H11 = "2026-11-21T10", "2026-11-21T11"
LOCAL, SPARK = 1 << 40, 0  # local_max_bytes that force each path


def no_spark():
    raise AssertionError("the driver-local path started a Spark session")


def at(hour: str, minute: int, second: int = 0) -> str:
    h = ArchiveHour.parse(hour)
    return f"{h.day}T{h.hr}:{minute:02d}:{second:02d}.000Z"


def hand_made(archive_root: str) -> None:
    """Duplicates the dedup must rank exactly, values that do not fit, bad lines."""
    write_hour(
        archive_root,
        SRC,
        H10,
        [
            msg("dup-early", receivedAt=at(H10, 9)),  # loses to the earlier copy of a later file
            msg("dup-tie", receivedAt=at(H10, 4)),  # tie: the first file wins
            msg("dup-null", receivedAt=None),  # a null receivedAt loses to any time
            msg("dup-nulls", receivedAt=None, properties={"n": 1}),  # both null: line order
            msg("dup-nulls", receivedAt=None, properties={"n": 2}),
            msg("misfit-1", properties={"total": 12, "when": "2026-11-20T08:00:00Z"}),
            msg("misfit-2", properties={"total": 3.5, "when": "not a time"}),
            msg("id-1", type="identify", userId="u1", traits={"email": "a@example.com"}),
            b'{"truncated": ',
            b"[1, 2]",
        ],
        name="part-0100.jsonl.gz",
    )
    write_hour(
        archive_root,
        SRC,
        H10,
        [
            msg("dup-early", receivedAt=at(H10, 3)),
            msg("dup-tie", receivedAt=at(H10, 4)),
            msg("dup-null", receivedAt=at(H10, 59)),
            msg("x-only-11", event="Signed In", receivedAt=at(H10, 1)),  # late: see the re-sync
        ],
        name="part-0101.jsonl.gz",
    )
    write_hour(
        archive_root,
        SRC,
        H11,
        [
            msg("dup-early", hour=H11),  # held by hour 10: a cross-hour duplicate
            msg("x-only-11", hour=H11, event="Signed In", minute=2),
            msg("in-11", hour=H11, minute=5),
            msg("in-11", hour=H11, minute=1),
            b"not json",
        ],
        name="part-0100.jsonl.gz",
    )


def parquet_state(lake_root: str) -> dict[str, tuple]:
    """Every directory of Parquet files under the lake: its files' count, schema and rows
    (sorted; ``run_id`` left out: each sync has its own)."""
    out: dict[str, tuple] = {}
    for directory, _, names in os.walk(lake_root):
        files = sorted(n for n in names if n.endswith(".parquet"))
        if not files or "sync_reports" in directory[len(lake_root) :]:  # report_state's
            continue
        tables = [pq.read_table(os.path.join(directory, n)) for n in files]
        table = pa.concat_tables(tables)
        table = table.drop_columns([c for c in table.column_names if c == "run_id"])
        rows = sorted(table.to_pylist(), key=repr)
        out[os.path.relpath(directory, lake_root)] = (len(files), table.schema, rows)
    return out


def report_state(result, lake_root: str) -> dict:
    """The report without what differs by run (ids, times) and by lake (its root)."""

    def strip(d: dict) -> dict:
        return {
            k: v
            for k, v in d.items()
            if k not in ("run_id", "start_time", "finish_time", "duration_mins", "timings")
        }

    state = {
        "source": strip(result.source.to_dict()),
        "tables": {t: strip(r.to_dict()) for t, r in result.tables.items()},
    }
    return json.loads(json.dumps(state).replace(lake_root, "<lake>"))


@pytest.fixture()
def two_lakes(tmp_path):
    archive = str(tmp_path / "archive")
    generate_archive(
        archive,
        SRC,
        [ArchiveHour.parse(H10), ArchiveHour.parse(H11)],
        events_per_hour=300,
        files_per_hour=2,
        seed=21,
        duplicate_rate=0.03,
    )
    hand_made(archive)
    lakes = {"local": str(tmp_path / "local"), "spark": str(tmp_path / "spark")}
    lake_key(lakes["local"])  # one identity key for both lakes: equal identity indexes
    os.makedirs(os.path.dirname(layout.privacy_key_path(lakes["spark"])))
    shutil.copy(layout.privacy_key_path(lakes["local"]), layout.privacy_key_path(lakes["spark"]))
    return archive, lakes


@pytest.mark.slow
def test_the_local_path_and_the_spark_path_write_the_same_lake(spark, two_lakes):
    archive, lakes = two_lakes
    oracle = Oracle(LocalStore(), archive, SRC)
    batches = [(H10,), (H11,), (H10,)]
    reports = []
    for i, hours in enumerate(batches):
        if i == 2:  # a late file: an id hour 11 holds, a cross-hour duplicate
            write_hour(
                archive,
                SRC,
                H10,
                [msg("in-11", minute=7), msg("late-new", minute=8)],
                name="part-0200.jsonl.gz",
            )
        local = run_sync(
            no_spark, SyncRequest(lakes["local"], archive, SRC, hours, local_max_bytes=LOCAL)
        )
        on_spark = run_sync(
            spark, SyncRequest(lakes["spark"], archive, SRC, hours, local_max_bytes=SPARK)
        )
        oracle.sync(hours)
        assert report_state(local, lakes["local"]) == report_state(on_spark, lakes["spark"])
        assert parquet_state(lakes["local"]) == parquet_state(lakes["spark"]), hours
        assert read_schema_record(lakes["local"], SRC) == read_schema_record(lakes["spark"], SRC)
        found = compare(oracle.expected(), read_lake(LocalStore(), lakes["local"], SRC))
        assert found.ok, str(found)
        reports.append(local.source)
    # what the batches held: duplicates in the batch and across hours, bad lines and values
    assert all(r.duplicates > r.cross_hour_duplicates for r in reports)
    assert reports[1].cross_hour_duplicates == 2 and reports[2].cross_hour_duplicates == 1
    assert all(r.lines_quarantined for r in reports[:2]) and reports[0].values_quarantined
    assert {"parse_s", "dedup_s", "write_s", "check_s"} <= set(local.source.timings)


def test_the_dedup_ranks_like_the_spark_window(spark):
    """Ties, nulls and cross-hour ids: the Arrow ranking and Spark's window pick the same
    losers, line by line."""
    keys = pa.table(
        {
            "table": ["t"] * 9,
            "hour": ["2026112110"] * 9,
            "message_id": ["a", "a", "a", "b", "b", None, None, "c", "d"],
            "received_at": pa.array([5, None, 5, None, None, 1, None, 9, 2], pa.int64()),
            "file_idx": pa.array([1, 0, 0, 0, 0, 0, 0, 0, 1], pa.int32()),
            "line_no": pa.array([1, 1, 2, 7, 3, 1, 2, 1, 1], pa.int64()),
        }
    ).cast(KEY_SCHEMA)
    df = spark.createDataFrame([tuple(r.values()) for r in keys.to_pylist()], KEY_ROW_DDL)
    on_spark = _duplicates_by_spark(spark, df, [])
    local = duplicates_of(keys, [])
    assert dict(local.counts) == dict(on_spark.counts) == {("t", "2026112110"): 4}
    assert (
        {k: sorted(v) for k, v in local.drop.items()}
        == {k: sorted(v) for k, v in on_spark.drop.items()}
        == {("t", 0): [1, 2, 7], ("t", 1): [1]}
    )
