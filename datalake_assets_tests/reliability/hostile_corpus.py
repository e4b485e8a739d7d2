"""The hostile-input corpus: bad archive lines, each with the fate the documented rules give it.

Every case is data: ``Case(name, lines, expect)``. ``expect`` holds one ``Expect`` per line
(or one for all of them): the line is a table row with typed columns (``row``, ``json_text``),
a duplicate (``duplicate``), quarantined whole with a reason (``quarantined``), or a blank line
that carries nothing (``blank``). The fates are derived from the README ("What a sync does to
each line") and the docstrings of ``spec/messages.py``, ``spec/naming.py`` and
``spec/types.py``, never from the code's output. Where the code disagrees with those rules, the
case keeps the documented fate and names the bug (``bug=...``): its test is a strict xfail, so
it flips once the code is fixed.

Conventions that keep each case's fate findable and independent of the others:

* message ids are ``<case>:<n>``;
* a column's type is decided from the whole batch, so no two cases share a column: a case's
  event is ``hostile <case>`` (table ``hostile_<case>``, naming rule 3 on ``[a-z0-9_]``
  names), or a few shared events ``hostile values`` / ``numbers`` / ``keys`` / ``nesting``
  whose messages carry ``properties: {<case>: value}`` (columns ``properties_<case>...``);
* hostile values live under ``properties`` (not part of the shared ``tracks`` table);
* lines go to the main hour (``MAIN_HOUR``) unless the case needs another one;
* ``isolated`` cases (known to crash a sync) get a sync of their own, with a control message.

The sync runs with ``max_message_bytes = MAX_MESSAGE_BYTES`` (256 KiB; the limit is
configurable, README "Parse and validate"), so that an event with 10,000 properties (about
130 KB) is a row, while the 10 MB line and a line one byte over the limit are ``oversize``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone

DAY = "2026-11-21"
MAIN_HOUR = f"{DAY}T10"
LATE_HOUR = f"{DAY}T11"
DAY_HOURS = tuple(f"{DAY}T{h:02d}" for h in range(24))
MAX_MESSAGE_BYTES = 256 * 1024
MAX_DEPTH = 16  # the documented default (objects nested deeper are JSON text)

MAIN_FILE = "part-0000.jsonl.gz"
BIG_FILE = "part-0001.jsonl.gz"  # the big lines, in a task of their own
PLAIN_FILE = "part-0002.jsonl"  # archive files may be plain JSON lines too

ROW, DUPLICATE, QUARANTINED, BLANK = "row", "duplicate", "quarantined", "blank"
BIGINT, DOUBLE, BOOLEAN, TIMESTAMP, STRING = "bigint", "double", "boolean", "timestamp", "string"


class _Any:
    def __repr__(self) -> str:
        return "ANY"


ANY = _Any()  # any value (only the column's type is checked)
OMIT = object()  # a field left out of the message


# ------------------------------------------------------------------------------ expectations


@dataclass(frozen=True)
class Col:
    """A column of the row: its type in the table and the row's value (``None``: NULL).
    Timestamps are microseconds since the epoch (UTC). ``json``: the value is JSON text whose
    parsed form equals ``value``."""

    type: str
    value: object = ANY
    json: bool = False


@dataclass(frozen=True)
class ValueQ:
    """A value of a written row that went to quarantine (``level = 'value'``), with the
    original JSON value (``ANY``: not checked) and, if given, the column it was recorded for."""

    reason: str
    value: object = ANY
    column: str | None = None


@dataclass(frozen=True)
class Expect:
    fate: str  # ROW, DUPLICATE, QUARANTINED or BLANK
    reason: str = ""  # QUARANTINED: the line's reason
    table: str = ""  # ROW: the table holding the row
    columns: tuple[tuple[str, Col], ...] = ()
    absent: tuple[str, ...] = ()  # columns the table must not have
    values_quarantined: tuple[ValueQ, ...] = ()  # exactly these value quarantines (this table)
    hour: str | None = None  # ROW: the partition hour; default: the line's archive hour
    message_id: str | None = None  # default: the line's messageId, as text
    column_count: tuple[str, int] | None = None  # (prefix, how many columns start with it)


def quarantined(reason: str) -> Expect:
    return Expect(QUARANTINED, reason=reason)


def row(
    table: str,
    column: str | None = None,
    type: str | None = None,
    value: object = ANY,
    *,
    columns: dict[str, Col] | None = None,
    absent: tuple[str, ...] = (),
    values_quarantined: tuple[ValueQ, ...] = (),
    hour: str | None = None,
    message_id: str | None = None,
    column_count: tuple[str, int] | None = None,
) -> Expect:
    cols = dict(columns or {})
    if column is not None:
        cols[column] = Col(type or STRING, value)
    return Expect(
        ROW,
        table=table,
        columns=tuple(cols.items()),
        absent=absent,
        values_quarantined=values_quarantined,
        hour=hour,
        message_id=message_id,
        column_count=column_count,
    )


def json_text(table: str, column: str, value: object, **kw) -> Expect:
    """A row whose ``column`` is a string column holding ``value`` as JSON text."""
    cols = dict(kw.pop("columns", None) or {})
    cols[column] = Col(STRING, value, json=True)
    return row(table, columns=cols, **kw)


def duplicate(message_id: str | None = None) -> Expect:
    return Expect(DUPLICATE, message_id=message_id)


def blank() -> Expect:
    return Expect(BLANK)


@dataclass(frozen=True)
class Line:
    raw: bytes
    hour: str = MAIN_HOUR
    file: str = MAIN_FILE


@dataclass(frozen=True)
class Case:
    name: str
    lines: tuple  # of Line (bytes are accepted and put in the main hour's main file)
    expect: tuple  # of Expect, one per line (one Expect is used for every line)
    bug: str | None = None  # the code disagrees with the documented fate: why (strict xfail)
    isolated: bool = False  # synced on its own (it is known to crash a sync it shares)

    def __post_init__(self) -> None:
        assert self.name.replace("_", "").isalnum() and self.name == self.name.lower(), self.name
        lines = tuple(x if isinstance(x, Line) else Line(x) for x in self.lines)
        expect = self.expect if isinstance(self.expect, (list, tuple)) else (self.expect,)
        if len(expect) == 1 and len(lines) > 1:
            expect = expect * len(lines)
        assert len(expect) == len(lines), f"{self.name}: one Expect per line"
        for line in lines:
            assert b"\n" not in line.raw, f"{self.name}: a line cannot hold a newline"
        object.__setattr__(self, "lines", lines)
        object.__setattr__(self, "expect", tuple(expect))


# ------------------------------------------------------------------------------- builders


def T(case: str) -> str:
    """The table of a case's own track event ``hostile <case>`` (naming rule 3)."""
    return f"hostile_{case}"


