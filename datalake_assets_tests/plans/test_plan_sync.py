"""A tracking plan in the sync (issue #56), as a user sets it: ``[[sources]] tracking_plan``
in the settings file, each mode, each violation type, version selection, typed columns from
the first sync, the reconciliation, the violations table in both table formats, erasure, and
a plan change that would narrow a column.

The hour is synced in the driver (``local_path.py``: the sync's own stage A, native parse and
all, without a Spark job) except where the Spark path itself is under test."""

from __future__ import annotations

import json
from collections import Counter
from datetime import timedelta

import pyarrow.parquet as pq
import pytest

from datalake_assets.lake import storage
from datalake_assets.lake.formats import SourceTables, table_format
from datalake_assets.lake.plan_store import read_stored
from datalake_assets.lake.records import read_schema_record
from datalake_assets.lake.sync_status import lake_status
from datalake_assets.plans.plan_load import plan_from_document
from datalake_assets.plans.plan_verdict import VIOLATION_TYPES, verdict
from datalake_assets.privacy.forget import forget
from datalake_assets.privacy.forget_request import ForgetRequest
from datalake_assets.settings import SettingsError
from datalake_assets.settings.formats_section import FormatConfig
from datalake_assets.spec.identity import identity
from datalake_assets.spec.layout import ArchiveHour
from datalake_assets.transform.sync import run_sync
from datalake_assets.transform.sync_request import SyncError, request_from_settings
from datalake_assets_tests.support.archive_builders import msg, write_hour
from datalake_assets_tests.support.settings_files import load_lake_toml

H = "2026-11-21T10"
ORDER = {
    "type": "object",
    "required": ["order_id", "total"],
    "additionalProperties": True,
    "properties": {
        "order_id": {"type": "string", "pattern": "^o[0-9]+$"},
        "total": {"type": "number", "minimum": 0, "maximum": 10000},
        "qty": {"type": "integer"},
        "currency": {"enum": ["USD", "EUR"]},
        "coupon": {"type": ["string", "null"], "minLength": 1, "maxLength": 8},
        "placed_at": {"type": "string", "format": "date-time"},
        "gift": {"type": "boolean"},
        "shipping": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"city": {"type": "string"}},
        },
        "items": {"type": "array", "items": {"type": "object", "required": ["sku"]}},
    },
}
PLAN = {
    "id": "tp_web",
    "name": "Web",
    "rules": [
        {"key": "Order Completed", "type": "TRACK", "version": 2,
         "jsonSchema": {"properties": {"properties": ORDER}}},
        # version 1 planned the total as text: a client that says so is judged by it
        {"key": "Order Completed", "type": "TRACK", "version": 1,
         "jsonSchema": {"properties": {"properties": {
             "type": "object", "properties": {"total": {"type": "string"}}}}}},
        {"type": "IDENTIFY", "version": 1, "jsonSchema": {"properties": {"traits": {
            "type": "object", "properties": {"email": {"type": "string", "pattern": "@"}}}}}},
        {"key": "Home", "type": "PAGE", "version": 1, "jsonSchema": {}},
    ],
}  # fmt: skip
GOOD = {"order_id": "o1", "total": 12, "qty": 2, "currency": "USD", "placed_at": "2026-11-21T10:00:00Z"}  # fmt: skip


