"""Stage A's key rows: one per message (table, hour, message id, receivedAt, position), the
only per-message data the deduplication needs.

A stage-A task does not hand them to Spark row by row: each flush's keys travel as one ``KEYS``
row whose payload is an Arrow IPC stream (``encode``). Two million messages are then a few
hundred rows for the JVM instead of two million (the JVM's Arrow-to-row conversion, the cache
and the window's shuffle of those rows were about a seventh of a big hour's CPU). The driver
decodes them into one Arrow table (``decode``) and finds the duplicates with Arrow kernels
(``first_copies``); a batch too big for the driver gets its keys back as Spark rows
(``as_rows``) and the dedup runs as a Spark window instead, with the same rule.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc

KEYS = 1  # the stage-A row kind whose payload is an Arrow IPC stream of KEY_SCHEMA rows

KEY_SCHEMA = pa.schema(
    [
        ("table", pa.string()),
        ("hour", pa.string()),
        ("message_id", pa.string()),
        ("received_at", pa.int64()),
        ("file_idx", pa.int32()),
        ("line_no", pa.int64()),
    ]
)

_INT64_MAX = 2**63 - 1

KEY_ROW_DDL = (
    "table string, hour string, message_id string, received_at long, file_idx int, line_no long"
)


def encode(batch: pa.RecordBatch) -> bytes:
    """A batch of ``KEY_SCHEMA`` rows as one payload."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, KEY_SCHEMA) as w:
        w.write_batch(batch)
    return sink.getvalue().to_pybytes()


def decode(payloads: Iterable[bytes]) -> pa.Table:
    """The key rows of ``KEYS`` payloads, as one table (``KEY_SCHEMA``)."""
    batches = [b for p in payloads for b in pa.ipc.open_stream(pa.py_buffer(p))]
    return pa.Table.from_batches(batches, schema=KEY_SCHEMA)


def first_copies(keys: pa.Table) -> tuple[pa.Table, pa.BooleanArray]:
    """``keys`` sorted by message id, then by the dedup's order (receivedAt ascending with
    missing ones last, then file, then line), and for each row whether it is the first copy of
    its message id, the one the batch keeps. The same rule as the Spark window of
    ``dedup.find_duplicates`` (``row_number() == 1``)."""
    # Missing receivedAt sorts last as the largest value (null_placement's spelling differs
    # between pyarrow versions).
    last = pc.fill_null(keys.column("received_at"), _INT64_MAX)
    ordered = keys.take(
        pc.sort_indices(
            keys.append_column("_received", last),
            sort_keys=[
                ("message_id", "ascending"),
                ("_received", "ascending"),
                ("file_idx", "ascending"),
                ("line_no", "ascending"),
            ],
        )
    )
    ids = ordered.column("message_id").combine_chunks()
    n = len(ids)
    if n == 0:
        return ordered, pa.array([], pa.bool_())
    later, earlier = ids.slice(1), ids.slice(0, n - 1)
    # Missing ids (never past validation, but the rule is total) are one group, as in Spark.
    same_as_previous = pc.or_(
        pc.fill_null(pc.equal(later, earlier), False),
        pc.and_(pc.is_null(later), pc.is_null(earlier)),
    )
    first = pa.concat_arrays([pa.array([True]), pc.invert(same_as_previous)])
    return ordered, first


def as_rows(spark, stage_a_output):
    """The key rows of a persisted stage-A output as a Spark DataFrame (``KEY_ROW_DDL``), for
    a batch whose keys are too many for the driver."""
    from pyspark.sql import functions as F

    def explode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for payload in batch.column(0).to_pylist():
                yield from pa.ipc.open_stream(pa.py_buffer(payload))

    return (
        stage_a_output.filter(F.col("kind") == KEYS)
        .select("payload")
        .mapInArrow(explode, KEY_ROW_DDL)
    )