def dumps(obj: object) -> bytes:
    """Compact JSON; keeps integers beyond 64 bits exact and writes NaN/Infinity literals."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=True).encode()


def event(
    case: str,
    i: int = 0,
    *,
    hour: str = MAIN_HOUR,
    minute: int | None = None,
    extra: dict | None = None,
    **fields,
) -> dict:
    """A valid ``track`` message of the case; ``fields`` replace or (``OMIT``) remove keys."""
    ts = f"{hour}:{(i if minute is None else minute) % 60:02d}:00.000Z"
    msg: dict = {
        "type": "track",
        "event": f"hostile {case}",
        "messageId": f"{case}:{i}",
        "anonymousId": "anon-hostile",
        "receivedAt": ts,
        "timestamp": ts,
        "context": {"library": {"name": "hostile-corpus", "version": "1"}},
    }
    for k, v in {**fields, **(extra or {})}.items():
        if v is OMIT:
            msg.pop(k, None)
        else:
            msg[k] = v
    return msg


def ev(case: str, i: int = 0, **kw) -> bytes:
    return dumps(event(case, i, **kw))


def props(case: str, p: dict, i: int = 0, **kw) -> bytes:
    return ev(case, i, properties=p, **kw)


def at(hour: str, raw: bytes, file: str = MAIN_FILE) -> Line:
    return Line(raw, hour, file)


def big(raw: bytes) -> Line:
    return Line(raw, MAIN_HOUR, BIG_FILE)


def plain(raw: bytes) -> Line:
    return Line(raw, MAIN_HOUR, PLAIN_FILE)


def us(
    y: int,
    mo: int,
    d: int,
    h: int = 0,
    mi: int = 0,
    s: int = 0,
    micro: int = 0,
    offset_minutes: int = 0,
) -> int:
    """Microseconds since the epoch of a wall-clock time at a UTC offset."""
    tz = timezone(timedelta(minutes=offset_minutes))
    delta = datetime(y, mo, d, h, mi, s, micro, tzinfo=tz) - datetime(1970, 1, 1, tzinfo=UTC)
    return delta // timedelta(microseconds=1)


def hashed(name: str, max_len: int) -> str:
    """Naming rule 6: ``<first max_len - 9 chars>_<8 hex of sha1 of the full name>``."""
    return f"{name[: max_len - 9]}_{hashlib.sha1(name.encode()).hexdigest()[:8]}"


def nest(key: str, levels: int, leaf: object) -> object:
    """``{key: {key: ... leaf}}`` with ``levels`` keys."""
    out = leaf
    for _ in range(levels):
        out = {key: out}
    return out


def nest_list(levels: int, leaf: object) -> object:
    out = leaf
    for _ in range(levels):
        out = [out]
    return out


def swap(raw: bytes, placeholder: str, replacement: bytes) -> bytes:
    """Put bytes that JSON encoders would not write (invalid UTF-8, NaN spelled oddly...)."""
    token = json.dumps(placeholder).encode()
    assert token in raw
    return raw.replace(token, replacement)


def padded_to(case: str, size: int) -> bytes:
    """A valid event of exactly ``size`` bytes (padded in ``properties.pad``)."""
    bare = props(case, {"pad": ""})
    return props(case, {"pad": "x" * (size - len(bare))})


def col(case: str, *parts: str) -> str:
    """The column of ``properties.<case>.<parts>`` (all parts already snake_case)."""
    return "_".join(["properties", case, *parts])


VALUES, NUMBERS, KEYS, NESTING = "values", "numbers", "keys", "nesting"


def shared(group: str, case: str, value: object, i: int = 0, **kw) -> bytes:
    """A message of the shared event ``hostile <group>`` (table ``hostile_<group>``) whose
    properties hold only ``{case: value}``: the case's columns are ``properties_<case>...``,
    typed from its own values only (a type is decided per column). Sharing a table keeps the
    corpus at a few dozen tables; the groups keep apart what sends a whole table's batch down
    the per-row path (key collisions, deep nesting, integers beyond 64 bits)."""
    return ev(case, i, event=f"hostile {group}", properties={case: value}, **kw)


def ts_case(name: str, text: object, expect_type: str, expect_value: object) -> Case:
    """A property holding one timestamp-ish value, alone in its column."""
    return Case(
        name, [shared(VALUES, name, text)], row(T(VALUES), col(name), expect_type, expect_value)
    )


# --------------------------------------------------------------------------------- corpus

_TEN_MB = 10 * 1024 * 1024


def _type_flip_value(h: int) -> object:
    """Hour h's value: int, float, boolean, timestamp text, text, integer text, in turn."""
    return (h, h + 0.5, h % 4 == 2, f"{DAY}T{h:02d}:00:00Z", f"text-{h}", str(h))[h % 6]


def _type_flip_expect(h: int) -> Expect:
    """Rule 5 over the whole batch (24 values, 4 of each kind): numbers vote bigint (8 votes)
    over timestamp (4) and boolean (4); fractions make it double; int, float and integer text
    fit double (12), booleans, timestamp text and text do not (12). Misfits do not outnumber
    the fitting values, so the column stays double and each misfit is quarantined."""
    v = _type_flip_value(h)
    hour = DAY_HOURS[h]
    if h % 6 in (0, 1, 5):
        return row(T("type_changes_every_hour"), "properties_flip", DOUBLE, float(v), hour=hour)
    return row(
        T("type_changes_every_hour"),
        "properties_flip",
        DOUBLE,
        None,
        hour=hour,
        values_quarantined=(ValueQ("type_mismatch", v, "properties_flip"),),
    )


