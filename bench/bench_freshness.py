"""When an event sent to the collector becomes a row: the open hour's batches against the
hourly sync, in the same run (issue #55).

    python bench/bench_freshness.py [--minutes 30] [--rate 20] [--align] [--out DIR]

As a user runs it, on this machine: ``datalake collect`` and ``datalake dev`` (webserver,
daemon, the archive sensor, the open hour's loop) on a fresh home with two sources on an
Iceberg lake (the default format) and default settings but for the intervals: ``web5`` at the
default ``[freshness] interval_minutes`` (5) and ``web1`` at ``freshness_minutes = 1``. For
each source the official ``@segment/analytics-node`` (``send_steady.cjs``, the library's
default batching) sends ``--rate`` track events a second for ``--minutes``; each carries its
sequence number. A poller runs ``datalake sql`` every ``--poll-seconds`` (one process a poll,
as a person would) and records when each message is first seen; the latency of a message is
that time minus the moment the library was called (an upper bound: up to one poll late).

``--align`` starts the traffic so that an hour boundary falls in the middle of it: the hour
before then closes during the run (``[automation] settle_minutes`` after its end, the archive
sensor's sync replaces the batches), and its close is the comparison: for the messages of that
hour, the time the close's snapshot of their table was committed minus their send time is when
an hourly-only lake (``interval_minutes = 0``) would have shown them (the same sync at the same
time; the hour's earlier messages would wait longer still).

Also measured: the CPU-seconds of the two services and every process they start (sampled
from /proc every 2 s), of the loop's process (``datalake batches``) apart, and per hour of
wall; and at the end every sent message is in its table exactly once. Output: a Markdown table on stdout and
``<out>/results.json``. Loopback only; needs node and ``npm ci`` in
``datalake_assets_tests/ingest/collector/js`` (the README's test command does it).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NODE_MODULES = REPO / "datalake_assets_tests/ingest/collector/js/node_modules"
SOURCES = {"web5": None, "web1": 1}  # source id -> freshness_minutes (None: [freshness]'s)
TABLE = "tick"  # the event "Tick"
SEQ = "properties_seq"  # its properties.seq
CLK_TCK = os.sysconf("SC_CLK_TCK")
ROW = re.compile(r"│\s*(web\d)\s*│\s*(\d+)\s*│")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_home(home: Path, port: int) -> Path:
    text = ['archive_root = "archive"', 'lake_root = "lake"', "[collector]", f"port = {port}"]
    for sid, minutes in SOURCES.items():
        text += ["[[sources]]", f'id = "{sid}"', f'write_keys = ["wk-{sid}"]']
        if minutes is not None:
            text.append(f"freshness_minutes = {minutes}")
    path = home / "lake.toml"
    path.write_text("\n".join(text) + "\n", encoding="utf-8")
    return path


def datalake() -> list[str]:
    """The ``datalake`` command of this interpreter's environment."""
    script = Path(sys.executable).with_name("datalake")
    return [str(script)] if script.exists() else [sys.executable, "-m", "datalake_assets.cli"]


class CpuSampler(threading.Thread):
    """CPU-seconds of the given processes and all their descendants (``datalake dev`` starts
    its services in sessions of their own), sampled from /proc every 2 s; a process that
    exits between two samples loses at most its last 2 s."""

    def __init__(self, roots: list[int]) -> None:
        super().__init__(daemon=True)
        self.roots, self.seen, self.stop = set(roots), {}, threading.Event()

    def run(self) -> None:
        while not self.stop.wait(2.0):
            stats = {}
            for d in os.listdir("/proc"):
                if d.isdigit():
                    try:
                        st = Path(f"/proc/{d}/stat").read_text()
                        stats[int(d)] = st[st.rindex(")") + 2 :].split()
                    except (OSError, ValueError):
                        continue
            ours = set(self.roots)
            while True:  # descendants: children of what is ours, until nothing is added
                more = {p for p, r in stats.items() if int(r[1]) in ours} - ours
                if not more:
                    break
                ours |= more
            for pid in ours & stats.keys():
                rest = stats[pid]
                key = (pid, rest[19])
                cpu = (int(rest[11]) + int(rest[12])) / CLK_TCK
                if key not in self.seen:
                    try:
                        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
                    except OSError:
                        continue
                    self.seen[key] = [cpu, cmd.decode(errors="replace")]
                self.seen[key][0] = cpu

    def total(self, needle: str = "") -> float:
        return sum(cpu for cpu, cmd in self.seen.values() if needle in cmd)


