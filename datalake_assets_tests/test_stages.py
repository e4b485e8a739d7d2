"""Stage A's statistics, run as plain Python over real archive files (no Spark needed)."""

import marshal

import pyarrow as pa

from datalake_assets.spec import types as T
from datalake_assets.transform.stages import STATS, StageAConfig, merge_signature_stats, run_stage_a
from datalake_assets_tests.archive_builders import msg, write_hour


def stage_a(files, **cfg):
    batch = pa.RecordBatch.from_pydict(
        {"file_idx": list(range(len(files))), "location": files, "hour": ["2026112110"] * len(files)}
    )
    out = pa.Table.from_batches(list(run_stage_a(iter([batch]), StageAConfig(32768, 16, **cfg))))
    return out.to_pydict()


def stats_of(out):
    return [p for k, p in zip(out["kind"], out["payload"]) if k == STATS]


def test_folding_many_signatures_gives_the_same_counts(tmp_path):
    lines = [msg(f"m{i}", properties={f"key_{i % 7}": i, "price": 1 if i % 2 else 1.5}) for i in range(60)]
    f = write_hour(str(tmp_path), "s", "2026-11-21T10", lines)
    by_signature = merge_signature_stats(stats_of(stage_a([f])))
    folded_out = stage_a([f], signature_limit=2)
    assert marshal.loads(stats_of(folded_out)[0])["columns"]  # it really folded
    by_column = merge_signature_stats(stats_of(folded_out))
    assert by_signature == by_column
    lines_in, counts, messages = by_column
    assert lines_in == 60 and messages == {"order_completed": 60, "tracks": 60}
    assert counts["order_completed"]["properties_price"][T.K_FLOAT] == 30
    assert "properties_price" not in counts["tracks"]


def test_stats_from_several_tasks_add_up(tmp_path):
    f1 = write_hour(str(tmp_path), "s", "2026-11-21T10", [msg("a"), b"not json"], name="a.jsonl")
    f2 = write_hour(str(tmp_path), "s", "2026-11-21T10", [msg("b"), msg("c", type="page")], name="b.jsonl.gz")
    lines_in, counts, messages = merge_signature_stats(stats_of(stage_a([f1])) + stats_of(stage_a([f2])))
    assert lines_in == 4
    assert messages == {"order_completed": 2, "tracks": 2, "pages": 1}


def test_corrupt_gzip_keeps_what_was_read_and_quarantines_the_rest(tmp_path):
    import random

    rnd = random.Random(5)
    lines = [msg(f"m{i}", properties={"blob": "%032x" % rnd.getrandbits(128)}) for i in range(20000)]
    f = write_hour(str(tmp_path), "s", "2026-11-21T10", lines)
    data = open(f, "rb").read()
    with open(f, "wb") as fh:
        fh.write(data[: len(data) // 2] + b"\x00garbage" * 50)
    out = stage_a([f])
    reasons = [r for k, r in zip(out["kind"], out["reason"]) if k == 1]
    assert any(r.startswith("unreadable_file") for r in reasons)
    lines_in, _, messages = merge_signature_stats(stats_of(out))
    assert 0 < messages["order_completed"] < 20000
    assert lines_in == sum(1 for k in out["kind"] if k in (0, 1))