def _cases() -> list[Case]:
    c: list[Case] = []
    add = c.append

    # ---- bytes and JSON -------------------------------------------------------------------
    whole = ev("truncated_json")
    add(
        Case(
            "truncated_json",
            [whole[:-1], whole[: len(whole) // 2], b"{", b'{"type":'],
            quarantined("invalid_json"),
        )
    )
    add(
        Case(
            "invalid_utf8",
            [
                plain(swap(props("invalid_utf8", {"x": "BAD"}, 0), "BAD", b'"\xff\xfe"')),
                plain(
                    swap(props("invalid_utf8", {"x": "BAD"}, 1), "BAD", b'"\xc0\xaf"')
                ),  # overlong
                plain(
                    swap(props("invalid_utf8", {"x": "BAD"}, 2), "BAD", b'"\xe2\x82"')
                ),  # cut short
                plain(
                    swap(props("invalid_utf8", {"x": "BAD"}, 3), "BAD", b'"\xed\xa0\x80"')
                ),  # CESU
                plain(b"\xff\xfe{}"),
            ],
            quarantined("invalid_json"),
        )
    )
    add(
        Case(
            "lone_surrogate_escape",
            [swap(props("lone_surrogate_escape", {"x": "S"}), "S", b'"\\ud800"')],
            quarantined("invalid_json"),
        )
    )
    add(
        Case(
            "nul_byte_raw",
            [
                swap(props("nul_byte_raw", {"x": "N"}, 0), "N", b'"a\x00b"'),
                ev("nul_byte_raw", 1).replace(b",", b",\x00", 1),
                b"\x00\x00\x00\x00",  # not whitespace: not a blank line
            ],
            quarantined("invalid_json"),
        )
    )
    add(
        Case(
            "nul_escaped",
            [shared(VALUES, "nul_escaped", {"note": "a\x00b", "x\x00y": 1})],
            row(
                T(VALUES),
                columns={
                    col("nul_escaped", "note"): Col(STRING, "a\x00b"),
                    col("nul_escaped", "x_y"): Col(BIGINT, 1),
                },
            ),
        )
    )
    add(
        Case(
            "line_10mb", [big(props("line_10mb", {"blob": "x" * _TEN_MB}))], quarantined("oversize")
        )
    )
    add(
        Case(
            "line_over_limit_by_one",
            [big(padded_to("line_over_limit_by_one", MAX_MESSAGE_BYTES + 1))],
            quarantined("oversize"),
        )
    )
    add(
        Case(
            "line_at_limit",
            [big(padded_to("line_at_limit", MAX_MESSAGE_BYTES))],
            row(T("line_at_limit"), "properties_pad", STRING),
        )
    )
    add(
        Case(
            "not_an_object",
            [
                b"[1,2]",
                b'"text"',
                b"42",
                b"null",
                b"true",
                b'[{"type":"track","messageId":"not_an_object:5"}]',
            ],
            quarantined("not_an_object"),
        )
    )
    add(
        Case(
            "trailing_garbage",
            [
                ev("trailing_garbage", 0) + b" x",
                ev("trailing_garbage", 1) + ev("trailing_garbage", 2),
                ev("trailing_garbage", 3) + b",",
            ],
            quarantined("invalid_json"),
        )
    )
    raw = ev("raw_newline_in_string", event="split\nhere")
    cut = raw.index(b"\\n")
    add(Case("raw_newline_in_string", [raw[:cut], raw[cut + 2 :]], quarantined("invalid_json")))
    add(
        Case(
            "json_dialects",
            [
                b"{'type': 'track', 'event': 'x', 'messageId': 'json_dialects:0'}",
                ev("json_dialects", 1).replace(b'"anonymousId"', b"anonymousId"),  # unquoted key
                ev("json_dialects", 2)[:-1] + b',"x":True}',  # Python literal
                ev("json_dialects", 3)[:-1] + b"/* comment */}",
                ev("json_dialects", 4)[:-1] + b",}",  # trailing comma
            ],
            quarantined("invalid_json"),
        )
    )
    add(Case("blank_lines", [b"", b"   ", b"\t\r"], blank()))
    add(
        Case(
            "crlf_line_end",
            [shared(VALUES, "crlf_line_end", 1) + b"\r"],
            row(T(VALUES), col("crlf_line_end"), BIGINT, 1),
        )
    )
    add(
        Case(
            "whitespace_padding",
            [b" \t " + shared(VALUES, "whitespace_padding", 2) + b"  "],
            row(T(VALUES), col("whitespace_padding"), BIGINT, 2),
        )
    )

    # ---- size and shape -------------------------------------------------------------------
    add(
        Case(
            "props_10000",
            [big(props("props_10000", {f"p{i:05d}": i for i in range(10_000)}))],
            row(
                T("props_10000"),
                columns={
                    "properties_p00000": Col(BIGINT, 0),
                    "properties_p09999": Col(BIGINT, 9999),
                },
                column_count=("properties_", 10_000),
            ),
        )
    )
    # An object nested deeper than 16 levels (the message being level 1) is JSON text in the
    # column of its path at that depth (as test_messages pins it at max_depth 4): 16 path
    # parts, here properties, the case and 14 keys.
    for levels in (100, 180):
        name = f"nesting_{levels}_deep"
        add(
            Case(
                name,
                [shared(NESTING, name, nest("n", levels, {"v": 1}))],
                json_text(T(NESTING), col(name, *["n"] * 14), nest("n", levels - 14, {"v": 1})),
            )
        )
    # Over the documented 200 levels (README "Parse and validate"): quarantined whole.
    add(
        Case(
            "nesting_300_deep",
            [shared(NESTING, "nesting_300_deep", nest("n", 300, {"v": 1}))],
            quarantined("nesting_too_deep"),
        )
    )
    add(
        Case(
            "nesting_at_the_limit",
            [
                shared(
                    NESTING,
                    "nesting_at_the_limit",
                    {
                        "a": nest("n", 12, {"v": 1}),  # {"v": 1} at path length 15: expanded
                        "b": nest("n", 13, {"v": 1}),  # {"v": 1} at path length 16: JSON text
                    },
                )
            ],
            row(
                T(NESTING),
                columns={
                    col("nesting_at_the_limit", "a", *["n"] * 12, "v"): Col(BIGINT, 1),
                    col("nesting_at_the_limit", "b", *["n"] * 13): Col(STRING, {"v": 1}, json=True),
                },
            ),
        )
    )
    # Deeper than orjson's 1,024 levels: "nesting deeper than the parser allows" is invalid_json.
    add(
        Case(
            "nesting_5000_deep",
            [
                big(
                    props("nesting_5000_deep", {"x": 0}).replace(
                        b'{"x":0}', b'{"x":' * 5000 + b"0" + b"}" * 5000
                    )
                )
            ],
            quarantined("invalid_json"),
        )
    )
    # Within orjson's limit (1,024 levels) but beyond the documented 200: quarantined as
    # nesting_too_deep (README "Parse and validate"). A control message shares its sync.
    deep = b'{"n":' * 1020 + b'{"v":1}' + b"}" * 1020
    add(
        Case(
            "nesting_1020_deep",
            [
                big(props("nesting_1020_deep", {"x": 0}, 0).replace(b'{"x":0}', deep)),
                big(props("nesting_1020_deep", {"ok": 1}, 1)),
            ],
            [
                quarantined("nesting_too_deep"),
                row(T("nesting_1020_deep"), "properties_ok", BIGINT, 1),
            ],
            isolated=True,
        )
    )
    # 150 levels: under the limit, so the flatten rule applies: JSON text at depth 16.
    deep150 = b'{"n":' * 150 + b'{"v":1}' + b"}" * 150
    add(
        Case(
            "nesting_150_deep",
            [
                big(props("nesting_150_deep", {"x": 0}, 0).replace(b'{"x":0}', deep150)),
            ],
            [row(T("nesting_150_deep"), "_".join(["properties", *["n"] * 15]), STRING)],
        )
    )
    add(
        Case(
            "arrays_100_deep",
            [shared(VALUES, "arrays_100_deep", nest_list(100, 1))],
            json_text(T(VALUES), col("arrays_100_deep"), nest_list(100, 1)),
        )
    )
    add(
        Case(
            "empty_containers",
            [shared(VALUES, "empty_containers", {"e": {}, "a": [], "s": ""})],
            row(
                T(VALUES),
                columns={
                    col("empty_containers", "a"): Col(STRING, [], json=True),
                    col("empty_containers", "s"): Col(STRING, ""),
                },
                absent=(col("empty_containers", "e"),),
            ),
        )
    )

    # ---- keys -----------------------------------------------------------------------------
    def keys(
        case: str,
        value: dict,
        expect_columns: dict[str, Col],
        *quarantined_values: ValueQ,
        bug: str | None = None,
    ) -> Case:
        return Case(
            case,
            [shared(KEYS, case, value)],
            row(T(KEYS), columns=expect_columns, values_quarantined=quarantined_values),
            bug=bug,
        )

    add(
        keys(
            "key_dots",
            {"utm.source": "x", "a.b.c": 1},
            {
                col("key_dots", "utm_source"): Col(STRING, "x"),
                col("key_dots", "a_b_c"): Col(BIGINT, 1),
            },
        )
    )
    add(
        keys(
            "key_spaces",
            {"Plan Name": "pro", "  padded  key ": 1},
            {
                col("key_spaces", "plan_name"): Col(STRING, "pro"),
                col("key_spaces", "padded_key"): Col(BIGINT, 1),
            },
        )
    )
    add(
        keys(
            "key_emoji",
            {"🎉": 1, "🎉 party": "yes"},
            {col("key_emoji", "party"): Col(STRING, "yes")},
            ValueQ("unusable_key", 1),
        )
    )
    add(
        keys(
            "key_empty",
            {"": "x", "ok": 1},
            {col("key_empty", "ok"): Col(BIGINT, 1)},
            ValueQ("unusable_key", "x"),
        )
    )
    add(
        keys(
            "key_punctuation_only",
            {"%": 2, "...": 3, " ": 4, "ok": 1},
            {col("key_punctuation_only", "ok"): Col(BIGINT, 1)},
            ValueQ("unusable_key", 2),
            ValueQ("unusable_key", 3),
            ValueQ("unusable_key", 4),
        )
    )
    add(
        keys(
            "key_unusable_holds_object",
            {"": {"a": True, "c": [1]}, "ok": 1},
            {col("key_unusable_holds_object", "ok"): Col(BIGINT, 1)},
            ValueQ("unusable_key", {"a": True, "c": [1]}),
        )
    )
    add(
        Case(
            "key_unusable_top_level",
            [ev("key_unusable_top_level", extra={"%": 5})],
            row(T("key_unusable_top_level"), values_quarantined=(ValueQ("unusable_key", 5),)),
        )
    )
    first_name = col("keys_collide_snake", "first_name")
    add(
        keys(
            "keys_collide_snake",
            {"firstName": "A", "first_name": "B", "FirstName": "C"},
            {first_name: Col(STRING, "B")},
            ValueQ("column_name_collision", "A", first_name),
            ValueQ("column_name_collision", "C", first_name),
        )
    )
    # No key is already snake_case: the first raw key path in sorted order wins ("F" < "f").
    first_name = col("keys_collide_no_canonical", "first_name")
    add(
        keys(
            "keys_collide_no_canonical",
            {"firstName": "x", "FirstName": "y"},
            {first_name: Col(STRING, "y")},
            ValueQ("column_name_collision", "x", first_name),
        )
    )
    add(
        keys(
            "keys_collide_same_value",
            {"firstName": "same", "first_name": "same"},
            {col("keys_collide_same_value", "first_name"): Col(STRING, "same")},
        )
    )
    # Both paths are snake_case: sorted order, (..., "a", "b") before (..., "a_b").
    a_b = col("keys_collide_nested_vs_flat", "a_b")
    add(
        keys(
            "keys_collide_nested_vs_flat",
            {"a": {"b": 1}, "a_b": 2},
            {a_b: Col(BIGINT, 1)},
            ValueQ("column_name_collision", 2, a_b),
        )
    )
    utm = col("keys_collide_dotted_vs_nested", "utm_source")
    add(
        keys(
            "keys_collide_dotted_vs_nested",
            {"utm": {"source": "n"}, "utm.source": "d"},
            {utm: Col(STRING, "n")},
            ValueQ("column_name_collision", "d", utm),
        )
    )
    cafe = col("keys_collide_unicode", "cafe")
    add(
        keys(
            "keys_collide_unicode",
            {"café": 1, "cafe": 2},
            {cafe: Col(BIGINT, 2)},
            ValueQ("column_name_collision", 1, cafe),
        )
    )
    add(
        keys(
            "key_sql_injection",
            {"'; DROP TABLE x; --": 1, "select": 2, "from": 3},
            {
                col("key_sql_injection", "drop_table_x"): Col(BIGINT, 1),
                col("key_sql_injection", "select"): Col(BIGINT, 2),
                col("key_sql_injection", "from"): Col(BIGINT, 3),
            },
        )
    )
    add(
        keys(
            "key_path_traversal",
            {"../../etc/passwd": "p", "a/b": "q", "..\\..\\win": "r"},
            {
                col("key_path_traversal", "etc_passwd"): Col(STRING, "p"),
                col("key_path_traversal", "a_b"): Col(STRING, "q"),
                col("key_path_traversal", "win"): Col(STRING, "r"),
            },
        )
    )
    add(
        keys(
            "key_300_chars",
            {"k" * 300: 1},
            {hashed(col("key_300_chars", "k" * 300), 250): Col(BIGINT, 1)},
        )
    )
    add(
        keys(
            "keys_300_chars_distinct",
            {"k" * 299 + "a": 1, "k" * 299 + "b": 2},
            {
                hashed(col("keys_300_chars_distinct", "k" * 299 + "a"), 250): Col(BIGINT, 1),
                hashed(col("keys_300_chars_distinct", "k" * 299 + "b"), 250): Col(BIGINT, 2),
            },
        )
    )
    add(
        keys(
            "key_camel_acronym",
            {"HTMLParser": 1, "userID": 2, "product2Id": 3},
            {
                col("key_camel_acronym", "html_parser"): Col(BIGINT, 1),
                col("key_camel_acronym", "user_id"): Col(BIGINT, 2),
                col("key_camel_acronym", "product2_id"): Col(BIGINT, 3),
            },
        )
    )
    add(
        Case(
            "top_level_partition_keys",
            [
                ev(
                    "top_level_partition_keys",
                    extra={
                        "day": "monday",
                        "hr": 3,
                        "year": "y",
                        "month": "m",
                        "segment_type": "evil",
                        "source_id": "other",
                    },
                )
            ],
            row(
                T("top_level_partition_keys"),
                columns={
                    "day_field": Col(STRING, "monday"),
                    "hr_field": Col(BIGINT, 3),
                    "year_field": Col(STRING, "y"),
                    "month_field": Col(STRING, "m"),
                    "segment_type_field": Col(STRING, "evil"),
                    "source_id_field": Col(STRING, "other"),
                },
                absent=("day", "hr", "year", "month", "segment_type", "source_id"),
            ),
        )
    )
    add(
        Case(
            "partition_key_collision",
            [ev("partition_key_collision", extra={"day": "a", "day_field": "b"})],
            row(
                T("partition_key_collision"),
                "day_field",
                STRING,
                "a",
                values_quarantined=(ValueQ("column_name_collision", "b", "day_field"),),
            ),
        )
    )

    # ---- event names (table names) ----------------------------------------------------------
    def named(case: str, names: list[str], tables: list[str]) -> Case:
        return Case(
            case, [ev(case, i, event=n) for i, n in enumerate(names)], [row(t) for t in tables]
        )

    add(
        named(
            "event_path_traversal",
            ["../../etc/passwd", "..\\..\\windows", "/abs/path"],
            ["etc_passwd", "windows", "abs_path"],
        )
    )
    add(named("event_slash", ["a/b"], ["a_b"]))
    add(
        named(
            "event_sql_injection",
            ["'; DROP TABLE x; --", 'x"; DELETE FROM y; --'],
            ["drop_table_x", "x_delete_from_y"],
        )
    )
    # Rule 6: table names are at most 242 characters (cut with a hash), so that the folder
    # segment_type=<name> fits 255 bytes. A control message shares the sync.
    long_names = ["E" * 300, "x" * 299 + "a", "x" * 299 + "b", "f" * 255, "f" * 256]
    add(
        Case(
            "event_long_names",
            [
                *[ev("event_long_names", i, event=n) for i, n in enumerate(long_names)],
                ev("event_long_names", len(long_names)),
            ],
            [
                row(hashed("e" * 300, 242)),
                row(hashed("x" * 299 + "a", 242)),
                row(hashed("x" * 299 + "b", 242)),
                row(hashed("f" * 255, 242)),
                row(hashed("f" * 256, 242)),
                row(T("event_long_names")),
            ],
            isolated=True,
        )
    )
    add(named("event_name_242_chars", ["g" * 242], ["g" * 242]))
    keywords = ["select", "table", "drop", "from", "order", "where", "null"]
    add(named("event_sql_keywords", keywords, keywords))
    add(
        named(
            "event_digits_first",
            ["1st Purchase", "404", "2026-11-21"],
            ["1st_purchase", "404", "2026_11_21"],
        )
    )
    add(
        named(
            "event_reserved_names",
            [
                "tracks",
                "Pages",
                "quarantine",
                "sync_reports",
                "Raw Archive",
                "identifies",
                "Catalog",
                "open_hour",
            ],
            [
                "track_tracks",
                "track_pages",
                "track_quarantine",
                "track_sync_reports",
                "track_raw_archive",
                "track_identifies",
                "track_catalog",
                "track_open_hour",
            ],
        )
    )
    add(
        named(
            "event_case_variants",
            ["Signup Done", "signup_done", "SignupDone", "SIGNUP DONE"],
            ["signup_done"] * 4,
        )
    )
    add(
        named(
            "event_unicode", ["Café Ünïcode", "Ｆｕｌｌｗｉｄｔｈ"], ["cafe_unicode", "fullwidth"]
        )
    )
    add(named("event_control_chars", ["a\nb\tc\x00d"], ["a_b_c_d"]))
    add(named("event_url_encoded", ["%2e%2e%2fetc%2fpasswd"], ["2e_2e_2fetc_2fpasswd"]))
    add(
        named(
            "event_partition_like",
            ["segment_type=x/day=2026-01-01/hr=00"],
            ["segment_type_x_day_2026_01_01_hr_00"],
        )
    )
    add(
        Case(
            "event_unusable",
            [ev("event_unusable", i, event=n) for i, n in enumerate(["🎉", "...", "\x00", "___"])],
            quarantined("unusable_event_name"),
        )
    )
    add(
        Case(
            "event_missing",
            [
                ev("event_missing", 0, event=""),
                ev("event_missing", 1, event="   "),
                ev("event_missing", 2, event="\t\n"),
                ev("event_missing", 3, event=None),
                ev("event_missing", 4, event=42),
                ev("event_missing", 5, event=["x"]),
                ev("event_missing", 6, event=OMIT),
            ],
            quarantined("missing_event"),
        )
    )

    # ---- timestamps -----------------------------------------------------------------------
    ten = us(2026, 11, 21, 10)
    for name, text, typ, value in [
        ("ts_zulu", f"{DAY}T10:00:00Z", TIMESTAMP, ten),
        ("ts_offset_colon", f"{DAY}T11:30:00+01:30", TIMESTAMP, ten),
        ("ts_offset_compact", f"{DAY}T15:30:00+0530", TIMESTAMP, ten),
        ("ts_offset_hours_only", f"{DAY}T07:00:00-03", TIMESTAMP, ten),
        ("ts_no_zone", f"{DAY}T10:00:00", TIMESTAMP, ten),  # no zone: UTC
        ("ts_space_separator", f"{DAY} 10:00:00Z", TIMESTAMP, ten),
        ("ts_lowercase_z", f"{DAY}T10:00:00z", TIMESTAMP, ten),
        ("ts_nanoseconds", f"{DAY}T10:00:00.123456789Z", TIMESTAMP, ten + 123_456),
        ("ts_no_seconds", f"{DAY}T10:00Z", TIMESTAMP, ten),
        (
            "ts_year_10000_after_offset",
            "9999-12-31T23:30:00-01:00",
            TIMESTAMP,
            us(9999, 12, 31, 23, 30, offset_minutes=-60),
        ),
        ("ts_before_epoch", "1969-12-31T23:59:59.999999Z", TIMESTAMP, -1),
        ("ts_date_only", DAY, STRING, DAY),  # a date is not an instant
        ("ts_lowercase_t", f"{DAY}t10:00:00Z", STRING, f"{DAY}t10:00:00Z"),
        ("ts_rfc2822", "Sat, 21 Nov 2026 10:00:00 GMT", STRING, "Sat, 21 Nov 2026 10:00:00 GMT"),
        ("ts_epoch_seconds", 1795255200, BIGINT, 1795255200),
        ("ts_epoch_millis_text", "1795255200000", STRING, "1795255200000"),
        ("ts_month_13", "2026-13-01T00:00:00Z", STRING, "2026-13-01T00:00:00Z"),
        ("ts_feb_30", "2026-02-30T10:00:00Z", STRING, "2026-02-30T10:00:00Z"),
        ("ts_hour_24", f"{DAY}T24:00:00Z", STRING, f"{DAY}T24:00:00Z"),
        ("ts_year_0", "0000-01-01T00:00:00Z", STRING, "0000-01-01T00:00:00Z"),
        ("ts_offset_25h", f"{DAY}T10:00:00+25:00", STRING, f"{DAY}T10:00:00+25:00"),
    ]:
        add(ts_case(name, text, typ, value))
    # The four Segment timestamps are always timestamps: a value that is not one is a misfit.
    add(
        Case(
            "ts_fixed_column_garbage",
            [ev("ts_fixed_column_garbage", timestamp="yesterday")],
            row(
                T("ts_fixed_column_garbage"),
                "timestamp",
                TIMESTAMP,
                None,
                values_quarantined=(ValueQ("type_mismatch", "yesterday", "timestamp"),),
            ),
        )
    )
    add(
        Case(
            "ts_fixed_column_date_only",
            [ev("ts_fixed_column_date_only", sentAt=DAY)],
            row(
                T("ts_fixed_column_date_only"),
                "sent_at",
                TIMESTAMP,
                None,
                values_quarantined=(ValueQ("type_mismatch", DAY, "sent_at"),),
            ),
        )
    )
    add(
        Case(
            "ts_fixed_column_number",
            [ev("ts_fixed_column_number", originalTimestamp=1795255200)],
            row(
                T("ts_fixed_column_number"),
                "original_timestamp",
                TIMESTAMP,
                None,
                values_quarantined=(ValueQ("type_mismatch", 1795255200, "original_timestamp"),),
            ),
        )
    )
    add(
        Case(
            "ts_received_at_offset",
            [ev("ts_received_at_offset", receivedAt=f"{DAY}T11:15:00+01:00")],
            row(T("ts_received_at_offset"), "received_at", TIMESTAMP, us(2026, 11, 21, 10, 15)),
        )
    )

    def column_of(case: str, values: list, expects: list[tuple], group: str = VALUES) -> Case:
        """One value per message in the case's own column; ``expects``: (type, value[, ValueQ])."""
        lines = [shared(group, case, v, i) for i, v in enumerate(values)]
        out = [
            row(T(group), col(case), e[0], e[1], values_quarantined=tuple(e[2:])) for e in expects
        ]
        return Case(case, lines, out)

    when = col("ts_column_majority_timestamp")
    add(
        column_of(
            "ts_column_majority_timestamp",
            [f"{DAY}T10:00:00Z", f"{DAY}T10:05:00+00:00", "soon"],
            [
                (TIMESTAMP, ten),
                (TIMESTAMP, ten + 300_000_000),
                (TIMESTAMP, None, ValueQ("type_mismatch", "soon", when)),
            ],
        )
    )
    add(
        column_of(
            "ts_column_majority_text",
            [f"{DAY}T10:00:00Z", "soon", "later"],
            [(STRING, f"{DAY}T10:00:00Z"), (STRING, "soon"), (STRING, "later")],
        )
    )

    # ---- numbers --------------------------------------------------------------------------
    add(column_of("numbers_as_strings_only", ["42", "007"], [(STRING, "42"), (STRING, "007")]))
    add(column_of("numbers_as_strings_with_int", [7, "8"], [(BIGINT, 7), (BIGINT, 8)]))
    add(
        column_of(
            "number_leading_zero_misfit",
            [1, "007"],
            [
                (BIGINT, 1),
                (BIGINT, None, ValueQ("type_mismatch", "007", col("number_leading_zero_misfit"))),
            ],
        )
    )
    add(column_of("number_float_text_with_int", ["1.5", 2], [(DOUBLE, 1.5), (DOUBLE, 2.0)]))
    add(column_of("float_and_int", [1, 2.5], [(DOUBLE, 1.0), (DOUBLE, 2.5)]))
    add(column_of("nan_with_int", [float("nan"), 5], [(DOUBLE, float("nan")), (DOUBLE, 5.0)]))
    add(
        Case(
            "nan_infinity_literals",
            [
                shared(
                    VALUES,
                    "nan_infinity_literals",
                    {"nan": float("nan"), "inf": float("inf"), "ninf": float("-inf")},
                )
            ],
            row(
                T(VALUES),
                columns={
                    col("nan_infinity_literals", "nan"): Col(DOUBLE, float("nan")),
                    col("nan_infinity_literals", "inf"): Col(DOUBLE, float("inf")),
                    col("nan_infinity_literals", "ninf"): Col(DOUBLE, float("-inf")),
                },
            ),
        )
    )
    add(
        Case(
            "nan_infinity_text",
            [shared(VALUES, "nan_infinity_text", {"nan": "NaN", "inf": "Infinity"})],
            row(
                T(VALUES),
                columns={
                    col("nan_infinity_text", "nan"): Col(STRING, "NaN"),
                    col("nan_infinity_text", "inf"): Col(STRING, "Infinity"),
                },
            ),
        )
    )
    add(
        Case(
            "exponent_numbers",
            [
                swap(
                    swap(shared(VALUES, "exponent_numbers", {"a": "A", "b": "B"}), "A", b"1e2"),
                    "B",
                    b"-2.5E-3",
                )
            ],
            row(
                T(VALUES),
                columns={
                    col("exponent_numbers", "a"): Col(DOUBLE, 100.0),
                    col("exponent_numbers", "b"): Col(DOUBLE, -0.0025),
                },
            ),
        )
    )
    add(
        Case(
            "ints_beyond_64_bits",
            [
                shared(
                    NUMBERS,
                    "ints_beyond_64_bits",
                    {
                        "u64max": 2**64 - 1,
                        "two64": 2**64,
                        "two63": 2**63,
                        "below_min": -(2**63) - 1,
                        "huge": 123456789012345678901234567890,
                    },
                )
            ],
            row(
                T(NUMBERS),
                columns={
                    col("ints_beyond_64_bits", "u64max"): Col(STRING, str(2**64 - 1)),
                    col("ints_beyond_64_bits", "two64"): Col(STRING, str(2**64)),
                    col("ints_beyond_64_bits", "two63"): Col(STRING, str(2**63)),
                    col("ints_beyond_64_bits", "below_min"): Col(STRING, str(-(2**63) - 1)),
                    col("ints_beyond_64_bits", "huge"): Col(
                        STRING, "123456789012345678901234567890"
                    ),
                },
            ),
        )
    )
    add(
        Case(
            "int64_bounds",
            [shared(NUMBERS, "int64_bounds", {"max": 2**63 - 1, "min": -(2**63)})],
            row(
                T(NUMBERS),
                columns={
                    col("int64_bounds", "max"): Col(BIGINT, 2**63 - 1),
                    col("int64_bounds", "min"): Col(BIGINT, -(2**63)),
                },
            ),
        )
    )
    add(
        Case(
            "ints_beyond_64_bits_in_array",
            [shared(NUMBERS, "ints_beyond_64_bits_in_array", [2**70, 1])],
            json_text(T(NUMBERS), col("ints_beyond_64_bits_in_array"), [2**70, 1]),
        )
    )
    add(
        Case(
            "ints_beyond_64_bits_in_deep_object",
            [shared(NUMBERS, "ints_beyond_64_bits_in_deep_object", nest("n", 20, {"big": 2**70}))],
            json_text(
                T(NUMBERS),
                col("ints_beyond_64_bits_in_deep_object", *["n"] * 14),
                nest("n", 6, {"big": 2**70}),
            ),
        )
    )
    add(
        column_of(
            "ints_beyond_64_bits_mixed_column",
            [5, 2**70],
            [
                (BIGINT, 5),
                (
                    BIGINT,
                    None,
                    ValueQ("type_mismatch", str(2**70), col("ints_beyond_64_bits_mixed_column")),
                ),
            ],
            group=NUMBERS,
        )
    )
    add(
        column_of(
            "int_beyond_64_bits_as_text",
            ["99999999999999999999"],
            [(STRING, "99999999999999999999")],
            group=NUMBERS,
        )
    )

    # ---- booleans -------------------------------------------------------------------------
    add(column_of("bool_text_only", ["true", "FALSE"], [(STRING, "true"), (STRING, "FALSE")]))
    add(column_of("bool_text_with_bool", [True, "false"], [(BOOLEAN, True), (BOOLEAN, False)]))
    add(
        column_of(
            "bool_majority_with_int",
            [True, True, 1],
            [
                (BOOLEAN, True),
                (BOOLEAN, True),
                (BOOLEAN, None, ValueQ("type_mismatch", 1, col("bool_majority_with_int"))),
            ],
        )
    )

    # ---- nulls ----------------------------------------------------------------------------
    add(
        Case(
            "null_everywhere",
            [
                ev(
                    "null_everywhere",
                    properties={"a": None, "b": {"c": None}, "d": {}},
                    context=None,
                    userId=None,
                    traits=None,
                    integrations=None,
                )
            ],
            row(
                T("null_everywhere"),
                absent=(
                    "properties",
                    "properties_a",
                    "properties_b",
                    "properties_b_c",
                    "properties_d",
                    "context",
                    "context_library_name",
                    "user_id",
                    "traits",
                    "integrations",
                ),
            ),
        )
    )
    add(
        Case(
            "null_required_fields",
            [
                ev("null_required_fields", 0, type=None),
                ev("null_required_fields", 1, messageId=None),
                ev("null_required_fields", 2, userId=None, anonymousId=None),
                ev("null_required_fields", 3, event=None),
            ],
            [
                quarantined("missing_type"),
                quarantined("missing_message_id"),
                quarantined("missing_user_id"),
                quarantined("missing_event"),
            ],
        )
    )
    add(column_of("null_then_value", [1, None], [(BIGINT, 1), (BIGINT, None)]))

    # ---- arrays ---------------------------------------------------------------------------
    mixed = [1, "a", None, True, {"b": 2}, [3], 2.5]
    add(
        Case(
            "array_mixed_types",
            [shared(VALUES, "array_mixed_types", mixed)],
            json_text(T(VALUES), col("array_mixed_types"), mixed),
        )
    )
    add(
        Case(
            "array_and_scalar_in_one_column",
            [
                shared(VALUES, "array_and_scalar_in_one_column", [1, 2], 0),
                shared(VALUES, "array_and_scalar_in_one_column", "x", 1),
            ],
            [
                json_text(T(VALUES), col("array_and_scalar_in_one_column"), [1, 2]),
                row(T(VALUES), col("array_and_scalar_in_one_column"), STRING, "x"),
            ],
        )
    )
    objs = [{"sku": 1}, {"sku": "a", "n": None}]
    add(
        Case(
            "array_of_objects",
            [shared(VALUES, "array_of_objects", objs)],
            json_text(T(VALUES), col("array_of_objects"), objs),
        )
    )

    # ---- required fields and ids ----------------------------------------------------------
    add(
        Case(
            "missing_message_id",
            [ev("missing_message_id", messageId=OMIT), ev("missing_message_id", messageId="")],
            quarantined("missing_message_id"),
        )
    )
    add(
        Case(
            "message_id_wrong_types",
            [
                ev("message_id_wrong_types", messageId=v)
                for v in (True, False, {}, [], {"a": 1}, ["x"])
            ],
            quarantined("invalid_message_id"),
        )
    )
    long_id = "message_id_length:" + "i" * (255 - len("message_id_length:"))
    add(
        Case(
            "message_id_length",
            [
                ev("message_id_length", messageId=long_id),
                ev("message_id_length", messageId=long_id + "i"),
            ],
            [row(T("message_id_length"), message_id=long_id), quarantined("invalid_message_id")],
        )
    )
    # "numbers are accepted as text": 4242001 and "4242001" are one message id.
    add(
        Case(
            "message_id_number_and_text",
            [
                ev("message_id_number_and_text", 0, messageId=4242001),
                ev("message_id_number_and_text", 1, messageId="4242001"),
            ],
            [row(T("message_id_number_and_text"), message_id="4242001"), duplicate("4242001")],
        )
    )
    add(
        Case(
            "message_id_beyond_64_bits",
            [
                ev("message_id_beyond_64_bits", 0, messageId=2**70),
                ev("message_id_beyond_64_bits", 1, messageId=2**70 + 1),
            ],
            quarantined("invalid_message_id"),
        )
    )  # README: beyond 64-bit precision, ids as strings
    add(Case("missing_type", [ev("missing_type", type=OMIT), b"{}"], quarantined("missing_type")))
    add(
        Case(
            "missing_received_at",
            [
                ev("missing_received_at", 0, receivedAt=OMIT),
                ev("missing_received_at", 1, receivedAt=None),
                ev("missing_received_at", 2, receivedAt=""),
            ],
            quarantined("missing_received_at"),
        )
    )
    add(
        Case(
            "invalid_received_at",
            [
                ev("invalid_received_at", 0, receivedAt="yesterday"),
                ev("invalid_received_at", 1, receivedAt=1763719200000),
                ev("invalid_received_at", 2, receivedAt="2026-13-45T99:00"),
            ],
            quarantined("invalid_received_at"),
        )
    )
    add(
        Case(
            "unknown_type",
            [
                ev("unknown_type", i, type=t)
                for i, t in enumerate(["TRACK", "trak", 3, ["track"], "track "])
            ],
            quarantined("unknown_type"),
        )
    )
    add(
        Case(
            "missing_user_ids",
            [
                ev("missing_user_ids", 0, anonymousId=OMIT),
                ev("missing_user_ids", 1, anonymousId="", userId=""),
                ev("missing_user_ids", 2, anonymousId=None, userId=""),
            ],
            quarantined("missing_user_id"),
        )
    )
    add(
        Case(
            "user_id_number",
            [ev("user_id_number", anonymousId=OMIT, userId=12345)],
            row(T("user_id_number"), "user_id", STRING, "12345", absent=("anonymous_id",)),
        )
    )

    # ---- duplicates -----------------------------------------------------------------------
    dup = "dup_different_bodies:x"
    add(
        Case(
            "dup_different_bodies",
            [
                props("dup_different_bodies", {"v": "late"}, messageId=dup, minute=30),
                props("dup_different_bodies", {"v": "early"}, messageId=dup, minute=10),
            ],
            [duplicate(dup), row(T("dup_different_bodies"), "properties_v", STRING, "early")],
        )
    )
    dup = "dup_same_received_at:x"
    add(
        Case(
            "dup_same_received_at",
            [
                props("dup_same_received_at", {"v": "first"}, messageId=dup, minute=20),
                props("dup_same_received_at", {"v": "second"}, messageId=dup, minute=20),
            ],
            [row(T("dup_same_received_at"), "properties_v", STRING, "first"), duplicate(dup)],
        )
    )
    dup = "dup_across_hours:x"
    add(
        Case(
            "dup_across_hours",
            [
                props("dup_across_hours", {"v": "hour10"}, messageId=dup, minute=59),
                at(
                    LATE_HOUR,
                    props(
                        "dup_across_hours", {"v": "hour11"}, messageId=dup, hour=LATE_HOUR, minute=1
                    ),
                ),
            ],
            [row(T("dup_across_hours"), "properties_v", STRING, "hour10"), duplicate(dup)],
        )
    )
    # The earliest receivedAt wins even when it was archived in the later hour.
    dup = "dup_earliest_in_later_file:x"
    add(
        Case(
            "dup_earliest_in_later_file",
            [
                props("dup_earliest_in_later_file", {"v": "a"}, messageId=dup, minute=40),
                at(
                    LATE_HOUR,
                    props("dup_earliest_in_later_file", {"v": "b"}, messageId=dup, minute=20),
                ),
            ],
            [
                duplicate(dup),
                row(T("dup_earliest_in_later_file"), "properties_v", STRING, "b", hour=LATE_HOUR),
            ],
        )
    )
    same = props("dup_identical_lines", {"v": 1})
    add(
        Case(
            "dup_identical_lines",
            [same, same, same],
            [row(T("dup_identical_lines"), "properties_v", BIGINT, 1), duplicate(), duplicate()],
        )
    )
    dup = "dup_across_tables:x"
    add(
        Case(
            "dup_across_tables",
            [
                dumps(
                    {
                        "type": "identify",
                        "messageId": dup,
                        "userId": "u-dup",
                        "receivedAt": f"{MAIN_HOUR}:01:00.000Z",
                        "traits": {"dupAcrossTables": "i"},
                    }
                ),
                ev("dup_across_tables", messageId=dup, minute=2),
            ],
            [row("identifies", "traits_dup_across_tables", STRING, "i"), duplicate(dup)],
        )
    )
    dup = "dup_with_rejected_twin:x"
    add(
        Case(
            "dup_with_rejected_twin",
            [
                ev("dup_with_rejected_twin", messageId=dup, type=OMIT, minute=1),
                ev("dup_with_rejected_twin", messageId=dup, minute=2),
            ],
            [quarantined("missing_type"), row(T("dup_with_rejected_twin"))],
        )
    )

    # ---- a property whose type changes every hour for a day --------------------------------
    add(
        Case(
            "type_changes_every_hour",
            [
                at(
                    DAY_HOURS[h],
                    props(
                        "type_changes_every_hour",
                        {"flip": _type_flip_value(h)},
                        h,
                        hour=DAY_HOURS[h],
                        minute=30,
                    ),
                )
                for h in range(24)
            ],
            [_type_flip_expect(h) for h in range(24)],
        )
    )

    # ---- other call types and odd shapes ----------------------------------------------------
    add(
        Case(
            "identify_hostile_traits",
            [
                dumps(
                    {
                        "type": "identify",
                        "messageId": "identify_hostile_traits:0",
                        "userId": "u-1",
                        "receivedAt": f"{MAIN_HOUR}:00:00.000Z",
                        "traits": {
                            "Email Address": "x@y",
                            "../../etc": 1,
                            "hostileName": "A",
                            "hostile_name": "A",
                        },
                    }
                )
            ],
            row(
                "identifies",
                columns={
                    "traits_email_address": Col(STRING, "x@y"),
                    "traits_etc": Col(BIGINT, 1),
                    "traits_hostile_name": Col(STRING, "A"),
                },
            ),
        )
    )
    add(
        Case(
            "page_name_traversal",
            [
                dumps(
                    {
                        "type": "page",
                        "messageId": "page_name_traversal:0",
                        "anonymousId": "a",
                        "receivedAt": f"{MAIN_HOUR}:00:00.000Z",
                        "name": "../../etc/passwd",
                        "properties": {"path": "/../../etc/passwd"},
                    }
                )
            ],
            row(
                "pages",
                columns={
                    "name": Col(STRING, "../../etc/passwd"),
                    "properties_path": Col(STRING, "/../../etc/passwd"),
                },
            ),
        )
    )
    add(
        Case(
            "screen_name_sql",
            [
                dumps(
                    {
                        "type": "screen",
                        "messageId": "screen_name_sql:0",
                        "anonymousId": "a",
                        "receivedAt": f"{MAIN_HOUR}:00:00.000Z",
                        "name": "'; DROP TABLE screens; --",
                    }
                )
            ],
            row("screens", "name", STRING, "'; DROP TABLE screens; --"),
        )
    )
    add(
        Case(
            "alias_numeric_previous_id",
            [
                dumps(
                    {
                        "type": "alias",
                        "messageId": "alias_numeric_previous_id:0",
                        "userId": "u-2",
                        "previousId": 5,
                        "receivedAt": f"{MAIN_HOUR}:00:00.000Z",
                    }
                )
            ],
            row("aliases", "previous_id", STRING, "5"),
        )
    )
    add(
        Case(
            "properties_not_an_object",
            [ev("properties_not_an_object", properties="text")],
            row(T("properties_not_an_object"), "properties", STRING, "text"),
        )
    )
    add(
        Case(
            "context_is_an_array",
            [ev("context_is_an_array", context=[1, "x"])],
            json_text(T("context_is_an_array"), "context", [1, "x"]),
        )
    )
    return c


CASES: list[Case] = _cases()
assert len({c.name for c in CASES}) == len(CASES), "case names are unique"
