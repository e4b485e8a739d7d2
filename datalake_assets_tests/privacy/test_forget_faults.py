"""A privacy request killed at each of its steps (``SIGKILL``, ``lake/faults.py``): readers see
whole partitions, and running the request again (or ``datalake forget --resume``) converges
on exactly what an uninterrupted request does. Also the command line itself."""

import glob
import os
import signal
import subprocess
import sys
from collections import Counter

import orjson
import pytest

from datalake_assets.cli import main
from datalake_assets.lake.faults import ENV as FAULT_ENV
from datalake_assets.lake.faults import FORGET_POINTS
from datalake_assets.privacy.state import load_state
from datalake_assets_tests.privacy.people import (
    TARGET_VALUES,
    is_target_row,
    lake_snapshot,
    mentions_target,
    oracle_expected,
    read_source,
    target_traces,
    without_target,
)
from datalake_assets_tests.privacy.test_forget import target_hashes

pytestmark = [pytest.mark.spark, pytest.mark.reliability]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REQUEST = ("--user-id", "u-target", "--follow-links", "--request-id", "r-kill")
COUNTS = (
    "rows_removed",
    "archive_lines_removed",
    "index_entries_removed",
    "hours_rewritten",
    "files_rewritten",
)


def run_cli(settings, *args: str, fault: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != FAULT_ENV}
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    if fault:
        env[FAULT_ENV] = fault
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "datalake_assets.cli",
            "--settings",
            settings.settings_file,
            "forget",
            *args,
        ],
        env=env,
        capture_output=True,
        timeout=300,
    )


def counts(out: bytes) -> dict:
    result = orjson.loads(out[out.index(b"{") :])
    return {k: result[k] for k in COUNTS} | {"status": result["status"]}


@pytest.fixture(scope="module")
def reference(base_people_lake, tmp_path_factory):
    """The uninterrupted request's counts, on a copy of the lake of its own."""
    from datalake_assets_tests.privacy.people import copy_lake

    settings = copy_lake(base_people_lake, str(tmp_path_factory.mktemp("reference")))
    done = run_cli(settings, *REQUEST)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    return counts(done.stdout)


def rows_multiset(rows) -> Counter:
    return Counter(orjson.dumps(r, default=str, option=orjson.OPT_SORT_KEYS) for r in rows)


def assert_whole(during: dict, before: dict, hashes) -> None:
    """Every partition holds its old version or its erased one, never a mix; every archive
    hour holds its lines, with some or all of the target's emptied."""
    for key in set(before["rows"]) | set(during["rows"]):
        old = before["rows"].get(key, [])
        new = [r for r in old if not is_target_row(r, hashes=hashes)]
        assert rows_multiset(during["rows"].get(key, [])) in (
            rows_multiset(old),
            rows_multiset(new),
        ), key
    for key, old in before["lines"].items():
        now = Counter(during["lines"][key])
        assert not now - Counter(old), key  # nothing new
        assert not Counter(ln for ln in old if not mentions_target(ln)) - now, key


@pytest.mark.slow
@pytest.mark.parametrize("point", FORGET_POINTS)
def test_killed_at_each_step_a_rerun_converges(indexed_lake, reference, point, reliability):
    settings = indexed_lake
    hashes = target_hashes(settings)
    before = lake_snapshot(settings)
    reliability.cases += 1
    reliability.fault()
    killed = run_cli(settings, *REQUEST, fault=point)
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()[-3000:]
    assert f"killed at {point}".encode() in killed.stderr
    assert_whole(lake_snapshot(settings), before, hashes)
    assert load_state(settings.lake_root, "r-kill").status == "running"

    # after a kill inside a commit, the resume (or any sync of the source) rolls it forward
    again = (
        run_cli(settings, "--resume")
        if point in ("mid_commit", "forget_archive")
        else run_cli(settings, *REQUEST)
    )
    assert again.returncode == 0, again.stderr.decode()[-3000:]
    assert counts(again.stdout) == reference
    after = lake_snapshot(settings)
    assert target_traces(after, hashes) == []
    assert without_target(after, hashes) == without_target(before, hashes)
    assert not glob.glob(f"{settings.lake_root}/_commits/*/*.json")
    assert not glob.glob(f"{settings.lake_root}/_staging/*/*")
    assert load_state(settings.lake_root, "r-kill").status == "completed"
    # the lake is what a clean sync of the erased archive makes
    reliability.expect(oracle_expected(settings, "web"), lambda: read_source(settings, "web"))
    found = reliability.compare()
    assert found.ok, str(found)


@pytest.mark.slow
def test_command_line(indexed_lake, tmp_path, capsys):
    settings = indexed_lake
    cli = ["--settings", settings.settings_file, "forget"]
    assert main([*cli]) == 2
    assert "name someone" in capsys.readouterr().err
    assert main([*cli, "--trait", "phone=+33 1 23"]) == 2
    assert "identity_traits" in capsys.readouterr().err
    assert main([*cli, "--user-id", "x" * 5000]) == 2
    assert "xxxxx" not in capsys.readouterr().err

    ids = tmp_path / "ticket-77.txt"
    ids.write_text("# one person, two ids\nuser_id=u-target\n\nemail=Target@Example.com\n")
    assert main([*cli, "--file", str(ids), "--anonymous-id", "anon-t", "--source", "web"]) == 0
    out = capsys.readouterr()
    printed = orjson.loads(out.out)
    assert (printed["request_id"], printed["status"], printed["identities"]) == (
        "ticket-77",
        "completed",
        3,
    )
    assert "identity_hashes" not in printed
    assert not any(v in (out.out + out.err).casefold() for v in TARGET_VALUES)
    assert main([*cli, "--resume"]) == 0
    assert "no unfinished" in capsys.readouterr().out
