"""Faults: the sync killed at every stage, two syncs of one hour at once, a held lock.

Each killed sync is a real process (``python -m datalake_assets.transform.job``) that dies by
``SIGKILL``: at a named checkpoint (``lake/faults.py``) or from outside, while it reads.
After each kill the lake is read as a reader would: every table partition holds its previous
version or its new one, never a mix or both. Then one re-run must converge to exactly what a
clean sync of the same archive produces in a fresh lake.
"""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict

import duckdb
import pytest

from datalake_assets.ingest.demo import generate_archive
from datalake_assets.lake.faults import ENV as FAULT_ENV
from datalake_assets.lake.lock import SourceLock
from datalake_assets.spec.layout import ArchiveHour
from datalake_assets.transform.job import SyncError, SyncRequest, run_sync
from datalake_assets_tests.support.archive_builders import msg, write_hour
from datalake_assets_tests.support.lake_reader import LocalStore, compare, read_lake
from datalake_assets_tests.support.oracle import Expected, Oracle

pytestmark = [pytest.mark.spark, pytest.mark.reliability]

SRC = "faulty"
HOURS = ("2026-11-21T10", "2026-11-21T11")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# ----------------------------------------------------------------------------- helpers


def lake_state(lake_root: str) -> dict[tuple[str, str], list[str]]:
    """``{(table, day/hr): sorted message ids}`` as a reader of the Parquet files sees them
    (quarantine: sorted ``level|hash`` of its rows; identity index: ``table|rows|is a
    presence row`` of each hour's rows)."""
    state: dict[tuple[str, str], list[str]] = {}
    for part in sorted(glob.glob(f"{lake_root}/data/{SRC}/segment_type=*/day=*/hr=*")):
        files = glob.glob(f"{part}/*.parquet")
        if not files:
            continue
        table = part.split("segment_type=")[1].split("/")[0]
        hour = "/".join(part.split("/")[-2:])
        ids = duckdb.sql(f"select message_id from read_parquet({files!r})").fetchall()
        state[(table, hour)] = sorted(i for (i,) in ids)
    for part in sorted(glob.glob(f"{lake_root}/quarantine/{SRC}/day=*/hr=*")):
        files = glob.glob(f"{part}/*.parquet")
        if files:
            rows = duckdb.sql(
                "select level || '|' || md5(concat_ws('|', reason, message_id, column_name, "
                f"value, raw_line, raw_line_base64)) from read_parquet({files!r})"
            ).fetchall()
            state[("_quarantine", "/".join(part.split("/")[-2:]))] = sorted(r for (r,) in rows)
    # The identity index, committed with the hour: its rows without the hashes (each lake
    # has its own key, and the reference is another lake), so whole hours still compare.
    for part in sorted(glob.glob(f"{lake_root}/_identities/{SRC}/hour=*")):
        files = glob.glob(f"{part}/*.parquet")
        if files:
            rows = duckdb.sql(
                f"select \"table\" || '|' || rows || '|' || (linked is null) "
                f"from read_parquet({files!r})"
            ).fetchall()
            state[("_identities", part.rsplit("=", 1)[1])] = sorted(r for (r,) in rows)
    return state


def job_args(lake: dict, hours=HOURS, **kw) -> list[str]:
    return SyncRequest(lake["lake_root"], lake["archive_root"], SRC, tuple(hours), **kw).to_args()


