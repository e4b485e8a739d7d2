"""A batch racing its hour's close (``transform/open_hour.py``, ``lake/lock.py``): the loop's
batch of an open hour and the archive sensor's sync of the same hour, started together as the
sync job's processes. The source's lock runs them one after the other, in either order; either
way the closed hour holds what a plain sync of its archive gives, a batch after the close
changes nothing, and neither fails.

The order is chosen, not left to the scheduler: both processes are let start while this test
holds the lock, so both wait at it; then one of them is paused (``SIGSTOP``) while the other
takes the lock, and resumed to wait for it. A third round lets them race for the lock
untouched, whichever wins."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from datalake_assets.lake.formats.iceberg import BATCH_PROPERTY, RUN_PROPERTY
from datalake_assets.lake.lock import SourceLock
from datalake_assets.spec.layout import ArchiveHour, archive_hour_dir
from datalake_assets.transform.sync_request import SyncError
from datalake_assets_tests.support.archive_builders import msg, write_hour
from datalake_assets_tests.transform.test_open_hour import (
    BEFORE,
    HOUR,
    SRC,
    assert_equals_a_lake_that_only_synced,
    assert_holds_what_a_sync_gives,
    first_file,
    lake_at,
    request,
    snapshots,
    sync,
)

REPO = Path(__file__).resolve().parents[2]


def new_file(archive: str, n: int) -> int:
    """The hour's next spool segment (``part-000<n>``): a new message, a new event type, a
    copy of the first segment's message and a line that is no JSON; its line count."""
    lines = [
        msg(f"r{n}", HOUR, 30 + n, properties={"total": n}),
        msg(f"r{n}-cart", HOUR, 30 + n, event="Cart Viewed", properties={"items": n}),
        msg("a1", HOUR, 40 + n, properties={"total": 10}),
        b'{"broken": ',
    ]
    write_hour(archive, SRC, HOUR, lines, name=f"part-{n:04d}.jsonl")
    return len(lines)


def hour_lines(archive: str) -> int:
    """The lines of the hour's archive files."""
    folder = archive_hour_dir(archive, SRC, ArchiveHour.parse(HOUR))
    return sum(len(p.read_bytes().splitlines()) for p in Path(folder).glob("part-*.jsonl"))


# Forks the job's processes from one that imported it once (``support/fork_sync.py`` says
# why: a sync's imports cost more than its work on a small hour). No thread runs when it forks.
HELPER = """
import json, os, signal, sys, threading, time
import pyarrow.dataset, pyarrow.parquet, pyiceberg.catalog.sql
import datalake_assets.lake.formats.iceberg, datalake_assets.transform.local_path
from datalake_assets.transform.job import main

assert threading.active_count() == 1


def child(args, out):
    for fd, path in ((1, out), (2, out + ".err")):
        os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
    code = 70
    try:
        code = main(args)
    finally:
        sys.stdout.flush()
        os._exit(code)


def status(pid, deadline):
    while True:
        done, st = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(st)
        if time.monotonic() > deadline:  # a hung job must not hang the suite
            os.kill(pid, signal.SIGKILL)
            return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        time.sleep(0.01)


print("ready", flush=True)
for line in sys.stdin:
    pids = []
    for args, out in json.loads(line):
        pid = os.fork()
        if pid == 0:
            child(args, out)
        pids.append(pid)
    print(json.dumps(pids), flush=True)
    deadline = time.monotonic() + 120
    print(json.dumps([status(pid, deadline) for pid in pids]), flush=True)
"""


