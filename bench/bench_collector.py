"""Benchmark: the collector's accepted events/s on loopback, against the sync's events/s.

    PYTHONPATH=. python bench/bench_collector.py                                  # 4 clients
    PYTHONPATH=. python bench/bench_collector.py --clients 1,4,16 --workers 1,2 --wait-quiet 300
    PYTHONPATH=. python bench/bench_collector.py --web --clients 16 --workers 1,2   # browsers

For each number of workers and of clients: a fresh collector (``datalake collect`` in its own
process, on 127.0.0.1, port chosen by the OS, ``--workers`` processes), then that many client
*processes*, each with one keep-alive connection, posting ``/v1/batch`` requests of ``--batch``
realistic messages (made by ``datalake_assets.ingest.demo``: nested properties, contexts, the python
library's shape with a ``timestamp`` per message and a batch ``sentAt``) as fast as the replies
come back, for ``--seconds`` (and at most ``--max-requests`` per client). Every messageId is
unique.

Measured: accepted events/s (events in 2xx replies / load time), request latency p50/p99/max
(send to full reply, which includes the group-committed fsync), the collector's peak RSS
(``VmHWM``) and CPU seconds, fsync rounds; then a graceful stop (SIGTERM) is timed and the
archive is read back: every accepted messageId must be in it exactly once. The figure to beat
is the sync's events/s on the same machine (``--sync-events-per-s``, default 11,401: the
``ours`` row of ``bench/README.md``), given as a ratio.

``--web``: the web source's traffic instead (``web_load.py``): ``--clients`` browser connections
driven by one load process, one small analytics.js event per request on ``/v1/t``, ``/v1/p``,
``/v1/i``; requests/s is then events/s.

Traffic goes to 127.0.0.1 only, bounded in count and time. Output: a Markdown table on stdout
and ``<out>/results.json``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import multiprocessing as mp
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from bench_sync import machine_cpu, wait_for_quiet  # same folder: run as a script
from web_load import run as web_run

REPO = Path(__file__).resolve().parent.parent
SYNC_EVENTS_PER_S = 11_401  # bench_sync.py, "ours" (bench/README.md)
WRITE_KEY = "bench-write-key"
SOURCE = "bench"
CLK_TCK = os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------------------------- payloads


def demo_messages(n: int, work: Path) -> list[dict]:
    """``n`` valid, realistic messages as a client would send them (no server fields)."""
    import orjson

    from datalake_assets.ingest.demo import generate_archive
    from datalake_assets.spec.layout import ArchiveHour
    from datalake_assets.spec.messages import Rejected, validate

    root = work / "demo-archive"
    generate_archive(
        str(root),
        "demo",
        [ArchiveHour.parse("2026-11-21T10")],
        events_per_hour=int(n * 1.1) + 100,
        files_per_hour=1,
        seed=11,
    )
    out: list[dict] = []
    for path in sorted(root.rglob("*.gz")):
        for line in gzip.decompress(path.read_bytes()).splitlines():
            try:
                m = orjson.loads(line)
                validate(m)
            except (orjson.JSONDecodeError, Rejected):
                continue
            for k in ("receivedAt", "sentAt", "originalTimestamp", "messageId"):
                m.pop(k, None)
            m["timestamp"] = "2026-11-21T10:00:00.000Z"
            out.append(m)
            if len(out) == n:
                break
    shutil.rmtree(root)
    return out


def batch_templates(messages: list[dict], batch: int, count: int) -> list[bytes]:
    """Request bodies whose messageIds contain ``@@R@@`` (replaced per request: unique ids)."""
    import orjson

    out = []
    for t in range(count):
        items = []
        for j in range(batch):
            m = dict(messages[(t * batch + j) % len(messages)])
            m["messageId"] = f"@@R@@-{j}"
            items.append(m)
        out.append(orjson.dumps({"batch": items, "sentAt": "@@SENT@@"}))
    return out


# ----------------------------------------------------------------------------------- clients


def client_main(
    cid: int,
    host: str,
    port: int,
    templates: list[bytes],
    start_at: float,
    seconds: float,
    max_requests: int,
    batch: int,
    results: mp.Queue,
) -> None:
    import base64
    import http.client

    auth = "Basic " + base64.b64encode(f"{WRITE_KEY}:".encode()).decode()
    headers = {"Content-Type": "application/json", "Authorization": auth}
    conn = http.client.HTTPConnection(host, port, timeout=60)
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    accepted_events = 0
    while time.time() < start_at:
        time.sleep(0.001)
    t0 = time.perf_counter()
    cpu0 = time.process_time()
    deadline = t0 + seconds
    n = 0
    errors = 0
    while n < max_requests and time.perf_counter() < deadline:
        sent = datetime.now(UTC).isoformat(timespec="milliseconds")[:-6] + "Z"
        body = templates[n % len(templates)].replace(b"@@R@@", f"c{cid}r{n}".encode(), batch)
        body = body.replace(b"@@SENT@@", sent.encode(), 1)
        t = time.perf_counter()
        try:
            conn.request("POST", "/v1/batch", body=body, headers=headers)
            resp = conn.getresponse()
            resp.read()
        except (OSError, http.client.HTTPException):
            errors += 1
            conn.close()
            conn = http.client.HTTPConnection(host, port, timeout=60)
            n += 1
            continue
        latencies.append(time.perf_counter() - t)
        statuses[resp.status] = statuses.get(resp.status, 0) + 1
        if 200 <= resp.status < 300:
            accepted_events += batch
        n += 1
    elapsed = time.perf_counter() - t0
    conn.close()
    results.put(
        {
            "client": cid,
            "requests": n,
            "accepted_events": accepted_events,
            "cpu_s": time.process_time() - cpu0,
            "statuses": statuses,
            "errors": errors,
            "elapsed": elapsed,
            "latencies": latencies,
        }
    )


def web_client_main(
    host: str,
    port: int,
    connections: int,
    start_at: float,
    seconds: float,
    max_requests: int,
    results: mp.Queue,
) -> None:
    results.put(web_run(host, port, WRITE_KEY, connections, start_at, seconds, max_requests))


# ---------------------------------------------------------------------------------- collector


def _one_proc(pid: int) -> dict[str, float]:
    out: dict[str, float] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmHWM:", "VmRSS:")):
                out[line.split(":")[0]] = int(line.split()[1]) / 1024  # MiB
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    out["cpu_s"] = (int(fields[11]) + int(fields[12])) / CLK_TCK
    return out


def proc_stat(pid: int) -> dict[str, float]:
    """The collector's process and its workers (``workers`` > 1): RSS and CPU summed, and
    ``VmHWM`` the sum of each process's own peak."""
    pids = [pid]
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        pids.append(int(entry))
            except (OSError, ValueError, IndexError):
                pass
    total: dict[str, float] = {"VmHWM": 0.0, "VmRSS": 0.0, "cpu_s": 0.0}
    for p in pids:
        try:
            for k, v in _one_proc(p).items():
                total[k] += v
        except OSError:
            pass
    return total


