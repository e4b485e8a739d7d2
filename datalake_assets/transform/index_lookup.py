"""Which of a batch's message ids the id index of the lookback window already holds: on the
driver, with pyarrow (Acero), no Spark (``prior_ids``).

The window is big (7 days of a 200k-event/hour source: 33.6 M ids), the batch small, so the
batch is the hash join's build side and the index is streamed through it, never held:

1. Files with the ``id_hash`` column (``spec/id_index.py``): only that column is read (8 bytes
   an id instead of the string) and semi-joined with the batch's hashes; the scan says which
   file each hit came from. A hit is a candidate only: for the files with hits, the
   ``message_id`` column is read and the batch's ids with a hit hash are matched exactly
   against it. A hash collision therefore costs one file's read, never a wrong duplicate.
2. Files written before the column existed: their ``message_id`` strings are semi-joined with
   the batch's ids directly (exact, slower: what a lake written by an earlier version costs
   until its window has rolled over).

Memory on the driver is the batch (its ids and their hashes) plus the ids found; the window
only costs time, linearly in its ids (8 bytes each), on the driver's cores and I/O threads.
"""

from __future__ import annotations

import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.acero as acero
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from datalake_assets.lake import storage
from datalake_assets.spec.id_index import ID_HASH, MESSAGE_ID, has_hash, id_hashes

_ATTEMPTS = 3  # a transient storage error (an S3 SlowDown on a small ranged read) is retried
_IO_THREADS = 16


def prior_ids(prior_files: list[str], batch_ids: pa.Array | pa.ChunkedArray) -> pa.Array:
    """The distinct ids of ``batch_ids`` that the id-index files ``prior_files`` (locations,
    one lake) hold, exactly: a string array."""
    if isinstance(batch_ids, pa.ChunkedArray):
        batch_ids = batch_ids.combine_chunks()
    batch_ids = pc.unique(batch_ids.cast(pa.string()).drop_null())
    if not prior_files or not len(batch_ids):
        return pa.array([], pa.string())
    for attempt in range(_ATTEMPTS):
        try:
            return _prior_ids(prior_files, batch_ids)
        except OSError:
            if attempt == _ATTEMPTS - 1:
                raise
            time.sleep(2**attempt)
    raise AssertionError("unreachable")


def _prior_ids(prior_files: list[str], batch_ids: pa.Array) -> pa.Array:
    fs = storage.resolve(prior_files[0])[0]  # one lake: one filesystem
    paths = [storage.resolve(f)[1] for f in prior_files]
    with ThreadPoolExecutor(min(_IO_THREADS, len(paths))) as pool:
        hashed = list(pool.map(lambda p: has_hash(pq.read_schema(p, filesystem=fs)), paths))
    found = []
    new = [p for p, h in zip(paths, hashed) if h]
    old = [p for p, h in zip(paths, hashed) if not h]
    if new:
        found.append(_by_hash(fs, new, batch_ids))
    if old:
        found.append(
            _semi_join(
                ds.dataset(
                    old, pa.schema([(MESSAGE_ID, pa.string())]), format="parquet", filesystem=fs
                ),
                MESSAGE_ID,
                pa.table({MESSAGE_ID: batch_ids}),
            )
        )
    return pc.unique(pa.chunked_array(found, pa.string()))


def _by_hash(fs, paths: list[str], batch_ids: pa.Array) -> pa.Array:
    """Step 1 of the module doc: hash hits by file, then confirmed against the strings."""
    batch = pa.table({MESSAGE_ID: batch_ids, ID_HASH: id_hashes(batch_ids)})
    dataset = ds.dataset(paths, pa.schema([(ID_HASH, pa.int64())]), format="parquet", filesystem=fs)
    hits = _semi_join(dataset, ID_HASH, batch.select([ID_HASH]), with_file=True)
    by_file: dict[str, list[int]] = defaultdict(list)
    for h, f in zip(hits.column(ID_HASH).to_pylist(), hits.column("file").to_pylist()):
        by_file[f].append(h)
    if not by_file:
        return pa.array([], pa.string())

    def confirm(item: tuple[str, list[int]]) -> pa.Array:
        path, hashes = item
        candidates = batch.filter(
            pc.is_in(batch.column(ID_HASH), value_set=pa.array(hashes, pa.int64()))
        )
        ids = pq.read_table(path, columns=[MESSAGE_ID], filesystem=fs).column(0)
        ids = ids.cast(pa.string()).combine_chunks()
        return ids.filter(pc.is_in(ids, value_set=candidates.column(MESSAGE_ID)))

    with ThreadPoolExecutor(min(_IO_THREADS, len(by_file))) as pool:
        return pa.concat_arrays(list(pool.map(confirm, sorted(by_file.items()))))


def _semi_join(
    dataset: ds.Dataset, key: str, build: pa.Table, with_file: bool = False
) -> pa.Table | pa.Array:
    """The rows (``key``, and with ``with_file`` the file's path as ``file``) of ``dataset``
    whose ``key`` is in ``build``: ``dataset`` streams through a hash table of ``build``."""
    columns = [pc.field(key)] + ([pc.field("__filename")] if with_file else [])
    names = [key] + (["file"] if with_file else [])
    scan = acero.Declaration.from_sequence(
        [
            acero.Declaration("scan", acero.ScanNodeOptions(dataset, columns=[key])),
            acero.Declaration("project", acero.ProjectNodeOptions(columns, names)),
        ]
    )
    join = acero.Declaration(
        "hashjoin",
        acero.HashJoinNodeOptions("left semi", [key], [key]),
        inputs=[scan, acero.Declaration("table_source", acero.TableSourceNodeOptions(build))],
    )
    out = join.to_table()
    return out if with_file else out.column(key).combine_chunks()
