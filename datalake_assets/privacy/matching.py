"""Which archive lines, table rows and quarantine records belong to the forgotten identities.

The matcher holds only keyed hashes (``spec.identity.identity_hash``), never clear values, so
a request can be resumed from its state file (which holds hashes only) with the same rules:

* **A decoded line** (a JSON object) matches when one of its identities is requested: those
  ``identities_of`` finds (userId, anonymousId, previousId, the listed traits of an identify's
  ``traits`` or any ``context.traits``) *and* the identity columns of its flattened form (the
  columns below, named exactly as the sync names them). So every row a line becomes that
  matches by column comes from a line that matches too, and a replay of the rewritten archive
  cannot bring a removed row back.
* **A row** of a table matches when its ``message_id`` is one of the person's messages (from
  the matched lines of the hour) or one of its identity columns holds a requested identity:
  ``user_id``, ``anonymous_id``, ``previous_id`` (kind ``id``) and, for each listed trait
  ``t``, ``t``, ``traits_t`` and ``context_traits_t`` (``t`` snake-cased as a column).
* **An undecodable line** (not JSON, cut short, not an object) matches when it contains a
  requested value as a substring: raw, or as JSON would escape it; traits case-folded. The
  test slides a window of each value's length over the line and compares keyed hashes, so it
  too needs no clear value (``Needle``). Identities only known by hash (found by following
  links) have no needle: an undecodable line is searched for the requested values only.
* **A quarantine record** matches when its message id is the person's, or its raw line
  matches as a line (above).

Message ids are assumed unique per message (Segment's contract, which the sync's dedup relies
on): a row whose message id is the person's is the person's.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Iterable
from dataclasses import dataclass

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from datalake_assets.spec import naming
from datalake_assets.spec.identity import (
    ID,
    MAX_IDENTITY_CHARS,
    TRAIT_PREFIX,
    Identity,
    identities_of,
    identity_hash,
    links_of,
    normalize,
    trait_kind,
)
from datalake_assets.spec.messages import DEFAULT_MAX_DEPTH, flatten_values

ID_COLUMNS = ("user_id", "anonymous_id", "previous_id")
NEEDLE_BYTES = 16


@dataclass(frozen=True)
class Needle:
    """A value to find inside undecodable text: its length in characters, whether the text is
    case-folded first, and the keyed hash of the value (hex)."""

    fold: bool
    length: int
    digest: str


def _needle_hash(key: bytes, text: str) -> str:
    return hmac.new(
        key, b"needle\x00" + text.encode("utf-8", "surrogatepass"), hashlib.sha256
    ).hexdigest()[: NEEDLE_BYTES * 2]


def needles_of(key: bytes, idents: Iterable[Identity]) -> frozenset[Needle]:
    """The needles of requested identities: each value as it is, and as JSON escapes it
    (orjson, Python's ASCII escapes, ``\\/``)."""
    out = set()
    for ident in idents:
        fold = ident.kind != ID
        value = ident.value
        variants = {
            value,
            orjson.dumps(value).decode()[1:-1],
            json.dumps(value)[1:-1],
            json.dumps(value)[1:-1].replace("/", "\\/"),
        }
        for v in variants:
            v = v.casefold() if fold else v
            out.add(Needle(fold, len(v), _needle_hash(key, v)))
    return frozenset(out)


def message_id_of(obj: dict) -> str | None:
    """The message id as the sync stores it (numbers as their JSON text)."""
    value = obj.get("messageId")
    if type(value) is str:
        return value or None
    if type(value) in (int, float):
        return orjson.dumps(value).decode()
    return None


def _decode(raw: bytes) -> object:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        try:  # NaN/Infinity literals, as the sync's own decoder
            return json.loads(raw)
        except (ValueError, UnicodeDecodeError, RecursionError):
            return None


class Matcher:
    """The rules of the module doc for one request: ``hashes`` (identity hashes), ``needles``
    (for undecodable text), ``traits`` (``[privacy] identity_traits``)."""

    def __init__(
        self,
        key: bytes,
        hashes: Iterable[str],
        needles: Iterable[Needle] = (),
        traits: Iterable[str] = ("email",),
        max_depth: int = DEFAULT_MAX_DEPTH,
    ):
        self.key = key
        self.hashes = frozenset(hashes)
        self.traits = tuple(traits)
        self.max_depth = max_depth
        self._base = hmac.new(key, digestmod=hashlib.sha256)
        self._needles: dict[tuple[bool, int], set[str]] = {}
        for n in needles:
            self._needles.setdefault((n.fold, n.length), set()).add(n.digest)
        # column -> identity kind of its values
        self.columns: dict[str, str] = dict.fromkeys(ID_COLUMNS, ID)
        for t in self.traits:
            col = naming.snake(t)
            for name in (col, f"traits_{col}", f"context_traits_{col}"):
                self.columns.setdefault(name, trait_kind(t))

    def hash_of(self, ident: Identity) -> str:
        return identity_hash(self.key, ident)

    def is_requested(self, kind: str, value: object) -> bool:
        text = normalize(ID if kind == ID else TRAIT_PREFIX, value)
        return (
            text is not None
            and len(text) <= MAX_IDENTITY_CHARS  # never requested
            and self.hash_of(Identity(kind, text)) in self.hashes
        )

    # ------------------------------------------------------------------------------ lines

    def message_matches(self, obj: dict, raw: bytes | None = None) -> bool:
        if any(self.hash_of(i) in self.hashes for i in identities_of(obj, self.traits)):
            return True
        try:
            flat, _, suspect = flatten_values(obj, self.max_depth)
            if suspect and raw is not None:  # wide integers, as the sync re-parses them
                flat, _, _ = flatten_values(json.loads(raw), self.max_depth)
        except Exception:  # noqa: BLE001 - a line the sync cannot flatten is quarantined whole
            return self.text_matches((raw or b"").decode("utf-8", "replace"))
        return any(
            self.is_requested(kind, flat.get(col))
            for col, kind in self.columns.items()
            if flat.get(col) is not None
        )

    def text_matches(self, text: str) -> bool:
        """Whether a requested value occurs in ``text`` (see ``Needle``)."""
        folded: str | None = None
        for (fold, length), digests in self._needles.items():
            if fold and folded is None:
                folded = text.casefold()
            hay = folded if fold else text
            for i in range(len(hay) - length + 1):
                h = self._base.copy()
                h.update(b"needle\x00" + hay[i : i + length].encode("utf-8", "surrogatepass"))
                if h.hexdigest()[: NEEDLE_BYTES * 2] in digests:
                    return True
        return False

    def line(self, raw: bytes) -> tuple[bool, str | None]:
        """``(matches, message id)`` of one archive line (id only of decoded lines)."""
        obj = _decode(raw)
        if type(obj) is dict:
            return self.message_matches(obj, raw), message_id_of(obj)
        return self.text_matches(raw.decode("utf-8", "replace")), None

    def links(self, obj: dict) -> set[tuple[str, str]]:
        """The hashed link pairs of a decoded message (``spec.identity.links_of``)."""
        pairs = links_of(obj, identities_of(obj, self.traits))
        return {(self.hash_of(a), self.hash_of(b)) for a, b in pairs}

    # ------------------------------------------------------------------------------ tables

    def mid_hash(self, message_id: str) -> str:
        """The keyed hash of a message id (what the request's state keeps of it)."""
        h = self._base.copy()
        h.update(b"message_id\x00" + message_id.encode("utf-8", "surrogatepass"))
        return h.hexdigest()[:32]

    def _hits(self, column: pa.ChunkedArray | pa.Array, hit) -> pa.Array | None:
        """The distinct values of ``column`` for which ``hit(value)`` holds (each distinct
        value tested once), or None."""
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        uniques = pc.unique(column)
        found = [v for v in uniques.to_pylist() if v is not None and hit(v)]
        return pa.array(found, uniques.type) if found else None

    def _mask(self, column, hits: pa.Array | None):
        return None if hits is None else pc.fill_null(pc.is_in(column, value_set=hits), False)

    def mid_mask(self, column, mids: frozenset[str] | set[str]) -> pa.Array:
        """True where a message id column holds one of the person's messages (``mids``: their
        keyed hashes)."""
        hits = self._hits(column, lambda v: self.mid_hash(str(v)) in mids) if mids else None
        m = self._mask(column, hits)
        return m if m is not None else pa.array([False] * len(column), pa.bool_())

    def row_mask(self, table: pa.Table, mids: frozenset[str] | set[str]) -> pa.Array:
        """True for the rows of a table file that are the person's (module doc); ``mids``: the
        keyed hashes of the person's message ids in the hour."""
        names = set(table.column_names)
        mask = (
            self.mid_mask(table.column("message_id"), mids)
            if "message_id" in names
            else pa.array([False] * table.num_rows, pa.bool_())
        )
        for col, kind in self.columns.items():
            if col in names and table.num_rows:
                m = self._mask(
                    table.column(col),
                    self._hits(table.column(col), lambda v, k=kind: self.is_requested(k, v)),
                )
                if m is not None:
                    mask = pc.or_(mask, m)
        return mask

    def quarantine_mask(self, table: pa.Table, mids: frozenset[str] | set[str]) -> pa.Array:
        """True for the quarantine records that are the person's (module doc)."""

        def column(name: str) -> list:
            return (
                table.column(name).to_pylist()
                if name in table.column_names
                else [None] * table.num_rows
            )

        out = []
        for mid, raw, exact in zip(
            column("message_id"), column("raw_line"), column("raw_line_base64")
        ):
            if mid is not None and self.mid_hash(mid) in mids:
                out.append(True)
            elif exact:
                out.append(self.line(base64.b64decode(exact))[0])
            elif raw:
                out.append(self.line(raw.encode("utf-8", "surrogatepass"))[0])
            else:
                out.append(False)
        return pa.array(out, pa.bool_())