class CollectorProcess:
    def __init__(self, work: Path, segment_max_bytes: int, workers: int = 1) -> None:
        work.mkdir(parents=True)
        (work / "lake.toml").write_text(
            'archive_root = "archive"\nlake_root = "lake"\n'
            f'[collector]\nport = 0\nspool_dir = "spool"\nworkers = {workers}\n'
            f"segment_max_bytes = {segment_max_bytes}\n"
            f'[[sources]]\nid = "{SOURCE}"\n',
            encoding="utf-8",
        )
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "DATALAKE_WRITE_KEYS": f"{WRITE_KEY}={SOURCE}",
        }
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "datalake_assets.cli",
                "--settings",
                str(work / "lake.toml"),
                "collect",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        self.lines: list[str] = []
        self.url = ""
        ready = threading.Event()

        def read() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                self.lines.append(line)
                m = re.search(r"listening on http://([\d.]+):(\d+)", line)
                if m:
                    self.host, self.port = m.group(1), int(m.group(2))
                    ready.set()
            ready.set()

        self._reader = threading.Thread(target=read, daemon=True)
        self._reader.start()
        if not ready.wait(60) or not hasattr(self, "port"):
            self.proc.kill()
            raise SystemExit("collector did not start:\n" + "".join(self.lines))

    def health(self) -> dict:
        import http.client

        conn = http.client.HTTPConnection(self.host, self.port, timeout=10)
        conn.request("GET", "/health")
        data = json.loads(conn.getresponse().read())
        conn.close()
        return data

    def stop(self) -> tuple[int, float]:
        t = time.perf_counter()
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(600)
        self._reader.join(30)
        return code, time.perf_counter() - t


