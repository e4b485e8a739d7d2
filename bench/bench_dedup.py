"""Cost of the cross-hour dedup: one sync with lookback 0, 1 and 7 days, same input.

    python bench/bench_dedup.py [--events 200000] [--ids-per-hour 200000] [--out bench/out/dedup]
                                [--old-index] [--wait-quiet SECONDS]

Generates one archive hour (demo traffic) and an id index for every hour of the 7 days
before it (``--ids-per-hour`` distinct ids each, as earlier syncs would have left them: with
the ``id_hash`` column, or with ``--old-index`` the ids only, as versions before it wrote them), with
``--planted`` ids of the synced hour planted in earlier hours as real cross-hour duplicates.
Then, in one warm local Spark session, syncs the hour into a fresh copy of that lake with
``dedup_lookback_hours`` = 0, 24 and 168 (in that order, then once more with 0 to show the
warm-up does not favour the later runs), and prints wall time, the cross-hour duplicates found
and the ratio to lookback 0. The lookback-0 sync is our hourly sync as measured against naive
Spark in ``bench_sync.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench_sync import wait_for_quiet  # noqa: E402  same folder: run as a script

HOUR = "2026-11-21T10"
SOURCE = "bench"


def build_index(
    lake: Path, hours: int, ids_per_hour: int, planted: list[str], old: bool = False
) -> int:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from datalake_assets.spec import layout

    first = layout.ArchiveHour.parse(HOUR)
    numbers = pc.cast(pa.array(range(ids_per_hour), pa.int64()), pa.string())
    total = 0
    for back in range(1, hours + 1):
        h = layout.ArchiveHour.of(first.start - __import__("datetime").timedelta(hours=back))
        ids = pc.binary_join_element_wise(pa.scalar(f"old-{h.compact}-"), numbers, "")
        if back == 5 and planted:  # a few of this hour's messages were already synced 5 h ago
            ids = pa.concat_arrays([ids, pa.array(planted, pa.string())])
        ids = pc.array_take(ids, pc.array_sort_indices(ids))
        d = lake / "_index" / SOURCE / f"hour={h.compact}"
        d.mkdir(parents=True, exist_ok=True)
        table = pa.table({"message_id": ids})
        if not old:  # what stage B writes now
            from datalake_assets.spec.id_index import index_table

            table = index_table(ids)
        pq.write_table(table, d / layout.data_file_name(h, "seed", 0, 0), compression="zstd")
        total += len(ids)
    return total


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=200_000)
    p.add_argument("--files", type=int, default=4)
    p.add_argument("--ids-per-hour", type=int, default=200_000)
    p.add_argument("--planted", type=int, default=1000)
    p.add_argument("--out", default=str(REPO / "bench" / "out" / "dedup"))
    p.add_argument(
        "--old-index",
        action="store_true",
        help="seed the index without the id_hash column (a lake of an earlier version)",
    )
    p.add_argument(
        "--wait-quiet",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="before each sync, wait up to SECONDS for the rest of the machine to "
        "use < 0.3 CPUs (for shared machines)",
    )
    a = p.parse_args()

    import gzip

    import orjson

    from datalake_assets.ingest.demo import generate_archive
    from datalake_assets.spec.layout import ArchiveHour
    from datalake_assets.transform.job import SyncRequest, local_spark_session, run_sync

    out = Path(a.out)
    shutil.rmtree(out, ignore_errors=True)
    archive = out / "archive"
    t = time.monotonic()
    generate_archive(
        str(archive),
        SOURCE,
        [ArchiveHour.parse(HOUR)],
        events_per_hour=a.events,
        files_per_hour=a.files,
        seed=7,
    )
    planted = []
    for f in sorted((archive / SOURCE).rglob("*.gz")):
        for line in gzip.open(f):
            try:
                mid = orjson.loads(line).get("messageId")
            except (orjson.JSONDecodeError, AttributeError):
                continue
            if isinstance(mid, str):
                planted.append(mid)
            if len(planted) >= a.planted:
                break
        break
    seed_lake = out / "seed-lake"
    ids = build_index(seed_lake, 7 * 24, a.ids_per_hour, planted, a.old_index)
    print(
        f"input: {a.events:,} events; index: {7 * 24} earlier hours, {ids:,} ids; "
        f"{len(set(planted))} ids planted 5 h earlier; setup {time.monotonic() - t:.0f} s"
    )

    spark = local_spark_session("local[2]", "6g", {"spark.sql.shuffle.partitions": "4"})
    spark.sparkContext.setLogLevel("ERROR")
    rows = []
    for lookback in (0, 24, 168, 0):
        lake = out / f"lake-{lookback}"
        shutil.rmtree(lake, ignore_errors=True)
        shutil.copytree(seed_lake, lake)
        req = SyncRequest(
            lake_root=str(lake),
            archive_root=str(archive),
            source_id=SOURCE,
            hours=(HOUR,),
            dedup_lookback_hours=lookback,
        )
        quiet = wait_for_quiet(a.wait_quiet) if a.wait_quiet > 0 else None
        load = os.getloadavg()[0]
        t = time.monotonic()
        r = run_sync(spark, req)
        wall = time.monotonic() - t
        s = r.source
        rows.append(
            {
                "lookback_hours": lookback,
                "wall_s": round(wall, 1),
                "cross_hour_duplicates": s.cross_hour_duplicates,
                "messages_written": s.messages_written,
                "timings": s.timings or {},
                "load_before": round(load, 2),
                "quiet": quiet,
            }
        )
        print(json.dumps(rows[-1]))
    spark.stop()
    base = min(r["wall_s"] for r in rows if r["lookback_hours"] == 0)
    print(
        "\n| lookback | wall s | vs lookback 0 | cross-hour duplicates | dedup phase s | checks s |"
    )
    print("|---|--:|--:|--:|--:|--:|")
    for r in rows:
        print(
            f"| {r['lookback_hours'] // 24} days | {r['wall_s']} | {r['wall_s'] / base:.2f} | "
            f"{r['cross_hour_duplicates']:,} | {r['timings'].get('dedup_s', 0):.1f} "
            f"| {r['timings'].get('check_s', 0):.1f} |"
        )
    (out / "results.json").write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
