"""Many small sources through the archive sensors, on the local default (issue #14).

    cd /work/main && PYTHONPATH=. python bench/bench_sources.py                 # 20 x 1,000 events
    cd /work/main && PYTHONPATH=. python bench/bench_sources.py --sources 3 --catalog none

Writes ``--sources`` sources, each with one closed archive hour of ``--events`` demo events
(the hour before the current one, so it is due at once: ``settle_minutes = 0``), and a
settings file with nothing but those sources and the sensors' interval (10 s, the smallest
allowed): the local default otherwise (``local[2]``, the embedded Hive metastore unless
``--catalog``, ``dagster.yaml``'s run queue). Then it starts the real ``datalake dev``
(webserver and daemon, the harness of ``datalake_assets_tests/orchestration/dagster_ui.py``),
and waits until every source's hour has been synced by a successful sensor run (by default
one run for all of them, ``sensor_runs = "batched"``; ``--sensor-runs per_source``: one each).

Prints: the time from the code location being loaded (the sensors tick from then on; every
hour is already due) to the last run's success, which the issue's target wants within 3
minutes for 20 sources; and per run, from its creation (the sensor's request) to its start
(the queue), and from its start to its end (the run itself: process start, code location load,
Spark session, the sync, the catalog).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

RUNS_WITH_TIMES = """
query BenchRuns($filter: RunsFilter) {
  runsOrError(filter: $filter) {
    ... on Runs { results { id jobName status creationTime startTime endTime
                            tags { key value } } }
  }
}"""


def write_lake(folder: Path, sources: int, events: int, catalog: str, sensor_runs: str) -> None:
    from datalake_assets.ingest.demo import generate_archive
    from datalake_assets.spec.layout import ArchiveHour

    hour = ArchiveHour.of(
        datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
    )
    lines = [
        'archive_root = "archive"',
        'lake_root = "lake"',
        "[automation]",
        "interval_seconds = 10",
        "settle_minutes = 0",
        f'sensor_runs = "{sensor_runs}"',
    ]
    if catalog != "hive":
        lines += ["[catalog]", f'backend = "{catalog}"']
    for i in range(1, sources + 1):
        source = f"site{i:02d}"
        generate_archive(
            str(folder / "archive"),
            source,
            [hour],
            events_per_hour=events,
            files_per_hour=1,
            seed=i,
        )
        lines += ["[[sources]]", f'id = "{source}"', f'start = "{hour.partition_key}"']
    (folder / "lake.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")


def source_hours(run: dict) -> set[str]:
    """The source-hours a sensor run synced: its partition (a run per source-hour, job
    <slug>_sync_job) or the tag datalake/source_hours (one batched run for all)."""
    tags = {t["key"]: t["value"] for t in run["tags"]}
    if "dagster/partition" in tags:
        return {f"{run['jobName']}:{tags['dagster/partition']}"}
    return set(tags.get("datalake/source_hours", "").split())


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sources", type=int, default=20)
    p.add_argument("--events", type=int, default=1000)
    p.add_argument("--catalog", default="hive", choices=["hive", "none"])
    p.add_argument(
        "--sensor-runs",
        default="auto",
        choices=["auto", "batched", "per_source"],
        help="[automation] sensor_runs (auto: batched, the local default)",
    )
    p.add_argument("--timeout", type=float, default=1800.0)
    p.add_argument("--out", default="", help="a folder to keep (default: a temporary one)")
    a = p.parse_args()

    from datalake_assets_tests.orchestration.dagster_ui import datalake_dev

    folder = Path(a.out) if a.out else Path(tempfile.mkdtemp(prefix="bench-sources-"))
    folder.mkdir(parents=True, exist_ok=True)
    write_lake(folder, a.sources, a.events, a.catalog, a.sensor_runs)
    (folder / "home").mkdir(exist_ok=True)
    with datalake_dev(folder / "home", folder / "lake.toml") as server:
        t0 = time.time()
        deadline = time.monotonic() + a.timeout
        while True:
            out = server.ui.gql(
                RUNS_WITH_TIMES,
                {"filter": {"tags": [{"key": "datalake/trigger", "value": "sensor"}]}},
            )["runsOrError"]["results"]
            done = [r for r in out if r["status"] == "SUCCESS"]
            failed = [r for r in out if r["status"] in ("FAILURE", "CANCELED")]
            if failed:
                print(
                    f"{len(failed)} runs failed, e.g. {failed[0]['id']}:\n"
                    f"{server.ui.run_errors(failed[0]['id'])}"
                )
                return 1
            synced = set().union(*(source_hours(r) for r in done))
            if len(synced) >= a.sources:
                break
            if time.monotonic() > deadline:
                print(f"timeout: {len(synced)} of {a.sources} source-hours synced")
                return 1
            time.sleep(2.0)
    last = max(r["endTime"] for r in done)
    queued = [r["startTime"] - r["creationTime"] for r in done]
    ran = [r["endTime"] - r["startTime"] for r in done]
    first_request = min(r["creationTime"] for r in done)
    result = {
        "sources": a.sources,
        "events_per_hour": a.events,
        "catalog": a.catalog,
        "sensor_runs": a.sensor_runs,
        "runs": len(done),
        "loaded_to_last_success_s": round(last - t0, 1),
        "first_request_after_load_s": round(first_request - t0, 1),
        "run_s": {
            "median": round(statistics.median(ran), 1),
            "max": round(max(ran), 1),
            "min": round(min(ran), 1),
        },
        "queued_s": {"median": round(statistics.median(queued), 1), "max": round(max(queued), 1)},
    }
    print(json.dumps(result, indent=2))
    print(
        f"\n| sources x events | catalog | sensor runs | runs | loaded -> all synced | "
        f"run (median / max) |\n|---|---|---|--:|--:|--:|\n| {a.sources} x {a.events:,} | "
        f"{a.catalog} | {a.sensor_runs} | {len(done)} | "
        f"{result['loaded_to_last_success_s']} s | {result['run_s']['median']} / "
        f"{result['run_s']['max']} s |"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
