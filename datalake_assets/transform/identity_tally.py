"""Who each message of a stage-A task is about (``spec/identity.py``): the task's share of the
identity index, and the suppression of listed identities.

For every message that decoded to an object (a row to be, or a line going to the quarantine),
``IdentityTally.keep`` hashes its identities under the lake's key and either

* drops it, when one of its hashes is on the suppression list: it is stored nowhere (no row,
  no quarantine record, no key row for the dedup; its index entry says ``SUPPRESSED``: the
  raw archive still holds it, and a later erasure must find the hour) and counted as
  ``suppressed`` under ``(table, hour)``, where ``table`` is the table it would have gone to,
  or ``QUARANTINE`` (``#quarantine``) for a line that would have been quarantined; or
* counts it under ``(hour, identity hash, table)``, plus one link per pair of identities of an
  ``identify`` or ``alias`` call.

This is the hot path (every line of every sync): each distinct identity is hashed once per
task (HMAC-SHA256 costs a few microseconds, a dict lookup a tenth of that), and a message
without identities costs one call. The task emits its counts in a few ``IDENTITY`` rows of the
stage-A output (``batches``); the driver merges them into one index file per hour
(``identity_index.py``).
"""

from __future__ import annotations

import orjson
import pyarrow as pa

from datalake_assets.lake.identities import LINK, QUARANTINE, SUPPRESSED
from datalake_assets.spec.identity import LINKING_TYPES, identity_hashes

IDENTITY = 3  # the stage-A row kind of index entries (KEYS = 1: keys.py, STATS = 2: stage_a.py)
ENTRY_SCHEMA = pa.schema(
    [
        ("hour", pa.string()),
        ("identity", pa.string()),
        ("table", pa.string()),
        ("rows", pa.int64()),
        ("linked", pa.string()),
    ]
)
ENTRIES_PER_ROW = 200_000  # about 12 MB of IPC per cell at most
_IPC = pa.ipc.IpcWriteOptions(compression="zstd")
# Lines the decoder refuses before or after parsing (too big, too deeply nested) may still
# name someone: they are parsed for their identities alone, up to this size, so that the
# quarantine's copy of them is found by an erasure and dropped by a suppression.
_REPARSED_REASONS = ("oversize", "nesting_too_deep")
MAX_REPARSED_BYTES = 8 * 1024 * 1024
MAX_CACHED_VALUES = 500_000  # raw values -> hash kept by a task (about 100 MB at most)


class IdentityTally:
    """One stage-A task's identity counts and suppressed messages (module docstring)."""

    __slots__ = ("key", "traits", "suppressed", "_hashes", "presence", "links", "suppressed_counts")

    def __init__(self, key: bytes, traits: tuple[str, ...], suppressed: frozenset[str]) -> None:
        self.key = key  # empty: no index, no suppression (a stage A run outside a sync)
        self.traits = traits
        self.suppressed = suppressed
        self._hashes: dict[object, str] = {}  # raw value -> hash: each hashed once per task
        self.presence: dict[tuple[str, str, str], int] = {}  # (hour, hash, table) -> messages
        self.links: dict[tuple[str, str, str], int] = {}  # (hour, hash, other hash) -> messages
        self.suppressed_counts: dict[tuple[str, str], int] = {}  # (table, hour) -> messages

    def keep(self, obj: object, table: str, hour: str, n: int = 1) -> bool:
        """Whether the message goes on (to ``table``, or ``QUARANTINE``): False when it is
        suppressed (counted). Records its identities when it goes on. ``n``: as many
        messages with the same identities (the native parse counts them per distinct
        identities)."""
        if not self.key or type(obj) is not dict:
            return True
        cache = self._hashes
        if len(cache) > MAX_CACHED_VALUES:  # a file of millions of distinct ids: start over
            cache.clear()
        hashes = identity_hashes(obj, self.traits, self.key, cache)
        if not hashes:
            return True
        presence = self.presence
        if self.suppressed and not self.suppressed.isdisjoint(hashes):
            k = (table, hour)
            self.suppressed_counts[k] = self.suppressed_counts.get(k, 0) + n
            # Stored nowhere, but the raw archive keeps the line: the index still names the
            # hour (as SUPPRESSED), so a later erasure of the person rewrites its archive.
            for h in hashes:
                k3 = (hour, h, SUPPRESSED)
                presence[k3] = presence.get(k3, 0) + n
            return False
        for h in hashes:
            k3 = (hour, h, table)
            presence[k3] = presence.get(k3, 0) + n
        if len(hashes) > 1 and obj.get("type") in LINKING_TYPES:
            # links_of's pairs: every pair of the call's distinct identities, each once
            ordered = sorted(hashes)
            links = self.links
            for i, a in enumerate(ordered):
                for b in ordered[i + 1 :]:
                    k3 = (hour, a, b)
                    links[k3] = links.get(k3, 0) + n
        return True

    def keep_rejected(self, obj: object, raw: bytes, reason: str, hour: str) -> bool:
        """``keep`` of a line going to the quarantine; ``obj`` is what the decoder returned
        (``None`` when it refused the line: then a line too big or too deep is parsed here
        for its identities)."""
        if not self.key:
            return True
        if obj is None and reason in _REPARSED_REASONS and len(raw) <= MAX_REPARSED_BYTES:
            try:
                obj = orjson.loads(raw)
            except orjson.JSONDecodeError:
                return True
        return self.keep(obj, QUARANTINE, hour)

    def entries(self) -> pa.Table:
        """The task's index entries: ``ENTRY_SCHEMA`` rows, a presence row per (hour, hash,
        table) and a link row per (hour, pair) (``table`` = ``LINK``)."""
        hours, idents, tables, counts, linked = [], [], [], [], []
        for (hour, h, table), n in self.presence.items():
            hours.append(hour), idents.append(h), tables.append(table), counts.append(n)
            linked.append(None)
        for (hour, a, b), n in self.links.items():
            hours.append(hour), idents.append(a), tables.append(LINK), counts.append(n)
            linked.append(b)
        return pa.table([hours, idents, tables, counts, linked], schema=ENTRY_SCHEMA)

    def batches(self, schema_names: list[str]) -> list[pa.RecordBatch]:
        """The entries as ``IDENTITY`` rows of the stage-A output, each a chunk of at most
        ``ENTRIES_PER_ROW`` entries in its ``payload`` (Arrow IPC, zstd). A few opaque cells per task, not a row per entry: the JVM only carries them
        to the driver, with the statistics, in the same job (about 1 s of CPU saved per 100k
        events against a row per entry)."""
        entries = self.entries()
        out = []
        for start in range(0, entries.num_rows, ENTRIES_PER_ROW):
            chunk = entries.slice(start, ENTRIES_PER_ROW)
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, ENTRY_SCHEMA, options=_IPC) as w:
                w.write_table(chunk)
            out.append(
                pa.RecordBatch.from_arrays(
                    [
                        pa.array([IDENTITY], pa.int8()),
                        pa.array([sink.getvalue().to_pybytes()], pa.binary()),
                    ],
                    names=schema_names,
                )
            )
        return out


def read_entries(payloads: list[bytes]) -> pa.Table:
    """The entries of ``IDENTITY`` rows' payloads, as one table (``ENTRY_SCHEMA``)."""
    tables = [pa.ipc.open_stream(pa.py_buffer(p)).read_all() for p in payloads]
    return pa.concat_tables(tables) if tables else ENTRY_SCHEMA.empty_table()
