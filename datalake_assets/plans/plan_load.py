"""``load_plan(path)``: a tracking plan from any of the shapes teams hold (issue #56).

* ``segment-public-api``: Segment's Public API rules, ``{"rules": [{"key", "type", "version",
  "jsonSchema"}]}``, bare or as the API returns it (``{"data": {"trackingPlan": {...}}}``,
  ``{"data": {"rules": [...]}}``, ``{"trackingPlan": {...}}``); ``type`` is TRACK, IDENTIFY,
  GROUP, PAGE, SCREEN or COMMON.
* ``segment-config-api``: the older Config API plan, ``{"name", "display_name", "rules":
  {"events": [RuleMetadata], "global": [...], "identify_traits": [...], "group_traits":
  [...]}}`` with ``RuleMetadata = {name, version, rules: <JSON Schema>}`` (typewriter's types;
  its plan-creation shape's single schemas ``global``, ``identify``, ``group`` too).
* ``schema-folder``: a folder of ``*.json`` files, one JSON Schema per track event, version 1;
  the event is the schema's ``title``, else the file's name without ``.json``.

A rule's schema wraps the message (``properties.properties``, ``properties.traits``,
``properties.context``) as Segment's do; a schema that does not (its properties are the
event's own) is taken as the kind's main section. Every problem is one ``PlanError`` line
naming the file and the JSON path (``$.rules[2].jsonSchema...``).
"""

from __future__ import annotations

import json
from pathlib import Path

from datalake_assets.plans.plan_model import (
    KINDS,
    MAIN_SECTION,
    SECTIONS,
    PlanError,
    PlanRule,
    TrackingPlan,
    make_plan,
    make_rule,
)
from datalake_assets.plans.plan_schema import check_schema

PUBLIC_API = "segment-public-api"
CONFIG_API = "segment-config-api"
SCHEMA_FOLDER = "schema-folder"
SHAPES = (PUBLIC_API, CONFIG_API, SCHEMA_FOLDER)
# Config API rule lists: key -> the kind of its rules
CONFIG_LISTS = {
    "events": "track",
    "global": "common",
    "identify_traits": "identify",
    "group_traits": "group",
}
CONFIG_SINGLE = {"identify": "identify", "group": "group"}  # typewriter's creation shape


def load_plan(path: str | Path) -> TrackingPlan:
    """The plan in ``path`` (a file, or a folder of schemas); ``PlanError`` if it is not one."""
    path = Path(path)
    if path.is_dir():
        return _load_folder(path)
    return plan_from_document(_read_json(path), str(path))


def plan_from_document(doc: object, where: str) -> TrackingPlan:
    """A plan from a file's decoded JSON (``where`` names it in errors)."""
    root, at = doc, "$"
    if isinstance(root, dict) and isinstance(root.get("data"), dict):
        root, at = root["data"], f"{at}.data"
    if isinstance(root, dict) and isinstance(root.get("trackingPlan"), dict):
        root, at = root["trackingPlan"], f"{at}.trackingPlan"
    rules = root.get("rules") if isinstance(root, dict) else None
    if isinstance(rules, list):
        return _load_public(root, rules, where, at)
    if isinstance(rules, dict) and set(rules) & (set(CONFIG_LISTS) | set(CONFIG_SINGLE)):
        return _load_config(root, rules, where, f"{at}.rules")
    raise PlanError(
        f"{where}: {at}: not a tracking plan: expected Segment's Public API rules "
        '({"rules": [...]}), its Config API plan ({"rules": {"events": [...], ...}}) '
        "or a folder of JSON Schema files"
    )


