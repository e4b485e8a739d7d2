"""A lake from no settings at all, driven as a new user drives it from a shell: ``datalake
demo``, ``datalake sync``, ``datalake compact``, ``datalake sql``, with only ``DATALAKE_HOME``
(no settings file, no ``DATALAKE_*`` variable). The lake must be Iceberg (the default format),
compact its cold hours and answer SQL with what the sync wrote."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from datalake_assets_tests.support.iceberg_reader import sql_catalog, tables
from datalake_assets_tests.test_cli import run_datalake


def datalake(home: Path, *args: str) -> subprocess.CompletedProcess:
    done = run_datalake(home, *args, timeout=600, settings=False)
    assert done.returncode == 0, f"datalake {' '.join(args)}: {done.stdout}\n{done.stderr}"
    return done


@pytest.mark.slow
@pytest.mark.spark
def test_a_lake_without_settings_is_iceberg_compacts_and_answers_sql(tmp_path):
    home = tmp_path
    datalake(home, "demo", "--hours", "6")
    archive = home / "archive" / "demo"
    hours = sorted(
        f"{d.name.removeprefix('day=')}T{h.name.removeprefix('hr=')}"
        for d in archive.glob("day=*")
        for h in d.glob("hr=*")
    )
    assert len(hours) == 6

    report = json.loads(datalake(home, "sync", "--hours", *hours).stdout)
    lake = home / "lake"
    # Iceberg, recorded as such; nothing in the Segment layout's folders
    assert json.loads((lake / "_table_format.json").read_text())["table_format"] == "iceberg"
    assert not list(lake.glob("data/demo/segment_type=*"))
    synced = tables(sql_catalog(str(lake)), "demo")
    assert {"tracks", "pages", "identifies"} <= set(synced)
    rows = {name: t.scan().to_arrow().num_rows for name, t in synced.items()}
    # every message once in its type's table (a track also in its event's table)
    written = sum(
        rows.get(t, 0) for t in ("tracks", "pages", "identifies", "screens", "groups", "aliases")
    )
    assert written == report["messages_written"] > 0, report

    # the hours that ended more than 2 h ago are cold: their small files become fewer
    files_before = {name: len(t.inspect.files()) for name, t in synced.items()}
    out = datalake(home, "compact").stdout
    total = re.search(r"^demo: (\d+) tables compacted, (\d+) files -> (\d+)", out, re.M)
    assert total, out
    assert int(total.group(1)) >= 1 and int(total.group(2)) > int(total.group(3)), out
    after = tables(sql_catalog(str(lake)), "demo")
    files_after = {name: len(t.inspect.files()) for name, t in after.items()}
    assert sum(files_after.values()) < sum(files_before.values())
    assert {name: t.scan().to_arrow().num_rows for name, t in after.items()} == rows

    # datalake sql answers from the compacted tables: every table's rows, by hour too
    answer = datalake(home, "sql", "SELECT count(*) AS n FROM demo.tracks").stdout
    assert re.search(rf"\b{rows['tracks']}\b", answer), answer
    by_hour = datalake(
        home, "sql", "SELECT day, hr, count(*) AS n FROM demo.pages GROUP BY ALL ORDER BY 1, 2"
    ).stdout
    counted = [
        int(n) for n in re.findall(r"\b\d{4}-\d\d-\d\d\b\s*\W*\s*\d+\s*\W*\s*(\d+)", by_hour)
    ]
    assert sum(counted) == rows["pages"], by_hour