def poll(env: dict, floors: dict[str, int]) -> set[tuple[str, int]] | None:
    """One ``datalake sql`` of the rows at or above each source's lowest unseen seq; None
    while a table does not exist yet."""
    query = " UNION ALL ".join(
        f"SELECT '{sid}' AS s, {SEQ} FROM {sid}.{TABLE} WHERE {SEQ} >= {floors[sid]}"
        for sid in SOURCES
    )
    done = subprocess.run(
        [*datalake(), "sql", query, "--limit", "1000000"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        return None
    return {(m[1], int(m[2])) for m in ROW.finditer(done.stdout)}


def wait_health(url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"the collector at {url} did not answer within {timeout:.0f} s")


def aligned_start(minutes: float) -> datetime:
    """The next moment from which half the run falls before an hour boundary."""
    now = datetime.now(UTC)
    boundary = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    start = boundary - timedelta(minutes=minutes / 2)
    return start if start >= now else start + timedelta(hours=1)


def percentiles(values: list[float]) -> dict:
    if not values:
        return {"n": 0}
    q = statistics.quantiles(values, n=100, method="inclusive") if len(values) > 1 else values
    return {
        "n": len(values),
        "p50_s": round(statistics.median(values), 1),
        "p95_s": round(q[94] if len(values) > 1 else values[0], 1),
        "max_s": round(max(values), 1),
    }


def close_times(lake: Path) -> dict[str, list[tuple[float, str]]]:
    """Per source, the commit times of the tick table's snapshots that were not batches
    (an hour's sync): (unix seconds, operation)."""
    from pyiceberg.catalog.sql import SqlCatalog

    from datalake_assets.lake.formats.iceberg import BATCH_PROPERTY

    catalog = SqlCatalog(
        "datalake", uri=f"sqlite:///{lake}/_iceberg/catalog.db", warehouse=f"file://{lake}/iceberg"
    )
    out = {}
    for sid in SOURCES:
        table = catalog.load_table((sid, TABLE))
        out[sid] = [
            (s.timestamp_ms / 1000, s.summary.operation.value)
            for s in table.snapshots()
            if s.summary is not None and BATCH_PROPERTY not in s.summary.additional_properties
        ]
    return out


def final_counts(env: dict) -> dict[str, dict]:
    query = " UNION ALL ".join(
        f"SELECT '{sid}' AS s, count(*) AS n, count(DISTINCT {SEQ}) AS d FROM {sid}.{TABLE}"
        for sid in SOURCES
    )
    done = subprocess.run(
        [*datalake(), "sql", query], env=env, capture_output=True, text=True, check=True
    )
    rows = re.findall(r"│\s*(web\d)\s*│\s*(\d+)\s*│\s*(\d+)\s*│", done.stdout)
    return {s: {"rows": int(n), "distinct": int(d)} for s, n, d in rows}


def stop_session(proc: subprocess.Popen, sig: int, timeout: float = 120) -> None:
    try:
        os.killpg(proc.pid, sig)
        proc.wait(timeout)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=30.0, help="traffic's duration")
    ap.add_argument("--rate", type=float, default=20.0, help="events a second per source")
    ap.add_argument("--poll-seconds", type=float, default=15.0)
    ap.add_argument("--drain-minutes", type=float, default=12.0, help="after the traffic")
    ap.add_argument("--align", action="store_true", help="an hour boundary mid-traffic")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if not (NODE_MODULES / "@segment/analytics-node").exists():
        raise SystemExit(f"missing {NODE_MODULES}: npm ci in its folder first")
    out = Path(args.out or tempfile.mkdtemp(prefix="bench_freshness_"))
    home = out / "home"
    home.mkdir(parents=True)
    port = free_port()
    settings = write_home(home, port)
    url = f"http://127.0.0.1:{port}"
    env = {
        **{k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"},
        "DATALAKE_HOME": str(home),
        "DATALAKE_SETTINGS": str(settings),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "NODE_PATH": str(NODE_MODULES),
    }
    if args.align:
        start = aligned_start(args.minutes)
        wait = (start - datetime.now(UTC)).total_seconds() - 90  # the services' start first
        print(f"traffic starts at {start:%H:%M:%S} UTC; waiting {max(wait, 0):.0f} s", flush=True)
        time.sleep(max(wait, 0))

    logs = {n: open(out / f"{n}.log", "wb") for n in ("collect", "dev")}  # noqa: SIM115
    spawn = dict(env=env, stderr=subprocess.STDOUT, start_new_session=True)
    collect = subprocess.Popen([*datalake(), "collect"], stdout=logs["collect"], **spawn)
    dev = subprocess.Popen(
        [*datalake(), "dev", "--port", str(free_port())], stdout=logs["dev"], **spawn
    )
    sampler = CpuSampler([collect.pid, dev.pid])
    sampler.start()
    wait_health(url, 60)
    if args.align:
        time.sleep(max(0.0, (start - datetime.now(UTC)).total_seconds()))

    t0 = time.time()
    senders = {
        sid: subprocess.Popen(
            [
                "node",
                str(REPO / "bench/send_steady.cjs"),
                url,
                f"wk-{sid}",
                str(args.rate),
                str(args.minutes * 60),
                str(out / f"sent-{sid}.json"),
            ],
            env=env,
        )
        for sid in SOURCES
    }
    total = round(args.rate * args.minutes * 60)
    first_seen: dict[tuple[str, int], float] = {}
    floors = dict.fromkeys(SOURCES, 0)
    deadline = t0 + (args.minutes + args.drain_minutes) * 60
    while time.time() < deadline:
        at = time.time()
        for key in poll(env, floors) or ():
            first_seen.setdefault(key, at)
        for sid in SOURCES:
            while (sid, floors[sid]) in first_seen:
                floors[sid] += 1
        if all(floors[s] >= total for s in SOURCES):
            break
        time.sleep(max(0.0, args.poll_seconds - (time.time() - at)))
    for p in senders.values():
        p.wait(300)
    wall_h = (time.time() - t0) / 3600
    cpu = {"all": sampler.total(), "loop": sampler.total(" batches"), "wall_h": wall_h}
    counts = final_counts(env)
    stop_session(dev, signal.SIGINT)
    stop_session(collect, signal.SIGTERM)
    sampler.stop.set()

    closes = close_times(home / "lake")
    results = {"args": vars(args), "started": t0, "cpu_s": cpu, "counts": counts, "sources": {}}
    for sid, minutes in SOURCES.items():
        sent = json.loads((out / f"sent-{sid}.json").read_text())
        lat, by_hour = [], {}
        for seq, _mid, ms in sent["sent"]:
            seen = first_seen.get((sid, seq))
            if seen is not None:
                lat.append(seen - ms / 1000)
            by_hour.setdefault(datetime.fromtimestamp(ms / 1000, UTC).hour, []).append(ms / 1000)
        hourly = []
        for hour_sends in by_hour.values():
            end = max(hour_sends)
            later = [t for t, _op in closes[sid] if t > end]
            if later:  # the hour's close: its first sync after its last message
                hourly += [min(later) - t for t in hour_sends]
        results["sources"][sid] = {
            "interval_minutes": minutes or 5,
            "sent": len(sent["sent"]),
            "errors": sent["errors"][:5],
            "visible": len(lat),
            "batches": percentiles(lat),
            "hourly_close": percentiles(hourly),
        }
    (out / "results.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    print(
        f"\n{args.rate:g} events/s per source for {args.minutes:g} min; polls every "
        f"{args.poll_seconds:g} s; {out}"
    )
    print("| source | interval | sent | visible | p50 | p95 | max | closed hour: p50 / p95 |")
    print("|---|---|---|---|---|---|---|---|")
    for sid, r in results["sources"].items():
        b, h = r["batches"], r["hourly_close"]
        print(
            f"| {sid} | {r['interval_minutes']} min | {r['sent']} | {r['visible']} | "
            f"{b.get('p50_s')} s | {b.get('p95_s')} s | {b.get('max_s')} s | "
            f"{h.get('p50_s')} s / {h.get('p95_s')} s |"
        )
    print(f"rows at the end: {counts}")
    print(
        f"CPU: {cpu['all']:.0f} CPU-s in all ({cpu['all'] / wall_h / 3600:.2f} of a core), "
        f"the loop {cpu['loop']:.0f} ({cpu['loop'] / wall_h / 3600:.3f} of a core)"
    )


if __name__ == "__main__":
    main()
