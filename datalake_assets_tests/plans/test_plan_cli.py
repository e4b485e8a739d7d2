"""``datalake plan check``, ``diff`` and ``infer`` as a user runs them (the console script, a
settings file). ``validate`` is in ``test_plan_load.py``."""

from __future__ import annotations

import json
from collections import Counter
from copy import deepcopy
from datetime import UTC, datetime, timedelta

from datalake_assets.plans.plan_load import load_plan, plan_from_document
from datalake_assets.plans.plan_verdict import verdict
from datalake_assets_tests.plans.test_plan_sync import PLAN, lines
from datalake_assets_tests.support.archive_builders import msg, write_hour
from datalake_assets_tests.support.settings_files import write_lake_toml
from datalake_assets_tests.test_cli import run_datalake

H = "2026-11-21T10"


def home(tmp_path, plan: bool = True, **modes):
    (tmp_path / "web.json").write_text(json.dumps(PLAN))
    keys = 'tracking_plan = "web.json"\n' if plan else ""
    keys += "".join(f'{k} = "{v}"\n' for k, v in modes.items())
    write_lake_toml(
        tmp_path,
        'archive_root = "archive"\nlake_root = "lake"\n[catalog]\nbackend = "none"\n'
        f'[[sources]]\nid = "web"\nstart = "2026-11-01-00:00"\n{keys}',
    )
    return tmp_path


def test_check_counts_what_the_plan_would_do_without_syncing(tmp_path):
    folder = home(tmp_path, unplanned_events="quarantine", violations="omit")
    write_hour(str(folder / "archive"), "web", H, lines())
    done = run_datalake(folder, "plan", "check", "--hours", H, "--json", timeout=120)
    assert done.returncode == 1, done.stderr  # messages break the plan
    found = json.loads(done.stdout)
    plan = plan_from_document(PLAN, "x")
    # every message the sync would write, duplicates as the archive holds them
    expected = Counter(v.violation_type for m in lines() if isinstance(m, dict) for v in verdict(plan, m))  # fmt: skip
    assert found["violations_by_type"] == dict(expected)
    assert found["messages"] == 11 and found["lines"] == 12
    assert found["lines_quarantined"] == {"tracking_plan_unplanned_event": 2}
    assert found["values_omitted"]["tracking_plan_omitted"] >= 7
    assert not (folder / "lake").exists()  # nothing synced, nothing written
    text = run_datalake(folder, "plan", "check", "--hours", H, timeout=120).stdout
    breaking = sum(1 for m in lines() if isinstance(m, dict) and verdict(plan, m))
    assert text.startswith(f"web: 11 messages in 12 lines, {breaking} ({breaking / 11:.1%}) break plan Web")  # fmt: skip
    assert "violations by event:" in text and "Order Completed: Datatype-Mismatch" in text


def test_diff_says_which_columns_a_change_narrows(tmp_path):
    new = deepcopy(PLAN)
    order = new["rules"][0]["jsonSchema"]["properties"]["properties"]["properties"]
    order["total"]["type"] = "integer"  # was number: narrows double to bigint
    order["qty"]["type"] = "number"  # was integer: widens
    order["tip"] = {"type": "number"}
    (tmp_path / "old.json").write_text(json.dumps(PLAN))
    (tmp_path / "new.json").write_text(json.dumps(new))
    done = run_datalake(tmp_path, "plan", "diff", "old.json", "new.json", settings=False)
    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines() == [
        "rule changed: track Order Completed v2",
        "order_completed.properties_qty: bigint -> double (widens: the sync widens the "
        "table's column)",
        "order_completed.properties_tip: - -> double (new planned column)",
        "order_completed.properties_total: double -> bigint (narrows: the sync refuses it "
        "once the table holds the older type)",
    ]
    same = run_datalake(tmp_path, "plan", "diff", "old.json", "old.json", settings=False)
    assert (same.returncode, same.stdout) == (0, "no change\n")


def test_infer_drafts_a_plan_every_message_it_read_keeps_to(tmp_path):
    folder = home(tmp_path, plan=False)
    now = datetime.now(UTC)
    hours = [(now - timedelta(hours=n)).strftime("%Y-%m-%dT%H") for n in (1, 30)]
    sent = [
        msg(f"a{i}", hour=hours[i % 2], userId="u1", properties={
            "total": [3, 4.5][i % 2], "sku": f"s{i}", "placed_at": "2026-11-21T10:00:00Z",
            "note": ["text", 7][i % 2], "coupon": [None, "C"][i % 2],
            "address": {"city": "Oslo", **({"zip": "0150"} if i % 2 else {})},
            "tags": ["x"],
        })
        for i in range(6)
    ] + [
        msg("s1", type="identify", hour=hours[0], userId="u1", traits={"email": "a@b.c", "age": 3}),
        msg("s2", event="Signed Up", hour=hours[1], userId="u2"),
    ]  # fmt: skip
    for hour in hours:
        write_hour(str(folder / "archive"), "web", hour, [m for m in sent if m["receivedAt"].startswith(hour[:10] + "T" + hour[11:])])  # fmt: skip
    done = run_datalake(folder, "plan", "infer", "--days", "2", "--out", "draft.json")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("3 rules from 8 messages of 2 archive hours of web")
    draft = load_plan(folder / "draft.json")  # what validate reads
    order = draft.rules_of("track")[0]
    schema = order.json_schema["properties"]
    assert schema["total"] == {"type": "number"}
    assert schema["sku"] == {"type": "string"}
    assert schema["placed_at"] == {"type": "string", "format": "date-time"}
    assert schema["note"] == {}  # sent as text and as a number: any
    assert schema["coupon"] == {"type": ["string", "null"]}
    assert schema["tags"] == {"type": "array"}
    assert schema["address"]["required"] == ["city"]
    assert set(order.json_schema["required"]) == {"total", "sku", "placed_at", "note", "coupon", "address", "tags"}  # fmt: skip
    assert [v for m in sent for v in verdict(draft, m)] == []  # the draft takes what it read
    check = run_datalake(folder, "plan", "check", "--plan", "draft.json", "--hours", *hours)
    assert check.returncode == 0 and "8 messages in 8 lines, 0 (0.0%) break" in check.stdout
