"""Stage A's native parse (issue #30): a chunk of archive lines parsed by DuckDB's JSON reader
into Arrow columns, with the Python path (``spec.messages``) for every line it cannot vouch for.

A worker keeps one in-process DuckDB per source (one thread: Spark already runs a task per
core, ``parser_for``) and per table a *shape*: the objects its messages have shown so far,
grown from ``json_structure`` of the lines that did not fit it. Each chunk:

1. **Routing.** Lines go to the Python path, untouched, when they are not valid UTF-8, do not
   start with ``{`` and end with ``}``, are longer than the message limit, or hold text the two
   parsers read differently or that would fake a key count (``_ROUTE_RE``: ``\\"`` and ``\\u``
   escapes, ``NaN``/``Infinity``, exponents of 3 digits, 40-digit numbers, trailing commas).
2. **Parse.** ``json_valid`` then ``json_transform`` into the shape, every non-object value as
   its JSON text, so each value's JSON kind survives (``1`` vs ``"1"``). Invalid JSON goes to
   the Python path, which quarantines it with its reason.
3. **Nothing lost.** The keys the struct holds (``counted_keys``) must equal the keys in the
   raw line (``KEY_COUNT_RE``): a key outside the shape, a scalar where the shape has an
   object, a key given twice, all show up as a difference. The shape grows from those lines
   and the chunk is parsed again; lines that still differ take the Python path.
4. **Validation** on the top-level columns, as ``messages.validate``; a line that is not
   plainly valid takes the Python path (which rejects it or, for an unusual valid form such
   as a numeric ``messageId``, accepts it).
5. **Columns** per table (``json_columns.flatten_texts``); the rows it flags take the Python
   path.
6. **Identities** per distinct (type, table, ids, traits), not per line; messages of a
   suppressed identity take the Python path, which drops and counts them.

The chunk's lines and their byte scans are ``native_chunk.py``'s; what the parse hands over
per table (its rows, step 6's identities) is ``native_tables.py``'s.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from datalake_assets.spec.json_checks import in_table, plainly_valid
from datalake_assets.spec.json_columns import counted_keys, flatten_texts
from datalake_assets.spec.messages import child_name
from datalake_assets.spec.naming import TRACKS_TABLE, TYPE_TABLES, event_table_name
from datalake_assets.transform.identity_tally import IdentityTally
from datalake_assets.transform.native_chunk import Chunk, _escaped, _key_counts, _texts
from datalake_assets.transform.native_tables import TableResult, _finish, _without

try:  # the workers' native parser; without it every line takes the Python path
    import duckdb
except ImportError:  # pragma: no cover - duckdb is a dependency
    duckdb = None

_ROUTE_RE = (
    r'\\[u"]|[:,\[]\s*[-+]?(?:[nN][aA][nN]|[iI][nN][fF])'
    r'|[:,\[]\s*-?[0-9.]+[eE][-+]?[0-9]{3}|[0-9]{40}|,\s*[\]}]|"\s+:|":\s'
)
# Fewer lines than this in a chunk (a small file) take the Python path: the native parse's
# fixed costs (a few DuckDB queries per table, the shapes) outweigh it there (a 1,000-event
# hour: 1.1-1.8 s of stage A in Python, 4-7 s native).
MIN_NATIVE_LINES = 5_000
MAX_SHAPE_LEAVES = 3_000  # a task's shape stops growing here (objects of unbounded keys)
GROW_LINES = 2_000  # lines of one chunk whose structure is read to grow a shape
FIRST_LINES = 256  # lines whose structure starts a table's shape
# What a chunk the native reader fails on raises; the chunk then takes the Python path.
_NATIVE_ERRORS = (
    (duckdb.Error, pa.ArrowException, ValueError, TypeError, RecursionError, OverflowError)
    if duckdb is not None
    else ()
)


def _connect():
    # One thread: Spark runs a task per core. (Flushing DuckDB's allocator after every query,
    # ``allocator_flush_threshold = 0``, saved ~35 MB of a worker's peak for ~10 % more CPU.)
    return duckdb.connect(config={"threads": 1, "preserve_insertion_order": True})


_LOCAL = threading.local()
_KEPT_PARSERS = 4  # parsers (and their shapes) a worker thread keeps, one per source


def parser_for(source_id: str, max_message_bytes: int, max_depth: int) -> NativeParser | None:
    """The calling thread's parser for a source (its shapes carry over from task to task: a
    Spark Python worker runs a source's tasks one after another); None without DuckDB."""
    if duckdb is None:
        return None
    kept: dict = getattr(_LOCAL, "parsers", None) or {}
    _LOCAL.parsers = kept
    key = (source_id, max_message_bytes, max_depth)
    p = kept.pop(key, None)
    if p is None:
        p = NativeParser(max_message_bytes, max_depth)
        if len(kept) >= _KEPT_PARSERS:
            kept.pop(next(iter(kept))).close()
    kept[key] = p  # most recently used last
    return p


