"""The ``abfss://`` commit protocol (hierarchical namespace) against a filesystem with the same
rename rules (``hns_emulation.py``; Azurite has none): journal, rename the live hour aside,
rename the staged hour in, delete the old one. A reader sees the old hour, briefly none, or the
new one, never a mix; a kill between the renames converges through ``recover``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from datalake_assets.lake import commit, storage
from datalake_assets.lake.faults import ENV as FAULT_ENV
from datalake_assets_tests.azure.hns_emulation import (
    LOOPBACK_GUARD,
    HnsRulesHandler,
    hns_filesystem,
    install,
)

LAKE = "abfss://lake@acct1.dfs.core.windows.net/prod"
LOCAL_LAKE = "lake/prod"  # the same lake, inside the emulated account's folder
REPO = str(Path(__file__).resolve().parents[2])
TABLE = "data/src/segment_type=orders"
H10, H11 = "2026112110", "2026112111"


def part(hour: str, run: str, n: int = 0) -> str:
    return f"part-{hour}-{run}-{n:05d}-0.parquet"


class Account:
    """The emulated account in a folder; ``view`` is what a reader of a partition sees."""

    def __init__(self, root: Path, monkeypatch) -> None:
        self.root = root
        self.views: list[dict[str, list[str]]] = []
        self.fs, self.handler = hns_filesystem(
            str(root), lambda s, d: self.views.append(self.view())
        )
        install(monkeypatch.setattr, self.fs)
        self.watched: list[str] = []

    def local(self, rel: str) -> Path:
        return self.root / LOCAL_LAKE / rel

    def put(self, rel: str, names: list[str], body: bytes = b"") -> None:
        folder = self.local(rel)
        folder.mkdir(parents=True, exist_ok=True)
        for name in names:
            (folder / name).write_bytes(body or name.encode())

    def view(self) -> dict[str, list[str]]:
        """Every watched partition's visible files (absent: no key)."""
        out = {}
        for rel in self.watched:
            folder = self.local(rel)
            if folder.is_dir():
                out[rel] = sorted(n for n in os.listdir(folder) if n.endswith(".parquet"))
        return out


@pytest.fixture()
def account(tmp_path, monkeypatch) -> Account:
    for name, value in LOOPBACK_GUARD.items():
        monkeypatch.setenv(name, value)
    return Account(tmp_path / "account", monkeypatch)


def swap(rel_staged: str, rel_target: str, *hours: str) -> commit.Swap:
    return commit.Swap(f"{LAKE}/{rel_staged}", f"{LAKE}/{rel_target}", tuple(hours))


def test_the_emulation_keeps_the_rename_rules(account):
    account.put("a", ["x.parquet"])
    account.put("b", ["y.parquet"])
    (account.root / "lake/prod/empty").mkdir()
    with pytest.raises(OSError, match="non-empty directory"):
        account.fs.move("lake/prod/a", "lake/prod/b")
    with pytest.raises(OSError, match="ParentPathNotFound"):
        account.fs.move("lake/prod/a", "lake/prod/no/such/a")
    account.fs.move("lake/prod/a", "lake/prod/empty")  # onto an empty directory: replaces it
    assert os.listdir(account.local("empty")) == ["x.parquet"]


def test_a_commit_renames_hours_in_and_readers_never_see_a_mix(account):
    live10 = f"{TABLE}/day=2026-11-21/hr=10"
    new11 = f"{TABLE}/day=2026-11-21/hr=11"
    account.watched = [live10, new11]
    account.put(live10, [part(H10, "old"), part(H10, "old", 1)])
    account.put(f"_staging/run2/{live10}", [part(H10, "run2")])
    account.put(f"_staging/run2/{new11}", [part(H11, "run2")])
    old = account.view()
    commit.commit(
        LAKE,
        "src",
        "run2",
        [swap(f"_staging/run2/{live10}", live10, H10), swap(f"_staging/run2/{new11}", new11, H11)],
    )
    new = account.view()
    assert new == {live10: [part(H10, "run2")], new11: [part(H11, "run2")]}
    for seen in account.views:  # after every rename
        for rel in account.watched:
            assert seen.get(rel) in (old.get(rel), None, new[rel]), (rel, seen)
    # renames only: aside, in, and in (a new partition); no data copied, nothing left behind
    assert [
        (s.rsplit("/", 1)[1], d.rsplit("/", 1)[1])
        for s, d in account.handler.renames
        if not s.endswith(".json") and ".tmp-" not in s
    ] == [("hr=10", "hr=10.replaced"), ("hr=10", "hr=10"), ("hr=11", "hr=11")]
    assert not account.handler.copies
    assert not (account.root / LOCAL_LAKE / "_staging/run2/data").exists() or not any(
        p.is_file() for p in (account.root / LOCAL_LAKE / "_staging/run2/data").rglob("*")
    )
    assert storage.list_files(f"{LAKE}/_commits/src") == []  # journal removed
    assert (account.local(live10) / commit.MARKER).read_text() == "run2"


