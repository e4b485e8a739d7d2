"""Stage A and B run as plain Python over real archive files (no Spark needed)."""

import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from datalake_assets.spec import types as T
from datalake_assets.transform import keys
from datalake_assets.transform.stage_a import STATS, StageAConfig, run_stage_a
from datalake_assets.transform.stage_a_stats import merge_stats
from datalake_assets.transform.stage_b import StageBConfig, plan_stage_b_tasks, run_stage_b
from datalake_assets_tests.support.archive_builders import msg, write_hour

HOUR = "2026112110"


def stage_a(tmp_path, files, **cfg):
    batch = pa.RecordBatch.from_pydict(
        {"file_idx": list(range(len(files))), "location": files, "hour": [HOUR] * len(files)}
    )
    config = StageAConfig(
        32768,
        16,
        "s",
        "run1",
        str(tmp_path / "work"),
        str(tmp_path / "quarantine"),
        tuple(files),
        **cfg,
    )
    out = pa.Table.from_batches(list(run_stage_a(iter([batch]), config))).to_pydict()
    stats = merge_stats([p for k, p in zip(out["kind"], out["payload"]) if k == STATS])
    return out, stats


def test_statistics_are_the_same_whatever_the_flush_size(tmp_path):
    lines = [
        msg(
            f"m{i}",
            properties={
                f"key_{i % 7}": i,
                "price": 1 if i % 2 else 1.5,
                "qty": str(i) if i % 3 else i,
            },
        )
        for i in range(60)
    ]
    f = write_hour(str(tmp_path), "s", "2026-11-21T10", lines)
    _, whole = stage_a(tmp_path / "a", [f])
    _, pieces = stage_a(tmp_path / "b", [f], flush_rows=7, buffered_rows=11)
    assert whole.counts == pieces.counts and whole.messages == pieces.messages
    assert len(pieces.work_files) > len(whole.work_files) == 1
    assert whole.lines_in == 60 and whole.messages == {"order_completed": 60, "tracks": 60}
    price = whole.counts["order_completed"]["properties_price"]
    assert price[T.K_FLOAT] == 30 and price[T.K_INT] == 30
    qty = whole.counts["order_completed"]["properties_qty"]
    assert qty[T.K_INT] == 20 and qty[T.K_INTSTR] == 40
    assert "properties_price" not in whole.counts["tracks"]


def test_stats_from_several_tasks_add_up(tmp_path):
    f1 = write_hour(str(tmp_path), "s", "2026-11-21T10", [msg("a"), b"not json"], name="a.jsonl")
    f2 = write_hour(
        str(tmp_path), "s", "2026-11-21T10", [msg("b"), msg("c", type="page")], name="b.jsonl.gz"
    )
    out, stats = stage_a(tmp_path, [f1, f2])
    assert stats.lines_in == 4
    assert stats.messages == {"order_completed": 2, "tracks": 2, "pages": 1}
    assert stats.lines_quarantined == {HOUR: 1}
    key_rows = keys.decode(p for k, p in zip(out["kind"], out["payload"]) if k == keys.KEYS)
    assert sorted(key_rows.column("message_id").to_pylist()) == ["a", "b", "c"]


@pytest.mark.slow
def test_corrupt_gzip_keeps_what_was_read_and_quarantines_the_rest(tmp_path):
    rnd = random.Random(5)
    lines = [
        msg(f"m{i}", properties={"blob": f"{rnd.getrandbits(128):032x}"}) for i in range(20000)
    ]
    f = write_hour(str(tmp_path), "s", "2026-11-21T10", lines)
    data = open(f, "rb").read()
    with open(f, "wb") as fh:
        fh.write(data[: len(data) // 2] + b"\x00garbage" * 50)
    out, stats = stage_a(tmp_path, [f])
    reasons = pq.read_table(stats.quarantine_files[0][1]).column("reason").to_pylist()
    assert reasons == ["unreadable_file"]
    assert 0 < stats.messages["order_completed"] < 20000
    assert stats.lines_in == stats.messages["order_completed"] + 1


def test_stage_b_casts_drops_duplicates_and_quarantines_misfits(tmp_path):
    lines = [
        msg(f"m{i}", properties={"n": i if i != 3 else "three", "when": "2026-11-21T10:00:00Z"})
        for i in range(10)
    ]
    f = write_hour(str(tmp_path), "s", "2026-11-21T10", lines)
    _, stats = stage_a(tmp_path, [f])
    columns = {
        "order_completed": (
            ("message_id", T.STRING),
            ("properties_n", T.BIGINT),
            ("properties_when", T.TIMESTAMP),
            ("event", T.STRING),
        ),
        "tracks": (("message_id", T.STRING), ("event", T.STRING)),
    }
    cfg = StageBConfig(
        "s", "run1", str(tmp_path / "data"), str(tmp_path / "q"), "day_hour", columns
    )
    tasks = plan_stage_b_tasks(stats.work_files, {("order_completed", 0): [1, 2]})
    batch = pa.RecordBatch.from_pylist(
        [{"task": t, "table": tb, "items": it} for t, tb, it in tasks]
    )
    manifest = pa.Table.from_batches(list(run_stage_b(iter([batch]), cfg))).to_pylist()
    files = {m["table"]: m for m in manifest if m["entry"] == "file"}
    assert files["order_completed"]["rows"] == 8 and files["tracks"]["rows"] == 8
    table = pq.read_table(files["order_completed"]["location"])
    assert table.schema.field("properties_n").type == pa.int64()
    assert table.schema.field("properties_when").type == pa.timestamp("us", tz="UTC")
    assert "m0" not in table.column("message_id").to_pylist()  # line 1 was a duplicate
    q = [m for m in manifest if m["entry"] == "quarantine"]
    assert len(q) == 1 and q[0]["values_quarantined"] == 1
    rec = pq.read_table(q[0]["location"]).to_pylist()[0]
    assert (rec["message_id"], rec["column_name"], rec["value"]) == ("m3", "properties_n", "three")
    assert rec["reason"] == "type_mismatch" and rec["detail"] == "text does not fit bigint"
