"""Small files against compacted ones (issue #33): what DuckDB opens, requests, reads and
waits for, on a local disk and on S3 with a round trip per request.

    python bench/bench_compaction.py [--quick] [--latency-ms 30] [--repeat 3] [--out DIR]

Builds with pyarrow (no Spark, no sync), in the shape a year of hourly syncs leaves:

* ``small``: ``--small-hours`` hours (8,760: a year from 2025-01-01T00) of one order_completed
  table, 250 to 350 rows an hour (the demo's size), 50,000 users;
* ``medium``: ``--medium-hours`` hours (720: 30 days) of a wider-traffic table,
  ``--medium-rows`` rows an hour.

Each is an Iceberg table like the product's (format v2, ``identity(day), identity(hr)``, a
SQL catalog), once on the local disk and once in S3 (moto on 127.0.0.1): one Parquet file per
hour, registered one day at a time (``add_files``: 365 commits, so 365 manifests; a year of
real syncs leaves one per sync). The small table is also written in the Segment layout twice:
``day_hour`` (a file per hour, as synced) and ``day`` with each day's 24 hours in one file
(what merging a closed day would give; docs/concepts/compaction.md, "The Segment layout").

Then, for each table before and after compaction (``iceberg_compact.compact_table``, every
hour cold, the default 512 MB target), two queries by DuckDB (``iceberg_scan`` with the
project's offline extensions; ``read_parquet`` over the Segment layout's folders), each on a
fresh connection (nothing cached between runs):

* ``count_by_day``: ``SELECT day, count(*) ... WHERE day BETWEEN <30 days> GROUP BY day``;
* ``one_user``: ``SELECT * ... WHERE user_id = <one user>`` over the whole table.

Locally: wall time (median of ``--repeat``), bytes and read calls from ``/proc/self/io``
(``rchar``, ``syscr``). On S3: through ``datalake_assets_tests``' fault proxy with
``--latency-ms`` added to every request (a cloud round trip): requests (GET/HEAD/LIST), bytes
sent back, objects opened, wall time. Every query's result is checked against the same query
before compaction. Everything goes to ``<out>/results.json``; a Markdown table is printed.
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path
from urllib.parse import unquote

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# the lake's build and compaction: compaction_lake.py, beside this file (run as a script)
from compaction_lake import (
    FIRST_HOUR,
    MB,
    THE_USER,
    Places,
    build_iceberg,
    compact,
    write_hours,
)

# ------------------------------------------------------------------------------- queries


class Requests:
    """What the proxy forwarded: requests by method, bytes sent back, objects read."""

    def __init__(self, places: Places) -> None:
        self.places = places
        self.sizes: dict[str, int] = {}
        self.reset()

    def reset(self) -> None:
        self.methods: collections.Counter = collections.Counter()
        self.bytes = 0
        self.objects: set[str] = set()

    def refresh_sizes(self) -> None:
        import boto3

        s3 = boto3.client("s3", endpoint_url=self.places.moto, region_name="us-east-1")
        self.sizes = {}
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=self.places.bucket):
            self.sizes.update({o["Key"]: o["Size"] for o in page.get("Contents", [])})

    def __call__(self, method: str, path: str, headers: dict, body: bytes) -> None:
        path, _, query = path.partition("?")
        key = unquote(path.lstrip("/")).split("/", 1)[-1]
        kind = "LIST" if method == "GET" and ("list-type" in query or not key) else method
        self.methods[kind] += 1
        if kind == "GET":
            self.objects.add(key)
            rng = {k.lower(): v for k, v in headers.items()}.get("range", "")
            size = self.sizes.get(key, 0)
            if rng.startswith("bytes="):
                a, _, b = rng[6:].partition("-")
                self.bytes += min(int(b) if b else size - 1, size - 1) - int(a) + 1
            else:
                self.bytes += size
        # fail nothing


def connection(places: Places, where: str):
    from datalake_assets.lake.formats.iceberg_read import _extension, duckdb_connection

    con = duckdb_connection()
    if where == "s3":
        try:
            httpfs = _extension("duckdb_extension_httpfs", "httpfs")
        except ModuleNotFoundError:
            raise SystemExit(
                "DuckDB's httpfs extension is not installed: pip install -e '.[bench]'"
            ) from None
        con.execute(f"LOAD '{httpfs}'")
        con.execute(
            "CREATE SECRET bench (TYPE s3, KEY_ID 'testing', SECRET 'testing', "
            f"REGION 'us-east-1', ENDPOINT '{places.proxy_url[len('http://') :]}', "
            "URL_STYLE 'path', USE_SSL false)"
        )
    return con


def sources(places: Places, where: str, cat, ident) -> dict[str, str]:
    root = places.root(where)
    out = {}
    if ident is not None:
        out["iceberg"] = f"iceberg_scan('{cat.load_table(ident).metadata_location}')"
    return out | {
        layout_: f"read_parquet('{root}/segment/{layout_}/{glob}', hive_partitioning = true, "
        "hive_types_autocast = false)"
        for layout_, glob in (("day_hour", "*/*/*.parquet"), ("day", "*/*.parquet"))
    }


def query_sql(query: str, source: str, days: list[str]) -> str:
    if query == "count_by_day":
        return (
            f"SELECT day, count(*) AS n FROM {source} WHERE day BETWEEN '{days[0]}' "
            f"AND '{days[-1]}' GROUP BY day ORDER BY day"
        )
    return (
        f"SELECT message_id, day, properties_revenue FROM {source} "
        f"WHERE user_id = '{THE_USER}' ORDER BY message_id"
    )


def proc_io() -> dict[str, int]:
    with open("/proc/self/io") as f:
        return {k: int(v) for k, v in (line.split(": ") for line in f)}


def run_query(places: Places, where: str, sql: str, requests: Requests, repeat: int) -> dict:
    times, result, io = [], None, {}
    for r in range(repeat):
        con = connection(places, where)  # fresh: no file or metadata cache between runs
        requests.reset()
        before = proc_io()
        t = time.perf_counter()
        rows = con.execute(sql).fetchall()
        times.append(time.perf_counter() - t)
        after = proc_io()
        con.close()
        if r == 0:
            result = rows
            io = {
                "read_bytes": after["rchar"] - before["rchar"],
                "read_calls": after["syscr"] - before["syscr"],
            }
            if where == "s3":
                io = {
                    "requests": sum(requests.methods.values()),
                    "by_method": dict(requests.methods),
                    "bytes": requests.bytes,
                    "objects": len(requests.objects),
                    "data_files": sum(o.endswith(".parquet") for o in requests.objects),
                }
    return {
        "seconds": statistics.median(times),
        "times": times,
        "rows": len(result or []),
        "result": result,
        **io,
    }


# ---------------------------------------------------------------------------------- main


def measure(
    places: Places,
    requests: Requests,
    state: str,
    tables: dict,
    repeat: int,
    latency_s: float,
    proxy,
) -> list[dict]:
    """Both queries on every table and layout, locally (median of ``repeat`` runs) and on S3
    (one run: the hourly files' runs take minutes there)."""
    requests.refresh_sizes()
    out = []
    for where in ("local", "s3"):
        proxy.delay_s = latency_s if where == "s3" else 0.0
        for name, t in tables.items():
            cat, ident = t["catalogs"][where]
            srcs = sources(places, where, cat, ident)
            if not t["segment"]:
                srcs = {"iceberg": srcs["iceberg"]}
            elif state == "after":
                srcs = {"iceberg": srcs["iceberg"]}  # the Segment layout has no "after"
            for layout_, src in srcs.items():
                for query in ("count_by_day", "one_user"):
                    sql = query_sql(query, src, t["days"])
                    r = run_query(places, where, sql, requests, repeat if where == "local" else 1)
                    label = layout_ if layout_ == "iceberg" else f"segment {layout_}"
                    out.append(
                        {
                            "table": name,
                            "layout": label,
                            "state": state,
                            "where": where,
                            "query": query,
                            **r,
                        }
                    )
                    print(
                        f"  {state:6s} {where:5s} {name:6s} {label:18s} {query:12s} "
                        f"{r['seconds']:7.3f} s  {r.get('requests', '-')} requests",
                        flush=True,
                    )
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--quick",
        action="store_true",
        help="60 days of the small table, 3 days of the medium one, 1 run each",
    )
    p.add_argument("--small-hours", type=int, default=8760)
    p.add_argument("--medium-hours", type=int, default=720)
    p.add_argument("--medium-rows", type=int, default=5000)
    p.add_argument("--latency-ms", type=float, default=30.0)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--target-mb", type=int, default=512)
    p.add_argument("--out", default=str(REPO / "bench" / "out" / "compaction"))
    a = p.parse_args()
    if a.quick:  # what was not given explicitly
        quick = {"small_hours": 24 * 60, "medium_hours": 24 * 3, "medium_rows": 2000, "repeat": 1}
        for k, v in quick.items():
            if getattr(a, k) == p.get_default(k):
                setattr(a, k, v)

    import boto3
    from moto.server import ThreadedMotoServer

    from datalake_assets_tests.reliability.s3_fault_proxy import FaultProxy
    from datalake_assets_tests.support.aws import FAKE_CREDENTIALS

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    os.environ.update(FAKE_CREDENTIALS)
    out = Path(a.out)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    proxy = FaultProxy(host, int(port)).start()
    try:
        places = Places(out, f"http://{host}:{port}", proxy.url, f"bench-{uuid.uuid4().hex[:8]}")
        boto3.client("s3", endpoint_url=places.moto, region_name="us-east-1").create_bucket(
            Bucket=places.bucket
        )
        requests = Requests(places)
        proxy.fail = requests
        specs = {
            "small": (a.small_hours, (250, 350), True),
            "medium": (a.medium_hours, (a.medium_rows * 9 // 10, a.medium_rows * 11 // 10), False),
        }
        tables: dict[str, dict] = {}
        for seed, (name, (hours, rows, segment)) in enumerate(specs.items()):
            t0 = time.monotonic()
            built = write_hours(places, name, hours, rows, seed + 1, segment)
            cats = {w: build_iceberg(places, w, name, built["by_day"]) for w in ("local", "s3")}
            ndays = -(-hours // 24)
            first = FIRST_HOUR + timedelta(days=max(0, ndays - 30))  # its last 30 days
            days = [f"{first + timedelta(days=d):%Y-%m-%d}" for d in range(min(30, ndays))]
            tables[name] = {
                "catalogs": cats,
                "segment": segment,
                "hours": hours,
                "days": days,
                "rows": built["rows"],
                "bytes": built["bytes"],
                "build_s": round(time.monotonic() - t0, 1),
            }
            print(
                f"built {name}: {hours} hours, {built['rows']:,} rows, "
                f"{built['bytes'] / MB:.1f} MB, {tables[name]['build_s']} s",
                flush=True,
            )
        latency = a.latency_ms / 1000
        results = measure(places, requests, "before", tables, a.repeat, latency, proxy)
        for name, t in tables.items():
            t["compaction"] = {
                w: compact(*t["catalogs"][w], a.target_mb * MB) for w in ("local", "s3")
            }
            print(f"compacted {name}: {t['compaction']['local']}", flush=True)
        results += measure(places, requests, "after", tables, a.repeat, latency, proxy)
    finally:
        proxy.stop()
        server.stop()
    check(results)
    head = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, check=False, text=True
    ).stdout.strip()
    summary = {
        "args": vars(a),
        "commit": head,
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load": os.getloadavg(),
        },
        "tables": {n: {k: v for k, v in t.items() if k != "catalogs"} for n, t in tables.items()},
        "user": THE_USER,
        "results": [{k: v for k, v in r.items() if k != "result"} for r in results],
    }
    (out / "results.json").write_text(json.dumps(summary, indent=2, default=str))
    print_table(results)


def check(results: list[dict]) -> None:
    """Every layout and state answers every query as the hourly Iceberg table did."""
    truth = {
        (r["table"], r["where"], r["query"]): r["result"]
        for r in results
        if r["layout"] == "iceberg" and r["state"] == "before"
    }
    for r in results:
        want = truth[(r["table"], r["where"], r["query"])]
        got = r["result"]
        if r["query"] == "one_user":  # day is a string in both
            got, want = sorted(got), sorted(want)
        if got != want:
            raise SystemExit(
                f"wrong result: {r['table']} {r['layout']} {r['state']} {r['where']} {r['query']}"
            )


def print_table(results: list[dict]) -> None:
    print(
        "\n| table | layout | query | local s | local MB read | S3 requests | S3 objects "
        "(data files) | S3 MB | S3 s |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    by = {(r["table"], r["layout"], r["state"], r["query"], r["where"]): r for r in results}
    for (table, lay, state, query, where), r in by.items():
        if where != "local":
            continue
        s3 = by[(table, lay, state, query, "s3")]
        print(
            f"| {table} | {lay}{' compacted' if state == 'after' else ''} | {query} | "
            f"{r['seconds']:.3f} | {r['read_bytes'] / MB:.1f} | {s3['requests']:,} | "
            f"{s3['objects']:,} ({s3['data_files']:,}) | {s3['bytes'] / MB:.1f} | "
            f"{s3['seconds']:.2f} |"
        )


if __name__ == "__main__":
    main()