def lines() -> list:
    """Each violation type at least once, a duplicate of a violating message, good ones."""
    return [
        msg("good", userId="u1", properties={**GOOD, "note": "not planned"}),
        msg("types", userId="u2", properties={**GOOD, "total": "abc", "qty": 1.5, "gift": "yes"}),
        msg("types", userId="u2", properties={**GOOD, "total": "abc", "qty": 1.5, "gift": "yes"}),
        msg("missing", userId="u1", properties={"total": -1}),
        msg(
            "keywords",
            userId="u3",
            properties={
                **GOOD,
                "order_id": "x 1",
                "total": 20000,
                "currency": "XYZ",
                "coupon": "",
                "placed_at": "yesterday",
                "items": [{"name": "no sku"}],
                "shipping": {"city": "Oslo", "zip": "0150"},
            },
        ),  # fmt: skip
        msg("long", userId="u3", properties={**GOOD, "coupon": "WAY-TOO-LONG"}),
        msg(
            "v1",
            userId="u1",
            properties={**GOOD, "total": "12"},
            context={"protocols": {"event_version": 1}},
        ),  # fmt: skip
        msg("typo", userId="u1", event="Oder Completed", properties={"order_id": "o9"}),
        msg("who", type="identify", userId="u1", traits={"email": "not an address"}),
        msg("home", type="page", userId="u1", name="Home"),
        msg("pricing", type="page", userId="u1", name="Pricing"),
        b'{"broken',
    ]


def settings_for(tmp_path, table_format: str = "segment", **modes):
    (tmp_path / "plans").mkdir(parents=True, exist_ok=True)
    (tmp_path / "plans" / "web.json").write_text(json.dumps(PLAN))
    keys = "".join(f'{k} = "{v}"\n' for k, v in modes.items())
    return load_lake_toml(
        tmp_path,
        f'table_format = "{table_format}"\narchive_root = "archive"\nlake_root = "lake"\n'
        '[catalog]\nbackend = "none"\n'
        f'[[sources]]\nid = "web"\nstart = "2026-11-01-00:00"\ntracking_plan = "plans/web.json"\n'
        f"{keys}",
    )


def without_plan(tmp_path):
    """The same lake's settings without the plan (a lake synced before the plan came)."""
    return load_lake_toml(
        _folder(tmp_path / "no-plan"),
        f'archive_root = "{tmp_path}/archive"\nlake_root = "{tmp_path}/lake"\n'
        '[catalog]\nbackend = "none"\n[[sources]]\nid = "web"\nstart = "2026-11-01-00:00"\n',
    )


def sync(settings, spark=None, hours=(H,)):
    source = settings.sources[0]
    request = request_from_settings(settings, source, hours, replay=False)
    if spark is not None:  # the Spark path, whatever the batch's size
        from dataclasses import replace

        request = replace(request, local_max_bytes=0)
    return run_sync(spark or _no_spark, request)


def _no_spark():
    raise AssertionError("a small batch is synced without Spark")


def table_rows(settings, table: str, hours=(H,)) -> list[dict]:
    """The table's rows as readers read them, in either table format."""
    fmt = table_format(FormatConfig.of_settings(settings), settings.lake_root)
    src = SourceTables("web", "web")
    out = []
    for h in hours:
        for location, _ in fmt.live_files(src, table, ArchiveHour.parse(h).compact):
            fs, path = storage.resolve(location)
            out += pq.read_table(path, filesystem=fs).to_pylist()
    return out


def by_message(rows: list[dict]) -> dict[str, Counter]:
    out: dict[str, Counter] = {}
    for r in rows:
        out.setdefault(r["message_id"], Counter())[(r["violation_type"], r["violation_field"])] += 1
    return out


def reference(messages: list, plan_doc=PLAN) -> dict[str, Counter]:
    """The reference verdict (held to ``jsonschema``) of each distinct message."""
    plan = plan_from_document(plan_doc, "test")
    out: dict[str, Counter] = {}
    for m in messages:
        if isinstance(m, dict) and m["messageId"] not in out:
            found = verdict(plan, m)
            if found:
                out[m["messageId"]] = Counter((v.violation_type, v.field) for v in found)
    return out


def reconciled(report) -> bool:
    s = report.source
    return s.lines_in == s.messages_written + s.duplicates + s.lines_quarantined + s.suppressed