class _Shape:
    """The objects one table's messages have shown so far (``tree``: key -> subtree for an
    object, ``None`` for anything else) and its ``json_transform`` structure."""

    def __init__(self) -> None:
        self.tree: dict = {}
        self.leaves = 0
        self.text = "{}"


class NativeParser:
    """One stage-A task's native parser (module docstring)."""

    def __init__(self, max_message_bytes: int, max_depth: int) -> None:
        self.max_bytes = max_message_bytes
        self.max_depth = max_depth
        self.con = _connect()
        self.used = False  # whether a chunk reached DuckDB since the connection was opened
        self.shapes: dict[str, _Shape] = {}

    def close(self) -> None:
        self.con.close()

    def release(self) -> None:
        """Give back what DuckDB keeps between queries (its allocator's caches: a worker that
        parsed two 100k-line files holds ~200 MB more with the connection open), at the end
        of a stage-A task. The shapes stay; a new connection costs ~10 ms (not paid by a task
        of small files, which never reached DuckDB)."""
        if self.used:
            self.con.close()
            self.con = _connect()
            self.used = False

    # ---------------------------------------------------------------------------- shape
    def _grow(self, shape: _Shape, lines: pa.Array) -> bool:
        """Add the structure of ``lines`` to ``shape``; whether it changed."""
        if shape.leaves >= MAX_SHAPE_LEAVES or len(lines) == 0:
            return False
        self.con.register("grow_lines", pa.table({"line": lines}))
        try:
            rows = self.con.execute(
                "SELECT DISTINCT json_structure(line) FROM grow_lines"
            ).fetchall()
        finally:
            self.con.unregister("grow_lines")
        changed = False
        for (text,) in rows:
            try:
                s = orjson.loads(text)
            except orjson.JSONDecodeError:  # nested beyond what orjson reads: not held
                continue
            if isinstance(s, dict):
                changed |= self._merge(shape.tree, s, 1)
        if changed:
            shape.leaves = _leaves(shape.tree)
            shape.text = json.dumps(_shape(shape.tree))
        return changed

    def _merge(self, tree: dict, s: dict, depth: int) -> bool:
        changed = False
        for key, sub in s.items():
            if child_name("", key)[0] is None or sub in ("NULL", "JSON"):
                continue  # unusable (the Python path records it); null or {}: nothing to hold
            obj = isinstance(sub, dict) and depth < self.max_depth
            if key not in tree:
                tree[key] = {} if obj else None
                changed = True
                if not obj:
                    continue
            cur = tree[key]
            if cur is None:
                continue
            if not obj:
                tree[key] = None  # an object in some lines, something else in others
                changed = True
            else:
                changed |= self._merge(cur, sub, depth + 1)
        return changed

    # ---------------------------------------------------------------------------- parse
    def parse(self, chunk: Chunk, tally: IdentityTally | None, hour: str) -> Iterator[TableResult]:
        """The chunk's rows, one table at a time (``TableResult``; ``lines`` are indices into
        ``chunk``): a table's struct and columns are gone before the next table's are built
        (a 100k-line chunk: one table's at a time, not all 18). The lines no result lists as
        handled take the Python path: whatever the native reader refuses or fails on, a
        table's lines, or the whole chunk if need be."""
        if len(chunk) < MIN_NATIVE_LINES:
            return
        self.used = True
        try:
            texts, groups, names = self._route(chunk)
            raw_keys = _key_counts(chunk)
            escaped = _escaped(chunk)
        except _NATIVE_ERRORS:  # never a crash: the reference rules read the chunk
            self._unregister()
            return
        try:
            for code, table in enumerate(names):
                try:
                    msgs, rows, columns = self._table(
                        table, code, np.flatnonzero(groups == code), texts, raw_keys, escaped
                    )
                except _NATIVE_ERRORS:
                    continue  # this table's lines: the reference rules
                yield _finish(
                    table, msgs, rows, columns, tally, hour
                )  # the tally: its only side effect
        finally:
            self._unregister()

    def _route(self, chunk: Chunk) -> tuple[pa.Array, np.ndarray, list[str]]:
        """The chunk's texts, each line's table code (``_groups``) and the tables by code;
        the chunk is left registered for the tables' transforms, with each line's code."""
        texts = _texts(chunk)
        route = ~pc.fill_null(
            pc.and_(
                pc.and_(pc.starts_with(texts, "{"), pc.ends_with(texts, "}")),
                pc.less_equal(pc.binary_length(texts), self.max_bytes),
            ),
            False,
        ).to_numpy(zero_copy_only=False)
        route |= pc.fill_null(pc.match_substring_regex(texts, _ROUTE_RE), True).to_numpy(
            zero_copy_only=False
        )
        self.con.register("chunk", pa.table({"line": texts, "skip": pa.array(route)}))
        groups, names = self._groups()
        self.con.unregister("chunk")
        self.con.register("chunk", pa.table({"line": texts, "grp": pa.array(groups)}))
        return texts, groups, names

    def _unregister(self) -> None:
        try:
            self.con.unregister("chunk")
        except duckdb.Error:  # pragma: no cover - not registered
            pass

    def _groups(self) -> tuple[np.ndarray, list[str]]:
        """Each line's table code, as its ``type`` and ``event`` name it (-1: none, or a
        routed or invalid line), and the tables by code."""
        te = (
            self.con.execute(
                "SELECT CASE WHEN NOT skip THEN TRY(json_extract_string(line, ['$.type', '$.event']))"
                " END AS te FROM chunk"
            )
            .to_arrow_table()
            .column(0)
            .combine_chunks()
        )
        key = pc.binary_join_element_wise(
            pc.list_element(te, 0), pc.fill_null(pc.list_element(te, 1), ""), "\x00"
        )
        enc = key.dictionary_encode()
        codes = pc.fill_null(enc.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)
        tables: dict[str, int] = {}
        remap = np.full(len(enc.dictionary) + 1, -1, np.int32)  # the last slot: code -1
        for i, k in enumerate(enc.dictionary.to_pylist()):
            mtype, _, event = k.partition("\x00")
            t = TYPE_TABLES.get(mtype)
            if t == TRACKS_TABLE:
                t = event_table_name(event) if event.strip() else None
            if t is not None:
                remap[i] = tables.setdefault(t, len(tables))
        return remap[codes], list(tables)

    def _transform(self, shape: _Shape, code: int) -> pa.StructArray:
        out = (
            self.con.execute(
                "SELECT json_transform(line, ?) AS m FROM chunk WHERE grp = ?", [shape.text, code]
            )
            .to_arrow_table()
            .column(0)
        )
        return out.chunk(0) if out.num_chunks == 1 else out.combine_chunks()

    def _table(
        self,
        table: str,
        code: int,
        rows: np.ndarray,
        texts: pa.Array,
        raw_keys: np.ndarray,
        escaped: np.ndarray,
    ) -> tuple[pa.StructArray, np.ndarray, dict]:
        """One table's lines of the chunk (``rows``): the messages that parsed whole and are
        plainly valid, their line indices and their columns (rows the columns flag are
        left out)."""
        shape = self.shapes.get(table)
        if shape is None:
            shape = self.shapes[table] = _Shape()
            self._grow(shape, texts.take(pa.array(rows[:FIRST_LINES])))
        for attempt in range(3):
            msgs = self._transform(shape, code)
            ok = counted_keys(msgs) == raw_keys[rows]
            if ok.all() or attempt == 2:
                break
            if not self._grow(shape, texts.take(pa.array(rows[~ok][:GROW_LINES]))):
                break
        ok &= plainly_valid(msgs) & in_table(msgs, table)
        # Filtered even when every row passed: the copy lives in Arrow's pool and DuckDB's
        # result is freed now; kept to the end of the table, a worker held 60-90 MB more.
        msgs, rows = msgs.filter(pa.array(ok)), rows[ok]
        columns, bad = flatten_texts(msgs, self.max_depth, child_name, escaped[rows].any())
        return _without(msgs, rows, columns, bad)


def _leaves(tree: dict) -> int:
    return sum(1 if v is None else _leaves(v) for v in tree.values())


def _shape(tree: dict) -> dict | str:
    return {k: "JSON" if v is None else _shape(v) for k, v in tree.items()} or "JSON"