def test_a_coarse_partition_carries_its_other_hours_over(account):
    """``day`` layout: one partition holds 24 hours; the staged version gets the other hours'
    files by server-side copies before it is renamed in."""
    day = f"{TABLE}/day=2026-11-21"
    account.watched = [day]
    account.put(day, [part(H10, "old"), part(H11, "old")])
    account.put(f"_staging/run2/{day}", [part(H10, "run2")])
    commit.commit(LAKE, "src", "run2", [swap(f"_staging/run2/{day}", day, H10)])
    assert account.view() == {day: [part(H10, "run2"), part(H11, "old")]}
    assert len(account.handler.copies) == 1


KILL_SCRIPT = """
import sys
sys.path.insert(0, {repo!r})
from datalake_assets.lake import commit
from datalake_assets_tests.azure.hns_emulation import hns_filesystem, install
fs, _ = hns_filesystem({root!r})
install(setattr, fs)
commit.commit({lake!r}, "src", "run2", [commit.Swap(s, t, tuple(h)) for s, t, h in {swaps!r}])
"""


@pytest.mark.reliability
@pytest.mark.parametrize("point", ["swap_aside", "mid_commit"])
def test_a_commit_killed_between_renames_converges_through_recover(account, point, reliability):
    h10, h11 = f"{TABLE}/day=2026-11-21/hr=10", f"{TABLE}/day=2026-11-21/hr=11"
    account.watched = [h10, h11]
    account.put(h10, [part(H10, "old")])
    account.put(h11, [part(H11, "old")])
    for rel, hour in ((h10, H10), (h11, H11)):
        account.put(f"_staging/run2/{rel}", [part(hour, "run2")])
    old = account.view()
    swaps = [
        (f"{LAKE}/_staging/run2/{rel}", f"{LAKE}/{rel}", [hour])
        for rel, hour in ((h10, H10), (h11, H11))
    ]
    script = KILL_SCRIPT.format(repo=REPO, root=str(account.root), lake=LAKE, swaps=swaps)
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        timeout=120,
        env={**os.environ, FAULT_ENV: point},
    )
    assert done.returncode == -9, done.stderr.decode()[-2000:]  # SIGKILL at the point
    reliability.fault()
    reliability.cases += 1
    killed = account.view()
    if point == "swap_aside":  # the first hour is aside: absent, never mixed
        assert killed == {h11: old[h11]}
        assert (account.root / LOCAL_LAKE / f"_staging/run2/{h10}.replaced").is_dir()
    else:  # the first hour swapped, the second not yet
        assert killed == {h10: [part(H10, "run2")], h11: old[h11]}
    assert [r for r, _ in storage.list_files(f"{LAKE}/_commits/src")]  # journaled

    assert commit.recover(LAKE, "src") == ["run2"]
    new = {h10: [part(H10, "run2")], h11: [part(H11, "run2")]}
    assert account.view() == new
    for seen in account.views:
        for rel in account.watched:
            assert seen.get(rel) in (old[rel], None, new[rel])
    assert not (account.root / LOCAL_LAKE / f"_staging/run2/{h10}.replaced").exists()
    assert commit.recover(LAKE, "src") == []  # nothing left to do


def test_a_lost_staging_area_fails_before_touching_the_live_hour(account):
    live = f"{TABLE}/day=2026-11-21/hr=10"
    account.put(live, [part(H10, "old")])
    with pytest.raises(RuntimeError, match="staged partition missing"):
        commit.apply_swap(swap(f"_staging/run9/{live}", live, H10), "run9")
    assert os.listdir(account.local(live)) == [part(H10, "old")]


def test_handler_is_a_pyarrow_filesystem(tmp_path):
    fs, handler = hns_filesystem(str(tmp_path / "acct"))
    assert isinstance(handler, HnsRulesHandler) and fs.type_name == "py::hns-emulation"
