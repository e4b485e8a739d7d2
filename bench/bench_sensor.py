"""Benchmark: how long one tick of an archive sensor takes on a big archive.

    cd /work/main && PYTHONPATH=. python bench/bench_sensor.py              # 10,000 hours
    cd /work/main && PYTHONPATH=. python bench/bench_sensor.py --hours 500 --no-s3

Builds a raw archive of ``--hours`` consecutive hours of one source, ``--files`` tiny files an
hour (it is the listing that costs, not the bytes), then times real sensor evaluations
(``build_sensor_context`` on an ephemeral instance, the sensor of ``build_definitions``):

* ``first tick, queue 24``: empty cursor, default ``max_queued_runs`` (24): lists the whole
  archive from the source's start, requests the 24 oldest hours;
* ``first tick, unbounded``: empty cursor, ``max_queued_runs`` = 10,000: requests every hour
  (10,000 run requests and raw-archive materializations in one tick);
* ``steady tick``: the next tick, with the cursor of the previous one, nothing new: lists only
  the re-check window (48 hours).

Each is run ``--repeat`` times (median). The same against S3 in moto's in-process ``mock_aws``
(objects seeded straight into moto's bucket; the sensor lists through the real boto3 client,
1,000 keys a page), unless ``--no-s3``. moto is not S3: a real page costs a network round trip
(tens of ms) instead of moto's in-process XML work, so read those figures as request counts
more than as times. Prints a Markdown table: ms, listings (folder scans or list_objects_v2
requests), entries (folder entries or keys), run requests, and the ratio to Dagster's default
60 s sensor evaluation timeout.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from datetime import timedelta

from dagster import DagsterInstance, SensorResult, build_sensor_context

from datalake_assets.definitions import build_definitions
from datalake_assets.lake.listing import Listing, LocalArchiveLister, S3ArchiveLister
from datalake_assets.settings import load_settings
from datalake_assets.spec.layout import ArchiveHour, archive_hour_dir

SOURCE = "bench"
START = "2025-01-01-00:00"
TIMEOUT_S = 60.0
BODY = b'{"type":"track"}\n'


class CountingLister:
    """Wraps a lister to keep the stats of its last listing."""

    def __init__(self, inner):
        self.inner = inner
        self.last: Listing | None = None

    def list_hours(self, *args, **kwargs):
        self.last = self.inner.list_hours(*args, **kwargs)
        return self.last


def hours_of(n: int) -> list[ArchiveHour]:
    first = ArchiveHour.parse(START)
    return [ArchiveHour(first.start + timedelta(hours=i)) for i in range(n)]


def build_local(root: str, hours: list[ArchiveHour], files: int) -> None:
    for hour in hours:
        d = archive_hour_dir(root, SOURCE, hour)
        os.makedirs(d, exist_ok=True)
        for i in range(files):
            with open(f"{d}/part-{i:04d}.jsonl.gz", "wb") as f:
                f.write(BODY)


def seed_s3(hours: list[ArchiveHour], files: int) -> None:
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    backend = s3_backends[DEFAULT_ACCOUNT_ID]["global"]
    for hour in hours:
        for i in range(files):
            key = f"raw/{SOURCE}/day={hour.day}/hr={hour.hr}/part-{i:04d}.jsonl.gz"
            backend.put_object("bench-archive", key, BODY)


def settings_for(tmp: str, archive_root: str, max_queued: int):
    path = os.path.join(tmp, f"lake-{max_queued}.toml")
    with open(path, "w") as f:
        f.write(
            f'archive_root = "{archive_root}"\nlake_root = "lake"\n'
            f"[automation]\nmax_queued_runs = {max_queued}\n"
            f'[[sources]]\nid = "{SOURCE}"\nstart = "{START}"\n'
        )
    return load_settings(path, env={})


def tick(defs, instance, cursor):
    sensor = defs.sensors[0]
    ctx = build_sensor_context(instance=instance, cursor=cursor, definitions=defs)
    t = time.perf_counter()
    result = sensor(ctx)
    ms = (time.perf_counter() - t) * 1000
    assert isinstance(result, SensorResult), result
    return ms, result


def measure(label, archive_root, tmp, hours, repeat, make_lister, rows):
    now = hours[-1].start + timedelta(hours=2)
    with DagsterInstance.ephemeral() as instance:
        for max_queued in (24, 10_000):
            lister = CountingLister(make_lister())
            defs = build_definitions(
                settings_for(tmp, archive_root, max_queued), clock=lambda: now, lister=lister
            )
            times, result = [], None
            for _ in range(repeat):
                ms, result = tick(defs, instance, None)
                times.append(ms)
            rows.append(
                (
                    label,
                    f"first tick, queue {'24' if max_queued == 24 else 'unbounded'}",
                    statistics.median(times),
                    lister.last,
                    len(result.run_requests),
                    len(result.cursor),
                )
            )
            if max_queued == 10_000:
                cursor = result.cursor
                times = []
                for _ in range(repeat):
                    ms, steady = tick(defs, instance, cursor)
                    times.append(ms)
                assert not steady.run_requests
                rows.append(
                    (
                        label,
                        "steady tick (nothing new)",
                        statistics.median(times),
                        lister.last,
                        0,
                        len(steady.cursor),
                    )
                )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hours", type=int, default=10_000)
    ap.add_argument("--files", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-s3", action="store_true")
    ap.add_argument("--out", help="folder for the archive (default: a temporary one, deleted)")
    args = ap.parse_args(argv)

    tmp = args.out or tempfile.mkdtemp(prefix="bench-sensor-")
    os.makedirs(tmp, exist_ok=True)
    hours = hours_of(args.hours)
    rows: list = []
    try:
        root = os.path.join(tmp, "archive")
        t = time.perf_counter()
        if not os.path.isdir(os.path.join(root, SOURCE)):
            build_local(root, hours, args.files)
        print(
            f"local archive: {args.hours} hours x {args.files} files under {root} "
            f"({time.perf_counter() - t:.1f} s to build)",
            file=sys.stderr,
        )
        measure("local", root, tmp, hours, args.repeat, LocalArchiveLister, rows)

        if not args.no_s3:
            import boto3
            from moto import mock_aws

            for k, v in {
                "AWS_ACCESS_KEY_ID": "bench",
                "AWS_SECRET_ACCESS_KEY": "bench",
                "AWS_DEFAULT_REGION": "us-east-1",
            }.items():
                os.environ.setdefault(k, v)
            with mock_aws():
                client = boto3.client("s3", region_name="us-east-1")
                client.create_bucket(Bucket="bench-archive")
                seed_s3(hours, args.files)
                measure(
                    "S3 (moto)",
                    "s3://bench-archive/raw",
                    tmp,
                    hours,
                    args.repeat,
                    lambda: S3ArchiveLister(client=client),
                    rows,
                )
    finally:
        if not args.out:
            shutil.rmtree(tmp, ignore_errors=True)

    print(
        f"\n{args.hours} hours x {args.files} files, median of {args.repeat}, "
        f"{os.cpu_count()} CPUs\n"
    )
    print("| archive | tick | ms | listings | entries | run requests | cursor bytes | of 60 s |")
    print("|---|---|--:|--:|--:|--:|--:|--:|")
    for label, what, ms, listing, n_req, cursor_len in rows:
        print(
            f"| {label} | {what} | {ms:,.0f} | {listing.calls:,} | {listing.entries:,} "
            f"| {n_req:,} | {cursor_len:,} | {ms / 1000 / TIMEOUT_S:.2%} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