def spawn_sync(lake: dict, fault: str | None = None, hours=HOURS, **kw) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != FAULT_ENV}
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    if fault:
        env[FAULT_ENV] = fault
    return subprocess.Popen(
        [sys.executable, "-m", "datalake_assets.transform.job", *job_args(lake, hours, **kw)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the sync and everything it started, as a crash of its machine would, and wait
    until all of it is gone. PySpark's Python daemon puts itself and its workers in a process
    group of their own, so the sync's group alone would leave a worker finishing stage A's
    writes into the staging area while the next sync cleans it up."""
    groups = {proc.pid} | {pgid for _, pgid in _descendants(proc.pid)}
    for pgid in groups:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(timeout=60)
    deadline = time.monotonic() + 60
    while any(pgid in groups for pgid in _live_groups()):
        assert time.monotonic() < deadline, f"processes of groups {groups} outlived SIGKILL"
        time.sleep(0.05)


def _stats() -> list[tuple[int, int, int, str]]:
    """``(pid, ppid, pgid, state)`` of every process."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            out.append((int(entry), int(fields[1]), int(fields[2]), fields[0]))
    return out


def _descendants(pid: int) -> list[tuple[int, int]]:
    """``(pid, pgid)`` of every live descendant of ``pid``."""
    children: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for p, ppid, pgid, _ in _stats():
        children[ppid].append((p, pgid))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child[0])
    return out


def _live_groups() -> set[int]:
    return {pgid for _, _, pgid, state in _stats() if state != "Z"}


def write_v1(archive_root: str) -> int:
    s = generate_archive(
        archive_root,
        SRC,
        [ArchiveHour.parse(h) for h in HOURS],
        events_per_hour=400,
        files_per_hour=2,
        seed=11,
    )
    return s.lines


def write_late_file(archive_root: str) -> int:
    """A late file for hour 10: new messages of several tables, one duplicate, one bad line."""
    lines = [msg(f"late-{i}", event="Order Completed", properties={"total": i}) for i in range(30)]
    lines += [msg(f"late-id-{i}", type="identify", traits={"plan": "pro"}) for i in range(10)]
    lines += [msg("late-0"), b'{"truncated": ']
    write_hour(archive_root, SRC, HOURS[0], lines, name="part-0009.jsonl.gz")
    return len(lines)


@pytest.fixture(scope="module")
def reference(spark, tmp_path_factory):
    """The converged truth: a clean sync of v1 + the late file into a fresh lake."""
    root = tmp_path_factory.mktemp("reference")
    lake = {"archive_root": str(root / "archive"), "lake_root": str(root / "lake")}
    n = write_v1(lake["archive_root"]) + write_late_file(lake["archive_root"])
    result = run_sync(spark, SyncRequest(lake["lake_root"], lake["archive_root"], SRC, HOURS))
    assert result.source.lines_in == n
    return {"state": lake_state(lake["lake_root"]), "source": result.source, "lines": n}


@pytest.fixture()
def synced_v1(spark, lake):
    """A lake holding v1 of both hours; the archive then receives a late file for hour 10."""
    n1 = write_v1(lake["archive_root"])
    run_sync(spark, SyncRequest(lake["lake_root"], lake["archive_root"], SRC, HOURS))
    v1 = lake_state(lake["lake_root"])
    n = n1 + write_late_file(lake["archive_root"])
    return {**lake, "v1": v1, "lines": n}


def assert_each_partition_whole(state, v1, v2) -> None:
    """Every partition a reader sees is exactly its old or its new version."""
    for key, ids in state.items():
        assert ids in (v1.get(key), v2.get(key)), f"partition {key} is neither version"
    for key in set(v1) | set(v2):  # a partition never vanishes unless its new version is empty
        if key not in state:
            assert not v2.get(key) or not v1.get(key), f"partition {key} disappeared"


def expect_oracle(reliability, lake: dict, hours=HOURS) -> Expected:
    """The lake must end as the oracle's model of one sync of ``hours`` of the archive (a
    re-run replaces its hours, so v1's sync does not change that); compared at the end of the
    test, or at its teardown if it stops before."""
    store = LocalStore()
    expected = Oracle(store, lake["archive_root"], SRC).sync(hours).expected()
    reliability.expect(expected, lambda: read_lake(store, lake["lake_root"], SRC))
    return expected


def assert_oracle_holds(reliability) -> None:
    found = reliability.compare()
    assert found.ok, str(found)


# ------------------------------------------------------------------------------ kills


# These hours are small: the killed syncs take the driver-local path (transform/local_path.py);
# the points before the commit are also passed on the Spark path (local_max_bytes=0).
@pytest.mark.slow
@pytest.mark.parametrize(
    "point,path",
    [
        *((p, "local") for p in ("parsed", "staged", "mid_commit", "committed", "registered")),
        ("parsed", "spark"),
        ("staged", "spark"),
    ],
)
def test_killed_at_a_checkpoint_readers_see_whole_hours_and_one_rerun_converges(
    spark, synced_v1, reference, point, path, reliability
):
    lake = synced_v1
    expected = expect_oracle(reliability, lake)
    reliability.fault()
    proc = spawn_sync(lake, fault=point, **({"local_max_bytes": 0} if path == "spark" else {}))
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == -signal.SIGKILL, err.decode()[-2000:]
    assert f"killed at {point}".encode() in err

    during = lake_state(lake["lake_root"])
    assert_each_partition_whole(during, lake["v1"], reference["state"])
    if point in ("parsed", "staged"):
        assert during == lake["v1"]  # nothing committed before the commit point
    if point in ("committed", "registered"):
        assert during == reference["state"]  # the commit completed before the kill
    if point == "mid_commit":
        # The journal: the next sync of the source, even of an hour without files, finishes
        # the cut commit; a reader then sees all of it.
        other = run_sync(
            spark, SyncRequest(lake["lake_root"], lake["archive_root"], SRC, ("2026-11-21T13",))
        )
        found = compare(expected, read_lake(LocalStore(), lake["lake_root"], SRC))
        assert found.ok, str(found)
        assert other.source.recovered_commits

    result = run_sync(spark, SyncRequest(lake["lake_root"], lake["archive_root"], SRC, HOURS))
    assert_oracle_holds(reliability)
    assert lake_state(lake["lake_root"]) == reference["state"]  # quarantine records too
    assert result.source.lines_in == lake["lines"]
    assert not glob.glob(f"{lake['lake_root']}/_commits/{SRC}/*.json")
    assert not glob.glob(f"{lake['lake_root']}/_staging/{SRC}/*")


@pytest.mark.slow
def test_killed_while_reading_the_archive(spark, synced_v1, reference, reliability):
    """Killed from outside as soon as stage A has written its first work file."""
    lake = synced_v1
    # Enough lines that stage A is still reading when its first work file lands.
    generate_archive(
        lake["archive_root"],
        SRC,
        [ArchiveHour.parse("2026-11-21T12")],
        events_per_hour=30_000,
        files_per_hour=4,
        seed=5,
    )
    hours = (*HOURS, "2026-11-21T12")
    expect_oracle(reliability, lake, hours)
    reliability.fault()
    proc = spawn_sync(lake, hours=hours, local_max_bytes=0)  # Spark tasks killed mid-read
    work = f"{lake['lake_root']}/_staging/{SRC}/*/work/**"
    deadline = time.monotonic() + 300
    while not any(os.path.isfile(p) for p in glob.glob(work, recursive=True)):
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        assert time.monotonic() < deadline, "stage A never wrote a work file"
        time.sleep(0.02)
    kill_group(proc)
    during = lake_state(lake["lake_root"])
    assert during == lake["v1"]  # the lake is untouched while reading

    result = run_sync(spark, SyncRequest(lake["lake_root"], lake["archive_root"], SRC, hours))
    assert_oracle_holds(reliability)
    after = lake_state(lake["lake_root"])
    # hour 12 is new (the reference has none): its partitions end "hr=12", its identity index
    # is keyed by the compact hour
    assert {
        k: v for k, v in after.items() if not (k[1].endswith("hr=12") or k[1] == "2026112112")
    } == reference["state"]
    assert result.source.lines_in == lake["lines"] + 30_000


# ---------------------------------------------------------------------- concurrency / lock


def _has_open(pid: int, path: str) -> bool:
    """Whether process ``pid`` holds a file descriptor on ``path`` (Linux ``/proc``)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except FileNotFoundError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == path:
                return True
        except OSError:
            pass
    return False


@pytest.mark.slow
def test_two_syncs_of_the_same_hours_at_once_are_serialized_never_doubled(
    synced_v1, reference, reliability
):
    """Both syncs are made to contend: the test holds the lock until each of them is waiting
    for it (its lock file open, seen in ``/proc``), whatever their JVMs' start-up times."""
    lake = synced_v1
    expect_oracle(reliability, lake)
    reliability.fault()  # a concurrent second sync
    lock_path = os.path.realpath(os.path.join(lake["lake_root"], "_locks", f"{SRC}.lock"))
    held = SourceLock(lake["lake_root"], SRC, "the-test").__enter__()
    try:
        procs = [spawn_sync(lake), spawn_sync(lake)]
        deadline = time.monotonic() + 300
        while not all(_has_open(p.pid, lock_path) for p in procs):
            for p in procs:
                assert p.poll() is None, p.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "the syncs never reached the lock"
            time.sleep(0.05)
    finally:
        held.__exit__(None, None, None)
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (_out, err) in zip(procs, outs):
        assert p.returncode == 0, err.decode()[-2000:]
    import json

    first, second = sorted(
        (json.loads(out.decode().strip().splitlines()[-1]) for out, _ in outs),
        key=lambda r: r["start_time"],
    )
    assert first["timings"]["lock_wait_s"] > 0 and second["timings"]["lock_wait_s"] > 0
    # Serialized: the second started (holding the lock) after the first had finished.
    assert first["finish_time"] <= second["start_time"]
    assert_oracle_holds(reliability)
    assert lake_state(lake["lake_root"]) == reference["state"]


@pytest.mark.slow
def test_a_held_lock_makes_the_sync_fail_clearly_without_changing_anything(spark, synced_v1):
    lake = synced_v1
    with SourceLock(lake["lake_root"], SRC, "someone-else"):
        with pytest.raises(SyncError) as e:
            run_sync(
                spark,
                SyncRequest(
                    lake["lake_root"], lake["archive_root"], SRC, HOURS, lock_wait_seconds=1
                ),
            )
    assert e.value.code == "locked"
    assert "someone-else" in str(e.value) and "waited 1 s" in str(e.value)
    assert lake_state(lake["lake_root"]) == lake["v1"]


@pytest.mark.slow
def test_a_waiting_sync_runs_once_the_holder_releases(spark, synced_v1, reference):
    lake = synced_v1
    lock = SourceLock(lake["lake_root"], SRC, "holder").__enter__()
    timer = threading.Timer(2.0, lock.__exit__, (None, None, None))
    timer.start()
    try:
        result = run_sync(
            spark,
            SyncRequest(lake["lake_root"], lake["archive_root"], SRC, HOURS, lock_wait_seconds=60),
        )
    finally:
        timer.join()
    assert result.source.timings["lock_wait_s"] >= 1.5
    assert lake_state(lake["lake_root"]) == reference["state"]


def test_a_killed_lock_holder_does_not_block_the_next_sync(tmp_path):
    """flock is released by the kernel when its holder dies, even by SIGKILL."""
    code = (
        f"import sys, time; sys.path.insert(0, {REPO!r})\n"
        "from datalake_assets.lake.lock import SourceLock\n"
        f"SourceLock({str(tmp_path)!r}, 'src', 'doomed').__enter__(); print('held', flush=True)\n"
        "time.sleep(600)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert proc.stdout.readline().strip() == b"held"
    with pytest.raises(Exception, match="doomed"):
        SourceLock(str(tmp_path), "src", "me", wait_s=0.5, poll_s=0.1).__enter__()
    proc.kill()
    proc.wait()
    with SourceLock(str(tmp_path), "src", "me", wait_s=5, poll_s=0.1) as held:
        assert held.waited_s < 5


# --------------------------------------------------------------------------- S3 lease


@pytest.fixture()
def s3_bucket(mocked_aws):
    import boto3

    boto3.client("s3").create_bucket(Bucket="lease-lake")
    return "s3://lease-lake/lake"


class ManualClock:
    """A wall clock that moves only when the test says so."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_s3_lease_excludes_a_second_holder_and_is_released(s3_bucket):
    from datalake_assets.lake.lock import LockTimeout

    with SourceLock(s3_bucket, "src", "first", lease_s=60):
        with pytest.raises(LockTimeout, match="run first"):
            SourceLock(s3_bucket, "src", "second", wait_s=0.3, poll_s=0.1).__enter__()
    with SourceLock(s3_bucket, "src", "second", wait_s=1, poll_s=0.1) as held:
        assert held.waited_s < 1


def test_s3_lease_of_a_dead_holder_expires_and_is_taken_over(s3_bucket):
    clock = ManualClock()
    dead = SourceLock(s3_bucket, "src", "dead", lease_s=1.0, clock=clock)
    dead.__enter__()
    dead._impl._stop.set()  # the holder dies: no more heartbeats, no release
    dead._impl._thread.join()  # (a beat in flight would renew it)
    clock.now += 1.2
    with SourceLock(s3_bucket, "src", "next", wait_s=5, poll_s=0.1, clock=clock) as held:
        assert held.waited_s < 5
        import boto3

        body = boto3.client("s3").get_object(Bucket="lease-lake", Key="lake/_locks/src.json")
        assert b'"next"' in body["Body"].read()
    # The old holder finds out before it would commit.
    with pytest.raises(Exception, match="taken over"):
        dead.check()


def test_s3_lease_heartbeat_keeps_a_live_holder(s3_bucket):
    """Time passes (on an injected clock) well beyond the lease: only a renewal written by the
    heartbeat after that keeps the lease. Waits for the renewal itself, not for a duration."""
    import json

    import boto3

    from datalake_assets.lake.lock import LockTimeout

    clock = ManualClock()
    s3 = boto3.client("s3")

    def expires_at() -> float:
        got = s3.get_object(Bucket="lease-lake", Key="lake/_locks/src.json")
        return json.loads(got["Body"].read())["expires_at"]

    with SourceLock(s3_bucket, "src", "alive", lease_s=0.6, clock=clock) as held:
        assert expires_at() == clock.now + 0.6
        clock.now += 1.5  # longer than the lease: without a renewal it has expired
        deadline = time.monotonic() + 60
        while expires_at() < clock.now:
            assert time.monotonic() < deadline, "the heartbeat never renewed the lease"
            time.sleep(0.05)
        with pytest.raises(LockTimeout):
            SourceLock(s3_bucket, "src", "other", wait_s=0, poll_s=0.1, clock=clock).__enter__()
        held.check()


def test_partition_state_helper_sees_a_doubled_hour(spark, lake):
    """The helper above must be able to fail: a partition holding both versions is caught."""
    write_hour(lake["archive_root"], SRC, HOURS[0], [msg("a"), msg("b")])
    run_sync(spark, SyncRequest(lake["lake_root"], lake["archive_root"], SRC, HOURS[:1]))
    v1 = lake_state(lake["lake_root"])
    part = glob.glob(f"{lake['lake_root']}/data/{SRC}/segment_type=order_completed/day=*/hr=*")[0]
    f = glob.glob(f"{part}/*.parquet")[0]
    import shutil

    shutil.copy(f, f"{part}/copy-{os.path.basename(f)}")
    doubled = lake_state(lake["lake_root"])
    with pytest.raises(AssertionError, match="neither version"):
        assert_each_partition_whole(doubled, v1, defaultdict(list))


def test_a_file_shorter_than_listed_fails_the_read_instead_of_passing_for_complete(tmp_path):
    """A truncated or replaced archive file must not silently lose its missing lines."""
    import gzip

    from datalake_assets.lake.storage import ShortRead, iter_lines

    path = tmp_path / "part.jsonl.gz"
    path.write_bytes(gzip.compress(b'{"a":1}\n{"a":2}\n'))
    size = path.stat().st_size
    assert list(iter_lines(str(path), expected_size=size)) == [b'{"a":1}', b'{"a":2}']
    with pytest.raises(ShortRead, match="listed with"):
        list(iter_lines(str(path), expected_size=size + 100))
