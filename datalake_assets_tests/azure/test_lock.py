"""The source lock on Azure blobs (Azurite): a lease blob created with ``If-None-Match: *``,
renewed and taken over with ``If-Match`` on its ETag; the same lease logic as on S3."""

from __future__ import annotations

import json
import threading
import time

import pytest

from datalake_assets.lake.lock import LockLost, LockTimeout, SourceLock


class ManualClock:
    """A wall clock that moves only when the test says so."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture()
def lake(container) -> str:
    return f"az://{container}/lake"


def lease_body(azurite, container: str) -> dict:
    blob = azurite.service().get_blob_client(container, "lake/_locks/src.json")
    return json.loads(blob.download_blob().readall())


def test_a_second_holder_waits_and_the_lease_is_released(lake, azure_env, container):
    with SourceLock(lake, "src", "first", lease_s=60):
        assert lease_body(azure_env, container)["run_id"] == "first"
        with pytest.raises(LockTimeout, match="run first"):
            SourceLock(lake, "src", "second", wait_s=0.3, poll_s=0.1).__enter__()
    with SourceLock(lake, "src", "second", wait_s=1, poll_s=0.1) as held:
        assert held.waited_s < 1
    assert not azure_env.service().get_blob_client(container, "lake/_locks/src.json").exists()


def test_two_waiters_for_a_dead_holder_one_wins(lake):
    """The dead holder's lease expires; two waiters race for it with If-Match on the same
    ETag: exactly one takes it over, the other waits (and times out here)."""
    clock = ManualClock()
    dead = SourceLock(lake, "src", "dead", lease_s=1.0, clock=clock)
    dead.__enter__()
    dead._impl._stop.set()  # the holder dies: no more heartbeats, no release
    dead._impl._thread.join()
    clock.now += 1.5
    won: list[SourceLock] = []
    lost: list[str] = []
    barrier = threading.Barrier(2)

    def wait_for_it(name: str) -> None:
        lock = SourceLock(lake, "src", name, wait_s=1.0, poll_s=0.05, lease_s=60, clock=clock)
        barrier.wait()
        try:
            lock.__enter__()
            won.append(lock)  # holds it (released at the end of the test)
        except LockTimeout:
            lost.append(name)

    threads = [threading.Thread(target=wait_for_it, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1 and len(lost) == 1
    with pytest.raises(LockLost, match="taken over"):
        dead.check()  # the old holder finds out before it would commit
    won[0].check()
    won[0].__exit__(None, None, None)


def test_the_heartbeat_keeps_a_live_holder(lake, azure_env, container):
    """Time passes (on an injected clock) well beyond the lease: only a renewal written by the
    heartbeat keeps it. Waits for the renewal itself, not for a duration."""
    clock = ManualClock()
    with SourceLock(lake, "src", "alive", lease_s=0.6, clock=clock) as held:
        assert lease_body(azure_env, container)["expires_at"] == clock.now + 0.6
        clock.now += 1.5
        deadline = time.monotonic() + 60
        while lease_body(azure_env, container)["expires_at"] < clock.now:
            assert time.monotonic() < deadline, "the heartbeat never renewed the lease"
            time.sleep(0.05)
        with pytest.raises(LockTimeout):
            SourceLock(lake, "src", "other", wait_s=0, poll_s=0.1, clock=clock).__enter__()
        held.check()


def test_release_deletes_only_its_own_lease(lake, azure_env, container):
    clock = ManualClock()
    first = SourceLock(lake, "src", "first", lease_s=1.0, clock=clock)
    first.__enter__()
    first._impl._stop.set()
    first._impl._thread.join()
    clock.now += 2
    with SourceLock(lake, "src", "second", wait_s=5, poll_s=0.05, clock=clock, lease_s=60):
        first._impl.lost = False  # as if it had not noticed yet: its release must not delete
        first._impl._stop.clear()
        first.__exit__(None, None, None)
        assert lease_body(azure_env, container)["run_id"] == "second"


def test_the_privacy_key_is_created_once(lake, monkeypatch):
    """The lake's identity-hash key uses the same conditional create: two processes that
    both find it missing keep the first one's key."""
    from datalake_assets.lake import identities, storage

    first = identities.lake_key(lake)
    assert len(first) == identities.KEY_BYTES and identities.lake_key(lake) == first
    # A second creator racing the first: its create finds the blob and keeps the first key.
    real = storage.read_bytes
    calls = {"n": 0}

    def missing_once(location: str) -> bytes:
        calls["n"] += 1
        if calls["n"] == 1:
            raise FileNotFoundError(location)
        return real(location)

    monkeypatch.setattr(storage, "read_bytes", missing_once)
    assert identities.lake_key(lake) == first
