"""Stage A's key rows as payloads, and the dedup on the driver against the Spark window."""

import random

import pyarrow as pa
import pyarrow.parquet as pq

from datalake_assets.transform import keys
from datalake_assets.transform.dedup import _duplicates_by_spark, duplicates_of


def key_rows(n: int, seed: int) -> pa.Table:
    """Key rows with repeated ids (same and other files, tables, hours), equal and missing
    receivedAt values."""
    rnd = random.Random(seed)
    rows = []
    for i in range(n):
        rows.append(
            {
                "table": rnd.choice(["pages", "order_completed", "identifies"]),
                "hour": rnd.choice(["2026112110", "2026112111"]),
                "message_id": f"m{rnd.randrange(n // 3)}",
                "received_at": rnd.choice([None, 5, 5, 7, rnd.randrange(100)]),
                "file_idx": rnd.randrange(4),
                "line_no": i + 1,
            }
        )
    return pa.Table.from_pylist(rows, schema=keys.KEY_SCHEMA)


def as_dict(d):
    return (dict(d.counts), dict(d.cross_hour), {k: sorted(v) for k, v in d.drop.items()})


def test_payloads_round_trip_and_keep_the_schema():
    t = key_rows(50, 1)
    payloads = [keys.encode(b) for b in t.to_batches(max_chunksize=7)]
    assert len(payloads) > 1
    assert keys.decode(payloads).equals(t)
    assert keys.decode([]).schema == keys.KEY_SCHEMA


def test_first_copy_is_the_earliest_received_then_file_then_line():
    t = pa.Table.from_pylist(
        [
            {
                "table": "t",
                "hour": "h",
                "message_id": "a",
                "received_at": None,
                "file_idx": 0,
                "line_no": 1,
            },
            {
                "table": "t",
                "hour": "h",
                "message_id": "a",
                "received_at": 9,
                "file_idx": 1,
                "line_no": 5,
            },
            {
                "table": "t",
                "hour": "h",
                "message_id": "a",
                "received_at": 9,
                "file_idx": 1,
                "line_no": 2,
            },
            {
                "table": "t",
                "hour": "h",
                "message_id": "b",
                "received_at": 3,
                "file_idx": 2,
                "line_no": 1,
            },
            {
                "table": "t",
                "hour": "h",
                "message_id": "b",
                "received_at": 3,
                "file_idx": 0,
                "line_no": 8,
            },
        ],
        schema=keys.KEY_SCHEMA,
    )
    ordered, first = keys.first_copies(t)
    kept = ordered.filter(first).select(["message_id", "file_idx", "line_no"]).to_pylist()
    assert kept == [
        {"message_id": "a", "file_idx": 1, "line_no": 2},
        {"message_id": "b", "file_idx": 0, "line_no": 8},
    ]


def test_driver_and_spark_find_the_same_duplicates(spark, tmp_path):
    t = key_rows(3000, 2)
    ids = t.column("message_id").to_pylist()
    index = tmp_path / "_index" / "hour=2026112105"
    index.mkdir(parents=True)
    held = sorted(set(ids[::17]) | {"not-in-batch"})
    pq.write_table(pa.table({"message_id": held}), index / "part-0.parquet")
    prior = [str(index / "part-0.parquet")]
    for files in ([], prior):
        on_driver = duplicates_of(t, files)
        by_spark = _duplicates_by_spark(spark, spark.createDataFrame(t.to_pandas()), files)
        assert as_dict(on_driver) == as_dict(by_spark)
        assert on_driver.total > 0 and (on_driver.cross_hour or not files)
    # Every id of the batch that the index holds is gone from the batch; one copy of each
    # other id is kept.
    dropped = {(r["file_idx"], r["line_no"]) for r in t.to_pylist()} - {
        (f, line) for (_, f), lines in duplicates_of(t, prior).drop.items() for line in lines
    }
    kept_ids = [r["message_id"] for r in t.to_pylist() if (r["file_idx"], r["line_no"]) in dropped]
    assert sorted(kept_ids) == sorted(set(ids) - set(held))


def test_a_batch_too_big_for_the_driver_gets_its_keys_back_as_spark_rows(spark):
    t = key_rows(200, 3)
    payloads = [keys.encode(b) for b in t.to_batches(max_chunksize=64)]
    output = spark.createDataFrame(
        [(keys.KEYS, p) for p in payloads] + [(2, b"stats"), (3, b"identities")],
        "kind byte, payload binary",
    )
    rows = keys.as_rows(spark, output).toPandas()
    assert (
        pa.Table.from_pandas(rows, schema=keys.KEY_SCHEMA, preserve_index=False)
        .sort_by("line_no")
        .equals(t.sort_by("line_no"))
    )
