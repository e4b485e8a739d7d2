"""Benchmark: our sync against a naive PySpark job and DuckDB, on one generated source-hour.

    cd /work/main && PYTHONPATH=. python bench/bench_sync.py --wait-quiet 600  # 2M events
    cd /work/main && PYTHONPATH=. python bench/bench_sync.py --events 50000 --files 4

One run, one input (``datalake_assets.ingest.demo.generate_archive``: one hour of messy Segment
traffic, gzipped JSON lines), three contenders, each in its OWN fresh subprocess:

* ``ours``:   ``run_sync`` (``datalake_assets.transform.job``) on a ``local[2]`` session:
              parse, validate, type, de-duplicate, quarantine, write typed Parquet, commit.
* ``naive``:  ``spark.read.json(hour_dir)`` (full schema inference) then
              ``write.partitionBy("type", "event").parquet(...)``; same session settings.
* ``duckdb``: ``COPY (SELECT unnest(json_transform(json, <structure>)) FROM
              read_ndjson_objects(...) WHERE json_type(json) = 'OBJECT') TO ... (FORMAT PARQUET,
              PARTITION_BY (type, event))``, 2 threads, memory_limit = --spark-memory, where
              ``<structure>`` is ``json_group_structure`` over all objects (pass 1): what
              ``read_json_auto`` does, minus the lines that are not objects.
* ``duckdb_auto`` (only with ``--only``): the literal ``COPY (SELECT * FROM read_json_auto(...,
              ignore_errors = true)) ...`` one-liner; it fails on this input (see README).

Per contender: wall time of the whole subprocess (interpreter + imports + JVM start + job +
stop), the time of the job alone (measured inside the child, session start excluded), events/s
and uncompressed MB/s, CPU seconds, and peak memory (see ``TreeSampler``). After each one the
output's rows are counted with DuckDB (Parquet footers) and the output is deleted.

The generation of the archive is timed separately and is not part of the comparison. Results:
a Markdown table on stdout and ``<out>/results.json``. See ``bench/README.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SOURCE_ID = "bench"
HOUR = "2026-11-21T10"
SEED = 7
CONTENDERS = ("ours", "naive", "duckdb")
# only with --only; ours_plan: ours with a tracking plan of 20 events x 15 properties
# (bench_plan.py), the plan's cost against ours in the same run
EXTRA_CONTENDERS = ("duckdb_auto", "ours_plan")
PAGE = os.sysconf("SC_PAGE_SIZE")
MB = 1024 * 1024


# ------------------------------------------------------------------------------ memory sampling


def _proc_table() -> dict[int, tuple[int, int]]:
    """``{pid: (ppid, utime + stime in clock ticks)}`` of every process."""
    out: dict[int, tuple[int, int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses
        rest = stat[stat.rfind(b")") + 2 :].split()
        out[int(name)] = (int(rest[1]), int(rest[11]) + int(rest[12]))
    return out


def _tree(root: int, table: dict[int, tuple[int, int]] | None = None) -> list[int]:
    table = _proc_table() if table is None else table
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


def _rss(pid: int) -> int:
    """Resident set size in bytes of one process (``/proc/<pid>/statm``); 0 if it is gone.

    ``statm`` is read in microseconds. (``smaps_rollup``, which would give PSS, walks the page
    tables: ~50 ms for an 8 GB JVM, so sampling it 5 times a second would cost a quarter of a
    core of a 2-core machine, and was dropped.)"""
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * PAGE
    except (OSError, ValueError, IndexError):
        return 0


def _cpu_ticks(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    rest = stat[stat.rfind(b")") + 2 :].split()
    return int(rest[11]) + int(rest[12])


class TreeSampler(threading.Thread):
    """Polls ``/proc`` every ``interval`` s for the process tree under ``root`` (the contender's
    subprocess, the JVM it starts, Spark's Python daemon and workers) and keeps the maximum of
    the SUM of the tree's RSS. The tree is re-discovered (a scan of all of ``/proc``) every
    ``rescan`` samples; in between only the known processes are read. Its own CPU time is
    reported (``cpu_self_s``) so its cost is visible.
    """

    def __init__(self, root: int, interval: float = 0.2, rescan: int = 5) -> None:
        super().__init__(daemon=True)
        self.root, self.interval, self.rescan = root, interval, rescan
        self.peak_rss = 0
        self.max_procs = 0
        self.samples = 0
        self.cpu_ticks: dict[int, int] = {}  # last utime + stime seen of each process
        self.cpu_self_s = 0.0
        self._pids: list[int] = [root]
        self._halt = threading.Event()

    def sample(self) -> None:
        if self.samples % self.rescan == 0:
            table = _proc_table()
            self._pids = _tree(self.root, table)
            for pid in self._pids:
                if pid in table:
                    self.cpu_ticks[pid] = table[pid][1]
        else:
            for pid in self._pids:
                ticks = _cpu_ticks(pid)
                if ticks is not None:
                    self.cpu_ticks[pid] = ticks
        rss = sum(_rss(pid) for pid in self._pids)
        self.peak_rss = max(self.peak_rss, rss)
        self.max_procs = max(self.max_procs, len(self._pids))
        self.samples += 1

    @property
    def cpu_s(self) -> float:
        return sum(self.cpu_ticks.values()) / os.sysconf("SC_CLK_TCK")

    def run(self) -> None:
        t0 = time.thread_time()
        while not self._halt.is_set():
            self.sample()
            self._halt.wait(self.interval)
        self.cpu_self_s = time.thread_time() - t0

    def stop(self) -> None:
        self._halt.set()
        self.join()


def machine_cpu() -> dict[str, float]:
    """Busy and steal CPU seconds of the whole machine since boot (``/proc/stat``), to see how
    much else ran during a contender (the machine may be shared)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    hz = os.sysconf("SC_CLK_TCK")
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    steal = v[7] if len(v) > 7 else 0
    return {"busy_s": (sum(v[:8]) - idle - steal) / hz, "steal_s": steal / hz}


def wait_for_quiet(max_wait: float, cores: float = 0.3, window: float = 3.0) -> dict:
    """Wait (up to ``max_wait`` s) until the rest of the machine uses less than ``cores`` CPUs
    over ``window`` s; the machine may be shared with other jobs. Returns what was seen."""
    t0 = time.monotonic()
    while True:
        before = machine_cpu()["busy_s"]
        time.sleep(window)
        load = (machine_cpu()["busy_s"] - before) / window
        waited = time.monotonic() - t0
        if load < cores or waited >= max_wait:
            if load >= cores:
                print(
                    f"!! the machine is still busy ({load:.2f} CPUs in use by others) after "
                    f"waiting {waited:.0f} s; running anyway",
                    flush=True,
                )
            return {"background_cpus": round(load, 2), "waited_s": round(waited, 1)}
        print(f"   waiting for a quiet machine ({load:.2f} CPUs in use by others) ...", flush=True)
        time.sleep(10)


def loadavg() -> float:
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def become_subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants (Linux ``PR_SET_CHILD_SUBREAPER``):
    Spark's Python daemon and workers outlive the JVM that started them by a moment and would
    otherwise be re-parented to init, and their CPU time and max RSS lost to ``wait4``."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except Exception:  # noqa: BLE001
        return False


def reap_orphans(timeout: float = 60.0) -> list:
    """Wait for the contender's orphaned descendants (re-parented to us); their rusages."""
    out, deadline = [], time.monotonic() + timeout
    while True:
        try:
            pid, _, ru = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return out
        if pid:
            out.append(ru)
        elif time.monotonic() > deadline:
            print(
                "!! descendants still running after the contender exited; killing them", flush=True
            )
            for p in _tree(os.getpid())[1:]:
                try:
                    os.kill(p, 9)
                except OSError:
                    pass
            deadline = time.monotonic() + timeout
        else:
            time.sleep(0.05)


# ---------------------------------------------------------------------------------- children


def _spark(memory: str, local_dir: str):
    from datalake_assets.transform.job import local_spark_session

    return local_spark_session("local[2]", memory, {"spark.local.dir": local_dir})


def _stop_spark(spark) -> None:
    """Stop the session and wait for the JVM to exit, so its rusage is reaped by this process
    (and reaches the parent's ``wait4``) and its exit is inside the wall time."""
    proc = getattr(spark.sparkContext._gateway, "proc", None)
    spark.stop()
    if proc is not None:
        try:
            proc.stdin.close()  # the gateway exits on EOF of its stdin
            proc.wait(timeout=60)
        except Exception:  # noqa: BLE001 - best effort: the parent still sees the tree
            proc.kill()
            proc.wait()


def child_main(a: argparse.Namespace) -> int:
    """Runs one contender; writes its timings (and our sync's report) to ``a.result``."""
    res: dict = {"contender": a.child}
    if a.child == "warmup":  # untimed: start Spark once so every contender finds warm caches
        spark = _spark(a.spark_memory, a.local_dir)
        spark.range(1000).selectExpr("sum(id)").collect()
        _stop_spark(spark)
        Path(a.result).write_text(json.dumps(res))
        return 0
    hour_dir = f"{a.archive_root}/{SOURCE_ID}/day={HOUR[:10]}/hr={HOUR[11:13]}"
    if a.child in ("ours", "naive", "ours_plan"):
        t = time.monotonic()
        spark = _spark(a.spark_memory, a.local_dir)
        res["session_s"] = time.monotonic() - t
        t = time.monotonic()
        if a.child in ("ours", "ours_plan"):
            from datalake_assets.transform.job import SyncRequest, run_sync

            plan_at = ""
            if a.child == "ours_plan":  # the plan as the settings' source would store it
                from datalake_assets.lake.plan_store import store_plan
                from datalake_assets.plans.plan_load import plan_from_document

                doc = json.loads((Path(a.archive_root).parent / "plan.json").read_text())
                plan_at = store_plan(a.target, SOURCE_ID, plan_from_document(doc, "bench"))
            t = time.monotonic()
            result = run_sync(
                spark,
                SyncRequest(
                    lake_root=a.target,
                    archive_root=a.archive_root,
                    source_id=SOURCE_ID,
                    hours=(HOUR,),
                    tracking_plan=plan_at,
                ),
            )
            res["job_s"] = time.monotonic() - t
            res["source_report"] = result.source.to_dict()
            res["tables"] = {
                n: {
                    "row_count": r.row_count,
                    "duplicates": r.duplicates,
                    "values_quarantined": r.values_quarantined,
                    "columns": len(r.columns),
                }
                for n, r in result.tables.items()
            }
        else:
            df = spark.read.json(hour_dir)  # full pass for the schema, a second one to write
            df.write.mode("overwrite").partitionBy("type", "event").parquet(a.target)
            res["job_s"] = time.monotonic() - t
            res["columns_top_level"] = len(df.columns)
        t = time.monotonic()
        _stop_spark(spark)
        res["stop_s"] = time.monotonic() - t
    elif a.child in ("duckdb", "duckdb_auto"):
        import duckdb

        t = time.monotonic()
        con = duckdb.connect()
        con.execute(f"SET threads = {a.duckdb_threads}")
        con.execute(f"SET memory_limit = '{a.duckdb_memory}'")
        con.execute(f"SET temp_directory = '{a.local_dir}'")
        res["session_s"] = time.monotonic() - t
        src = f"{hour_dir}/*.jsonl.gz"
        t = time.monotonic()
        if a.child == "duckdb_auto":
            # The one-liner of the issue. On this input it cannot work: the JSON array lines
            # (batches posted as-is) make the sniffer choose records=false, so the result is a
            # single ``json`` column and PARTITION_BY finds no ``type``/``event``.
            sql = (
                f"COPY (SELECT * FROM read_json_auto('{src}', ignore_errors = true)) "
                f"TO '{a.target}' (FORMAT PARQUET, PARTITION_BY (type, event))"
            )
            res["sql"] = [sql]
            con.execute(sql)
        else:
            # The same inference as read_json_auto over every line (like Spark's), but over
            # JSON objects only. Pass 1 merges the structure of all objects (a key of mixed
            # types becomes JSON); json_group_structure over all 2M objects collects them all
            # in memory (OOM at 8 GB), so it runs over one object of each distinct
            # json_structure instead, which gives the same merged structure. Pass 2 transforms
            # each object to it and writes.
            objects = (
                f"read_ndjson_objects('{src}', ignore_errors = true) "
                "WHERE json_type(json) = 'OBJECT'"
            )
            q1 = (
                "SELECT json_group_structure(j) FROM (SELECT any_value(json) AS j "
                f"FROM {objects} GROUP BY json_structure(json))"
            )
            structure = con.execute(q1).fetchone()[0]
            res["infer_s"] = time.monotonic() - t
            q2 = (
                f"COPY (SELECT unnest(json_transform(json, '{structure.replace(chr(39), chr(39) * 2)}'))"
                f" FROM {objects}) TO '{a.target}' "
                "(FORMAT PARQUET, PARTITION_BY (type, event))"
            )
            res["sql"] = [q1, q2[:200] + " ..."]
            con.execute(q2)
        res["job_s"] = time.monotonic() - t
        t = time.monotonic()
        con.close()
        res["stop_s"] = time.monotonic() - t
    else:
        raise SystemExit(f"unknown contender {a.child!r}")
    res["self_maxrss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    res["children_maxrss_mb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    Path(a.result).write_text(json.dumps(res, default=str))
    return 0


# --------------------------------------------------------------------------------- counting


def count_rows(root: str, key: str) -> dict[str, int]:
    """Rows per value of the partition key ``key`` (``segment_type`` or ``type``) of every
    ``*.parquet`` under ``root``, from the Parquet footers read by DuckDB."""
    import duckdb

    files = [str(p) for p in Path(root).rglob("*.parquet")]
    if not files:
        return {}
    con = duckdb.connect()
    rows = con.execute(
        "SELECT file_name, num_rows FROM parquet_file_metadata(?)", [files]
    ).fetchall()
    con.close()
    out: dict[str, int] = {}
    for name, n in rows:
        part = next((s.split("=", 1)[1] for s in name.split("/") if s.startswith(f"{key}=")), "?")
        out[part] = out.get(part, 0) + int(n)
    return dict(sorted(out.items()))


def dir_bytes(root: str) -> int:
    return sum(p.stat().st_size for p in Path(root).rglob("*") if p.is_file())


# ------------------------------------------------------------------------------- orchestration


def generate(a: argparse.Namespace, archive_root: Path) -> dict:
    meta_path = archive_root / "summary.json"
    want = {
        "events": a.events,
        "files": a.files,
        "seed": SEED,
        "hour": HOUR,
        "source_id": SOURCE_ID,
    }
    if a.reuse and meta_path.exists():
        meta = json.loads(meta_path.read_text())
        if {k: meta.get(k) for k in want} == want:
            print(
                f"reusing the archive in {archive_root} (generated in {meta['generate_s']:.1f} s)",
                flush=True,
            )
            meta["reused"] = True
            return meta
        print("--reuse: the existing archive has another size; generating again", flush=True)
    from datalake_assets.ingest.demo import generate_archive
    from datalake_assets.spec.layout import ArchiveHour

    shutil.rmtree(archive_root, ignore_errors=True)
    archive_root.mkdir(parents=True)
    print(f"generating {a.events:,} events in {a.files} files ...", flush=True)
    t = time.monotonic()
    s = generate_archive(
        str(archive_root),
        SOURCE_ID,
        [ArchiveHour.parse(HOUR)],
        events_per_hour=a.events,
        files_per_hour=a.files,
        seed=SEED,
    )
    took = time.monotonic() - t
    meta = {
        **want,
        "generate_s": took,
        "lines": s.lines,
        "valid_messages": s.valid_messages,
        "duplicate_lines": s.duplicate_lines,
        "malformed_lines": s.malformed_lines,
        "bytes_uncompressed": s.bytes_uncompressed,
        "bytes_compressed": sum(os.path.getsize(f) for f in s.files),
        "by_type": s.by_type,
        "malformed_by_reason": s.malformed_by_reason,
    }
    meta_path.write_text(json.dumps(meta, indent=2))
    meta["reused"] = False
    return meta


def run_contender(
    a: argparse.Namespace, name: str, out: Path, archive_root: Path, quiet: bool = False
) -> dict:
    target = out / f"output-{name}"
    local_dir = out / "tmp" / name
    result_path = out / "logs" / f"{name}.result.json"
    log_path = out / "logs" / f"{name}.log"
    for p in (target, local_dir):
        shutil.rmtree(p, ignore_errors=True)
    local_dir.mkdir(parents=True)
    result_path.unlink(missing_ok=True)
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        name,
        "--archive-root",
        str(archive_root),
        "--target",
        str(target),
        "--local-dir",
        str(local_dir),
        "--result",
        str(result_path),
        "--spark-memory",
        a.spark_memory,
        "--duckdb-memory",
        a.duckdb_memory or a.spark_memory,
        "--duckdb-threads",
        str(a.duckdb_threads),
    ]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [str(REPO)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        ),
    }
    env["PYSPARK_PYTHON"] = sys.executable
    if not quiet:
        print(f"\n== {name}: running (log: {log_path})", flush=True)
    quiet_seen = wait_for_quiet(a.wait_quiet) if a.wait_quiet > 0 else None
    load_before, cpu_before = loadavg(), machine_cpu()
    with open(log_path, "wb") as log:
        t = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO)
        sampler = TreeSampler(proc.pid)
        sampler.start()
        _, status, ru = os.wait4(proc.pid, 0)
        wall = time.monotonic() - t
        proc.returncode = os.waitstatus_to_exitcode(status)
        sampler.stop()
        orphans = reap_orphans()
        tree_exit_s = time.monotonic() - t
    cpu_after = machine_cpu()
    # CPU of the tree: what wait4 reports (the child, its reaped descendants, and orphans
    # reaped here), or the sum of the last samples of each process if that is more (a
    # process reaped by nobody is invisible to wait4)
    cpu_wait4 = ru.ru_utime + ru.ru_stime + sum(o.ru_utime + o.ru_stime for o in orphans)
    cpu_s = max(cpu_wait4, sampler.cpu_s)
    busy = cpu_after["busy_s"] - cpu_before["busy_s"]
    r: dict = {
        "contender": name,
        "wall_s": wall,
        "exit_code": proc.returncode,
        "peak_rss_tree_mb": sampler.peak_rss / MB,
        "max_procs": sampler.max_procs,
        "samples": sampler.samples,
        "sampler_cpu_s": sampler.cpu_self_s,
        "maxrss_single_process_mb": max([ru.ru_maxrss] + [o.ru_maxrss for o in orphans]) / 1024,
        "orphans_reaped": len(orphans),
        "tree_exit_s": tree_exit_s,
        "cpu_s": cpu_s,
        "cpu_wait4_s": cpu_wait4,
        "cpu_sampled_s": sampler.cpu_s,
        "machine_busy_s": busy,
        # CPU used by anything else on the machine meanwhile (0 on a quiet machine)
        "foreign_cpu_s": max(0.0, busy - cpu_s),
        "steal_s": cpu_after["steal_s"] - cpu_before["steal_s"],
        "loadavg_before": load_before,
        "loadavg_after": loadavg(),
        "quiet_check": quiet_seen,
    }
    if proc.returncode != 0 or not result_path.exists():
        tail = log_path.read_text(errors="replace").splitlines()[-40:]
        r["status"] = "failed"
        r["error_tail"] = "\n".join(tail)
        print(
            f"!! {name} FAILED (exit {proc.returncode}) after {wall:.1f} s; log tail:\n"
            + r["error_tail"],
            flush=True,
        )
    else:
        r.update(json.loads(result_path.read_text()))
        r["status"] = "ok"
    if quiet:
        shutil.rmtree(local_dir, ignore_errors=True)
        return r
    # sanity: what did it write?
    if target.exists():
        r["output_bytes"] = dir_bytes(str(target))
        if name in ("ours", "ours_plan"):
            from datalake_assets.spec.naming import TRACKS_TABLE, VIOLATIONS

            per = count_rows(str(target / "data" / SOURCE_ID), "segment_type")
            r["rows_by_table"] = per
            r["rows_out"] = sum(n for t, n in per.items() if t not in (TRACKS_TABLE, VIOLATIONS))
            r["violation_rows"] = per.get(VIOLATIONS, 0)
            r["rows_tracks_table"] = per.get(TRACKS_TABLE, 0)
            r["quarantine_rows"] = sum(count_rows(str(target / "quarantine"), "day").values())
        else:
            per = count_rows(str(target), "type")
            r["rows_by_type"] = per
            r["rows_out"] = sum(per.values())
        r["output_files"] = sum(1 for _ in target.rglob("*.parquet"))
    else:
        r["rows_out"] = 0
        r["output_files"] = 0
    print(
        f"== {name}: {r['status']}, wall {wall:.1f} s, job {r.get('job_s', float('nan')):.1f} s,"
        f" CPU {cpu_s:.1f} s (other processes meanwhile: {r['foreign_cpu_s']:.1f} CPU s),"
        f" rows written {r['rows_out']:,} in {r['output_files']} Parquet files"
        + (f" (by table: {r.get('rows_by_table') or r.get('rows_by_type')})"),
        flush=True,
    )
    if r["rows_out"] == 0:
        print(f"!! {name} wrote NO rows", flush=True)
    if not a.keep_output:
        shutil.rmtree(target, ignore_errors=True)
    shutil.rmtree(local_dir, ignore_errors=True)
    return r


