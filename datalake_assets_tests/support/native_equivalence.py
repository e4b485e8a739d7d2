"""Stage A through the native parse and through the Python path, side by side, and what each
wrote in a form that compares value by value (``transform/native_parse.py``'s equivalence).

A work-file column may be a plain Arrow array in one path and a ``MIXED`` (text, kind) array in
the other (each batch's columns are typed from that batch's values); what must be equal is
every row's value text and kind, the rows' problems, the kind counts, the key rows, the
identity index entries, the suppressed counts and every quarantine record.
"""

from __future__ import annotations

import json
import random

import pyarrow as pa
import pyarrow.parquet as pq

from datalake_assets.spec.column_build import MIXED
from datalake_assets.spec.column_kinds import value_kinds
from datalake_assets.spec.types import STRING, cast
from datalake_assets.transform import keys, native_parse
from datalake_assets.transform.identity_tally import IDENTITY, read_entries
from datalake_assets.transform.stage_a import STATS, StageAConfig, run_stage_a
from datalake_assets.transform.stage_a_stats import merge_stats

HOUR = "2026112110"


def run_stage_a_on(
    root: str, files: list[str], native: bool, monkeypatch=None, **cfg
) -> tuple[dict, int]:
    """Stage A over ``files`` through one path: ``(normalized output, lines the native
    parse left to the Python path)``."""
    batch = pa.RecordBatch.from_pydict(
        {"file_idx": list(range(len(files))), "location": files, "hour": [HOUR] * len(files)}
    )
    config = StageAConfig(
        cfg.pop("max_message_bytes", 32 * 1024),
        cfg.pop("max_depth", 16),
        "src",
        "run1",
        f"{root}/work",
        f"{root}/quarantine",
        tuple(files),
        **cfg,
    )
    left = [0]
    real = native_parse.parser_for

    def counting(*a):
        p = real(*a)
        parse = p.parse

        def counted(chunk, tally, hour):
            handled = 0
            for result in parse(chunk, tally, hour):
                handled += len(result.handled)
                yield result
            left[0] += len(chunk) - handled

        p.parse = counted  # type: ignore[method-assign]
        return p

    monkeypatch.setattr(native_parse, "parser_for", counting if native else lambda *a: None)
    monkeypatch.setattr(native_parse, "MIN_NATIVE_LINES", 1)  # small test files go native too
    try:
        out = pa.Table.from_batches(list(run_stage_a(iter([batch]), config))).to_pydict()
    finally:
        monkeypatch.undo()
        native_parse._LOCAL.parsers = {}  # no shapes carried between the compared runs
    return normalized(out), left[0]


def normalized(out: dict) -> dict:
    payloads = list(zip(out["kind"], out["payload"]))
    stats = merge_stats([p for k, p in payloads if k == STATS])
    rows: dict = {}
    for table, _, file_idx, location, _ in stats.work_files:
        t = pa.ipc.open_file(location).read_all()
        lines = t.column("#line").to_pylist()
        at = {ln: rows.setdefault((table, file_idx, ln), {}) for ln in lines}
        for i, (mid, probs) in enumerate(
            zip(t.column("#message_id").to_pylist(), t.column("#problems").to_pylist())
        ):
            at[lines[i]].update({"#id": mid, "#problems": probs})
        for c in t.column_names:
            if c.startswith("#"):
                continue
            arr = t.column(c).combine_chunks()
            kinds = value_kinds(arr).to_pylist()
            values = arr.to_pylist()
            for i, v in enumerate(values):
                if v is not None:
                    text = v["text"] if arr.type == MIXED else cast(v, STRING)
                    at[lines[i]][c] = (text, kinds[i])
    quarantine = []
    for _, location, _, _ in stats.quarantine_files:
        quarantine += pq.read_table(location).to_pylist()
    key_rows = keys.decode(p for k, p in payloads if k == keys.KEYS).to_pylist()
    entries = read_entries([p for k, p in payloads if k == IDENTITY]).to_pylist()
    return {
        "lines_in": stats.lines_in,
        "messages": stats.messages,
        "counts": stats.counts,
        "lines_quarantined": stats.lines_quarantined,
        "suppressed": stats.suppressed,
        "rows": rows,
        "quarantine": sorted(quarantine, key=lambda r: (r["archive_file"], r["line_number"])),
        "keys": sorted(key_rows, key=lambda r: (r["file_idx"], r["line_no"])),
        "identity": sorted(entries, key=repr),
    }


def differences(a: dict, b: dict, limit: int = 10) -> list[str]:
    """What differs between two normalized outputs (empty: equal)."""
    out = [f"{k}: {a[k]!r:.300} != {b[k]!r:.300}" for k in a if k != "rows" and a[k] != b[k]]
    for key in sorted(set(a["rows"]) | set(b["rows"]), key=repr):
        ra, rb = a["rows"].get(key), b["rows"].get(key)
        if ra != rb:
            cols = sorted(set(ra or {}) | set(rb or {}))
            diff = {
                c: ((ra or {}).get(c), (rb or {}).get(c))
                for c in cols
                if (ra or {}).get(c) != (rb or {}).get(c)
            }
            out.append(f"row {key}: {diff!r:.400}")
            if len(out) >= limit:
                break
    return out


