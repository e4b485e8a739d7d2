"""Right-sized files (issue #33): a sync cuts a large table-hour into files of the target size
(``transform/hour_files.py``), plans no task that writes a few rows of an hour, and every
reader of the written files (report, replay, a coarse layout's day, erasure) takes several
files per table-hour. Stage B runs as plain Python here (the driver-local path): no Spark."""

from __future__ import annotations

import dataclasses
import os
import random

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from datalake_assets.privacy.forget import forget
from datalake_assets.privacy.forget_request import ForgetRequest
from datalake_assets.spec import layout
from datalake_assets.spec import types as T
from datalake_assets.spec.identity import identity
from datalake_assets.transform.hour_files import row_group_bytes
from datalake_assets.transform.stage_a import STATS, StageAConfig, run_stage_a
from datalake_assets.transform.stage_a_stats import merge_stats
from datalake_assets.transform.stage_b import StageBConfig, plan_stage_b_tasks, run_stage_b
from datalake_assets.transform.sync import run_sync
from datalake_assets.transform.sync_request import parse_args, request_from_settings
from datalake_assets_tests.support.archive_builders import msg, write_hour
from datalake_assets_tests.support.settings_files import load_lake_toml
from datalake_assets_tests.transform.test_stages import stage_a

TARGET = 200 * 1024  # bytes: a few hundred KB stands for the 512 MB of a real lake
H10, H11 = "2026-11-21T10", "2026-11-21T11"


def blob_messages(n: int, hour: str = H10, prefix: str = "m") -> list[dict]:
    """Messages of ~300 bytes of incompressible text: the files' size follows the rows."""
    rnd = random.Random(n)
    return [
        msg(
            f"{prefix}{i}",
            hour=hour,
            minute=i % 60,
            userId=f"u{i % 50}",
            properties={"blob": f"{rnd.getrandbits(1024):0256x}", "n": i},
        )
        for i in range(n)
    ]


def written_files(manifest: list[dict], table: str) -> list[dict]:
    return [m for m in manifest if m["entry"] == "file" and m["table"] == table]


def assert_right_sized(files: list[dict], target: int) -> None:
    """Each file but the last reached the target with its last row group (and not before);
    none is more than one row group past it."""
    for f in files:
        size = os.path.getsize(f["location"])
        assert size == f["bytes"]
        assert size <= target + row_group_bytes(target), (size, target)
        meta = pq.ParquetFile(f["location"]).metadata
        group = meta.row_group(meta.num_row_groups - 1)
        last_group = sum(group.column(i).total_compressed_size for i in range(group.num_columns))
        assert size - last_group < target, "the file went on after reaching the target"
    for f in files[:-1]:
        assert f["bytes"] >= target


def test_a_large_hour_is_cut_into_files_of_the_target_size(tmp_path):
    lines = blob_messages(4000)
    f = write_hour(str(tmp_path), "s", H10, lines)
    # many small work files, as stage A writes them for a large hour
    _, stats = stage_a(tmp_path, [f], flush_rows=250, buffered_rows=250)
    columns = (
        ("message_id", T.STRING),
        ("user_id", T.STRING),
        ("properties_blob", T.STRING),
        ("properties_n", T.BIGINT),
        ("event", T.STRING),
    )
    cfg = StageBConfig(
        "s",
        "run1",
        str(tmp_path / "data"),
        str(tmp_path / "q"),
        "day_hour",
        {"order_completed": columns, "tracks": columns[:2] + columns[-1:]},
        target_file_bytes=TARGET,
    )
    tasks = plan_stage_b_tasks(stats.work_files, {})
    assert len(tasks) == 2  # one per table: 4,000 rows is a small hour for the planner
    batch = pa.RecordBatch.from_pylist(
        [{"task": t, "table": tb, "items": it} for t, tb, it in tasks]
    )
    manifest = pa.Table.from_batches(list(run_stage_b(iter([batch]), cfg))).to_pylist()

    files = written_files(manifest, "order_completed")
    assert_right_sized(files, TARGET)
    total = sum(f["bytes"] for f in files)
    # the number of files is what the size implies: n-1 full files, and not one more
    assert (len(files) - 1) * TARGET <= total <= len(files) * (TARGET + row_group_bytes(TARGET))
    assert len(files) >= 4
    ids = [i for f in files for i in pq.read_table(f["location"]).column("message_id").to_pylist()]
    assert sorted(ids) == sorted(m["messageId"] for m in lines)  # every row, once
    assert sum(f["rows"] for f in files) == 4000
    # the hour's counts are told once (on its first file), not once per file
    assert [bool(f["columns"]) for f in files] == [True] + [False] * (len(files) - 1)
    tracks = written_files(manifest, "tracks")  # narrow rows: under the target, one file
    assert len(tracks) == 1 and tracks[0]["rows"] == 4000
    # its row groups gather several work files (16 of 250 rows), not one group per work file
    assert pq.ParquetFile(tracks[0]["location"]).metadata.num_row_groups < 16 // 2