@pytest.mark.parametrize("fmt", ["segment", "iceberg"])
def test_keep_reports_every_violation_and_types_the_planned_columns(tmp_path, fmt):
    settings = settings_for(tmp_path, fmt)
    write_hour(settings.archive_root, "web", H, lines())
    report = sync(settings)
    assert reconciled(report) and report.source.duplicates == 1
    violations = table_rows(settings, "violations")
    # one row per violation of each message kept, the duplicate's not again
    assert by_message(violations) == reference(lines())
    assert {r["violation_type"] for r in violations} == set(VIOLATION_TYPES)
    assert {r["action"] for r in violations} == {"kept"}
    first = next(r for r in violations if r["message_id"] == "types")
    assert (first["tracking_plan_id"], first["tracking_plan_version"]) == ("tp_web", 2)
    assert (first["event_name"], first["event_table"], first["user_id"]) == (
        "Order Completed",
        "order_completed",
        "u2",
    )
    assert "abc" not in first["violation_description"]  # never the value a person sent
    # the plan's types from the first sync, whatever the first event sent (an integer total)
    types = dict(read_schema_record(settings.lake_root, "web")["order_completed"])
    assert {c: types[c] for c in ("properties_total", "properties_qty", "properties_gift")} == {
        "properties_total": "double",
        "properties_qty": "bigint",
        "properties_gift": "boolean",
    }
    assert types["properties_placed_at"] == "timestamp"
    # under keep the row stays; a value that cannot take its planned type is quarantined
    rows = {r["message_id"]: r for r in table_rows(settings, "order_completed")}
    assert set(rows) == {"good", "types", "missing", "keywords", "long", "v1"}
    assert (rows["types"]["properties_total"], rows["types"]["properties_qty"]) == (None, None)
    assert rows["v1"]["properties_total"] == 12.0  # "12" fits a double
    assert rows["good"]["properties_note"] == "not planned"  # unplanned properties: inferred
    # the figures: the hour's violations by table, for the asset check and datalake status
    by_hour = {h.hour: h for h in report.tables["order_completed"].by_hour}
    assert sum(by_hour[H].violations.values()) == sum(
        n for (t, _), n in _typed(violations).items() if t == "order_completed"
    )
    entry = next(e for e in report.source.hour_entries() if e.hour == H)
    assert entry.figures.violations == len(violations)
    an_hour_after = ArchiveHour.parse(H).start + timedelta(hours=2)
    assert lake_status(settings.lake_root, "web", an_hour_after).violations_24h == len(violations)


def _typed(violations: list[dict]) -> Counter:
    return Counter((r["event_table"], r["violation_type"]) for r in violations)


def test_quarantine_modes_send_whole_lines_to_the_quarantine(tmp_path):
    settings = settings_for(tmp_path, unplanned_events="quarantine", violations="quarantine")
    write_hour(settings.archive_root, "web", H, lines())
    report = sync(settings)
    assert reconciled(report)
    kept = {r["message_id"] for r in table_rows(settings, "order_completed")}
    assert kept == {"good", "v1"}
    assert {r["message_id"] for r in table_rows(settings, "pages")} == {"home"}
    assert table_rows(settings, "identifies") == []
    quarantined = [r for r in table_rows(settings, "quarantine") if r["level"] == "line"]
    reasons = Counter(r["reason"] for r in quarantined)
    # both copies of the duplicate are quarantined (the quarantine keeps what arrived)
    assert reasons == {
        "tracking_plan_violation": 6,
        "tracking_plan_unplanned_event": 2,
        "invalid_json": 1,
    }
    assert report.source.lines_quarantined == 9
    violations = table_rows(settings, "violations")
    assert {r["action"] for r in violations} == {"quarantined"}
    assert set(by_message(violations)) == set(reference(lines()))