# ------------------------------------------------------------------------ generated traffic

_VALUES = [
    0,
    -0,
    1,
    -7,
    2**63 - 1,
    2**63,
    -(2**63),
    -(2**63) - 1,
    2**64 + 1,
    10**30,
    1.0,
    -0.0,
    1.5,
    1e16,
    1e-7,
    5e-324,
    1.7976931348623157e308,
    123456789.123,
    "1",
    "007",
    "1.5",
    "1e5",
    "true",
    "False",
    "",
    " ",
    "x",
    "2026-11-21T10:00:00Z",
    "2026-02-30T10:00:00Z",
    "2026-11-21 10:00",
    "é",
    "日本",
    "🎉",
    'a"b',
    "back\\slash",
    "tab\there",
    "nul\u0000",
    True,
    False,
    None,
    [],
    [1, "a"],
    [{"k": 1}],
    {},
    {"n": None},
    {"deep": {"er": 1}},
]


def _value(rnd: random.Random, depth: int = 0) -> object:
    r = rnd.random()
    if r < 0.08 and depth < 20:
        return {
            rnd.choice(["a", "b", "B", "c_d", "cD", "x y"]): _value(rnd, depth + 1)
            for _ in range(rnd.randint(0, 3))
        }
    if r < 0.12:
        return [_value(rnd, depth + 1) for _ in range(rnd.randint(0, 3))] if depth < 20 else []
    return rnd.choice(_VALUES)


def generated_line(rnd: random.Random, i: int) -> bytes:
    """A message built to disagree with its neighbours: keys whose type changes from line to
    line, colliding spellings, deep and wide nesting, numbers beyond 64 bits, odd texts; a
    few lines malformed in the ways the two parsers might read differently."""
    props = {
        k: _value(rnd)
        for k in rnd.sample(
            [
                "price",
                "qty",
                "Price",
                "first_name",
                "firstName",
                "tags",
                "meta",
                "%",
                "",
                "utm.source",
                "utm_source",
                "n",
                "when",
            ],
            rnd.randint(1, 6),
        )
    }
    m: dict = {
        "type": rnd.choice(["track"] * 6 + ["identify", "page", "alias", "group"]),
        "messageId": f"m{i}",
        "anonymousId": f"anon-{i % 17}",
        "receivedAt": f"2026-11-21T10:{i % 60:02d}:00.{i % 1000:03d}Z",
        "event": rnd.choice(["Order Completed", "Signed In", "order_completed"]),
        "properties": props,
        "traits": {"email": rnd.choice(["A@b.com ", "c@d.org", 5])},
        "context": {"traits": {"email": "ctx@e.net"}, "page": {"path": "/x"}},
    }
    r = rnd.random()
    if r < 0.05:
        m["userId"] = rnd.choice([42, "u7", "", None, 1.5, True])
    elif r < 0.08:
        m["messageId"] = rnd.choice([17, "", "x" * 300, None, {"a": 1}, 2.0**70])
    elif r < 0.10:
        m["receivedAt"] = rnd.choice(["yesterday", 5, None, "2026-11-21T10:00:00+02:00"])
    elif r < 0.12:
        m["event"] = rnd.choice(["", "   ", "%%", 5, None])
    elif r < 0.13:
        m["type"] = rnd.choice(["Track", 1, None, "screen"])
    elif r < 0.14:
        m["context"] = rnd.choice([None, "flat", {}, {"traits": None}, {"traits": "x"}])
    elif r < 0.15:
        m["properties"] = {"deep": _nest(rnd.randint(14, 22))}
    raw = _dumps(m)
    r = rnd.random()
    if r < 0.01:
        raw = raw[:-1] + b',"messageId":"dup-key"}'  # a key given twice
    elif r < 0.02:
        raw = raw.replace(b'"properties":{', b'"properties":{"n":NaN,', 1)
    elif r < 0.03:
        raw = raw[:-1] + b",}"  # a trailing comma
    elif r < 0.035:
        raw = raw.replace(b'"x"', b'"\xff\xfe"', 1) + b" \xc3"  # invalid UTF-8
    elif r < 0.04:
        raw = json.dumps(m, indent=2, ensure_ascii=False).encode().replace(b"\n", b" ")
    elif r < 0.045:
        raw = raw.replace(b'"m', b'"\\u006d', 1)  # an escaped character in the id
    elif r < 0.05:
        raw = raw.replace(b'"price":', b'"price":100000000000000000000000000000000000000000,', 1)
    elif r < 0.055:
        raw = b"[" + raw + b"]"
    elif r < 0.06:
        raw = b"  "
    return raw


def _dumps(m: dict) -> bytes:
    """Minified JSON with integers of any width (orjson stops at 64 bits)."""
    return json.dumps(m, separators=(",", ":"), ensure_ascii=False).encode()


def _nest(levels: int) -> object:
    v: object = 1
    for i in range(levels):
        v = {f"l{i}": v}
    return v