class Jobs:
    """The sync job's entry point (``transform/job.py``'s ``main``, what Dagster's and EMR's
    syncs run), forked: ``start`` a process per request at once, ``reports`` when they end."""

    def __init__(self, folder: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DATALAKE_")}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
        self.folder = folder
        self.helper = subprocess.Popen(
            [sys.executable, "-c", HELPER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=REPO,
        )
        assert self._read() == "ready"
        self.outs: list[Path] = []

    def _read(self) -> str:
        assert self.helper.stdout is not None
        line = self.helper.stdout.readline()
        assert line, f"the fork helper ended (exit {self.helper.wait()})"
        return line.strip()

    def start(self, requests: list[list[str]]) -> list[int]:
        """The processes' ids."""
        assert self.helper.stdin is not None
        n = len(list(self.folder.glob("job-*.out")))
        self.outs = [self.folder / f"job-{n + i}.out" for i in range(len(requests))]
        jobs = [[args, str(out)] for args, out in zip(requests, self.outs, strict=True)]
        self.helper.stdin.write(json.dumps(jobs) + "\n")
        self.helper.stdin.flush()
        return json.loads(self._read())

    def reports(self) -> list[dict]:
        """Each process's report (the job's last line), once all exited 0."""
        codes = json.loads(self._read())
        assert codes == [0] * len(codes), f"exit codes {codes}:\n{self.output()}"
        return [json.loads(p.read_text().strip().splitlines()[-1]) for p in self.outs]

    def output(self) -> str:
        """What the last processes printed, stdout then stderr."""
        files = [f for p in self.outs for f in (p, Path(f"{p}.err")) if f.exists()]
        return "\n".join(f"{f.name}: {f.read_text()}" for f in files)

    def close(self) -> None:
        assert self.helper.stdin is not None
        self.helper.stdin.close()
        self.helper.wait(timeout=150)


def lock_file(lake: dict) -> str:
    return os.path.join(lake["lake_root"], "_locks", f"{SRC}.lock")


def waits_at_the_lock(pid: int, lake: dict) -> bool:
    """The process holds the source's lock file open: it is waiting for the lock (the test
    holds it)."""
    fds, path = f"/proc/{pid}/fd", os.path.realpath(lock_file(lake))
    try:
        opened = os.listdir(fds)
    except OSError:  # it ended (its output says why)
        return False
    for fd in opened:
        try:
            if os.readlink(f"{fds}/{fd}") == path:
                return True
        except OSError:  # closed meanwhile
            pass
    return False


def holds_the_lock(pid: int, lake: dict) -> bool:
    """The lock file names the process as its holder (written once it took the lock)."""
    try:
        with open(lock_file(lake)) as f:
            return json.load(f).get("pid") == pid
    except ValueError:  # being written
        return False


def poll(condition, what, seconds: float = 60) -> None:
    """Until ``condition()``; ``what`` (a text, or a function giving it) if it never holds."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what() if callable(what) else what
        time.sleep(0.02)


def race(jobs: Jobs, lake: dict, first: str | None) -> tuple[dict, dict]:
    """The hour's batch and its sync, both started and waiting at the source's lock, then let
    go: ``first`` (``"batch"``, ``"sync"``) takes the lock while the other is paused, then the
    other waits for it; ``None``: they race for it. Their reports ``(batch, sync)``."""
    with SourceLock(lake["lake_root"], SRC, "test-holds-the-lock"):
        pids = dict(
            zip(
                ("batch", "sync"),
                jobs.start([request(lake, [HOUR], batch=b).to_args() for b in (True, False)]),
                strict=True,
            )
        )
        for name, pid in pids.items():
            poll(
                lambda pid=pid: waits_at_the_lock(pid, lake),
                lambda name=name: f"the {name} never waited at the lock:\n{jobs.output()}",
            )
        if first is not None:
            later = pids["sync" if first == "batch" else "batch"]
            os.kill(later, signal.SIGSTOP)
    if first is not None:
        try:
            poll(lambda: holds_the_lock(pids[first], lake), f"the {first} never took the lock")
        finally:
            os.kill(later, signal.SIGCONT)
    batch, closed = jobs.reports()
    return batch, closed


def current_snapshots(lake: dict) -> dict[str, dict]:
    return {name: snaps[-1][1] for name, snaps in snapshots(lake).items() if snaps}


@pytest.fixture()
def jobs(tmp_path):
    forks = Jobs(tmp_path)
    yield forks
    forks.close()


@pytest.mark.slow
def test_a_batch_racing_the_hours_close_leaves_what_a_sync_gives_in_either_order(tmp_path, jobs):
    lake = lake_at(tmp_path, "race")
    archive = lake["archive_root"]
    write_hour(archive, SRC, BEFORE, [msg("old-1", BEFORE, 50)], name="part-0000.jsonl")
    sync(lake, [BEFORE])
    first_file(archive)
    assert sync(lake, [HOUR], batch=True).source.batch_id  # the open hour's first batch
    for n, first in enumerate(("batch", "sync", None), start=1):
        new_lines = new_file(archive, n)  # a segment no run took in yet, then the race
        batch, closed = race(jobs, lake, first)
        # the close: every file of the hour, replacing whatever batches appended
        assert closed.get("batch_id") is None and closed["lines_in"] == hour_lines(archive)
        order = ("batch", "sync") if batch["lines_in"] else ("sync", "batch")
        assert first in (None, order[0]), (first, batch, closed)
        if order[0] == "batch":  # it took the new segment, then the close replaced it
            assert batch["batch_id"] and batch["lines_in"] == new_lines, batch
        else:  # after the close: its ledger lists every file, so the batch read nothing
            assert batch["warning"] == "no_archive_files" and not batch.get("batch_id"), batch
        # ... and wrote nothing: every table's current version is the close's overwrite
        current = current_snapshots(lake)
        assert {p[RUN_PROPERTY] for p in current.values()} == {closed["run_id"]}, current
        assert not any(p.get(BATCH_PROPERTY) for p in current.values()), current
        assert_holds_what_a_sync_gives(lake)

    # a batch that may not wait for the close refuses in one line, changing nothing
    before = snapshots(lake)
    with SourceLock(lake["lake_root"], SRC, "the-hours-close"):
        with pytest.raises(SyncError) as e:
            sync(lake, [HOUR], batch=True, lock_wait_seconds=0)
    assert e.value.code == "locked" and "\n" not in str(e.value), e.value
    assert "holds its lock: run the-hours-close" in str(e.value)
    assert "Nothing was changed; retry when it has finished" in str(e.value)
    assert snapshots(lake) == before
    assert_equals_a_lake_that_only_synced(lake, tmp_path)
