"""What the open hour's loop costs with many sources: the CPU-seconds per hour of wall of
``datalake batches`` serving ``--sources`` sources at the default interval (issue #55: "20
sources at the default interval use at most a quarter of the machine on average").

    python bench/bench_sources_cpu.py [--sources 20] [--rate 20] [--minutes 30] [--out DIR]

A fresh home (under /tmp unless ``--out``) with an Iceberg lake (the default table format),
``--sources`` sources at the default ``[freshness] interval_minutes`` (5: a batch of each every
4 minutes, ``batch_period``) and a Dagster instance (``DAGSTER_HOME`` with the project's
``dagster.yaml``, as ``datalake dev`` makes it), so the loop records each batch's open hour
materialization as it does for users. Then, for ``--minutes``:

* the loop: the real ``datalake batches`` (this environment's entry point), a process of its
  own; what is measured is that process and every process it starts;
* the traffic: each source receives ``--rate`` track events a second (the demo's generator,
  ``ingest/demo``: realistic track messages of its twelve events, each with a new
  ``messageId``, ``receivedAt`` the moment it arrived, the client's timestamps), and reaches the
  archive as the collector's spool rolls it (``ingest/collector/roller.py``): one gzip JSONL
  file per source per ``[collector] segment_max_age_seconds`` (60 s), holding the events
  received since the last, written as ``.tmp-<name>`` and renamed to
  ``<archive_root>/<source>/day=YYYY-MM-DD/hr=HH/collector-<YYYYMMDDHH>-<segment id>.jsonl.gz``
  (a segment also ends at an hour's end). This process writes the files (the collector's CPU
  is not the batches' cost: ``bench_collector.py`` measures it), so none of it is measured.

Measured: the loop's CPU-seconds (user + system) from the kernel's accounting when it exits
(``wait4``: the process and every descendant it waited for), cross-checked by sampling its
process tree from /proc every 2 s; its peak RSS (``VmHWM``); per hour of wall and as a share
of the machine (``os.cpu_count()`` cores); per batch (the CPU between two of the loop's lines,
a batch and the previous one's record in Dagster). "After start-up" leaves out the imports
and the opening of the instance (up to the loop's first line). When the time is up the loop is
stopped (SIGTERM: the batch under way ends first); the last open segments are then rolled
and batched in another process, unmeasured, and every message sent is checked to be one row
in ``tracks`` and one in its event's table. Not measured here: the hour's close (the archive
sensor's sync, which ``datalake batches`` does not run) and the collector.

Output: a Markdown table on stdout, ``<out>/results.json``, the loop's lines in
``<out>/batches.log``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CLK_TCK = os.sysconf("SC_CLK_TCK")
GZIP_LEVEL = 3  # the roller's (roller.GZIP_LEVEL)
HOUR_MS = 3_600_000
BATCH_LINE = re.compile(r"^batch (\S+) .*: (\d+) lines, (\d+) rows, .*\((\d+) files, ([\d.]+) s\)")


def datalake() -> list[str]:
    """The ``datalake`` command of this interpreter's environment."""
    script = Path(sys.executable).with_name("datalake")
    return [str(script)] if script.exists() else [sys.executable, "-m", "datalake_assets.cli"]


def source_ids(n: int) -> list[str]:
    return [f"web{i:02d}" for i in range(1, n + 1)]


def write_home(home: Path, sources: list[str]) -> Path:
    """The settings: default everything (Iceberg, ``[freshness] interval_minutes = 5``)."""
    text = ['archive_root = "archive"', 'lake_root = "lake"']
    for sid in sources:
        text += ["[[sources]]", f'id = "{sid}"']
    path = home / "lake.toml"
    path.write_text("\n".join(text) + "\n", encoding="utf-8")
    return path


