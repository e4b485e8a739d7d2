"""Suppression at the collector, over real HTTP: messages of suppressed identities are answered
like accepted ones and never archived, the list is re-read when it changes, and the roller
drops lines accepted before the change."""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

from datalake_assets.ingest.collector import Collector
from datalake_assets.ingest.collector.suppression import Suppression
from datalake_assets.lake.identities import lake_key, write_suppressed
from datalake_assets.settings.privacy_section import PrivacySettings
from datalake_assets.spec.identity import identity, identity_hash
from datalake_assets.spec.layout import privacy_key_path
from datalake_assets_tests.ingest.collector.helpers import (
    archive_lines,
    lake_settings,
    post,
    track,
)


def settings_with(tmp_path: Path, reload_seconds: int = 10, **collector: object):
    s = lake_settings(tmp_path, **collector)
    return dataclasses.replace(
        s,
        privacy=PrivacySettings(
            identity_traits=("email",), suppression_reload_seconds=reload_seconds
        ),
    )


def suppress(lake_root: str, request_id: str, *identities: tuple[str, str]) -> None:
    key = lake_key(lake_root)
    write_suppressed(
        lake_root, request_id, [identity_hash(key, identity(k, v)) for k, v in identities]
    )


def wait_for(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_suppressed_messages_get_200_and_are_stored_nowhere(tmp_path):
    settings = settings_with(tmp_path)
    suppress(settings.lake_root, "req-1", ("user_id", "gone"), ("email", "gone@x.io"))
    c = Collector(settings).start()
    try:
        status, reply, _ = post(c.url, "/v1/track", track("s1", userId="gone"))
        assert (status, reply) == (200, {"success": True})
        batch = [
            track("s2", userId="u2", anonymousId="gone"),  # any identity of the message
            {
                "type": "identify",
                "messageId": "s3",
                "userId": "u3",
                "traits": {"email": " GONE@x.io"},
            },
            track("s4", userId="u4", context={"traits": {"email": "gone@x.io"}}),
            track("k1", userId="u2"),
            track("k2", userId="u5", traits={"email": "gone@x.io"}),  # not an identify: kept
        ]
        status, reply, _ = post(c.url, "/v1/batch", {"batch": batch})
        assert (status, reply) == (200, {"success": True})
        # rejected messages are reported; suppressed ones count as accepted for the client
        status, reply, _ = post(
            c.url,
            "/v1/batch",
            {"batch": [track("s5", userId="gone"), {"type": "track", "userId": "gone"}]},
        )
        assert status == 200 and reply["accepted"] == 1 and len(reply["rejected"]) == 1
        stats = c.stats()
        assert (stats["suppressed"], stats["accepted"], stats["suppression_list"]) == (5, 2, 2)
    finally:
        assert c.stop()
    assert sorted(m["messageId"] for m in archive_lines(settings.archive_root)) == ["k1", "k2"]


def test_the_list_is_reloaded_and_the_roller_drops_what_was_accepted_before(tmp_path):
    settings = settings_with(tmp_path, reload_seconds=1, segment_max_age_seconds=3600)
    c = Collector(settings).start()
    try:
        for i in range(3):
            assert post(c.url, "/v1/track", track(f"early{i}", userId="gone"))[0] == 200
        assert post(c.url, "/v1/track", track("other", userId="u2"))[0] == 200
        assert c.stats()["accepted"] == 4  # spooled: the list was empty
        suppress(settings.lake_root, "req-1", ("user_id", "gone"))
        wait_for(lambda: c.stats()["suppression_list"] == 1)
        assert post(c.url, "/v1/track", track("late", userId="gone"))[0] == 200
        assert c.stats()["suppressed"] == 1
    finally:
        assert c.stop()  # the roll of the open segment leaves the early lines out
    assert c.stats()["suppressed_at_roll"] == 3
    assert [m["messageId"] for m in archive_lines(settings.archive_root)] == ["other"]


def test_segments_left_by_a_crash_are_filtered_when_rolled_at_start(tmp_path):
    settings = settings_with(tmp_path)
    spool = Path(settings.collector.spool_dir) / "src1"
    spool.mkdir(parents=True)
    (spool / "2026112110-20261121T100000-aaaaaaaaaaaa.wal").write_bytes(
        b'{"type":"track","event":"E","userId":"gone","messageId":"x1"}\n'
        b'{"type":"track","event":"E","userId":"u2","messageId":"x2"}\n'
    )
    suppress(settings.lake_root, "req-1", ("user_id", "gone"))
    c = Collector(settings).start()
    assert c.stop()
    assert [m["messageId"] for m in archive_lines(settings.archive_root)] == ["x2"]
    assert c.stats()["suppressed_at_roll"] == 1


def test_nothing_is_hashed_while_the_list_is_empty(tmp_path):
    settings = settings_with(tmp_path)
    c = Collector(settings).start()
    try:
        assert post(c.url, "/v1/track", track("a", userId="u1"))[0] == 200
        assert not c.suppression.active
    finally:
        assert c.stop()
    # the key is read only to hash: a lake without a suppression list never got one
    assert not os.path.exists(privacy_key_path(settings.lake_root))


def test_an_unreadable_list_is_logged_and_the_collector_keeps_accepting(tmp_path):
    settings = settings_with(tmp_path)
    damaged = Path(settings.lake_root) / "_privacy" / "suppressed" / "req-1.json"
    damaged.parent.mkdir(parents=True)
    damaged.write_text('{"hashes": [')  # a list the collector cannot read
    c = Collector(settings).start()
    try:
        assert post(c.url, "/v1/track", track("a", userId="u1"))[0] == 200
        assert c.stats()["suppression_errors"] == 1 and c.stats()["accepted"] == 1
    finally:
        assert c.stop()


def test_a_reload_reads_the_files_only_when_the_listing_changed(tmp_path):
    lake = str(tmp_path / "lake")
    s = Suppression(lake, ("email",))
    assert s.reload() is False  # nothing listed, nothing read: as at the start
    suppress(lake, "req-1", ("user_id", "a"))
    assert s.reload() is True and s.size == 1 and s.loads == 1
    assert s.reload() is False and s.loads == 1
    # the same request rewritten with another hash of the same size: a new mtime
    time.sleep(0.01)
    suppress(lake, "req-1", ("user_id", "b"))
    assert s.reload() is True
    assert s.matches({"userId": "b"}) and not s.matches({"userId": "a"})
    assert s.matches_line(b'{"anonymousId":"b"}') and not s.matches_line(b"[1]")
    assert s.matches_line(b'{"userId":"b","n":123456789012345678901234567890}')
