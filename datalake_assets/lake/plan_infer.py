"""A first tracking plan drafted from what a source sent (``datalake plan infer``): how most
teams start. The archive's messages of the last days are read (up to a number of them), and
each track event, identify, group, page and screen gets a rule in Segment's Public API shape
(``{"rules": [{"key", "type", "version", "jsonSchema"}]}``, draft-07 wrapping the message's
``properties`` or ``traits``) that every one of those messages keeps to:

* a key's ``type`` is the JSON type all its values had (``integer`` when every number was
  whole; ``number`` when some were not; ``null`` beside it when some values were null); a key
  sent with several types gets none (any value), as the lake then infers its column;
* a string whose every value was an RFC 3339 date-time gets ``format: date-time`` (a
  timestamp column);
* ``required``: the keys every message of the event sent (in an object: every message that
  sent the object);
* objects are planned field by field, to the lake's nesting depth; arrays are ``array``.

A team then reviews the draft (``datalake plan validate``, ``plan check``), tightens it (enums,
patterns, ``additionalProperties``), and points ``tracking_plan`` at it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from datalake_assets.lake import storage
from datalake_assets.plans.plan_model import MAIN_SECTION
from datalake_assets.plans.plan_verdict import is_date_time, is_type
from datalake_assets.spec import layout
from datalake_assets.spec.messages import DEFAULT_MAX_MESSAGE_BYTES, Rejected, decode, validate

MAX_DEPTH = 5  # objects deeper than this are one value of any type


@dataclass
class _Key:
    """What the values of one key were."""

    seen: int = 0
    kinds: Counter[str] = field(default_factory=Counter)  # JSON kind -> values
    all_date_times: bool = True
    children: dict[str, _Key] = field(default_factory=dict)  # an object's keys
    objects: int = 0  # values that were objects


@dataclass
class _Rule:
    kind: str
    key: str
    messages: int = 0
    fields: dict[str, _Key] = field(default_factory=dict)


@dataclass
class Inferred:
    document: dict  # the plan, Segment's Public API shape
    messages: int  # messages read
    hours: int  # archive hours read


def infer(
    archive_root: str,
    source_id: str,
    end: datetime,
    days: int,
    max_messages: int = 200_000,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> Inferred:
    """The draft from the source's archive hours of the ``days`` before ``end`` (UTC)."""
    rules: dict[tuple[str, str], _Rule] = {}
    read = hours = 0
    start = layout.ArchiveHour.parse(end.strftime("%Y-%m-%dT%H")).start - timedelta(days=days)
    for n in range(days * 24 + 1):
        hour = layout.ArchiveHour.parse((start + timedelta(hours=n)).strftime("%Y-%m-%dT%H"))
        directory = layout.archive_hour_dir(archive_root, source_id, hour)
        files = [loc for loc, _ in storage.list_files(directory) if layout.is_archive_file(loc)]
        hours += bool(files)
        for location in files:
            for raw in storage.iter_lines(location):
                if read >= max_messages:
                    break
                if raw.strip() and _take(raw, max_message_bytes, rules):
                    read += 1
    document = {
        "name": f"{source_id} (inferred from {read} messages)",
        "rules": [_rule(r) for _, r in sorted(rules.items())],
    }
    return Inferred(document, read, hours)


def _take(raw: bytes, max_bytes: int, rules: dict[tuple[str, str], _Rule]) -> bool:
    try:
        obj = decode(raw, max_bytes)
        kind = validate(obj)[0]
    except Rejected:
        return False
    if kind not in MAIN_SECTION or kind == "common":
        return False  # an alias has nothing a plan describes
    key = obj.get("event") if kind == "track" else ""
    rule = rules.setdefault((kind, key), _Rule(kind, key))  # type: ignore[arg-type]
    rule.messages += 1
    section = obj.get(MAIN_SECTION[kind])  # type: ignore[union-attr]
    if isinstance(section, dict):
        _observe(section, rule.fields, 1)
    return True


def _observe(obj: dict, fields: dict[str, _Key], depth: int) -> None:
    for name, value in obj.items():
        k = fields.setdefault(name, _Key())
        k.seen += 1
        kind = _kind(value)
        k.kinds[kind] += 1
        if kind != "string" or not is_date_time(value):
            k.all_date_times = k.all_date_times and kind == "null"
        if kind == "object" and depth < MAX_DEPTH:
            k.objects += 1
            _observe(value, k.children, depth + 1)


def _kind(value: object) -> str:
    for name in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if is_type(value, name):
            return name
    return "any"


def _schema(k: _Key) -> dict:
    kinds = set(k.kinds) - {"null"}
    if kinds == {"integer", "number"}:
        kinds = {"number"}
    out: dict = {}
    if len(kinds) == 1:
        (only,) = kinds
        out["type"] = [only, "null"] if "null" in k.kinds else only
        if only == "string" and k.all_date_times:
            out["format"] = "date-time"
        if only == "object" and k.children:
            out.update(_object(k.children, k.objects))
    return out


def _object(fields: dict[str, _Key], messages: int) -> dict:
    out: dict = {"properties": {name: _schema(k) for name, k in sorted(fields.items())}}
    required = sorted(name for name, k in fields.items() if k.seen == messages)
    if required:
        out["required"] = required
    return out


def _rule(r: _Rule) -> dict:
    section = MAIN_SECTION[r.kind]
    body = {"type": "object", **_object(r.fields, r.messages)}
    return {
        "key": r.key,
        "type": r.kind.upper(),
        "version": 1,
        "jsonSchema": {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {section: body},
        },
    }
