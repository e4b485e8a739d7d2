"""Erasure from the spool: sealed segments rewritten without the person's lines (atomically,
the rest byte for byte), live collectors' segments left to the suppression."""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

import orjson

from datalake_assets.ingest.collector import Collector
from datalake_assets.ingest.collector.spool_erase import erase_from_spool, erase_spool
from datalake_assets.lake.identities import lake_key, write_suppressed
from datalake_assets.settings.privacy_section import PrivacySettings
from datalake_assets.spec.identity import identity, identity_hash
from datalake_assets_tests.ingest.collector.helpers import (
    archive_lines,
    lake_settings,
    post,
    track,
)

KEY = b"s" * 32
TRAITS = ("email",)
GONE = frozenset(
    {
        identity_hash(KEY, identity("user_id", "gone")),
        identity_hash(KEY, identity("email", "gone@x.io")),
    }
)


def line(mid: str, **kw) -> bytes:
    return orjson.dumps({"type": "track", "event": "E", "messageId": mid, **kw}) + b"\n"


def segment(folder: Path, name: str, *lines: bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"2026112110-20261121T1000{name}-aaaaaaaaaaaa.wal"
    path.write_bytes(b"".join(lines))
    return path


def test_sealed_segments_lose_exactly_the_persons_lines(tmp_path):
    spool = tmp_path / "spool"
    keep = [
        line("k1", userId="u1"),
        line("k2", anonymousId="a2", context={"traits": {}}),
        b"not json at all\n",
        line("k3", userId="u1", traits={"email": "gone@x.io"}),
    ]
    mixed = segment(
        spool / "src1",
        "00",
        keep[0],
        line("g1", userId="gone"),
        keep[1],
        line("g2", anonymousId="gone"),
        keep[2],
        line("g3", userId="u2", context={"traits": {"email": " Gone@X.io"}}),
        keep[3],
        b'{"torn": "gon',
    )
    only_gone = segment(spool / "worker.1" / "web", "01", line("g4", previousId="gone"))
    untouched = segment(spool / "worker.0" / "src1", "02", keep[0])
    before = os.stat(untouched)
    result = erase_spool(str(spool), KEY, GONE, TRAITS)
    assert (
        result.lines_removed,
        result.segments_rewritten,
        result.segments_deleted,
        result.skipped_live,
    ) == (4, 1, 1, 0)
    # the other lines byte for byte, the torn tail as it was (a restart cuts it)
    assert mixed.read_bytes() == b"".join(keep) + b'{"torn": "gon'
    assert not only_gone.exists()
    assert os.stat(untouched).st_mtime_ns == before.st_mtime_ns  # never rewritten
    assert sorted(p.name for p in spool.rglob(".erase-*")) == []
    assert erase_from_spool(str(spool), KEY, GONE, TRAITS) == 0  # a re-run: nothing left


def test_a_rewrite_interrupted_by_a_crash_leaves_the_segment_whole_and_is_cleaned(tmp_path):
    spool = tmp_path / "spool"
    seg = segment(spool / "src1", "00", line("g1", userId="gone"), line("k1", userId="u1"))
    leftover = seg.parent / (".erase-" + seg.name)
    leftover.write_bytes(b"half a rewrite")  # the crash came before the rename
    assert erase_from_spool(str(spool), KEY, GONE, TRAITS) == 1
    assert seg.read_bytes() == line("k1", userId="u1") and not leftover.exists()


def test_nothing_to_do_for_no_hashes_or_no_spool(tmp_path):
    assert erase_from_spool(str(tmp_path / "absent"), KEY, GONE, TRAITS) == 0
    assert not (tmp_path / "absent").exists()
    spool = tmp_path / "spool"
    seg = segment(spool / "src1", "00", line("g1", userId="gone"))
    assert erase_from_spool(str(spool), KEY, frozenset(), TRAITS) == 0
    assert seg.exists()


def test_a_stopped_collectors_spool_is_erased_and_the_next_start_archives_the_rest(tmp_path):
    settings = lake_settings(tmp_path)
    key = lake_key(settings.lake_root)
    gone = frozenset({identity_hash(key, identity("user_id", "gone"))})
    # what a crashed collector left: segments nobody rolled yet
    spool = Path(settings.collector.spool_dir)
    segment(spool / "src1", "00", line("g1", userId="gone"), line("k1", userId="u1"))
    segment(spool / "worker.3" / "web", "01", line("g2", userId="gone"))
    assert erase_from_spool(str(spool), key, gone, TRAITS) == 2
    c = Collector(settings).start()  # rolls what the crash left
    assert c.stop()
    assert [m["messageId"] for m in archive_lines(settings.archive_root)] == ["k1"]


def test_a_running_collectors_segments_are_left_to_the_suppression(tmp_path):
    settings = dataclasses.replace(
        lake_settings(tmp_path, segment_max_age_seconds=3600),
        privacy=PrivacySettings(suppression_reload_seconds=1),
    )
    c = Collector(settings).start()
    try:
        for mid, uid in (("g1", "gone"), ("k1", "u1")):
            assert post(c.url, "/v1/track", track(mid, userId=uid))[0] == 200
        key = lake_key(settings.lake_root)
        gone = frozenset({identity_hash(key, identity("user_id", "gone"))})
        # the erasure engine's order: suppress, let the collector reload, erase the spool
        write_suppressed(settings.lake_root, "req-1", sorted(gone))
        deadline = time.monotonic() + 10
        while c.stats()["suppression_list"] != 1:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        result = erase_spool(settings.collector.spool_dir, key, gone, TRAITS)
        assert result.lines_removed == 0 and result.skipped_live == 1
    finally:
        assert c.stop()
    assert [m["messageId"] for m in archive_lines(settings.archive_root)] == ["k1"]
    assert c.stats()["suppressed_at_roll"] == 1