def _read_json(path: Path) -> object:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PlanError(f"{path}: no such file or folder") from None
    except (OSError, UnicodeDecodeError) as e:
        raise PlanError(f"{path}: cannot be read: {e}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise PlanError(f"{path}: not JSON: {e.msg} at line {e.lineno} column {e.colno}") from None


def _plan_names(root: dict, default: str) -> tuple[str, str]:
    plan_id = root.get("id") or root.get("name") or default
    name = root.get("display_name") or root.get("displayName") or root.get("name") or plan_id
    return str(plan_id), str(name)


def _load_public(root: dict, rules: list, where: str, at: str) -> TrackingPlan:
    out = []
    for i, rule in enumerate(rules):
        here = f"{at}.rules[{i}]"
        if not isinstance(rule, dict):
            raise PlanError(f"{where}: {here}: a rule must be an object")
        kind = rule.get("type")
        if not isinstance(kind, str) or kind.lower() not in KINDS:
            raise PlanError(
                f"{where}: {here}.type: missing or unknown rule type {kind!r} (one of "
                f"{', '.join(k.upper() for k in KINDS)})"
            )
        kind = kind.lower()
        key = rule.get("key")
        if key is None and kind != "track":
            key = ""
        if not isinstance(key, str) or (kind == "track" and not key):
            raise PlanError(f"{where}: {here}.key: a TRACK rule needs its event name as key")
        version = _version(rule.get("version", 1), where, f"{here}.version")
        schema = rule.get("jsonSchema")
        if schema is None:
            schema = {}
        out.append(_rule(kind, key, version, schema, where, f"{here}.jsonSchema"))
    plan_id, name = _plan_names(root, Path(where).stem)
    return _finish(plan_id, name, PUBLIC_API, out, where)


def _load_config(root: dict, rules: dict, where: str, at: str) -> TrackingPlan:
    out = []
    for list_key, kind in CONFIG_LISTS.items():
        entries = rules.get(list_key)
        if entries is None:
            continue
        if isinstance(entries, dict):  # typewriter's creation shape: one schema
            out.append(_rule(kind, "", 1, entries, where, f"{at}.{list_key}"))
            continue
        if not isinstance(entries, list):
            raise PlanError(f"{where}: {at}.{list_key}: must be a list of rules")
        for i, entry in enumerate(entries):
            here = f"{at}.{list_key}[{i}]"
            if not isinstance(entry, dict):
                raise PlanError(f"{where}: {here}: a rule must be an object")
            key = entry.get("name", "") if kind == "track" else ""
            if not isinstance(key, str) or (kind == "track" and not key):
                raise PlanError(f"{where}: {here}.name: an event rule needs the event's name")
            version = _version(entry.get("version", 1), where, f"{here}.version")
            schema = entry.get("rules")
            if schema is None:
                raise PlanError(f"{where}: {here}.rules: missing: the rule's JSON Schema")
            out.append(_rule(kind, key, version, schema, where, f"{here}.rules"))
    for single, kind in CONFIG_SINGLE.items():
        if rules.get(single) is not None:
            out.append(_rule(kind, "", 1, rules[single], where, f"{at}.{single}"))
    plan_id, name = _plan_names(root, Path(where).stem)
    return _finish(plan_id, name, CONFIG_API, out, where)


def _load_folder(folder: Path) -> TrackingPlan:
    files = sorted(p for p in folder.iterdir() if p.suffix == ".json" and p.is_file())
    if not files:
        raise PlanError(f"{folder}: a plan folder holds one JSON Schema file per event; none")
    out = []
    for file in files:
        schema = _read_json(file)
        where = str(file)
        title = schema.get("title") if isinstance(schema, dict) else None
        event = title if isinstance(title, str) and title else file.stem
        out.append(_rule("track", event, 1, schema, where, "$"))
    return _finish(folder.name, folder.name, SCHEMA_FOLDER, out, str(folder))


def _version(value: object, where: str, at: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PlanError(f"{where}: {at}: a rule's version is a whole number from 1, not {value!r}")
    return value


def _rule(kind: str, key: str, version: int, schema: object, where: str, at: str) -> PlanRule:
    """A rule from its schema: checked, then unwrapped into its sections."""
    try:
        check_schema(schema, at)
    except PlanError as e:
        raise PlanError(f"{where}: {e}") from None
    assert isinstance(schema, dict)
    props = schema.get("properties", {})
    if props and set(props) <= set(SECTIONS):  # Segment's wrapper around the message
        sections = {s: props[s] for s in SECTIONS if s in props}
    else:  # the event's own properties (a folder's schema, a bare traits schema)
        sections = {MAIN_SECTION[kind]: schema} if schema else {}
    return make_rule(kind, key, version, sections)


def _finish(plan_id: str, name: str, shape: str, rules: list, where: str) -> TrackingPlan:
    seen = set()
    for r in rules:
        if (r.kind, r.key, r.version) in seen:
            raise PlanError(f"{where}: two rules for {r.label}")
        seen.add((r.kind, r.key, r.version))
    return make_plan(plan_id, name, shape, rules, where)
