"""A lake records its table format when it is first synced, and a sync whose settings name
another format fails before touching it, saying what to do (``lake/formats/format_record.py``).
Driver-local syncs of a few messages: no Spark."""

from __future__ import annotations

import json
import os

import pytest

from datalake_assets.lake.formats import format_record
from datalake_assets.transform.sync_request import SyncError
from datalake_assets_tests.lake.test_iceberg import HOURS, SRC, roots, sync
from datalake_assets_tests.support.archive_builders import msg, write_hour


@pytest.fixture
def lake(tmp_path) -> dict:
    lake = roots(tmp_path)
    for i, hour in enumerate(HOURS):
        write_hour(lake["archive_root"], SRC, hour, [msg(f"m{i}", hour)])
    return lake


def listing(root: str) -> list[str]:
    return sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs)


@pytest.mark.parametrize(("first", "then"), [("segment", "iceberg"), ("iceberg", "segment")])
def test_the_first_sync_records_the_format_and_another_format_is_refused(lake, first, then):
    sync(lake, HOURS[:1], first)
    record = json.loads(open(format_record.record_location(lake["lake_root"])).read())
    assert record["table_format"] == first
    before = listing(lake["lake_root"])
    with pytest.raises(SyncError) as e:
        sync(lake, HOURS[1:], then)
    assert e.value.code == "invalid_settings"
    assert f'table_format = "{first}"' in str(e.value)
    if first == "segment":
        assert "datalake convert --to iceberg" in str(e.value)
    assert listing(lake["lake_root"]) == before  # nothing touched, not even a lock
    sync(lake, HOURS[1:], first)  # the lake's own format still syncs


def test_a_lake_from_before_the_record_is_recognised_by_its_folders(lake):
    sync(lake, HOURS[:1], "segment")
    os.remove(format_record.record_location(lake["lake_root"]))
    assert format_record.recorded(lake["lake_root"]) == "segment"
    with pytest.raises(SyncError, match="convert"):
        sync(lake, HOURS[1:], "iceberg")
    sync(lake, HOURS[1:], "segment")
    assert os.path.exists(format_record.record_location(lake["lake_root"]))


def test_an_empty_lake_takes_any_format(lake):
    assert format_record.recorded(lake["lake_root"]) is None
    sync(lake, HOURS[:1], "iceberg")
    assert format_record.recorded(lake["lake_root"]) == "iceberg"


def test_settings_without_a_format_on_a_segment_lake_are_refused_by_every_command(
    lake, tmp_path, capsys
):
    """A lake synced in the Segment layout, then opened with settings that name no format
    (the default became Iceberg): the commands that read its tables refuse it in one line,
    exit code 2, with what to do; nothing is written."""
    from datalake_assets.cli import main

    sync(lake, HOURS[:1], "segment")
    before = listing(lake["lake_root"])
    settings = tmp_path / "default.toml"
    settings.write_text(
        f'archive_root = "{lake["archive_root"]}"\nlake_root = "{lake["lake_root"]}"\n'
        f'[catalog]\nbackend = "none"\n[[sources]]\nid = "{SRC}"\n'
    )
    for command in (["sql", "SELECT 1"], ["compact"], ["maintain"], ["status"]):
        capsys.readouterr()
        assert main(["--settings", str(settings), *command]) == 2, command
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1, err
        assert err.startswith(f"datalake {command[0]}: the lake at {lake['lake_root']} holds "), err
        assert "(the default when the settings name none)" in err, err
        assert 'table_format = "segment"' in err and "datalake convert --to iceberg" in err
    assert listing(lake["lake_root"]) == before
