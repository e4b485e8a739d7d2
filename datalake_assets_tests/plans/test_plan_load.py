"""Tracking plans read from the shapes teams hold (``plans/plan_load.py``): Segment's Public API
rules (and the wrappers its responses come in), its older Config API plan, a folder of JSON
Schemas; the columns each rule declares, named as the lake names them; version selection as
Segment's; the plan's hash; every refusal as one line naming the file and the JSON path; and
``datalake plan validate`` as a user runs it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from datalake_assets.plans.plan_load import CONFIG_API, PUBLIC_API, SCHEMA_FOLDER, load_plan
from datalake_assets.plans.plan_model import PlanError, select_rule
from datalake_assets.plans.plan_schema import SUPPORTED
from datalake_assets_tests.test_cli import run_datalake

DATA = Path(__file__).parent / "data"
SEGMENT = DATA / "segment_public_api.json"
CONFIG = DATA / "segment_config_api.json"
FOLDER = DATA / "schema_folder"


def segment_rules() -> list[dict]:
    return json.loads(SEGMENT.read_text())["data"]["rules"]


def columns(rule) -> dict:
    return {p.column: p for p in rule.properties}


# ------------------------------------------------------------------ the three shapes


def test_segment_public_api_rules():
    plan = load_plan(SEGMENT)
    assert plan.shape == PUBLIC_API
    assert [r.label for r in plan.rules] == [
        "track Order Completed v1",
        "track Order Completed v2",
        "track Product Viewed v1",
        "track Signed Up v1",
        "identify v1",
        "group v1",
        "common v1",
    ]
    assert len(plan.hash) == 64 and plan.id == "segment_public_api"
    identify = plan.rules_of("identify")[0]
    # json_schema: the traits object's schema, unwrapped from properties.traits
    assert identify.json_schema["required"] == ["email"]
    assert set(identify.json_schema["properties"]) == {"email", "firstName", "age", "createdAt"}


@pytest.mark.parametrize(
    "wrap",
    [
        lambda rules: {"rules": rules},
        lambda rules: {"trackingPlan": {"id": "tp_web", "name": "Web", "rules": rules}},
        lambda rules: {"data": {"trackingPlan": {"id": "tp_web", "name": "Web", "rules": rules}}},
    ],
    ids=["bare", "trackingPlan", "data.trackingPlan"],
)
def test_the_public_api_wrappers_give_the_same_rules(tmp_path, wrap):
    file = tmp_path / "web.json"
    file.write_text(json.dumps(wrap(segment_rules())))
    plan = load_plan(file)
    assert plan.shape == PUBLIC_API
    assert plan.hash == load_plan(SEGMENT).hash
    if "trackingPlan" in file.read_text():
        assert (plan.id, plan.name) == ("tp_web", "Web")


def test_segment_config_api_plan():
    plan = load_plan(CONFIG)
    assert plan.shape == CONFIG_API
    assert plan.name == "Mobile App"
    assert [r.label for r in plan.rules] == [
        "track Playlist Created v1",
        "track Song Played v1",
        "track Song Played v2",
        "identify v1",
        "common v1",
    ]
    # identify_traits' schema is the traits' own (no wrapper): read as the traits section
    assert set(columns(plan.rules_of("identify")[0])) == {"traits_email", "traits_plan"}
    assert set(columns(plan.rules_of("common")[0])) == {"context_locale"}
    song = select_rule(plan, "track", "Song Played", None)
    assert song.version == 2 and columns(song)["properties_source"].enum == (
        "search",
        "playlist",
        "radio",
    )


def test_a_folder_of_json_schemas():
    plan = load_plan(FOLDER)
    assert plan.shape == SCHEMA_FOLDER
    # the title names the event, else the file's name
    assert [r.label for r in plan.rules] == [
        "track Order Completed v1",
        "track checkout_started v1",
    ]
    order = columns(plan.rules[0])
    assert {c: p.required for c, p in order.items()} == {
        "properties_order_id": True,
        "properties_total": True,
        "properties_items": False,
    }
    assert set(columns(plan.rules[1])) == {
        "properties_step",
        "properties_cart_value",
        "properties_cart_currency",
    }


# ------------------------------------------------------------------ what a rule declares


def test_properties_are_flattened_and_named_as_the_lake_names_columns():
    plan = load_plan(SEGMENT)
    v2 = columns(select_rule(plan, "track", "Order Completed", 2))
    assert list(v2) == [
        "properties_order_id",
        "properties_revenue",
        "properties_currency",
        "properties_products",
        "properties_subtotal",
        "properties_coupon",
        "properties_completed_at",  # completedAt, snake_cased as the lake does
        "properties_shipping_address_city",
        "properties_shipping_address_zip",
    ]
    city = v2["properties_shipping_address_city"]
    assert city.path == ("properties", "shipping_address", "city") and city.required
    assert not v2["properties_shipping_address_zip"].required
    assert v2["properties_shipping_address_zip"].pattern == "^[0-9]{5}$"
    assert v2["properties_completed_at"].format == "date-time"
    assert v2["properties_products"].json_types == ("array",)  # an array: one column
    assert v2["properties_coupon"].nullable and v2["properties_coupon"].max_length == 32
    assert v2["properties_currency"].enum == ("USD", "EUR", "GBP")
    assert v2["properties_revenue"].minimum == 0
    assert select_rule(plan, "track", "Order Completed", 2).closed == (("properties",),)
    identify = columns(plan.rules_of("identify")[0])
    assert identify["traits_first_name"].json_types == ("string",)
    assert identify["traits_age"].maximum == 150
    common = columns(plan.rules_of("common")[0])
    assert common["context_app_version"].required


def test_version_selection_follows_segment():
    plan = load_plan(SEGMENT)
    assert select_rule(plan, "track", "Order Completed", 1).version == 1
    assert select_rule(plan, "track", "Order Completed", 2).version == 2
    assert select_rule(plan, "track", "Order Completed", None).version == 2  # the latest
    assert select_rule(plan, "track", "Order Completed", 7).version == 2  # no such version
    assert select_rule(plan, "track", "Product Viewed", 2).version == 1
    assert select_rule(plan, "track", "Order Refunded", None) is None  # unplanned
    assert select_rule(plan, "identify", "", None).kind == "identify"
    assert select_rule(plan, "page", "Home", None) is None


def test_the_hash_is_stable_across_key_and_rule_order(tmp_path):
    def reordered(value):
        if isinstance(value, dict):
            return {k: reordered(value[k]) for k in reversed(list(value))}
        if isinstance(value, list):
            return [reordered(v) for v in value]
        return value

    file = tmp_path / "plan.json"
    file.write_text(json.dumps({"rules": reordered(segment_rules())[::-1]}))
    assert load_plan(file).hash == load_plan(SEGMENT).hash
    rules = segment_rules()
    rules[2]["jsonSchema"]["properties"]["properties"]["properties"]["price"]["type"] = "integer"
    file.write_text(json.dumps({"rules": rules}))
    assert load_plan(file).hash != load_plan(SEGMENT).hash


# ------------------------------------------------------------------ refusals


def track(props: dict, **rule) -> dict:
    schema = {"type": "object", "properties": {"properties": {"type": "object", **props}}}
    return {
        "rules": [{"key": "Signed Up", "type": "TRACK", "version": 1, "jsonSchema": schema, **rule}]
    }


AT = "$.rules[0].jsonSchema.properties.properties"
BAD = {
    "not_json": ('{"rules": [', "not JSON: Expecting value at line 1 column 12"),
    "unknown_shape": ({"events": []}, "$: not a tracking plan"),
    "rule_without_type": (
        {"rules": [{"key": "Signed Up", "jsonSchema": {}}]},
        "$.rules[0].type: missing or unknown rule type None",
    ),
    "unknown_type": (
        {"rules": [{"key": "x", "type": "ALIAS", "jsonSchema": {}}]},
        "$.rules[0].type: missing or unknown rule type 'ALIAS'",
    ),
    "track_without_key": (
        {"rules": [{"type": "TRACK", "version": 1, "jsonSchema": {}}]},
        "$.rules[0].key: a TRACK rule needs its event name as key",
    ),
    "bad_version": (track({}, version="2"), "$.rules[0].version: a rule's version is a whole"),
    "bad_type": (
        track({"properties": {"plan": {"type": "strin"}}}),
        f"{AT}.properties.plan.type: must be one of array, boolean",
    ),
    "bad_required": (track({"required": "plan"}), f"{AT}.required: must be a list"),
    "bad_min_length": (
        track({"properties": {"plan": {"minLength": -1}}}),
        f"{AT}.properties.plan.minLength: must be a whole number of at least 0",
    ),
    "bad_pattern": (
        track({"properties": {"plan": {"pattern": "(ab"}}}),
        f"{AT}.properties.plan.pattern: not a regular expression",
    ),
    "unsupported_keyword": (
        track({"properties": {"plan": {"oneOf": [{"type": "string"}]}}}),
        f"{AT}.properties.plan.oneOf: JSON Schema keyword 'oneOf' is not supported (supported: "
        + ", ".join(SUPPORTED),
    ),
    "unsupported_format": (
        track({"properties": {"email": {"type": "string", "format": "email"}}}),
        f"{AT}.properties.email.format: format 'email' is not supported (supported: date-time)",
    ),
    "additional_properties_schema": (
        track({"additionalProperties": {"type": "string"}}),
        f"{AT}.additionalProperties: only true or false is supported",
    ),
    "two_rules_for_one_version": (
        {"rules": track({})["rules"] * 2},
        "two rules for track Signed Up v1",
    ),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_an_invalid_plan_is_one_line_naming_the_file_and_path(tmp_path, name):
    doc, expected = BAD[name]
    file = tmp_path / "web.json"
    file.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    with pytest.raises(PlanError) as e:
        load_plan(file)
    message = str(e.value)
    assert message.startswith(f"{file}: ") and "\n" not in message
    assert expected in message, message


def test_folder_refusals(tmp_path):
    with pytest.raises(PlanError, match="one JSON Schema file per event; none"):
        load_plan(tmp_path)
    shutil.copy(FOLDER / "order_completed.json", tmp_path)
    (tmp_path / "broken.json").write_text('{"type": "object", "properties": {"x": {"type": 1}}}')
    with pytest.raises(PlanError) as e:
        load_plan(tmp_path)
    assert str(e.value).startswith(f"{tmp_path / 'broken.json'}: $.properties.x.type: ")
    with pytest.raises(PlanError, match="no such file or folder"):
        load_plan(tmp_path / "missing.json")


# ------------------------------------------------------------------ the command


def test_reading_a_plan_imports_no_data_library():
    """The plans are pure rules like ``spec``: the CLI and the settings can read one cheaply
    (and ``jsonschema``, not a runtime dependency, is never needed)."""
    code = (
        "import sys\n"
        "from datalake_assets.plans.plan_load import load_plan\n"
        f"load_plan({str(SEGMENT)!r})\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'pyarrow', 'pandas', 'numpy', 'pyspark', 'dagster', 'duckdb', 'jsonschema'}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_datalake_plan_validate(tmp_path):
    done = run_datalake(tmp_path, "plan", "validate", str(SEGMENT), settings=False, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == (
        f"valid: segment-public-api, 7 rules (3 track events, identify traits: yes, group "
        f"traits: yes, page: no, screen: no, common: yes), plan hash {load_plan(SEGMENT).hash[:12]}"
    )
    assert lines[1:] == [
        "track Order Completed v1: 4 properties (1 required)",
        "track Order Completed v2: 9 properties (3 required)",
        "track Product Viewed v1: 4 properties (1 required)",
        "track Signed Up v1: 2 properties (1 required)",
        "identify v1: 4 properties (1 required)",
        "group v1: 3 properties (1 required)",
        "common v1: 1 property (1 required)",
    ]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(BAD["unsupported_keyword"][0]))
    done = run_datalake(tmp_path, "plan", "validate", str(bad), settings=False, timeout=60)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith(f"invalid: {bad}: {AT}.properties.plan.oneOf: ")