def test_omit_removes_violating_and_unplanned_values_into_the_quarantine(tmp_path):
    settings = settings_for(tmp_path, violations="omit", unplanned_properties="omit")
    write_hour(settings.archive_root, "web", H, lines())
    report = sync(settings)
    assert reconciled(report) and report.source.lines_quarantined == 1  # the broken line
    rows = {r["message_id"]: r for r in table_rows(settings, "order_completed")}
    assert rows["keywords"]["properties_order_id"] is None
    assert rows["keywords"]["properties_shipping_city"] == "Oslo"  # valid: stays
    assert rows["keywords"].get("properties_items") is None  # an array is one column
    assert rows["types"]["properties_currency"] == "USD"
    assert "properties_note" not in rows["good"] or rows["good"]["properties_note"] is None
    values = [r for r in table_rows(settings, "quarantine") if r["level"] == "value"]
    omitted = {(r["message_id"], r["column_name"]) for r in values if r["reason"] == "tracking_plan_omitted"}  # fmt: skip
    assert {
        ("types", "properties_total"),
        ("types", "properties_qty"),
        ("types", "properties_gift"),
        ("keywords", "properties_order_id"),
        ("keywords", "properties_shipping_zip"),
        ("keywords", "properties_items"),
        ("long", "properties_coupon"),
    } <= omitted
    unplanned = {(r["message_id"], r["column_name"]) for r in values if r["reason"] == "tracking_plan_unplanned_property"}  # fmt: skip
    # v1 plans only the total: under it the other properties are unplanned
    v1_only = {"properties_order_id", "properties_qty", "properties_currency", "properties_placed_at"}  # fmt: skip
    assert unplanned == {("good", "properties_note")} | {("v1", c) for c in v1_only}
    actions = Counter(
        (r["violation_type"], r["action"]) for r in table_rows(settings, "violations")
    )
    assert actions[("Required-Missing", "kept")] == 1  # a missing key: nothing to omit
    assert actions[("Required-Missing", "omitted")] == 1  # in an array's item: the array
    assert actions[("Unplanned-Event", "kept")] == 2
    assert not [k for k in actions if k[1] == "quarantined"]


def test_the_spark_path_writes_what_the_driver_path_writes(spark, tmp_path):
    """Stage A as Spark tasks (the native parse leaves the plan's lines to the Python path)
    against the same hour synced in the driver: the same violations and rows."""
    out = {}
    for path, session in (("driver", None), ("spark", spark)):
        settings = settings_for(tmp_path / path, "iceberg", violations="omit")
        write_hour(settings.archive_root, "web", H, lines() * 1)
        assert reconciled(sync(settings, session))
        out[path] = (
            sorted(json.dumps(r, sort_keys=True, default=str) for r in table_rows(settings, "violations")),
            sorted(json.dumps(r, sort_keys=True, default=str) for r in table_rows(settings, "order_completed")),
        )  # fmt: skip
    assert out["driver"] == out["spark"]
    assert len(out["spark"][0]) == sum(sum(c.values()) for c in reference(lines()).values())


def test_a_plan_that_would_narrow_a_column_refuses_in_one_line(tmp_path):
    settings = settings_for(tmp_path)
    write_hour(settings.archive_root, "web", H, [msg("m1", userId="u1", properties={"total": "n/a"})])  # fmt: skip
    sync(without_plan(tmp_path))  # without a plan: properties_total is text
    before = read_schema_record(settings.lake_root, "web")
    with pytest.raises(SyncError) as e:
        sync(settings)
    assert e.value.code == "plan_narrows"
    assert "order_completed.properties_total as double" in str(e.value)
    assert "\n" not in str(e.value)
    assert read_schema_record(settings.lake_root, "web") == before  # nothing committed


def test_a_plan_widens_an_older_narrower_column(tmp_path):
    write = without_plan(tmp_path)
    write_hour(write.archive_root, "web", H, [msg("m1", userId="u1", properties={"total": 3})])
    sync(write)
    assert dict(read_schema_record(write.lake_root, "web")["order_completed"])["properties_total"] == "bigint"  # fmt: skip
    settings = settings_for(tmp_path)
    report = sync(settings)
    assert {"name": "properties_total", "from": "bigint", "to": "double"} in report.tables[
        "order_completed"
    ].widened_columns


