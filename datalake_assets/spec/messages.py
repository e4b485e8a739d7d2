"""One raw archive line -> a validated, flattened Segment message, or a reason to quarantine it.

Line-level rules (a rejected line goes to quarantine whole, with its raw bytes and a reason):

===========================  =================================================================
reason                       when
===========================  =================================================================
``oversize``                 the line is longer than ``max_message_bytes`` (default 32 KiB,
                             Segment's per-message limit)
``invalid_json``             not JSON (truncated, invalid UTF-8, raw NUL bytes, nesting deeper
                             than the parser allows...)
``not_an_object``            JSON, but not an object (array, string, number, null)
``missing_type``             no ``type``
``unknown_type``             ``type`` is not one of track/identify/page/screen/group/alias
``missing_message_id``       no ``messageId`` (or empty); numbers are accepted as text
``invalid_message_id``       ``messageId`` is an object/array/boolean or longer than 255
``missing_user_id``          neither ``userId`` nor ``anonymousId`` (Segment requires one)
``missing_event``            a ``track`` without a non-empty ``event`` string
``unusable_event_name``      a ``track`` whose event name has no usable characters
===========================  =================================================================

Flattening: nested objects are joined with ``_`` (see ``naming.py``); arrays are stored as
their JSON text; ``null`` and empty objects produce no column; objects nested deeper than
``max_depth`` (default 16) are stored as JSON text in the column of their path at that depth.
Value-level problems (``unusable_key``, ``column_name_collision``) do not reject the line: the
row is written and the value goes to quarantine.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import orjson

from datalake_assets.spec import naming
from datalake_assets.spec.types import is_timestamp, kind_of, parse_timestamp, value_text

DEFAULT_MAX_MESSAGE_BYTES = 32 * 1024
DEFAULT_MAX_DEPTH = 16
MAX_MESSAGE_ID_CHARS = 255
_SUSPECT_FLOAT = 2.0**63  # orjson turns integers wider than 64 bits into floats: re-parse


class Rejected(Exception):
    """A line that cannot become a row."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


@dataclass(slots=True)
class Message:
    type: str
    table: str  # identifies/pages/... or the track event's table
    message_id: str
    received_at: int | None  # microseconds since the epoch, UTC
    flat: dict[str, object]
    kinds: list[int]  # the kind (types.K_*) of each value of ``flat``, in the same order
    problems: list[tuple[str, str, str]]  # (column or raw key path, value text, reason)


MAX_NESTING = 200  # deeper messages are quarantined: no JSON writer here can store them


def _nesting(obj: object) -> int:
    depth, stack = 0, [(obj, 1)]
    while stack:
        v, d = stack.pop()
        if d > depth:
            depth = d
        if type(v) is dict:
            stack.extend((c, d + 1) for c in v.values() if type(c) in (dict, list))
        elif type(v) is list:
            stack.extend((c, d + 1) for c in v if type(c) in (dict, list))
    return depth


def _check_nesting(raw: bytes, obj: object) -> object:
    # Two C-speed counts per line; the walk only for lines with that many brackets at all.
    if raw.count(b"{") + raw.count(b"[") > MAX_NESTING and _nesting(obj) > MAX_NESTING:
        raise Rejected("nesting_too_deep", f"more than {MAX_NESTING} levels of objects/arrays")
    return obj


