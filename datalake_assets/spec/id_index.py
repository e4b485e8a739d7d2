"""The id index's file format: one Parquet file per writer and hour under
``<lake>/_index/<source>/hour=<YYYYMMDDHH>/`` (``layout.index_root``), every message id the
lake holds for that hour. Pure: no I/O, no Spark.

Columns:

* ``message_id`` (string, sorted): the ids themselves, the only truth;
* ``id_hash`` (int64): a fixed-width fingerprint of each id (``id_hashes``), so a sync's
  cross-hour dedup reads 8 bytes an id instead of the strings. A hash is only a prefilter: a
  hit is confirmed against ``message_id`` before an id counts as held. Files written before the
  column existed have ``message_id`` only, and readers must accept them (``has_hash``).

The hash is BLAKE2b with an 8-byte digest (``hashlib.blake2b(id_utf8, digest_size=8)``), read
as a little-endian signed 64-bit integer. It is part of the lake's format: changing it makes
every existing hash column wrong (a miss would then be taken for "not held").
"""

from __future__ import annotations

import hashlib

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

MESSAGE_ID = "message_id"
ID_HASH = "id_hash"
INDEX_SCHEMA = pa.schema([(MESSAGE_ID, pa.string()), (ID_HASH, pa.int64())])


def id_hashes(ids: pa.Array | pa.ChunkedArray) -> pa.Array:
    """``id_hash`` of each id (string array); null for a null id."""
    if isinstance(ids, pa.ChunkedArray):
        ids = ids.combine_chunks()
    blake = hashlib.blake2b
    raw = ids.cast(pa.binary()).to_pylist()
    zero = bytes(8)
    digests = b"".join([blake(b, digest_size=8).digest() if b is not None else zero for b in raw])
    values = np.frombuffer(digests, dtype="<i8")
    mask = np.asarray(ids.is_null()) if ids.null_count else None
    return pa.array(values, pa.int64(), mask=mask)


def index_table(ids: pa.Array | pa.ChunkedArray) -> pa.Table:
    """An id-index file's rows: ``ids`` sorted, with their hashes."""
    if isinstance(ids, pa.ChunkedArray):
        ids = ids.combine_chunks()
    ids = pc.array_take(ids, pc.array_sort_indices(ids)).cast(pa.string())
    return pa.Table.from_arrays([ids, id_hashes(ids)], schema=INDEX_SCHEMA)


def has_hash(schema: pa.Schema) -> bool:
    """Whether an index file (by its schema) has the ``id_hash`` column."""
    i = schema.get_field_index(ID_HASH)
    return i >= 0 and schema.field(i).type == pa.int64()