def test_forget_erases_a_persons_violations(tmp_path):
    settings = settings_for(tmp_path)
    write_hour(settings.archive_root, "web", H, lines())
    sync(settings)
    assert {r["user_id"] for r in table_rows(settings, "violations")} >= {"u1", "u3"}
    result = forget(settings, ForgetRequest("r-u3", (identity("user_id", "u3"),)))
    assert result.status == "completed" and result.rows_remaining == 0
    left = table_rows(settings, "violations")
    assert "u3" not in {r["user_id"] for r in left}
    assert {"keywords", "long"}.isdisjoint(r["message_id"] for r in left)
    assert {r["message_id"] for r in left} >= {"types", "missing", "typo"}  # others stay


def test_the_lake_keeps_the_plan_each_sync_used(tmp_path):
    settings = settings_for(tmp_path)
    write_hour(settings.archive_root, "web", H, lines()[:2])
    request = request_from_settings(settings, settings.sources[0], (H,), replay=False)
    stored = read_stored(request.tracking_plan)
    assert stored.hash == plan_from_document(PLAN, "x").hash
    assert request.tracking_plan.startswith(settings.lake_root)


def _folder(path):
    path.mkdir(parents=True, exist_ok=True)
    return path


def test_the_settings_refuse_modes_without_a_plan_and_unknown_modes(tmp_path):
    base = '[[sources]]\nid = "web"\nstart = "2026-11-01-00:00"\n'
    with pytest.raises(SettingsError, match="only applies with a tracking plan") as e:
        load_lake_toml(tmp_path, base + 'violations = "omit"\n')
    assert e.value.key == "sources[0].violations"
    with pytest.raises(SettingsError, match="'drop'"):
        load_lake_toml(tmp_path, base + 'tracking_plan = "p.json"\nviolations = "drop"\n')
    with pytest.raises(SettingsError, match="must be a local file"):
        load_lake_toml(tmp_path, base + 'tracking_plan = "s3://bucket/p.json"\n')
    loaded = load_lake_toml(tmp_path, base + 'tracking_plan = "plans/p.json"\n')
    assert loaded.sources[0].tracking_plan == str(tmp_path / "plans" / "p.json")


def test_a_plan_that_cannot_be_read_fails_the_sync_in_one_line(tmp_path):
    settings = settings_for(tmp_path)
    (tmp_path / "plans" / "web.json").write_text('{"rules": [{"type": "TRACK"}]}')
    with pytest.raises(SyncError) as e:
        request_from_settings(settings, settings.sources[0], (H,), replay=False)
    assert e.value.code == "plan_invalid" and "\n" not in str(e.value)
    assert "web.json: $.rules[0].key" in str(e.value)


def test_the_open_hours_batches_apply_the_plan_and_the_close_equals_one_sync(tmp_path):
    """Iceberg: two batches append each file's rows and violations; the hour's close replaces
    them with exactly what one sync of the hour writes."""
    settings = settings_for(tmp_path, "iceberg", violations="omit")
    source = settings.sources[0]
    sent = lines()

    def batch():
        request = request_from_settings(settings, source, (H,), replay=False, batch=True)
        return run_sync(_no_spark, request)

    write_hour(settings.archive_root, "web", H, sent[:6], name="part-0001.jsonl.gz")
    assert batch().source.batch_id
    first = table_rows(settings, "violations")
    assert set(by_message(first)) == set(reference(sent[:6]))
    write_hour(settings.archive_root, "web", H, sent[6:], name="part-0002.jsonl.gz")
    assert batch().source.batch_id
    batched = sorted(json.dumps(r, sort_keys=True, default=str) for r in table_rows(settings, "violations"))  # fmt: skip
    assert by_message(table_rows(settings, "violations")) == reference(sent)
    closed = sync(settings)
    assert reconciled(closed)
    after = sorted(json.dumps(r, sort_keys=True, default=str) for r in table_rows(settings, "violations"))  # fmt: skip
    assert after == batched


def _config_api(doc: dict) -> dict:
    """The plan in Segment's older Config API shape."""
    events, identify = [], []
    for r in doc["rules"]:
        if r["type"] == "TRACK":
            events.append({"name": r["key"], "version": r["version"], "rules": r["jsonSchema"]})
        elif r["type"] == "IDENTIFY":
            identify.append({"name": "", "version": r["version"], "rules": r["jsonSchema"]})
    return {"name": "Web", "rules": {"events": events, "identify_traits": identify}}


