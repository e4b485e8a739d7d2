"""The sync's deduplication: which messages are duplicates, and the check that none was
written twice.

Duplicates are found on ``(messageId, receivedAt, position)`` only, from stage A's key rows
(``keys.py``): in the batch, the first received copy of an id wins; across hours, ids the lake
already holds for another hour of the lookback window (the id index, never the tables) are
duplicates, and the message stays where it was. Up to ``DRIVER_MAX_KEYS`` messages, all of it
runs on the driver with Arrow, the window's index looked up with pyarrow
(``index_lookup.prior_ids``); a bigger batch stays in Spark (a window, and a semi-join of the
index). The losers' positions go to stage B, which skips them.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from datalake_assets.lake import storage
from datalake_assets.spec import layout
from datalake_assets.transform import keys
from datalake_assets.transform.index_lookup import prior_ids


@dataclass
class Duplicates:
    """What the deduplication found: counts by ``(table, hour)`` and the lines stage B drops."""

    counts: Counter[tuple[str, str]] = field(default_factory=Counter)
    cross_hour: Counter[tuple[str, str]] = field(default_factory=Counter)  # held by other hours
    drop: defaultdict[tuple[str, int], list[int]] = field(
        default_factory=lambda: defaultdict(list)
    )  # (table, file_idx) -> line numbers
    prior_files: list[str] = field(default_factory=list)  # index files of the lookback window
    # The batch's ids that those files hold (``index_lookup.prior_ids``): the cross-hour
    # duplicates' ids, and what the post-write check compares the output with.
    held: pa.Array = field(default_factory=lambda: pa.array([], pa.string()))

    @property
    def total(self) -> int:
        return sum(self.counts.values())


# Up to this many messages in a batch, their keys are deduplicated on the driver with Arrow
# (about 80 bytes of driver memory a key; 2 million keys sort in about a second); beyond, in a
# Spark window, so a cluster's hour of hundreds of millions never meets the driver.
DRIVER_MAX_KEYS = 10_000_000


def find_duplicates(
    spark,
    stage_a_output,
    messages: int,
    lookback_hours: int,
    lake_root: str,
    source_dir: str,
    batch_hours: list[str],
    driver_max_keys: int | None = None,
    appends: bool = False,
) -> Duplicates:
    """The duplicates among the key rows of stage A's (persisted) output and against the id
    index of the hours within ``lookback_hours`` of the batch (``batch_hours``: compact).
    ``messages``: how many key rows there are (stage A's statistics); ``driver_max_keys``:
    ``DRIVER_MAX_KEYS`` as it is when called; ``appends``: the run adds to its hours (an open
    hour's batch), whose own index counts too."""
    prior_files = index_files(lake_root, source_dir, lookback_hours, batch_hours, appends)
    if messages <= (DRIVER_MAX_KEYS if driver_max_keys is None else driver_max_keys):
        from pyspark.sql import functions as F

        payloads = (
            bytes(r.payload)
            for r in stage_a_output.filter(F.col("kind") == keys.KEYS)
            .select("payload")
            .toLocalIterator()
        )
        out = duplicates_of(keys.decode(payloads), prior_files)
    else:
        out = _duplicates_by_spark(spark, keys.as_rows(spark, stage_a_output), prior_files)
    out.prior_files = prior_files
    return out


def duplicates_of(key_rows: pa.Table, prior_files: list[str]) -> Duplicates:
    """``find_duplicates`` on the driver: ``key_rows`` (``keys.KEY_SCHEMA``) in Arrow."""
    ordered, first = keys.first_copies(key_rows)
    held = (
        prior_ids(prior_files, ordered.column("message_id"))
        if prior_files
        else pa.array([], pa.string())
    )
    seen = pc.is_in(ordered.column("message_id"), value_set=held)
    lost = pc.or_(pc.invert(first), seen)  # a later copy, or an id another hour holds
    losers = ordered.filter(lost).append_column("cross_hour", pc.and_(first, seen).filter(lost))
    out = Duplicates(held=held)
    by_hour = losers.group_by(["table", "hour"]).aggregate(
        [("cross_hour", "count"), ("cross_hour", "sum")]
    )
    for t, h, n, cross in zip(
        *(
            by_hour.column(c).to_pylist()
            for c in ("table", "hour", "cross_hour_count", "cross_hour_sum")
        )
    ):
        out.counts[(t, h)] = n
        if cross:
            out.cross_hour[(t, h)] = cross
    by_file = losers.group_by(["table", "file_idx"]).aggregate([("line_no", "list")])
    for t, f, lines in zip(
        *(by_file.column(c).to_pylist() for c in ("table", "file_idx", "line_no_list"))
    ):
        out.drop[(t, f)] = lines
    return out


def _duplicates_by_spark(spark, key_rows, prior_files: list[str]) -> Duplicates:
    """``find_duplicates`` as a Spark window over ``key_rows`` (``keys.KEY_ROW_DDL``)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    order = Window.partitionBy("message_id").orderBy(
        F.col("received_at").asc_nulls_last(), "file_idx", "line_no"
    )
    ranked = key_rows.withColumn("_n", F.row_number().over(order))
    # Across hours: ids the lake already holds for other hours of the lookback window
    # (the id index, never the tables) are duplicates; the message stays where it was.
    out = Duplicates()
    if prior_files:
        # A batch this big stays in the cluster: the index is scanned by Spark once and
        # semi-joined with the batch's distinct ids; only the ids found come to the driver.
        found = ids_in_index(spark, prior_files, key_rows.select("message_id").distinct())
        out.held = pa.array([r["message_id"] for r in found.collect()], pa.string())
    if len(out.held):
        held = spark.createDataFrame(pa.table({"message_id": out.held}).to_pandas())
        ranked = ranked.join(
            F.broadcast(held.withColumn("_seen", F.lit(True))), "message_id", "left"
        )
    else:
        ranked = ranked.withColumn("_seen", F.lit(None).cast("boolean"))
    losers = (
        ranked.filter((F.col("_n") > 1) | F.col("_seen").isNotNull())
        .select("table", "hour", "file_idx", "line_no", (F.col("_n") == 1).alias("cross_hour"))
        .collect()
    )
    for r in losers:
        out.counts[(r["table"], r["hour"])] += 1
        if r["cross_hour"]:
            out.cross_hour[(r["table"], r["hour"])] += 1
        out.drop[(r["table"], r["file_idx"])].append(r["line_no"])
    return out


def index_files(
    lake_root: str,
    source_dir: str,
    lookback_hours: int,
    batch_hours: list[str],
    appends: bool = False,
) -> list[str]:
    """Index files of the hours within ``lookback_hours`` of the batch (before its first
    hour or after its last), the batch's own hours (compact) excluded: the sync replaces
    them. ``appends``: an open hour's batch adds to its hours, whose index (its earlier
    batches' ids) is included (``open_hour.py``)."""
    if not batch_hours or (lookback_hours <= 0 and not appends):
        return []
    first = layout.ArchiveHour.parse(min(batch_hours)).start
    last = layout.ArchiveHour.parse(max(batch_hours)).start
    span = timedelta(hours=max(lookback_hours, 0))
    lo = layout.ArchiveHour.of(first - span).compact
    hi = layout.ArchiveHour.of(last + span).compact
    own = set(batch_hours)
    out = []
    for location, _ in storage.list_files(layout.index_root(lake_root, source_dir), recursive=True):
        hour = layout.hour_of_index_file(location)
        if hour and lo <= hour <= hi and (appends if hour in own else lookback_hours > 0):
            out.append(location)
    return out


def ids_in_index(spark, index_files: list[str], ids):
    """The distinct ``message_id`` of ``ids`` that the index files hold, in Spark (a
    broadcast semi-join: the index is read once and never shuffled). For batches too big
    for the driver; others use ``index_lookup.prior_ids``."""
    from pyspark.sql import functions as F

    if spark_reads(spark, index_files[0]):  # one lake: every file has the same scheme
        index = spark.read.parquet(*index_files).select("message_id")
    else:
        index = ids_read_by_pyarrow(spark, [("", f) for f in index_files]).select("message_id")
    return index.join(F.broadcast(ids), "message_id", "left_semi").distinct()


def spark_reads(spark, location: str) -> bool:
    """Whether Spark's own (Hadoop) filesystems read ``location``: local paths always, a URI
    where the cluster has a connector for its scheme (EMR: ``s3``; Databricks: ``abfss``).
    A local session on an S3 or Azure lake has none (no hadoop-aws or hadoop-azure jars): the
    files are then read with pyarrow in Python workers, as stages A and B read and write."""
    if not storage.is_uri(location):
        return True
    try:
        conf = spark._jsc.hadoopConfiguration()
        spark._jvm.org.apache.hadoop.fs.FileSystem.getFileSystemClass(
            location.split("://", 1)[0], conf
        )
        return True
    except Exception:  # noqa: BLE001 - no such filesystem, or no JVM at hand (Spark Connect)
        return False


def ids_read_by_pyarrow(spark, files: list[tuple[str, str]]):
    """``(t, message_id)`` of Parquet files ``[(t, location)]``, read with pyarrow in Python
    workers (``storage.resolve``: the lake's credentials come from the workers' environment)."""

    def read(batches):
        for batch in batches:
            for t, loc in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist()):
                fs, path = storage.resolve(loc)
                ids = pq.read_table(path, columns=["message_id"], filesystem=fs).column(0)
                ids = ids.combine_chunks().cast(pa.string())
                yield pa.RecordBatch.from_arrays(
                    [pa.array([t] * len(ids), pa.string()), ids], names=["t", "message_id"]
                )

    tasks = max(1, min(len(files), spark.sparkContext.defaultParallelism))
    return (
        spark.createDataFrame(files, "t string, location string")
        .repartition(tasks)
        .mapInArrow(read, "t string, message_id string")
    )


def repeated_message_ids(
    spark,
    staged_data: str,
    tables: list[str],
    held: pa.Array | None = None,
    files: list[tuple[str, str, int]] | None = None,
) -> dict[str, int]:
    """Per table: how many message ids were written more than once (in one table or in two),
    or also live in another hour of the lookback window. It reads the written Parquet back
    (the ``message_id`` column only), so it checks what was written, not what the dedup
    intended. ``tracks`` is made of the track tables' rows: it is checked through them (and
    its row count against theirs, by the caller).

    ``held`` (``Duplicates.held``) is the batch's ids that the window's id index holds, as the
    dedup found them. Comparing the output with ``held`` is the same as comparing it with the
    whole index, without reading the index again: every written row comes from a stage-A
    work file, and stage A emits a key row for each row it writes there, so the written ids
    are a subset of the batch's ids B; hence written ∩ index = written ∩ (B ∩ index) =
    written ∩ held. The index cannot change in between: the sync holds the source's lock, and
    the batch's own hours, which this sync replaces, are not part of the window.

    ``files``: ``[(table, location, bytes)]`` written (stage B's manifest), when some were
    written in place among a table's other files (Iceberg); otherwise the staged tables'
    folders are read."""
    from pyspark.sql import functions as F

    held = pa.array([], pa.string()) if held is None else held
    written = _written(staged_data, tables, files)
    if not written:
        return {}
    local = repeated_in_output(staged_data, tables, held, files)
    if local is not None:
        return local
    dirs = [layout.segment_type_dir(staged_data, t) for t in tables]
    dirs = [d for d in dirs if storage.list_files(d, recursive=True)]
    if files is None and spark_reads(spark, staged_data):
        ids = (
            spark.read.option("basePath", staged_data)
            .schema("message_id string")
            .parquet(*dirs)
            .select(
                F.regexp_extract(F.input_file_name(), r"/segment_type=([^/]+)/", 1).alias("t"),
                "message_id",
            )
        )
    else:
        ids = ids_read_by_pyarrow(spark, [(t, loc) for t, loc, _ in written])
    counted = ids.groupBy("message_id").agg(F.count("*").alias("n"), F.min("t").alias("t"))
    bad = F.col("n") > 1
    if len(held):
        seen = spark.createDataFrame(pa.table({"message_id": held}).to_pandas()).withColumn(
            "_seen", F.lit(1)
        )
        counted = counted.join(F.broadcast(seen), "message_id", "left")
        bad = bad | F.col("_seen").isNotNull()
    rows = counted.filter(bad).groupBy("t").count().collect()
    return {r["t"]: r["count"] for r in rows}


_DRIVER_CHECK_MAX_ROWS = 20_000_000
_CHECK_THREADS = 4  # staged files read at once by the driver's check


def _written(
    staged_data: str, tables: list[str], files: list[tuple[str, str, int]] | None
) -> list[tuple[str, str, int]]:
    """``[(table, location, bytes)]`` of the tables' written Parquet files."""
    if files is not None:
        wanted = set(tables)
        return [(t, loc, size) for t, loc, size in files if t in wanted]
    return [
        (t, loc, size)
        for t in tables
        for loc, size in storage.list_files(layout.segment_type_dir(staged_data, t), recursive=True)
        if loc.endswith(".parquet")
    ]


def repeated_in_output(
    staged_data: str,
    tables: list[str],
    held: pa.Array | None = None,
    files: list[tuple[str, str, int]] | None = None,
) -> dict[str, int] | None:
    """``repeated_message_ids`` on the driver with Arrow: reads the ``message_id`` column of
    the written files; an id counts when written twice or when in ``held``. ``None`` when
    the output is too big for the driver (the caller then uses Spark)."""
    tables = sorted(tables)  # an id in two tables counts under the smaller name, as Spark's min
    # Fragments of the listed size: each file's footer is read once and no HEAD is sent for
    # its size (on S3, five requests a file became one or two).
    fmt = ds.ParquetFileFormat()
    index = {t: i for i, t in enumerate(tables)}
    fragments = []  # (table index, fragment)
    for t, loc, size in _written(staged_data, tables, files):
        fs, path = storage.resolve(loc)
        fragments.append((index[t], fmt.make_fragment(path, filesystem=fs, file_size=size)))
    # a few round trips each on S3: several files at once (pyarrow waits without the GIL)
    with ThreadPoolExecutor(_CHECK_THREADS, thread_name_prefix="output-check") as pool:
        if sum(pool.map(lambda f: f[1].metadata.num_rows, fragments)) > _DRIVER_CHECK_MAX_ROWS:
            return None
        columns = list(
            pool.map(lambda f: f[1].to_table(columns=["message_id"]).column(0), fragments)
        )
    ids, owner = [], []
    for (i, _), col in zip(fragments, columns):  # chunks, never concatenated: 2 M ids copied again
        ids.extend(col.chunks)
        owner.extend(pa.repeat(pa.scalar(i, pa.int32()), len(c)) for c in col.chunks)
    if not ids:
        return {}
    table = pa.table(
        {"id": pa.chunked_array(ids, pa.string()), "t": pa.chunked_array(owner, pa.int32())}
    )
    per_id = table.group_by("id").aggregate([("t", "count"), ("t", "min")])
    bad = pc.greater(per_id["t_count"], 1)
    if held is not None and len(held):
        bad = pc.or_(bad, pc.is_in(per_id["id"], value_set=held.cast(pa.string())))
    repeated = per_id.filter(bad)
    out: dict[str, int] = {}
    for t in repeated["t_min"].to_pylist():
        out[tables[t]] = out.get(tables[t], 0) + 1
    return out