def proc_stat(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command's name (``rest[0]`` is the state)."""
    try:
        st = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return st[st.rindex(")") + 2 :].split()


def cpu_of(pid: int) -> float | None:
    """utime + stime of a process (all its threads), seconds."""
    rest = proc_stat(pid)
    return None if rest is None else (int(rest[11]) + int(rest[12])) / CLK_TCK


def hwm_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class TreeSampler(threading.Thread):
    """CPU-seconds and peak RSS of ``root`` and all its descendants, from /proc every 2 s (a
    descendant that exits between two samples loses at most its last 2 s)."""

    def __init__(self, root: int) -> None:
        super().__init__(daemon=True)
        self.root, self.stop = root, threading.Event()
        self.seen: dict[tuple[int, str], dict] = {}  # (pid, start time) -> cpu, hwm, cmd

    def sample(self) -> None:
        stats = {}
        for d in os.listdir("/proc"):
            if d.isdigit() and (rest := proc_stat(int(d))) is not None:
                stats[int(d)] = rest
        ours = {self.root}
        while True:
            more = {p for p, r in stats.items() if int(r[1]) in ours} - ours
            if not more:
                break
            ours |= more
        for pid in ours & stats.keys():
            rest = stats[pid]
            key = (pid, rest[19])
            entry = self.seen.get(key)
            if entry is None:
                try:
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
                except OSError:
                    continue
                entry = self.seen[key] = {"cpu": 0.0, "hwm_kib": 0, "cmd": cmd.decode()[:200]}
            entry["cpu"] = (int(rest[11]) + int(rest[12])) / CLK_TCK
            entry["hwm_kib"] = max(entry["hwm_kib"], hwm_kib(pid))

    def run(self) -> None:
        while not self.stop.wait(2.0):
            self.sample()

    def total(self) -> float:
        return sum(e["cpu"] for e in self.seen.values())


class LoopLines(threading.Thread):
    """The loop's stdout, line by line: into ``log``, each with the time and the loop's CPU
    when it was read."""

    def __init__(self, proc: subprocess.Popen, log: Path) -> None:
        super().__init__(daemon=True)
        self.proc, self.log = proc, log
        self.lines: list[tuple[float, float | None, str]] = []  # (time, loop's cpu, line)
        self.first = threading.Event()

    def run(self) -> None:
        with open(self.log, "w", encoding="utf-8") as log:
            for raw in self.proc.stdout:
                line = raw.decode(errors="replace").rstrip("\n")
                at = time.time()
                self.lines.append((at, cpu_of(self.proc.pid), line))
                log.write(f"{datetime.fromtimestamp(at, UTC):%H:%M:%S} {line}\n")
                log.flush()
                self.first.set()


class Traffic:
    """Each source's steady track events, rolled into the archive a spool segment at a time.

    A source's segment opens with its first event and is rolled ``segment_age`` seconds later
    (or when its hour ends), holding the events received meanwhile; the next opens with the
    next event. Event ``j`` of a source is received at ``t0 + j / rate`` plus a jitter inside
    its slot."""

    def __init__(
        self, archive_root: str, sources: list[str], rate: float, segment_age: float, seed: int
    ) -> None:
        from datalake_assets.ingest.demo.catalogue import _build_catalogue
        from datalake_assets.ingest.demo.hour_messages import _Hour
        from datalake_assets.ingest.demo.timestamps import _tables
        from datalake_assets.ingest.demo.users import _USERS_MAX, _USERS_MIN, _build_users

        _tables()
        self.archive_root, self.rate, self.age = archive_root, rate, segment_age
        per_hour = int(rate * 3600)
        self.gen = {}
        for sid in sources:
            rng = random.Random(f"bench-sources-cpu|users|{seed}|{sid}")
            cat = _build_catalogue(rng)
            users = _build_users(rng, cat, min(_USERS_MAX, max(_USERS_MIN, per_hour // 100)))
            self.gen[sid] = _Hour(random.Random(f"bench|{seed}|{sid}"), cat, users, 0.02)
        self.t0_ms = 0
        self.next_j = dict.fromkeys(sources, 0)  # each source's next event
        self.next_ms = dict.fromkeys(sources, 0)  # when that event is received
        self.opened_ms = dict.fromkeys(sources, 0)  # its open segment's first event
        self.sent: dict[str, list[str]] = {sid: [] for sid in sources}
        self.files = 0
        self.bytes = 0

    def received_ms(self, sid: str, j: int) -> int:
        slot = int(1000 / self.rate)
        rnd = self.gen[sid].rnd
        return self.t0_ms + int(j * 1000 / self.rate) + int(rnd() * max(1, slot))

    def start(self, now_ms: int) -> None:
        self.t0_ms = now_ms
        for sid in self.next_j:
            self.next_ms[sid] = self.opened_ms[sid] = self.received_ms(sid, 0)

    def roll_at(self, sid: str) -> int:
        """When the source's open segment is rolled (ms): its age, or its hour's end."""
        opened = self.opened_ms[sid]
        return min(opened + int(self.age * 1000), (opened // HOUR_MS + 1) * HOUR_MS)

    def roll(self, sid: str, until_ms: int) -> int:
        """Roll the source's segment with the events received before ``until_ms``; the next
        segment opens with the next event. The number of events."""
        import orjson

        from datalake_assets.spec.layout import ArchiveHour, archive_hour_dir

        gen, j, ms, lines = self.gen[sid], self.next_j[sid], self.next_ms[sid], []
        opened = self.opened_ms[sid]
        until_ms = min(until_ms, (opened // HOUR_MS + 1) * HOUR_MS)
        while ms < until_ms:
            msg = gen.message(ms, "track")
            self.sent[sid].append(msg["messageId"])
            lines.append(orjson.dumps(msg))
            j += 1
            ms = self.received_ms(sid, j)
        # the next segment opens with the next event
        self.next_j[sid], self.next_ms[sid], self.opened_ms[sid] = j, ms, ms
        if not lines:
            return 0
        created = datetime.fromtimestamp(opened / 1000, UTC)
        hour = ArchiveHour.of(created)
        segment_id = f"{created:%Y%m%dT%H%M%S}-{gen.bits(48):012x}"
        name = f"collector-{hour.compact}-{segment_id}.jsonl.gz"
        folder = archive_hour_dir(self.archive_root, sid, hour)
        os.makedirs(folder, exist_ok=True)
        z = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)
        data = z.compress(b"\n".join(lines) + b"\n") + z.flush()
        tmp = os.path.join(folder, ".tmp-" + name)
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, os.path.join(folder, name))
        self.files += 1
        self.bytes += len(data)
        return len(lines)

    def hours(self) -> list[str]:
        """The hours written, ``YYYY-MM-DDTHH``."""
        out = set()
        for sid in self.sent:
            root = Path(self.archive_root, sid)
            for hr in root.glob("day=*/hr=*"):
                out.add(f"{hr.parent.name[4:]}T{hr.name[3:]}")
        return sorted(out)


def drain_and_check(home: Path, sent_file: Path, hours: list[str]) -> dict:
    """In a fresh process (``--child-check``), unmeasured: one batch of each source over the
    hours written (the segments rolled after the loop stopped), then each sent message must be
    one row in ``tracks`` and one in its event's table, and nothing quarantined; the open hour
    materializations the loop recorded in Dagster are counted."""
    from dagster import AssetKey, DagsterInstance
    from pyiceberg.catalog.sql import SqlCatalog

    from datalake_assets.settings import load_settings
    from datalake_assets.spec.naming import STANDARD_TABLES
    from datalake_assets.transform.sync import run_sync
    from datalake_assets.transform.sync_request import request_from_settings

    def no_spark():
        raise RuntimeError("a batch this small runs in the driver: no Spark session expected")

    settings = load_settings(str(home / "lake.toml"))
    sent = json.loads(sent_file.read_text())
    drained = {
        source.id: run_sync(
            no_spark, request_from_settings(settings, source, hours, replay=False, batch=True)
        ).source
        for source in settings.sources
    }
    lake = Path(settings.lake_root)
    catalog = SqlCatalog(
        "datalake",
        uri=f"sqlite:///{lake}/_iceberg/catalog.db",
        warehouse=f"file://{lake}/iceberg",
    )
    instance = DagsterInstance.from_config(str(home / "dagster_home"))
    out = {}
    for source in settings.sources:
        report = drained[source.id]
        ids = sent[source.id]
        want = set(ids)
        tables = {t[-1] for t in catalog.list_tables(source.id)}
        counts = {}
        for name in sorted(tables):
            got = (
                catalog.load_table((source.id, name))
                .scan(selected_fields=("message_id",))
                .to_arrow()
                .column("message_id")
                .to_pylist()
            )
            counts[name] = got
        tracks = counts.get("tracks", [])
        events = [m for t, got in counts.items() if t not in STANDARD_TABLES for m in got]
        others = {t: len(g) for t, g in counts.items() if t in STANDARD_TABLES and t != "tracks"}
        materializations = instance.fetch_materializations(
            AssetKey([source.slug, "open_hour"]), limit=10_000
        ).records
        out[source.id] = {
            "sent": len(ids),
            "sent_distinct": len(want),
            "drain_lines": report.lines_in,
            "tracks_rows": len(tracks),
            "tracks_distinct": len(set(tracks)),
            "tracks_exactly_once": len(tracks) == len(want) and set(tracks) == want,
            "event_tables": len(counts) - len(STANDARD_TABLES & counts.keys()),
            "event_rows": len(events),
            "events_exactly_once": len(events) == len(want) and set(events) == want,
            "other_standard_rows": sum(others.values()),
            "quarantined": report.lines_quarantined,
            "open_hour_materializations": len(materializations),
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sources", type=int, default=20)
    ap.add_argument("--rate", type=float, default=20.0, help="events a second per source")
    ap.add_argument("--minutes", type=float, default=30.0, help="how long the loop runs")
    ap.add_argument("--seed", type=int, default=55)
    ap.add_argument("--out", default=None, help="default: a new folder under /tmp")
    ap.add_argument("--child-check", nargs=3, help=argparse.SUPPRESS)  # home, sent, hours
    args = ap.parse_args()
    if args.child_check:
        home, sent, hours = args.child_check
        print(json.dumps(drain_and_check(Path(home), Path(sent), hours.split(","))))
        return

    from datalake_assets.settings import load_settings

    out = Path(args.out or tempfile.mkdtemp(prefix="bench_sources_cpu_", dir="/tmp"))
    home = out / "home"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    sources = source_ids(args.sources)
    settings_path = write_home(home, sources)
    dagster_home = home / "dagster_home"
    dagster_home.mkdir()
    shutil.copy(REPO / "dagster.yaml", dagster_home / "dagster.yaml")
    env = {
        **os.environ,
        "DATALAKE_HOME": str(home),
        "DATALAKE_SETTINGS": str(settings_path),
        "DAGSTER_HOME": str(dagster_home),
    }
    settings = load_settings(str(settings_path), env=env)
    segment_age = settings.collector.segment_max_age_seconds
    interval = settings.freshness.interval_minutes
    # the instance exists before the loop opens it (as datalake dev's prepare_instance does):
    # its creation is a one-off, not the loop's
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from dagster import DagsterInstance; "
            "DagsterInstance.from_config(sys.argv[1]).dispose()",
            str(dagster_home),
        ],
        env=env,
        check=True,
    )
    traffic = Traffic(settings.archive_root, sources, args.rate, segment_age, args.seed)
    load_before = os.getloadavg()

    t0 = time.time()
    loop = subprocess.Popen(
        [*datalake(), "batches"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    lines = LoopLines(loop, out / "batches.log")
    lines.start()
    sampler = TreeSampler(loop.pid)
    sampler.start()
    traffic.start(int(t0 * 1000))
    end = t0 + args.minutes * 60
    events = 0
    while True:
        due = min(traffic.roll_at(s) for s in sources) / 1000
        if due > end:
            break
        time.sleep(max(0.0, due - time.time()))
        for sid in sources:
            if traffic.roll_at(sid) / 1000 <= time.time():
                events += traffic.roll(sid, traffic.roll_at(sid))
        if loop.poll() is not None:
            raise SystemExit(f"the loop exited early ({loop.returncode}): {out / 'batches.log'}")
    time.sleep(max(0.0, end - time.time()))
    sampler.sample()
    cpu_at_stop = cpu_of(loop.pid)
    stopped = time.time()
    os.kill(loop.pid, signal.SIGTERM)  # the batch under way ends first
    _, status, usage = os.wait4(loop.pid, 0)
    wall = time.time() - t0
    stop_wait = time.time() - stopped
    loop.returncode = os.waitstatus_to_exitcode(status)
    sampler.stop.set()
    lines.join(10)
    load_after = os.getloadavg()

    # the last open segments, rolled as the collector's stop would; batched unmeasured
    now_ms = int(time.time() * 1000)
    for sid in sources:
        while traffic.opened_ms[sid] < now_ms:
            events += traffic.roll(sid, min(traffic.roll_at(sid), now_ms))
    sent_file = out / "sent.json"
    sent_file.write_text(json.dumps(traffic.sent), encoding="utf-8")
    checked = subprocess.run(
        [
            sys.executable,
            __file__,
            "--child-check",
            str(home),
            str(sent_file),
            ",".join(traffic.hours()),
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if checked.returncode:
        raise SystemExit(f"the check failed:\n{checked.stdout}\n{checked.stderr}")
    check = json.loads(checked.stdout.strip().splitlines()[-1])

    cpu = usage.ru_utime + usage.ru_stime
    started = next((x for x in lines.lines if x[2].startswith("freshness:")), (t0, 0.0, ""))
    steady_cpu = cpu - (started[1] or 0.0)
    steady_wall = wall - (started[0] - t0)
    batches = []
    previous = started[1] or 0.0
    failures = 0
    for at, c, line in lines.lines:
        m = BATCH_LINE.match(line)
        if m:
            batches.append(
                {
                    "at": round(at - t0, 1),
                    "source": m[1],
                    "lines": int(m[2]),
                    "rows": int(m[3]),
                    "files": int(m[4]),
                    "wall_s": float(m[5]),
                    "cpu_since_last_line_s": round((c or previous) - previous, 2),
                }
            )
        elif " failed" in line:
            failures += 1
        previous = c if c is not None else previous
    opened = sum(c["open_hour_materializations"] for c in check.values())
    by_round: dict[int, list[float]] = {}  # a source's k-th batch with files: CPU-s
    seen: dict[str, int] = {}
    for b in batches:
        k = seen[b["source"]] = seen.get(b["source"], 0) + 1
        by_round.setdefault(k, []).append(b["cpu_since_last_line_s"])
    rounds = {k: round(statistics.median(v), 2) for k, v in sorted(by_round.items())}
    per_batch = [b["cpu_since_last_line_s"] for b in batches]
    cores = os.cpu_count() or 1
    results = {
        "args": {k: v for k, v in vars(args).items() if k != "child_check"},
        "out": str(out),
        "started_utc": datetime.fromtimestamp(t0, UTC).isoformat(timespec="seconds"),
        "interval_minutes": interval,
        "segment_max_age_seconds": segment_age,
        "cores": cores,
        "load_before": load_before,
        "load_after": load_after,
        "wall_s": round(wall, 1),
        "stop_wait_s": round(stop_wait, 1),  # SIGTERM to exit: the batch under way
        "cpu_s": round(cpu, 2),
        "cpu_s_at_stop_signal": cpu_at_stop,
        "cpu_s_sampled_tree": round(sampler.total(), 2),
        "processes": [e["cmd"] for e in sampler.seen.values()],
        "cpu_s_startup": started[1],
        "cpu_s_per_hour": round(cpu / wall * 3600, 1),
        "machine_share": round(cpu / wall / cores, 4),
        "steady_cpu_s_per_hour": round(steady_cpu / steady_wall * 3600, 1),
        "steady_machine_share": round(steady_cpu / steady_wall / cores, 4),
        "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
        "peak_rss_mib_sampled": round(max(e["hwm_kib"] for e in sampler.seen.values()) / 1024, 1),
        "batches_with_files": len(batches),
        "batch_attempts_recorded": opened,
        "batch_failures": failures,
        "cpu_s_per_batch": round(steady_cpu / max(1, opened), 2),
        "cpu_s_per_batch_with_files": round(steady_cpu / max(1, len(batches)), 2),
        "batch_cpu_median_s": round(statistics.median(per_batch), 2) if per_batch else None,
        "batch_cpu_max_s": max(per_batch, default=None),
        "batch_cpu_median_s_by_round": rounds,
        "batch_wall_median_s": (
            round(statistics.median(b["wall_s"] for b in batches), 2) if batches else None
        ),
        "events_sent": sum(len(v) for v in traffic.sent.values()),
        "events_batched_by_loop": sum(b["lines"] for b in batches),
        "archive_files": traffic.files,
        "archive_mib": round(traffic.bytes / 2**20, 1),
        "exactly_once": all(
            c["tracks_exactly_once"] and c["events_exactly_once"] and not c["quarantined"]
            for c in check.values()
        ),
        "check": check,
        "batches": batches,
    }
    (out / "results.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    r = results
    print(
        f"\n{args.sources} sources x {args.rate:g} events/s, interval {interval} min (a batch "
        f"every {max(interval * 60 - segment_age, interval * 30):g} s), {wall / 60:.1f} min of "
        f"wall; {cores} cores; load {load_before[0]:.2f} before, {load_after[0]:.2f} after; {out}"
    )
    print("| the loop (`datalake batches`, its process tree) | figure |")
    print("|---|---|")
    for label, value in (
        ("CPU-s, all", f"{r['cpu_s']:.1f} (sampled: {r['cpu_s_sampled_tree']:.1f})"),
        ("CPU-s per hour of wall", f"**{r['cpu_s_per_hour']:,.0f}**"),
        ("share of the machine", f"**{r['machine_share']:.3f}** of {cores} cores"),
        (
            "after start-up: CPU-s per hour, share",
            f"{r['steady_cpu_s_per_hour']:,.0f}, {r['steady_machine_share']:.3f}",
        ),
        ("start-up (imports, instance) CPU-s", f"{r['cpu_s_startup']}"),
        (
            "batches (recorded in Dagster; with files)",
            f"{r['batch_attempts_recorded']}; {r['batches_with_files']}",
        ),
        ("CPU-s per batch (after start-up / recorded)", f"{r['cpu_s_per_batch']}"),
        (
            "a batch with files + the previous record: median, max CPU-s",
            f"{r['batch_cpu_median_s']}, {r['batch_cpu_max_s']}",
        ),
        (
            "the same by a source's 1st, 2nd, ... batch with files: median CPU-s",
            ", ".join(f"{v}" for v in rounds.values()),
        ),
        ("a batch's wall (its line): median s", f"{r['batch_wall_median_s']}"),
        ("failed batches", f"{failures}"),
        ("peak RSS", f"{r['peak_rss_mib']} MiB"),
        (
            "events sent; read by the loop's batches",
            f"{r['events_sent']:,}; {r['events_batched_by_loop']:,}",
        ),
        ("archive files (MiB)", f"{r['archive_files']:,} ({r['archive_mib']})"),
        ("every message one row (tracks and its event's table)", f"{r['exactly_once']}"),
    ):
        print(f"| {label} | {value} |")


if __name__ == "__main__":
    main()