def _f(x: float | None, fmt: str = "{:,.1f}") -> str:
    return "n/a" if x is None else fmt.format(x)


def summarise(results: list[dict], gen: dict) -> str:
    events, ubytes = gen["lines"], gen["bytes_uncompressed"]
    naive = next((r for r in results if r["contender"] == "naive" and r["status"] == "ok"), None)
    for r in results:
        ok = r["status"] == "ok"
        r["events_per_s_wall"] = events / r["wall_s"] if ok else None
        r["events_per_s_job"] = events / r["job_s"] if ok else None
        r["mb_per_s_wall"] = ubytes / MB / r["wall_s"] if ok else None
        r["mb_per_s_job"] = ubytes / MB / r["job_s"] if ok else None
        # speed-up against the naive Spark job: > 1 means faster than naive
        r["ratio_vs_naive_wall"] = naive["wall_s"] / r["wall_s"] if ok and naive else None
        r["ratio_vs_naive_job"] = naive["job_s"] / r["job_s"] if ok and naive else None
    lines = [
        "events = input lines; MB = uncompressed input MiB; 'job' excludes interpreter, imports"
        " and session start/stop; 'vs naive' = naive time / contender time (> 1: faster);"
        " others' CPU = CPU used by other processes on the machine during the run",
        "",
        f"Input: {events:,} lines ({gen['valid_messages']:,} valid messages, "
        f"{gen['duplicate_lines']:,} duplicate deliveries, {gen['malformed_lines']:,} malformed),"
        f" {ubytes / MB:,.0f} MB uncompressed, {gen['bytes_compressed'] / MB:,.0f} MB gzipped,"
        f" {gen['files']} files; generated in {gen['generate_s']:.1f} s (not compared)",
        "",
        "| contender | status | wall s | job s | events/s (wall) | events/s (job) "
        "| MB/s (wall) | MB/s (job) | CPU s | others' CPU s | peak RSS MB (tree sum) "
        "| vs naive (wall) | vs naive (job) | rows out |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in results:
        lines.append(
            f"| {r['contender']} | {r['status']} | {_f(r['wall_s'])} | {_f(r.get('job_s'))} "
            f"| {_f(r['events_per_s_wall'], '{:,.0f}')} | {_f(r['events_per_s_job'], '{:,.0f}')} "
            f"| {_f(r['mb_per_s_wall'])} | {_f(r['mb_per_s_job'])} | {_f(r['cpu_s'])} "
            f"| {_f(r['foreign_cpu_s'])} "
            f"| {_f(r['peak_rss_tree_mb'], '{:,.0f}')} "
            f"| {_f(r['ratio_vs_naive_wall'], '{:.2f}')} | {_f(r['ratio_vs_naive_job'], '{:.2f}')} "
            f"| {r['rows_out']:,} |"
        )
    ours = next((r for r in results if r["contender"] == "ours" and r["status"] == "ok"), None)
    if ours:
        s = ours["source_report"]
        recon = s["messages_written"] + s["duplicates"] + s["lines_quarantined"]
        lines += [
            "",
            f"ours, reconciliation: lines_in={s['lines_in']:,} = rows {s['messages_written']:,}"
            f" + duplicates {s['duplicates']:,} + quarantined {s['lines_quarantined']:,}"
            f" ({'ok' if recon == s['lines_in'] else 'MISMATCH'}); values quarantined "
            f"{s['values_quarantined']:,}; rows counted in the Parquet (without the tracks table):"
            f" {ours['rows_out']:,}; tracks table {ours['rows_tracks_table']:,};"
            f" quarantine rows {ours['quarantine_rows']:,}",
            f"ours, phases: session start {ours['session_s']:.1f} s, run_sync {ours['job_s']:.1f} s,"
            f" stop {ours['stop_s']:.1f} s",
        ]
        if ours.get("ratio_vs_naive_wall") is not None:
            verdict = "MET" if ours["ratio_vs_naive_wall"] >= 1.0 else "NOT met"
            lines.append(
                f"target (ours at least as fast as naive Spark, wall): {verdict} "
                f"({ours['ratio_vs_naive_wall']:.2f}x)"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=2_000_000)
    p.add_argument("--files", type=int, default=20)
    p.add_argument("--out", default=str(REPO / "bench" / "out"))
    p.add_argument(
        "--reuse",
        action="store_true",
        help="reuse <out>/archive if it was generated with the same --events/--files",
    )
    p.add_argument(
        "--only",
        default=",".join(CONTENDERS),
        help="comma-separated, from: " + ",".join(CONTENDERS + EXTRA_CONTENDERS),
    )
    p.add_argument("--spark-memory", default="8g", help="spark.driver.memory of both Spark jobs")
    p.add_argument(
        "--duckdb-memory",
        default="",
        help="DuckDB memory_limit (default: the same as --spark-memory)",
    )
    p.add_argument("--duckdb-threads", type=int, default=2)
    p.add_argument(
        "--no-warmup",
        dest="warmup",
        action="store_false",
        help="skip the untimed Spark start-up that brings the jars into the page cache",
    )
    p.add_argument(
        "--wait-quiet",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="before each contender, wait up to SECONDS for the rest of the machine "
        "to use < 0.3 CPUs (for shared machines)",
    )
    p.add_argument("--keep-output", action="store_true", help="keep each contender's output")
    # internal: one contender inside its own subprocess
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--archive-root", help=argparse.SUPPRESS)
    p.add_argument("--target", help=argparse.SUPPRESS)
    p.add_argument("--local-dir", help=argparse.SUPPRESS)
    p.add_argument("--result", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        return child_main(a)

    only = [c.strip() for c in a.only.split(",") if c.strip()]
    bad = [c for c in only if c not in CONTENDERS + EXTRA_CONTENDERS]
    if bad:
        p.error(f"--only: unknown contender(s) {bad}; choose from {CONTENDERS}")
    if a.spark_memory and not a.duckdb_memory:
        a.duckdb_memory = a.spark_memory.upper().replace("G", "GB").replace("M", "MB")
    subreaper = become_subreaper()
    out = Path(a.out).resolve()
    (out / "logs").mkdir(parents=True, exist_ok=True)
    archive_root = out / "archive"
    started = datetime.now(UTC)
    gen = generate(a, archive_root)
    print(
        f"archive: {gen['lines']:,} lines, {gen['bytes_uncompressed'] / MB:,.0f} MB uncompressed,"
        f" {gen['bytes_compressed'] / MB:,.0f} MB gzipped, generated in {gen['generate_s']:.1f} s",
        flush=True,
    )

    if "ours_plan" in only:
        from bench_plan import bench_plan

        from datalake_assets.spec.layout import ArchiveHour

        plan = bench_plan(str(archive_root), SOURCE_ID, ArchiveHour.parse(HOUR).start)
        (out / "plan.json").write_text(json.dumps(plan))
    if a.warmup and any(c in ("ours", "naive", "ours_plan") for c in only):
        w = run_contender(a, "warmup", out, archive_root, quiet=True)
        print(f"(untimed Spark warm-up: {w['wall_s']:.1f} s, {w['status']})", flush=True)
    results = [run_contender(a, name, out, archive_root) for name in only]
    table = summarise(results, gen)
    print("\n" + table, flush=True)
    doc = {
        "started": started.isoformat(),
        "finished": datetime.now(UTC).isoformat(),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": {
            "cpus": os.cpu_count(),
            "mem_gib": round(os.sysconf("SC_PHYS_PAGES") * PAGE / 2**30, 1),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "settings": {
            "spark_master": "local[2]",
            "spark_memory": a.spark_memory,
            "duckdb_threads": a.duckdb_threads,
            "duckdb_memory": a.duckdb_memory,
            "warmup": a.warmup,
            "subreaper": subreaper,
            "memory": "peak over 0.2 s samples of the sum of RSS (/proc/<pid>/statm)"
            " of the contender's process tree; maxrss_single_process_mb is "
            "wait4's ru_maxrss (largest single process)",
        },
        "input": gen,
        "results": results,
        "table": table,
    }
    (out / "results.json").write_text(json.dumps(doc, indent=2, default=str))
    print(f"\nwritten: {out / 'results.json'}", flush=True)
    return 0 if all(r["status"] == "ok" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