def work(table: str, hour: str, rows: list[int]) -> list[tuple[str, str, int, str, int]]:
    base = hash((table, hour)) % 1000 * 1000
    return [(table, hour, base + i, f"/w/{table}/{hour}/{i}", n) for i, n in enumerate(rows)]


def test_the_plan_cuts_a_large_hour_evenly_and_keeps_small_hours_whole():
    files = (
        work("pages", "2026112110", [10_000] * 26)  # 260k rows: two tasks of 130k
        + work("pages", "2026112111", [10_000] * 60)  # 600k: three of 200k
        + work("pages", "2026112112", [3_000, 2_000])  # small hours: packed whole
        + work("pages", "2026112113", [1_000])
    )
    tasks = plan_stage_b_tasks(files, {})
    rows_of = {loc: n for _, _, _, loc, n in files}
    by_hour: dict[str, list[int]] = {}
    for _, _, items in tasks:
        rows: dict[str, int] = {}
        for item in orjson.loads(items):
            rows[item["hour"]] = rows.get(item["hour"], 0) + rows_of[item["location"]]
        for hour, n in rows.items():
            by_hour.setdefault(hour, []).append(n)
    assert sorted(by_hour["2026112110"]) == [130_000, 130_000]
    assert sorted(by_hour["2026112111"]) == [200_000] * 3
    assert by_hour["2026112112"] == [5_000] and by_hour["2026112113"] == [1_000]
    assert len(tasks) == 6  # the two small hours in one task


SETTINGS = """
archive_root = "{root}/archive"
lake_root = "{root}/lake"
[catalog]
backend = "none"
[sync]
local_max_bytes = 1099511627776
[[sources]]
id = "s"
date_layout = "day"
"""


def test_the_sync_cuts_files_at_the_lakes_one_file_size(tmp_path):
    """``[iceberg] target_file_mb`` is the lake's file size: compaction's and, in either table
    format, the sync's."""
    text = SETTINGS.format(root=tmp_path) + "[iceberg]\ntarget_file_mb = 256\n"
    settings = load_lake_toml(tmp_path, text)
    assert settings.table_format == "segment"
    req = request_from_settings(settings, settings.source("s"), [H10], replay=False)
    assert req.target_file_bytes == 256 * 1024 * 1024
    assert parse_args(req.to_args()).target_file_bytes == req.target_file_bytes


def no_spark():
    raise AssertionError("a small batch started a Spark session")


def hour_files(lake: str, table: str, hour: str) -> list[str]:
    h = layout.ArchiveHour.parse(hour)
    d = layout.table_partition_dir(lake, "s", table, "day", h)
    return sorted(n for n in os.listdir(d) if layout.hour_of_data_file(n) == h.compact)


