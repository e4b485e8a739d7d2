"""The open hour's batches end to end (docs/concepts/freshness.md): the official Python client
sends to the real collector (``datalake collect``), its spool segments roll into the archive,
``datalake batches --once`` (the loop's own code, one round) appends them, and ``datalake
sql`` shows them while their hour is still open; the hour's close (its sync, which the
archive sensor would run: ``datalake sync --hours`` here) then leaves what the oracle says a
sync of the archive gives.

The hour is the archive's, not the clock's: a test started a minute before an hour's end may
send into two hours, and every assertion holds either way."""

from __future__ import annotations

import json
import os
import re
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from datalake_assets_tests.ingest.collector.helpers import REPO, WEB_KEY, archive_lines
from datalake_assets_tests.ingest.collector.processes import CollectorProcess
from datalake_assets_tests.support.iceberg_reader import read_iceberg_lake, sql_catalog
from datalake_assets_tests.support.lake_reader import LocalStore, compare
from datalake_assets_tests.support.oracle import Oracle
from datalake_assets_tests.support.settings_files import write_lake_toml
from datalake_assets_tests.test_cli import run_datalake

SRC = "web"
# segments roll a second after their first event (the setting's minimum): the archive has an
# event about a second after the collector acknowledged it
SETTINGS = f"""
archive_root = "archive"
lake_root = "lake"
[collector]
port = 0
spool_dir = "spool"
segment_max_age_seconds = 1
[[sources]]
id = "{SRC}"
"""
TABLES = ("identifies", "tracks", "pages")  # a track's row in its own table is its row in tracks
ROW = re.compile(r"^│\s*(\S+)\s*│\s*(\d+)\s*│$")


def send(client, errors: list, n_users: int, tag: str, resend: str | None = None) -> list[str]:
    """An identify, a track and a page per user, with the library's own batching; ``resend``:
    also a message id sent before, again (a client's retry). The message ids sent."""
    sent = []
    for u in range(n_users):
        user = f"{tag}-user-{u}"
        for ok, m in (
            client.identify(user, {"email": f"{user}@example.com"}),
            client.track(user, "Order Completed", {"revenue": 10.5 + u}),
            client.page(user, "Docs", "Home", {"path": f"/{tag}/{u}"}),
        ):
            assert ok
            sent.append(m["messageId"])
    if resend is not None:
        ok, m = client.track(f"{tag}-retry", "Order Completed", {"revenue": 1}, message_id=resend)
        assert ok and m["messageId"] == resend
        sent.append(resend)
    client.flush()
    assert not errors, errors
    return sent


def archived(home: Path) -> Counter:
    return Counter(m["messageId"] for m in archive_lines(home / "archive" / SRC))


def wait_for_archive(home: Path, expected: Counter, seconds: float = 60) -> None:
    """Until every line sent is in the archive's files (the segments rolled)."""
    deadline = time.monotonic() + seconds
    while archived(home) != expected:
        assert time.monotonic() < deadline, f"not archived: {expected - archived(home)}"
        time.sleep(0.1)


def archive_hours(home: Path) -> list[str]:
    """The hours the archive's files are in (``YYYY-MM-DDTHH``), from its folders."""
    return sorted(
        f"{hr.parent.name[len('day=') :]}T{hr.name[len('hr=') :]}"
        for hr in (home / "archive" / SRC).glob("day=*/hr=*")
        if any(hr.iterdir())
    )


def source_reports(home: Path) -> list[dict]:
    """Every run's source report in the lake, oldest first."""
    out = []
    for path in (home / "lake" / "reports").rglob("report.json"):
        out += [r for r in map(json.loads, path.read_text().splitlines()) if r["type"] == "source"]
    return sorted(out, key=lambda r: r["start_time"])


def rows_by_message(home: Path) -> Counter:
    """``datalake sql`` as a user runs it: each message id's rows in the source's tables."""
    query = (
        "SELECT message_id, count(*) AS n FROM ("
        + " UNION ALL ".join(f"SELECT message_id FROM {SRC}.{t}" for t in TABLES)
        + ") GROUP BY 1 ORDER BY 1"
    )
    done = run_datalake(home, "sql", query, "--limit", "1000")
    assert done.returncode == 0, done.stderr
    rows = [ROW.match(line.strip()) for line in done.stdout.splitlines()]
    return Counter({m[1]: int(m[2]) for m in rows if m and m[1] != "message_id"})


def batch_once(home: Path, lines: int, rows: int, duplicates: int) -> None:
    done = run_datalake(home, "batches", "--once")
    assert done.returncode == 0, done.stderr
    batch_lines = [line for line in done.stdout.splitlines() if line.startswith("batch ")]
    assert len(batch_lines) == 1, done.stdout
    assert re.match(
        rf"batch {SRC} \S.*: {lines} lines, {rows} rows, {duplicates} duplicates, 0 ",
        batch_lines[0],
    ), batch_lines[0]


@pytest.mark.slow
def test_events_sent_to_the_collector_are_rows_before_their_hour_closes(tmp_path):
    from segment.analytics.client import Client  # a test dependency: never skipped

    home = tmp_path
    settings_file = write_lake_toml(home, SETTINGS, table_format=None)  # the default: Iceberg
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("DATALAKE_") and k != "DAGSTER_HOME"
    }
    env.update(
        DATALAKE_HOME=str(home), PYTHONPATH=str(REPO), DATALAKE_WRITE_KEYS=f"{WEB_KEY}={SRC}"
    )
    collector = CollectorProcess(settings_file, env)
    errors: list[object] = []
    client = Client(
        write_key=WEB_KEY, host=collector.url, max_retries=0, on_error=lambda e, b: errors.append(e)
    )
    try:
        # the first events: a row each once a batch took the archive's segment
        first = send(client, errors, 3, "a")
        wait_for_archive(home, Counter(first))
        batch_once(home, len(first), len(first), 0)
        assert rows_by_message(home) == Counter(first)  # each exactly once
        (one,) = source_reports(home)  # no hourly sync of the hour has run: only the batch
        assert one["batch_id"] and one["hours_synced"] == archive_hours(home)

        # more events, and one of the first sent again: the next batch takes only the new
        # segment's lines; the copy is a duplicate, not a second row
        second = send(client, errors, 2, "b", resend=first[1])
        wait_for_archive(home, Counter(first + second))
        batch_once(home, len(second), len(second) - 1, 1)
        assert rows_by_message(home) == Counter(set(first + second))
        reports = source_reports(home)
        assert [r.get("batch_id") is not None for r in reports] == [True, True], reports
        assert reports[1]["batch_id"] != one["batch_id"]
        assert reports[1]["lines_in"] == len(second) and reports[1]["files_in"] >= 1
    finally:
        client.shutdown()
        code = collector.stop(signal.SIGTERM)
    assert code == 0, collector.output()

    # the hour closes: its sync replaces the batches with what a sync of its archive gives
    hours = archive_hours(home)
    done = run_datalake(home, "sync", "--source", SRC, "--hours", *hours)
    assert done.returncode == 0, done.stderr
    closed = json.loads(done.stdout)
    assert closed.get("batch_id") is None and closed["lines_in"] == len(first) + len(second)
    store, lake = LocalStore(), str(home / "lake")
    expected = Oracle(store, str(home / "archive"), SRC).sync(hours).expected()
    found = compare(expected, read_iceberg_lake(store, sql_catalog(lake), lake, SRC, SRC))
    assert found.ok, str(found)