def decode(raw: bytes, max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> object:
    if len(raw) > max_bytes:
        raise Rejected("oversize", f"{len(raw)} bytes > limit {max_bytes}")
    try:
        return _check_nesting(raw, orjson.loads(raw))
    except orjson.JSONDecodeError as first:
        # The stdlib parser accepts NaN/Infinity literals that orjson refuses; nothing else.
        try:
            obj = json.loads(raw)
        except (ValueError, UnicodeDecodeError, RecursionError):
            raise Rejected("invalid_json", str(first)) from None
        try:  # "\ud800" escapes decode to text that is not Unicode: no column can hold it
            json.dumps(obj, ensure_ascii=False, allow_nan=True).encode("utf-8")
        except UnicodeEncodeError:
            raise Rejected("invalid_json", "unpaired UTF-16 surrogate escape") from None
        except RecursionError:
            raise Rejected("nesting_too_deep", "too deep to re-encode") from None
        return _check_nesting(raw, obj)


def reparse_exact(raw: bytes) -> object:
    """Integers wider than 64 bits, exactly (orjson would have rounded them to floats)."""
    return json.loads(raw)


# parent column ("" at the top level) -> raw key -> (column name or None, full untruncated name)
_NAME_CACHE: dict[str, dict[str, tuple[str | None, str]]] = {}
_NAME_CACHE_MAX_PARENTS = 20_000


def child_name(parent: str, key: str) -> tuple[str | None, str]:
    """``(column name or None, full untruncated name)`` of ``key`` under the column ``parent``
    (``""`` at the top level): the flattening's naming rule, shared with ``columnar``."""
    part = naming.snake(key)
    if not part:
        return (None, "")
    full = f"{parent}_{part}" if parent else part
    name = full
    if not parent and name in naming.PARTITION_KEYS:
        name = f"{name}_field"
    return (naming.limit(name, naming.MAX_COLUMN_NAME), full)


def _names_under(parent: str) -> dict[str, tuple[str | None, str]]:
    names = _NAME_CACHE.get(parent)
    if names is None:
        names = {}
        if len(_NAME_CACHE) < _NAME_CACHE_MAX_PARENTS:
            _NAME_CACHE[parent] = names
    return names


class _TooDeep(Exception):
    pass


def _json_text(v: object) -> str:
    try:
        return orjson.dumps(v).decode()
    except TypeError:  # integers wider than 64 bits (stdlib parse path)
        pass
    except orjson.JSONEncodeError as e:  # nested deeper than orjson writes (255 levels)
        raise _TooDeep(str(e)) from None
    try:
        return json.dumps(v, ensure_ascii=False, allow_nan=True, separators=(",", ":"))
    except RecursionError:
        raise _TooDeep("nesting too deep to store as JSON text") from None


def _json_text_exact(v: object) -> tuple[str, bool]:
    """``(JSON text, suspect)``: suspect when a float >= 1e16 inside may be a wide integer
    that orjson's parse rounded (the line is then re-parsed exactly)."""
    text = _json_text(v)
    return text, "e+" in text and type(v) in (list, dict)


class _Collision(Exception):
    pass


_INT64_LO, _INT64_HI = -(2**63), 2**63


def _flatten_fast(obj: dict, max_depth: int) -> tuple[dict[str, object], list, bool]:
    """Flatten without tracking raw paths; raises ``_Collision`` when two keys share a column
    or a key is unusable (the slow path then sorts it out and records the problems).

    The hot loop of a sync: per value only a type dispatch and a cached name lookup. Values'
    kinds are not computed here: the sync classifies whole columns at once (``columnar.py``).
    """
    out: dict = {}
    suspect = False
    written = 0
    stack: list[tuple[dict, str, int]] = [(obj, "", 1)]
    while stack:
        d, parent, depth = stack.pop()
        names = _names_under(parent)
        for k, v in d.items():
            nm = names.get(k)
            if nm is None:
                nm = names[k] = child_name(parent, k)
            tv = type(v)
            if tv is str or tv is bool:
                pass
            elif tv is dict:
                if not v:
                    continue
                if depth < max_depth and nm[0] is not None:
                    stack.append((v, nm[1], depth + 1))
                    continue
                v, wide = _json_text_exact(v)
                suspect = suspect or wide
            elif v is None:
                continue
            elif tv is int:
                if not (_INT64_LO <= v < _INT64_HI):
                    v = str(v)  # exact digits; typed as text
            elif tv is float:
                if (v >= _SUSPECT_FLOAT or v <= -_SUSPECT_FLOAT) and v.is_integer():
                    suspect = True
            elif tv is list:
                v, wide = _json_text_exact(v)
                suspect = suspect or wide
            else:  # not produced by a JSON parser
                v = str(v)
            out[nm[0]] = v  # an unusable key lands under None: found below
            written += 1
    if written != len(out) or None in out:
        raise _Collision
    return out, [], suspect


def _flatten_tracked(obj: dict, max_depth: int) -> tuple[dict[str, object], list]:
    """Slow path for events with colliding keys: resolve by naming rule 8."""
    candidates: dict[str, list[tuple[tuple[bool, tuple[str, ...]], object]]] = {}
    problems: list[tuple[str, str, str]] = []
    stack: list[tuple[dict, str, int, tuple[str, ...]]] = [(obj, "", 1, ())]
    while stack:
        d, parent, depth, path = stack.pop()
        for k, v in d.items():
            if v is None:
                continue
            p = path + (k,)
            name, full = child_name(parent, k)
            if type(v) is dict and name is not None:
                if not v:
                    continue
                if depth < max_depth:
                    stack.append((v, full, depth + 1, p))
                    continue
                v = _json_text(v)
            elif type(v) in (list, dict):  # (a dict here sits under an unusable key)
                v = _json_text(v)
            elif type(v) is int and not (_INT64_LO <= v < _INT64_HI):
                v = str(v)
            elif type(v) not in (str, bool, int, float):
                v = str(v)
            if name is None:
                problems.append(("/".join(p), value_text(v), "unusable_key"))
                continue
            rank = (not naming.is_canonical(p), p)
            candidates.setdefault(name, []).append((rank, v))
    out: dict[str, object] = {}
    for name, cands in candidates.items():
        cands.sort(key=lambda c: c[0])
        out[name] = cands[0][1]
        for (_, lost_path), lost_value in cands[1:]:
            if lost_value == cands[0][1] and type(lost_value) is type(cands[0][1]):
                continue  # same value under two spellings: nothing is lost
            problems.append(
                (name, value_text(lost_value), f"column_name_collision: {'/'.join(lost_path)}")
            )
    return out, problems


def flatten_values(
    obj: dict, max_depth: int = DEFAULT_MAX_DEPTH
) -> tuple[dict[str, object], list, bool]:
    """``(columns, value problems, suspect)``; ``suspect`` means a float may be a rounded
    integer wider than 64 bits and the line should be re-parsed exactly."""
    try:
        return _flatten_fast(obj, max_depth)
    except _Collision:
        flat, problems = _flatten_tracked(obj, max_depth)
        return flat, problems, False


def flatten(
    obj: dict, max_depth: int = DEFAULT_MAX_DEPTH
) -> tuple[dict[str, object], list[int], list, bool]:
    """``(columns, kinds, value problems, suspect)``: ``flatten_values`` plus each value's kind."""
    flat, problems, suspect = flatten_values(obj, max_depth)
    return flat, [kind_of(v) for v in flat.values()], problems, suspect


def _text_id(value: object, missing_reason: str, invalid_reason: str) -> str:
    if value is None or value == "":
        raise Rejected(missing_reason)
    if type(value) is str:
        if len(value) > MAX_MESSAGE_ID_CHARS:
            raise Rejected(invalid_reason, f"{len(value)} characters")
        return value
    if type(value) is float and value.is_integer() and abs(value) >= _SUSPECT_FLOAT:
        # orjson rounds integers beyond 64 bits to floats: two such ids could collide
        raise Rejected(
            invalid_reason,
            "a number beyond 64-bit precision cannot be an exact id; send ids as strings",
        )
    if type(value) in (int, float):
        return _json_text(value)
    raise Rejected(invalid_reason, f"{type(value).__name__} is not an id")


def validate(obj: object) -> tuple[str, str, str]:
    """``(type, table, message_id)`` of a decoded message, or ``Rejected``."""
    if type(obj) is not dict:
        raise Rejected("not_an_object", type(obj).__name__)
    mtype = obj.get("type")
    if mtype is None:
        raise Rejected("missing_type")
    if type(mtype) is not str or mtype not in naming.MESSAGE_TYPES:
        raise Rejected("unknown_type", repr(mtype)[:100])
    message_id = _text_id(obj.get("messageId"), "missing_message_id", "invalid_message_id")
    if obj.get("userId") in (None, "") and obj.get("anonymousId") in (None, ""):
        raise Rejected("missing_user_id")
    received = obj.get("receivedAt")
    if received is None or received == "":
        # The collector stamps it; without it no hour, no dedup order, no partition.
        raise Rejected("missing_received_at")
    if type(received) is not str or not is_timestamp(received):
        raise Rejected("invalid_received_at", repr(received)[:100])
    if mtype == "track":
        event = obj.get("event")
        if type(event) is not str or not event.strip():
            raise Rejected("missing_event")
        table = naming.event_table_name(event)
        if table is None:
            raise Rejected("unusable_event_name", repr(event)[:100])
    else:
        table = naming.TYPE_TABLES[mtype]
    return mtype, table, message_id


def parse_fast(
    raw: bytes,
    max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> Message:
    """Decode, validate and flatten one archive line, or raise ``Rejected``; ``kinds`` is left
    empty (the sync classifies whole columns, see ``columnar.py``)."""
    obj = decode(raw, max_bytes)
    mtype, table, message_id = validate(obj)
    flat, problems, suspect = flatten_values(obj, max_depth)  # type: ignore[arg-type]
    if suspect:
        flat, problems, _ = flatten_values(reparse_exact(raw), max_depth)  # type: ignore[arg-type]
    received = obj.get("receivedAt")  # type: ignore[union-attr]
    received_at = parse_timestamp(received) if type(received) is str else None
    return Message(mtype, table, message_id, received_at, flat, [], problems)


def parse_line(
    raw: bytes,
    max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> Message:
    """``parse_fast`` plus the kind of every value (the per-value reference rules)."""
    m = parse_fast(raw, max_bytes, max_depth)
    m.kinds = [kind_of(v) for v in m.flat.values()]
    return m


def is_tracks_column(column: str) -> bool:
    """Whether a track event's column also belongs in the shared ``tracks`` table."""
    return not (column == "properties" or column.startswith("properties_"))
