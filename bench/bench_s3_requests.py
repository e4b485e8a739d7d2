"""How many S3 and Glue requests one small sync makes, by kind: moto behind a counting proxy.

    python bench/bench_s3_requests.py [--events 300] [--files 2] [--top 25]

On S3 every request is latency (tens of ms) and a charge, and a sync of a small hour writes
and reads a few dozen small files: the request count is what such a sync costs. This starts a
moto server on loopback with ``datalake_assets_tests``' fault proxy in front of it (here it
only counts; ``--latency-ms`` adds a cloud round trip to each request), generates one archive
hour (demo traffic, seed 13, as ``reliability/test_storage_faults.py``), and runs one sync as a
real process (``python -m datalake_assets.transform.job``, Glue in moto as the catalog) with
``AWS_ENDPOINT_URL`` on the proxy. Printed: the total, the wall time of the sync (moto and the
proxy are slow Python servers: compare counts, not seconds), the report's phases, and the
requests grouped by method and the first levels of their path (Glue by operation).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
SOURCE = "s3src"
HOUR = "2026-11-21T10"


def kind(method: str, path: str, headers: dict) -> tuple[str, str]:
    target = {k.lower(): v for k, v in headers.items()}.get("x-amz-target")
    if target:
        return "GLUE", target.split(".")[-1]
    path, _, query = path.partition("?")
    short = re.sub(
        r"=[^/]*",
        "=*",
        "/".join(re.sub(r"^lake-[0-9a-f]+$", "<bucket>", p) for p in path.split("/")[:5]),
    )
    return method, short + ("?" + re.sub(r"=[^&]*", "", query) if query else "")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=300)
    p.add_argument("--files", type=int, default=2)
    p.add_argument("--top", type=int, default=25)
    p.add_argument(
        "--latency-ms",
        type=float,
        default=0.0,
        help="added to every request, as a round trip to AWS would be",
    )
    p.add_argument(
        "--table-format",
        choices=("segment", "iceberg"),
        default="segment",
        help="iceberg: the tables in Glue (moto); the commit's requests are listed apart",
    )
    p.add_argument(
        "--replay", action="store_true", help="count a replay of the hour (after a first sync)"
    )
    a = p.parse_args()

    import logging

    import boto3
    from moto.server import ThreadedMotoServer

    from datalake_assets.catalog.config import CatalogConfig
    from datalake_assets.ingest.demo import generate_archive
    from datalake_assets.settings.formats_section import FormatConfig
    from datalake_assets.spec.layout import ArchiveHour
    from datalake_assets.transform.job import SyncRequest
    from datalake_assets_tests.reliability.s3_fault_proxy import FaultProxy
    from datalake_assets_tests.support.aws import FAKE_CREDENTIALS

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    os.environ.update(FAKE_CREDENTIALS)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    moto = f"http://{host}:{port}"
    proxy = FaultProxy(host, int(port)).start()
    tally: collections.Counter = collections.Counter()

    iceberg: collections.Counter = collections.Counter()  # (method, metadata|data)

    def count(method, path, headers, body):  # fails nothing
        tally[kind(method, path, headers)] += 1
        if "/iceberg/" in path:
            part = "metadata" if "/metadata/" in path else "data"
            iceberg[(method, part)] += 1

    try:
        bucket = f"lake-{uuid.uuid4().hex[:12]}"
        boto3.client("s3", endpoint_url=moto, region_name="us-east-1").create_bucket(Bucket=bucket)
        os.environ["AWS_ENDPOINT_URL"] = moto  # the archive is written straight to moto
        generate_archive(
            f"s3://{bucket}/archive",
            SOURCE,
            [ArchiveHour.parse(HOUR)],
            events_per_hour=a.events,
            files_per_hour=a.files,
            seed=13,
        )
        proxy.fail = count
        proxy.delay_s = a.latency_ms / 1000
        req = SyncRequest(
            f"s3://{bucket}/lake",
            f"s3://{bucket}/archive",
            SOURCE,
            (HOUR,),
            database="bench",
            lock_wait_seconds=30,
            catalog=CatalogConfig(
                backend="glue", glue_region="us-east-1", glue_endpoint_url=proxy.url
            ),
            table_format=FormatConfig(
                format=a.table_format,
                **(
                    {
                        "catalog": "glue",
                        "glue_region": "us-east-1",
                        "glue_endpoint_url": proxy.url,
                        "s3_endpoint_url": proxy.url,
                    }
                    if a.table_format == "iceberg"
                    else {}
                ),
            ),
        )
        env = {
            **os.environ,
            "AWS_ENDPOINT_URL": proxy.url,
            "PYTHONPATH": str(REPO),
            "SPARK_LOCAL_IP": "127.0.0.1",
        }
        if a.replay:  # the first sync, not counted
            subprocess.run(
                [sys.executable, "-m", "datalake_assets.transform.job", *req.to_args()],
                env=env,
                capture_output=True,
                timeout=900,
                check=True,
            )
            req = dataclasses.replace(req, replay=True)
            tally.clear()
            iceberg.clear()
        t = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "datalake_assets.transform.job", *req.to_args()],
            env=env,
            capture_output=True,
            timeout=900,
        )
        wall = time.monotonic() - t
        report = json.loads(done.stdout.decode().strip().splitlines()[-1])
        print(
            f"sync: exit {done.returncode}, {report.get('status')}, {report.get('lines_in')} "
            f"lines, {wall:.1f} s; requests: {sum(tally.values())}"
        )
        print(
            f"report: {report.get('duration_mins', 0) * 60:.1f} s in the sync, phases "
            f"{report.get('timings')}"
        )
        for (method, what), n in tally.most_common(a.top):
            print(f"{n:6d}  {method:6s} {what}")
        if a.table_format == "iceberg":
            # the commit's own requests: the tables' metadata (manifests, manifest lists,
            # metadata JSON) and the Iceberg tables' Glue calls; stage B's data files and the
            # footers the commit reads are the requests on data/
            by_part = ", ".join(f"{m} {part} {n}" for (m, part), n in sorted(iceberg.items()))
            glue = {what: n for (m, what), n in tally.items() if m == "GLUE"}
            print(f"iceberg tables' objects: {by_part}; Glue: {glue}")
    finally:
        proxy.stop()
        server.stop()


if __name__ == "__main__":
    main()
