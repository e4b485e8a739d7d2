"""The collector's spool: group commit, segments, failed writes, recovery, adoption."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from datalake_assets.ingest.collector.spool import Spool
from datalake_assets.ingest.collector.spool_files import (
    ClosedSegment,
    SpoolError,
    lock_spool,
    parse_segment_path,
)
from datalake_assets_tests.ingest.collector.helpers import H10


def lines_of(path: str) -> list[bytes]:
    with open(path, "rb") as f:
        return f.read().splitlines()


def test_group_commit_one_fsync_covers_many_requests(tmp_path, monkeypatch):
    """19 requests that arrive while a round's fsync runs share the next round. Made
    deterministic: the first fsync is held until all 19 are queued (no reliance on timing)."""
    from datalake_assets.ingest.collector import spool as spool_mod

    closed: list[ClosedSegment] = []
    real_fsync = os.fsync
    fsyncs = []
    in_fsync, release = threading.Event(), threading.Event()

    def gated_fsync(fd):
        fsyncs.append(fd)
        in_fsync.set()
        release.wait()
        real_fsync(fd)

    monkeypatch.setattr(spool_mod.os, "fsync", gated_fsync)
    sp = Spool(str(tmp_path / "spool"), closed.append)
    sp.open()

    def request(i):
        sp.append("src1", H10, b'{"n":%d}\n' % i)

    threads = [threading.Thread(target=request, args=(i,)) for i in range(20)]
    threads[0].start()
    assert in_fsync.wait(30)  # round 1 (request 0) is in its fsync
    for t in threads[1:]:
        t.start()
    deadline = time.monotonic() + 30
    while sum(len(c) for c in sp._round.pending.values()) < 19:  # the next round, queued
        assert time.monotonic() < deadline, "the requests never queued"
        time.sleep(0.01)
    release.set()
    for t in threads:
        t.join()
    assert sp.commits == 2 and len(fsyncs) < 20  # 20 requests, two rounds: shared fsyncs
    sp.close()
    assert len(closed) == 1
    assert sorted(lines_of(closed[0].path)) == sorted(b'{"n":%d}' % i for i in range(20))


def test_append_returns_only_after_its_fsync(tmp_path, monkeypatch):
    from datalake_assets.ingest.collector import spool as spool_mod

    gate = threading.Event()
    real_fsync = os.fsync
    monkeypatch.setattr(spool_mod.os, "fsync", lambda fd: (gate.wait(), real_fsync(fd)))
    sp = Spool(str(tmp_path / "spool"), lambda seg: None)
    sp.open()
    done = threading.Event()
    t = threading.Thread(target=lambda: (sp.append("src1", H10, b"{}\n"), done.set()))
    t.start()
    assert not done.wait(0.3)
    gate.set()
    assert done.wait(10)
    t.join()
    sp.close()


def test_segments_close_on_size_hour_and_age(tmp_path):
    closed: list[ClosedSegment] = []
    sp = Spool(
        str(tmp_path / "spool"), closed.append, segment_max_bytes=100, segment_max_age_seconds=0.3
    )
    sp.open()
    line = b'{"x":"' + b"a" * 50 + b'"}\n'
    sp.append("src1", H10, line)
    sp.append("src1", H10, line)  # 120 bytes >= 100: closed
    deadline = time.monotonic() + 10
    while len(closed) < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(closed) == 1 and lines_of(closed[0].path) == [line.strip()] * 2
    sp.append("src1", H10, line)
    sp.append("src1", H10.next(), line)  # another hour: the H10 segment is closed
    sp.append("web", H10.next(), line)  # another source: its own segment
    while len(closed) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert closed[1].hour == H10 and lines_of(closed[1].path) == [line.strip()]
    while len(closed) < 4 and time.monotonic() < deadline:  # age: both remaining segments
        time.sleep(0.01)
    assert sorted((c.source_id, c.hour) for c in closed[2:]) == [
        ("src1", H10.next()),
        ("web", H10.next()),
    ]
    sp.close()
    assert len(closed) == 4
    assert all(parse_segment_path(c.path) == c for c in closed)


def test_a_failed_write_is_not_acknowledged_and_damages_nothing(tmp_path, monkeypatch):
    import errno

    from datalake_assets.ingest.collector import spool as spool_mod

    closed: list[ClosedSegment] = []
    sp = Spool(str(tmp_path / "spool"), closed.append)
    sp.open()
    sp.append("src1", H10, b'{"n":1}\n')
    real_write = os.write
    state = {"fail": True}

    def disk_full(fd, data):
        if state["fail"]:
            state["fail"] = False
            real_write(fd, bytes(data[:5]))  # half a line reached the file
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(spool_mod.os, "write", disk_full)
    with pytest.raises(SpoolError, match="No space left"):
        sp.append("src1", H10, b'{"n":2}\n')
    sp.append("src1", H10, b'{"n":3}\n')  # a new segment takes the lines
    sp.close()
    assert [lines_of(c.path) for c in closed] == [[b'{"n":1}'], [b'{"n":3}']]


def test_recovery_cuts_torn_tails_and_one_process_per_spool(tmp_path):
    folder = tmp_path / "spool" / "src1"
    folder.mkdir(parents=True)
    (folder / "2026112110-20261121T100000-aaaaaaaaaaaa.wal").write_bytes(b'{"a":1}\n{"b":2}\n{"c"')
    (folder / "2026112111-20261121T110000-bbbbbbbbbbbb.wal").write_bytes(b"")
    (folder / "not-a-segment.txt").write_bytes(b"x")
    sp = Spool(str(tmp_path / "spool"), lambda s: None)
    (left,) = sp.open()
    assert (left.source_id, left.hour) == ("src1", H10)
    assert left.segment_id == "20261121T100000-aaaaaaaaaaaa"
    assert Path(left.path).read_bytes() == b'{"a":1}\n{"b":2}\n'
    assert not (folder / "2026112111-20261121T110000-bbbbbbbbbbbb.wal").exists()
    other = Spool(str(tmp_path / "spool"), lambda s: None)
    with pytest.raises(SpoolError, match="in use by another collector"):
        other.open()
    sp.close()
    other.open()  # free again
    other.close()
    with pytest.raises(SpoolError, match="shutting down"):
        other.append("src1", H10, b"{}\n")


def test_spools_of_gone_workers_are_adopted(tmp_path):
    from datalake_assets.ingest.collector.workers import prepare_spool, worker_spool

    root = tmp_path / "spool"

    def segment(folder: Path, name: str) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"2026112110-20261121T100000-{name}.wal").write_bytes(b'{"a":1}\n')

    def names(folder: Path) -> list[str]:
        return sorted(p.name[-16:-4] for p in folder.rglob("*.wal"))

    # a single-process run left src1 segments; a 3-worker run left some in worker.2
    segment(root / "src1", "aaaaaaaaaaaa")
    segment(root / "worker.2" / "src1", "bbbbbbbbbbbb")
    segment(root / "worker.1" / "web", "cccccccccccc")
    assert prepare_spool(str(root), workers=2) == 2  # into worker.0; worker.1 keeps its own
    assert names(Path(worker_spool(str(root), 0))) == ["aaaaaaaaaaaa", "bbbbbbbbbbbb"]
    assert names(root / "worker.1") == ["cccccccccccc"] and not (root / "src1").exists()
    # back to one process: its spool adopts every worker's segments
    sp = Spool(str(root), lambda s: None)
    left = sp.open()
    assert sorted((s.source_id, s.segment_id[-12:]) for s in left) == [
        ("src1", "aaaaaaaaaaaa"),
        ("src1", "bbbbbbbbbbbb"),
        ("web", "cccccccccccc"),
    ]
    assert all(Path(s.path).parent.parent == root for s in left)
    sp.close()
    # a worker spool in use by a live process is not taken
    fd = lock_spool(str(root / "worker.7"))
    try:
        with pytest.raises(SpoolError, match="in use"):
            Spool(str(root), lambda s: None).open()
    finally:
        os.close(fd)
