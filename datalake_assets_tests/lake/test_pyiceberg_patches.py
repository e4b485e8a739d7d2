"""The three places the lake changes pyiceberg 0.12's behaviour (``lake/formats/pyiceberg_*.py``):
each against pyiceberg's own result, or the failure it prevents."""

from __future__ import annotations

import threading

from datalake_assets.lake.formats import SourceTables, table_format
from datalake_assets.settings.formats_section import FormatConfig

SRC = "ice"
ICEBERG = FormatConfig(format="iceberg")


def test_one_manifest_evaluator_answers_each_thread_for_its_own_manifest():
    """``pyiceberg_manifest_eval``: an overwrite's check of the files it deletes evaluates the
    parent snapshot's manifests in threads with one evaluator. Thread A is between the two
    fields of its filter (``day``, then ``hr``) when thread B evaluates another manifest: with
    pyiceberg's ``eval`` A reads B's ``hr`` summary and skips its own manifest (the suite's
    ``Missing required files to delete``); with the lake's, each reads its own."""
    from pyiceberg.conversions import to_bytes
    from pyiceberg.expressions import And, EqualTo
    from pyiceberg.expressions.visitors import manifest_evaluator
    from pyiceberg.manifest import ManifestFile, PartitionFieldSummary
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import IntegerType, NestedField, StringType

    from datalake_assets.lake.formats import pyiceberg_manifest_eval

    assert pyiceberg_manifest_eval.install()
    schema = Schema(
        NestedField(1, "day", StringType(), required=False),
        NestedField(2, "hr", IntegerType(), required=False),
    )
    spec = PartitionSpec(
        PartitionField(1, 1000, IdentityTransform(), "day"),
        PartitionField(2, 1001, IdentityTransform(), "hr"),
    )

    def summaries(day: str, hr: int) -> list:
        return [
            PartitionFieldSummary(
                False, False, to_bytes(StringType(), day), to_bytes(StringType(), day)
            ),
            PartitionFieldSummary(
                False, False, to_bytes(IntegerType(), hr), to_bytes(IntegerType(), hr)
            ),
        ]

    a_inside, b_done = threading.Event(), threading.Event()

    class Paused(list):  # manifest A's summaries: A waits for B after reading its `day`
        def __getitem__(self, pos):
            if pos == 0:
                a_inside.set()
                assert b_done.wait(10)
            return list.__getitem__(self, pos)

    def race(evaluate) -> tuple[bool, bool]:
        a_inside.clear(), b_done.clear()
        a = ManifestFile.from_args(
            manifest_path="a.avro", partitions=Paused(summaries("2026-11-23", 10))
        )
        b = ManifestFile.from_args(manifest_path="b.avro", partitions=summaries("2026-11-23", 20))
        shared = manifest_evaluator(
            spec, schema, And(EqualTo("day", "2026-11-23"), EqualTo("hr", 10))
        )
        got = {}

        def run_a():
            got["a"] = evaluate(shared.__self__, a)

        thread = threading.Thread(target=run_a)
        thread.start()
        assert a_inside.wait(10)
        got["b"] = evaluate(shared.__self__, b)
        b_done.set()
        thread.join()
        return got["a"], got["b"]

    # pyiceberg's: A's manifest (hour 10) judged by B's hour 20 and skipped
    assert race(pyiceberg_manifest_eval.pyiceberg_eval) == (False, False)
    # the lake's, installed: A's manifest kept, B's skipped
    assert race(type(manifest_evaluator(spec, schema, EqualTo("hr", 1)).__self__).eval) == (
        True,
        False,
    )


def test_the_memoized_transaction_metadata_is_what_pyiceberg_computes(tmp_path):
    """``pyiceberg_memo``: a transaction's metadata, read after each staged change, equals
    pyiceberg's own replay of the updates (the time of the update aside), and a new change is
    seen at once (the memo is keyed on the updates, which every change replaces)."""
    import pyarrow as pa
    from pyiceberg.table.update import update_table_metadata

    from datalake_assets.lake.formats import pyiceberg_memo

    fmt = table_format(ICEBERG, str(tmp_path / "lake"))  # installs the memo
    assert pyiceberg_memo.install()
    src = SourceTables(SRC, SRC)
    tbl = fmt._create(src, "pages", (("message_id", "string"),))

    def same(tx) -> None:
        memo, own = tx.table_metadata, update_table_metadata(tx._table.metadata, tx._updates)
        assert memo.model_copy(update={"last_updated_ms": 0}) == own.model_copy(
            update={"last_updated_ms": 0}
        )

    with tbl.transaction() as tx:
        same(tx)
        assert tx.table_metadata is tx.table_metadata  # computed once per change
        with tx.update_schema() as us:
            us.union_by_name(pa.schema([("name", pa.string())]))
        same(tx)
        assert "name" in tx.table_metadata.schema().column_names  # seen at once
        tx.set_properties({"datalake.test": "1"})
        same(tx)
        assert tx.table_metadata.properties["datalake.test"] == "1"
    after = fmt.load(src, "pages")
    assert "name" in after.schema().column_names and after.properties["datalake.test"] == "1"


def test_a_timestamp_beyond_the_year_9999_is_committed_without_its_bounds(tmp_path):
    """``pyiceberg_bounds``: a file holding a timestamp pyarrow cannot turn into a ``datetime``
    (after 9999-12-31; valid in the lake) gets counts without bounds for its timestamp
    columns, its other columns keep theirs; a file without one keeps every bound."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyiceberg.io import pyarrow as pyiceberg_arrow
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField, TimestamptzType

    from datalake_assets.lake.formats import pyiceberg_bounds

    pyiceberg_bounds.install()
    schema = Schema(
        NestedField(1, "n", LongType(), required=False),
        NestedField(2, "ts", TimestamptzType(), required=False),
    )
    plan = pyiceberg_arrow.compute_statistics_plan(schema, {})
    mapping = pyiceberg_arrow.parquet_path_to_id_mapping(schema)
    year_10000 = 253402300800 * 1_000_000  # microseconds: 10000-01-01T00:00:00Z
    stats = {}
    for name, last in (("far", year_10000), ("near", 1_700_000_000_000_000)):
        arrow_schema = pa.schema(
            [
                pa.field("n", pa.int64(), metadata={b"PARQUET:field_id": b"1"}),
                pa.field("ts", pa.timestamp("us", tz="UTC"), metadata={b"PARQUET:field_id": b"2"}),
            ]
        )
        table = pa.table({"n": [1, 7], "ts": [0, last]}, schema=arrow_schema)
        pq.write_table(table, tmp_path / f"{name}.parquet")
        footer = pq.read_metadata(tmp_path / f"{name}.parquet")
        stats[name] = pyiceberg_arrow.data_file_statistics_from_parquet_metadata(
            footer, plan, mapping
        )
    far, near = stats["far"], stats["near"]
    assert far.record_count == 2 and far.value_counts == {1: 2, 2: 2}
    assert 1 in far.column_aggregates and 2 not in far.column_aggregates  # n's bounds, not ts's
    assert {1, 2} <= set(near.column_aggregates)