@pytest.mark.parametrize("shape", ["config-api", "schema-folder"])
def test_every_plan_shape_gives_the_sync_the_same_violations(tmp_path, shape):
    """The Config API shape and a folder of schemas (track events only, version 1) judge the
    same messages as the Public API rules they hold."""
    expected_doc = _config_api(PLAN)
    settings = settings_for(tmp_path)
    plan_file = tmp_path / "plans" / "web.json"
    plan_file.unlink()
    if shape == "config-api":
        plan_file.write_text(json.dumps(expected_doc))
    else:
        plan_file.mkdir()
        v1 = [r for r in PLAN["rules"] if r["type"] == "TRACK" and r["version"] == 1]
        for r in v1:
            schema = r["jsonSchema"]["properties"]["properties"]
            (plan_file / "order.json").write_text(json.dumps({"title": r["key"], **schema}))
        expected_doc = {"rules": v1}
    write_hour(settings.archive_root, "web", H, lines())
    assert reconciled(sync(settings))
    assert by_message(table_rows(settings, "violations")) == reference(lines(), expected_doc)


def test_omit_counts_a_value_that_fails_two_keywords_omitted_twice():
    """A key that gives no column name (``!!!``) too: its value leaves the row once, and
    both of its violations say so."""
    from datalake_assets.plans.plan_gate import PlanGate
    from datalake_assets.plans.plan_policy import PlanPolicy

    two = {"pattern": "^x", "minLength": 3}
    doc = {"rules": [{"key": "E", "type": "TRACK", "version": 1, "jsonSchema": {"properties": {"properties": {"properties": {"!!!": two, "a": two}}}}}]}  # fmt: skip
    gate = PlanGate(PlanPolicy(plan_from_document(doc, "x"), violations="omit"))
    sent = msg("m1", event="E", properties={"!!!": "A", "a": "C"})
    judged = gate.judge(sent)
    assert judged.actions == ["omitted"] * 4
    assert len(judged.omitted) == 2 and judged.obj["properties"] == {}
    assert sent["properties"] == {"!!!": "A", "a": "C"}  # the message as sent stays whole


def test_an_omitted_value_stays_out_of_a_row_re_read_for_its_exact_numbers(tmp_path):
    """A line whose integers are past 64 bits is flattened from an exact re-parse of the line
    as sent: the plan's omissions hold there too."""
    settings = settings_for(tmp_path, violations="omit")
    huge = 123456789012345678901234567890
    line = json.dumps(msg("big", userId="u1", properties={**GOOD, "total": "abc", "huge": huge}))  # fmt: skip
    write_hour(settings.archive_root, "web", H, [line.encode()])
    assert reconciled(sync(settings))
    (row,) = table_rows(settings, "order_completed")
    assert row["properties_total"] is None and str(huge) in str(row["properties_huge"])
    values = [r for r in table_rows(settings, "quarantine") if r["level"] == "value"]
    assert [(r["column_name"], r["reason"]) for r in values] == [("properties_total", "tracking_plan_omitted")]  # fmt: skip


def test_a_job_started_elsewhere_gets_the_plan_and_its_modes(tmp_path):
    """EMR, Databricks, ``python -m``: the request travels as argv; the plan as its place in
    the lake, which the job reads."""
    from datalake_assets.transform.sync_request import parse_args

    settings = settings_for(tmp_path, unplanned_events="quarantine", violations="omit")
    request = request_from_settings(settings, settings.sources[0], (H,), replay=False)
    back = parse_args(request.to_args())
    assert (back.tracking_plan, back.unplanned_events, back.violations) == (
        request.tracking_plan,
        "quarantine",
        "omit",
    )
    assert back.unplanned_properties == "keep"
    none = without_plan(tmp_path)
    plain = request_from_settings(none, none.sources[0], (H,), replay=False)
    assert parse_args(plain.to_args()).tracking_plan == ""