def test_a_sync_replay_and_erasure_take_several_files_per_table_hour(tmp_path):
    """A coarse layout (``day``): two hours share a folder; the large one is several files.
    The report counts them, a replay of the small hour keeps them, an erasure rewrites them."""
    settings = load_lake_toml(tmp_path, SETTINGS.format(root=tmp_path))
    big = blob_messages(3000)
    write_hour(settings.archive_root, "s", H10, big)
    write_hour(settings.archive_root, "s", H11, blob_messages(20, H11, "late"))
    req = request_from_settings(settings, settings.source("s"), [H10, H11], replay=False)
    result = run_sync(no_spark, dataclasses.replace(req, target_file_bytes=TARGET))
    lake = settings.lake_root
    ten = hour_files(lake, "order_completed", H10)
    assert len(ten) >= 3 and len(hour_files(lake, "order_completed", H11)) == 1
    hours = {h["hour"]: h for h in result.tables["order_completed"].to_dict()["by_hour"]}
    assert hours["2026-11-21T10"]["files"] == len(ten)
    assert hours["2026-11-21T10"]["rows"] == 3000
    day = layout.table_partition_dir(
        lake, "s", "order_completed", "day", layout.ArchiveHour.parse(H10)
    )
    assert hours["2026-11-21T10"]["bytes"] == sum(os.path.getsize(f"{day}/{n}") for n in ten)

    # a replay of the small hour replaces its file and leaves the large hour's files as they were
    run_sync(no_spark, request_from_settings(settings, settings.source("s"), [H11], replay=True))
    assert hour_files(lake, "order_completed", H10) == ten
    assert pq.read_table(day).num_rows == 3020

    # erasure finds the person in every file of the hour and rewrites only what held them
    done = forget(settings, ForgetRequest("r1", (identity("user_id", "u7"),)))
    assert done.status == "completed" and done.rows_remaining == 0
    assert done.rows_removed["order_completed"] == 60 + 1  # every 50th message, both hours
    left = pq.read_table(day)
    assert left.num_rows == 3020 - 61 and "u7" not in left.column("user_id").to_pylist()


def test_a_task_of_several_hours_writes_each_hour_whole(tmp_path):
    """Small hours packed in one task: one file each (an hour's rows written once the task
    moves on to the next one), all rows there."""
    files = [
        write_hour(
            str(tmp_path),
            "s",
            f"2026-11-21T{h:02d}",
            blob_messages(30 + h, f"2026-11-21T{h:02d}", f"h{h}-"),
            name=f"{h}.jsonl",
        )
        for h in (10, 11, 12)
    ]
    batch = pa.RecordBatch.from_pydict(
        {
            "file_idx": [0, 1, 2],
            "location": files,
            "hour": ["2026112110", "2026112111", "2026112112"],
        }
    )
    config = StageAConfig(
        32768, 16, "s", "run1", str(tmp_path / "work"), str(tmp_path / "quarantine"), tuple(files)
    )
    out = pa.Table.from_batches(list(run_stage_a(iter([batch]), config))).to_pydict()
    stats = merge_stats([p for k, p in zip(out["kind"], out["payload"]) if k == STATS])
    columns = (("message_id", T.STRING), ("event", T.STRING))
    cfg = StageBConfig(
        "s",
        "run1",
        str(tmp_path / "data"),
        str(tmp_path / "q"),
        "day",
        {"order_completed": columns, "tracks": columns},
        target_file_bytes=TARGET,
    )
    tasks = plan_stage_b_tasks(stats.work_files, {})
    assert len(tasks) == 2  # one per table, three hours each
    rows = pa.RecordBatch.from_pylist(
        [{"task": t, "table": tb, "items": it} for t, tb, it in tasks]
    )
    manifest = pa.Table.from_batches(list(run_stage_b(iter([rows]), cfg))).to_pylist()
    files_of = written_files(manifest, "order_completed")
    assert sorted((f["hour"], f["rows"]) for f in files_of) == [
        ("2026112110", 40),
        ("2026112111", 41),
        ("2026112112", 42),
    ]
    for f in files_of:
        assert layout.hour_of_data_file(f["location"]) == f["hour"]
        assert pq.read_table(f["location"]).num_rows == f["rows"]