def count_archive(archive: Path) -> tuple[int, int]:
    """(lines, distinct messageIds) of the archive's visible files."""
    ids: set[bytes] = set()
    lines = 0
    pattern = re.compile(rb'"messageId":"([^"]*)"')
    for path in archive.rglob("*.jsonl.gz"):
        if path.name.startswith((".", "_")):
            continue
        data = gzip.decompress(path.read_bytes())
        found = pattern.findall(data)
        lines += data.count(b"\n")
        ids.update(found)
    return lines, len(ids)


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    k = min(len(values) - 1, max(0, round(p / 100 * (len(values) - 1))))
    return values[k]


def run_config(
    clients: int, workers: int, args: argparse.Namespace, templates: list[bytes], out: Path
) -> dict:
    work = out / f"workers-{workers}-clients-{clients}"
    shutil.rmtree(work, ignore_errors=True)
    quiet = wait_for_quiet(args.wait_quiet) if args.wait_quiet > 0 else None
    collector = CollectorProcess(work, args.segment_max_bytes, workers)
    ctx = mp.get_context("fork")
    results: mp.Queue = ctx.Queue()
    start_at = time.time() + 1.0
    if args.web:  # one load process drives every connection
        procs = [
            ctx.Process(
                target=web_client_main,
                args=(
                    collector.host,
                    collector.port,
                    clients,
                    start_at,
                    args.seconds,
                    args.max_requests * clients,
                    results,
                ),
            )
        ]
    else:
        procs = [
            ctx.Process(
                target=client_main,
                args=(
                    c,
                    collector.host,
                    collector.port,
                    templates[c::clients] or templates,
                    start_at,
                    args.seconds,
                    args.max_requests,
                    args.batch,
                    results,
                ),
            )
            for c in range(clients)
        ]
    for p in procs:
        p.start()
    samples: list[float] = []
    stop_sampling = threading.Event()

    def sample() -> None:
        while not stop_sampling.wait(0.5):
            try:
                samples.append(proc_stat(collector.proc.pid)["VmRSS"])
            except (OSError, KeyError):
                return

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    while time.time() < start_at:
        time.sleep(0.001)
    busy0, wall0 = machine_cpu()["busy_s"], time.monotonic()
    before = proc_stat(collector.proc.pid)
    per_client = [results.get(timeout=args.seconds + 120) for _ in procs]
    for p in procs:
        p.join()
    busy1, wall1 = machine_cpu()["busy_s"], time.monotonic()
    after = proc_stat(collector.proc.pid)
    health = collector.health()  # with workers: one worker's counters
    stop_sampling.set()
    code, stop_s = collector.stop()
    lines, distinct = count_archive(work / "archive")
    latencies = [x for r in per_client for x in r["latencies"]]
    accepted = sum(r["accepted_events"] for r in per_client)
    load_s = max(r["elapsed"] for r in per_client)
    statuses: dict[str, int] = {}
    for r in per_client:
        for s, n in r["statuses"].items():
            statuses[str(s)] = statuses.get(str(s), 0) + n
    eps = accepted / load_s if load_s else 0.0
    result = {
        "clients": clients,
        "workers": workers,
        "batch": 1 if args.web else args.batch,
        "mode": "web" if args.web else "batch",
        "seconds": round(load_s, 2),
        "requests": sum(r["requests"] for r in per_client),
        "statuses": statuses,
        "client_errors": sum(r["errors"] for r in per_client),
        "accepted_events": accepted,
        "events_per_s": round(eps),
        "requests_per_s": round(len(latencies) / load_s) if load_s else 0,
        "latency_ms": {
            "p50": round(percentile(latencies, 50) * 1000, 2),
            "p99": round(percentile(latencies, 99) * 1000, 2),
            "max": round(max(latencies, default=0) * 1000, 2),
        },
        "collector_peak_rss_mb": round(after["VmHWM"], 1),
        "collector_rss_sampled_max_mb": round(max(samples, default=after["VmRSS"]), 1),
        "collector_cpu_s": round(after["cpu_s"] - before["cpu_s"], 2),
        "collector_cpu_us_per_event": round((after["cpu_s"] - before["cpu_s"]) / accepted * 1e6, 1)
        if accepted
        else None,
        "clients_cpu_s": round(sum(r["cpu_s"] for r in per_client), 2),
        # CPU of everything else on the machine during the load (0 on a quiet machine)
        "others_cpu_s": round(
            (busy1 - busy0)
            - (after["cpu_s"] - before["cpu_s"])
            - sum(r["cpu_s"] for r in per_client),
            1,
        ),
        "load_wall_s": round(wall1 - wall0, 1),
        "quiet_check": quiet,
        "fsync_rounds": health.get("fsync_rounds") if workers == 1 else None,
        "events_per_fsync": round(accepted / health["fsync_rounds"], 1)
        if workers == 1 and health.get("fsync_rounds")
        else None,
        "stop_exit_code": code,
        "graceful_stop_s": round(stop_s, 2),
        "collector_said": next(
            (ln.strip() for ln in collector.lines if ln.startswith("stopped:")), None
        ),
        "archive_lines": lines,
        "archive_distinct_ids": distinct,
        "archive_complete": lines == distinct == accepted,
        "vs_sync": round(eps / args.sync_events_per_s, 2),
    }
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return result


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clients", default="4", help="comma-separated client counts (default 4)")
    p.add_argument(
        "--workers", default="1", help="comma-separated collector worker process counts (default 1)"
    )
    p.add_argument("--batch", type=int, default=100, help="messages per request (default 100)")
    p.add_argument(
        "--web",
        action="store_true",
        help="web-source traffic: one small event per request on /v1/t|p|i, "
        "--clients connections from one load process",
    )
    p.add_argument("--seconds", type=float, default=20.0, help="load time per run (default 20)")
    p.add_argument("--max-requests", type=int, default=100_000, help="per client (bound)")
    p.add_argument("--segment-max-bytes", type=int, default=64 * 1024 * 1024)
    p.add_argument("--sync-events-per-s", type=float, default=SYNC_EVENTS_PER_S)
    p.add_argument("--out", default=str(REPO / "bench" / "out" / "collector"))
    p.add_argument("--keep", action="store_true", help="keep each run's spool and archive")
    p.add_argument(
        "--wait-quiet",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="before each run, wait up to this long for the rest of the machine to "
        "use < 0.3 CPUs (a shared machine)",
    )
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    counts = [int(c) for c in args.clients.split(",")]
    worker_counts = [int(w) for w in args.workers.split(",")]
    if args.web:
        templates = []
        body_kb = (
            sum(
                len(t)
                for t in __import__("web_load").request_templates("127.0.0.1", 8088, WRITE_KEY)
            )
            / 3
            / 1024
        )
    else:
        messages = demo_messages(2000, out)
        templates = batch_templates(messages, args.batch, 64)
        body_kb = sum(len(t) for t in templates) / len(templates) / 1024
    runs = []
    for w, c in [(w, c) for w in worker_counts for c in counts]:
        r = run_config(c, w, args, templates, out)
        runs.append(r)
        print(
            f"workers={w} clients={c}: {r['events_per_s']:,} events/s, "
            f"p50 {r['latency_ms']['p50']} ms, "
            f"p99 {r['latency_ms']['p99']} ms, peak RSS {r['collector_peak_rss_mb']} MB",
            file=sys.stderr,
        )
    results = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_avg_at_end": os.getloadavg(),
        },
        "request_body_kib": round(body_kb, 1),
        "runs": runs,
        "sync_events_per_s": args.sync_events_per_s,
    }
    (out / "results.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    what = "1 event" if args.web else f"batch of {args.batch} messages"
    print(
        f"\n{what} per request ({body_kb:.1f} KiB), "
        f"{args.seconds:g} s per run; sync: {args.sync_events_per_s:,.0f} events/s\n"
    )
    print(
        "| workers | clients | accepted events/s | vs sync | requests/s | p50 ms | p99 ms "
        "| max ms | peak RSS MB | collector CPU µs/event | events/fsync | graceful stop s "
        "| archive ok | load generator CPU s | others' CPU s |"
    )
    print("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|:-:|--:|--:|")
    for r in runs:
        lat = r["latency_ms"]
        print(
            f"| {r['workers']} | {r['clients']} | {r['events_per_s']:,} | {r['vs_sync']:.1f}x | "
            f"{r['requests_per_s']:,} | {lat['p50']} | {lat['p99']} | {lat['max']} | "
            f"{r['collector_peak_rss_mb']} | {r['collector_cpu_us_per_event']} | "
            f"{r['events_per_fsync']} | {r['graceful_stop_s']} | "
            f"{'yes' if r['archive_complete'] else 'NO'} | {r['clients_cpu_s']} | "
            f"{r['others_cpu_s']} |"
        )
    bad = [r for r in runs if not r["archive_complete"] or r["stop_exit_code"] != 0]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
