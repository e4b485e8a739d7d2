"""Compaction of cold data in Iceberg mode (``lake/formats/compaction.py``,
``iceberg_compact.py``), read back as readers read it: pyiceberg's own catalog and DuckDB's
``iceberg_scan``, row for row against the lake before compaction.

One lake of many small hours (3 days x 24 hours, three event tables and the quarantine), synced
once on the driver-local path (no Spark) and compacted once; the tests that change it (replays,
a concurrent sync, an erasure) end with its rows as the archive says, in the file's order."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest

from datalake_assets.lake.faults import ENV as FAULT_ENV
from datalake_assets.lake.formats import SourceTables, table_format
from datalake_assets.lake.formats.compaction import compact_source
from datalake_assets.lake.formats.format_interface import SEGMENT_COMPACTION
from datalake_assets.lake.formats.iceberg_compact import FAULT_POINT, compact_table
from datalake_assets.lake.formats.maintain import maintain_source
from datalake_assets.lake.lock import SourceLock
from datalake_assets.settings.formats_section import FormatConfig
from datalake_assets.transform.job import run_sync
from datalake_assets.transform.sync_request import request_from_settings
from datalake_assets_tests.support.archive_builders import msg, write_hour
from datalake_assets_tests.support.iceberg_reader import duckdb_with_iceberg, sql_catalog, tables
from datalake_assets_tests.support.settings_files import load_lake_toml

SRC = "ice"
DAYS = ("2026-11-20", "2026-11-21", "2026-11-22")
HOURS = tuple(f"{d}T{h:02d}" for d in DAYS for h in range(24))
NOW = datetime(2026, 11, 24, 12, tzinfo=UTC)
SETTLE = 48  # cold: the hours before 2026-11-22T12 (days 20 and 21, half of day 22)
REPLAYED = "2026-11-21T05"
SETTINGS = f"""
    table_format = "iceberg"
    archive_root = "archive"
    lake_root = "lake"
    [catalog]
    backend = "none"
    [[sources]]
    id = "{SRC}"
    start = "2026-11-01-00:00"
    """


PERSON = "gone"  # the erasure's person: an order and a page in each of PERSON_HOURS
PERSON_HOURS = ("2026-11-20T02", "2026-11-21T05", "2026-11-22T03")


def hour_lines(hour: str) -> list[dict]:
    """20 orders and 10 pages an hour."""

    def user(i: int, n: int) -> str:
        return PERSON if hour in PERSON_HOURS and i == 0 else f"u{i % n}"

    return [
        msg(
            f"{hour}-o{i}",
            hour=hour,
            minute=i,
            userId=user(i, 7),
            properties={"total": i, "currency": "EUR"},
        )
        for i in range(20)
    ] + [
        msg(
            f"{hour}-p{i}",
            hour=hour,
            minute=i,
            type="page",
            name="Home",
            userId=user(i, 5),
            properties={"path": f"/p{i}"},
        )
        for i in range(10)
    ]


def sync(settings, hours, replay: bool = False):
    """The driver-local path: a Spark session is never asked for (``None``)."""
    return run_sync(
        None, request_from_settings(settings, settings.source(SRC), hours, replay=replay)
    )


def contents(lake_root: str) -> dict[str, list[tuple]]:
    """Every table's rows (all columns, by name), sorted: what readers read."""
    out = {}
    for name, tbl in tables(sql_catalog(lake_root), SRC).items():
        t = tbl.scan().to_arrow()
        t = t.select(sorted(t.column_names))
        out[name] = sorted(tuple(map(str, r.values())) for r in t.to_pylist())
    return out


def files(lake_root: str) -> dict[str, int]:
    return {
        n: len(list(t.scan().plan_files())) for n, t in tables(sql_catalog(lake_root), SRC).items()
    }


def day_bytes(tbl, day: str) -> int:
    return sum(
        t.file.file_size_in_bytes for t in tbl.scan(row_filter=f"day = '{day}'").plan_files()
    )


def checks(settings) -> list[dict]:
    """The per-hour check figures a check run alone measures from the lake (a day hour, a
    month hour, the quarantine's hour)."""
    from collections import Counter

    from datalake_assets.orchestration.sync.check_runs import lake_source
    from datalake_assets.spec.layout import ArchiveHour
    from datalake_assets.transform.recheck import table_hour

    src = lake_source(settings, settings.source(SRC))
    out = []
    for hour in ("2026-11-21T07", "2026-11-22T03", "2026-11-20T03"):
        figures = table_hour(src, "order_completed", ArchiveHour.parse(hour), {}, Counter())
        out.append(
            {
                k: getattr(figures, k)
                for k in ("rows", "repeated_message_ids", "conformance_failures")
            }
        )
    return out


TARGETS: dict[str, int] = {}  # table -> target bytes, from the hourly lake


def compact_each(settings):
    """Each table with a target of 3 full days of its hourly files: a full day fills a day
    file (>= 1/4 of the target), a half day does not and goes to its month (module doc of
    iceberg_compact.py): both coarse levels in one run."""
    fmt = table_format(FormatConfig.of_settings(settings), settings.lake_root)
    src = SourceTables(SRC, SRC)
    reports = {}
    for name in sorted(tables(sql_catalog(settings.lake_root), SRC)):
        target = TARGETS.setdefault(name, int(3 * day_bytes(fmt.load(src, name), DAYS[0])))
        reports[name] = compact_source(
            settings.lake_root,
            FormatConfig.of_settings(settings),
            src,
            "test-compact",
            settle_hours=SETTLE,
            now=NOW,
            target_bytes=target,
            tables=[name],
        )
    return reports


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    base = tmp_path_factory.mktemp("compaction")
    settings = load_lake_toml(base, SETTINGS)
    for hour in HOURS:
        write_hour(settings.archive_root, SRC, hour, hour_lines(hour))
    write_hour(settings.archive_root, SRC, HOURS[3], [b"{not json"], name="bad.jsonl")
    sync(settings, HOURS)
    before = {
        "rows": contents(settings.lake_root),
        "files": files(settings.lake_root),
        "checks": checks(settings),
    }
    reports = compact_each(settings)
    return {"settings": settings, "before": before, "reports": reports}


@pytest.mark.slow
def test_rows_are_identical_and_cold_hours_become_a_few_files(lake):
    root = lake["settings"].lake_root
    assert contents(root) == lake["before"]["rows"]
    assert set(lake["before"]["rows"]) == {"order_completed", "pages", "tracks", "quarantine"}
    after = files(root)
    for name in ("order_completed", "pages", "tracks"):
        [t] = lake["reports"][name].tables
        # 60 cold hourly files -> a file for each of days 20 and 21, and the cold half of day
        # 22 in a month file; its 12 hot hours stay hourly
        assert sorted(t.partitions) == ["day=2026-11-20", "day=2026-11-21", "month=2026-11"]
        assert (t.files_before, t.files_after) == (60, 3)
        assert lake["before"]["files"][name] == 72 and after[name] == 12 + 3
        assert 0 < t.bytes_after < t.bytes_before
        assert t.rows == 60 * (10 if name == "pages" else 20)
    # the quarantine's one file is alone in its month: nothing to merge
    assert lake["reports"]["quarantine"].tables == []
    for tbl in tables(sql_catalog(root), SRC).values():  # syncs still write hourly files
        assert [f.name for f in tbl.spec().fields] == ["day", "hr"]
    # the current snapshot's manifests list the live files only, not the replaced ones as
    # deleted entries (which every reader would read on every query)
    tbl = tables(sql_catalog(root), SRC)["order_completed"]
    entries = [
        e
        for m in tbl.current_snapshot().manifests(tbl.io)
        for e in m.fetch_manifest_entry(tbl.io, discard_deleted=False)
    ]
    assert len(entries) == 12 + 3 and all(e.status.name != "DELETED" for e in entries)


@pytest.mark.slow
def test_queries_by_day_and_hour_return_the_same_and_prune(lake):
    root = lake["settings"].lake_root
    con = duckdb_with_iceberg()
    tbl = tables(sql_catalog(root), SRC)["order_completed"]
    scan = f"iceberg_scan('{tbl.metadata_location}')"
    by_hour = con.sql(
        f"SELECT day, hr, count(*), sum(properties_total) FROM {scan} GROUP BY ALL ORDER BY ALL"
    ).fetchall()
    assert len(by_hour) == 72 and all(r[2] == 20 for r in by_hour)
    one = con.sql(
        f"SELECT message_id FROM {scan} WHERE day = '2026-11-21' AND hr = '07' ORDER BY 1"
    ).fetchall()
    assert [r[0] for r in one] == sorted(f"2026-11-21T07-o{i}" for i in range(20))
    # pyiceberg prunes: an hour of a compacted day reads its day's file only, an hour of the
    # month file that one file, a hot hour its own hourly file
    for hour, folder in (
        ("2026-11-21T07", "/data/day=2026-11-21/"),
        ("2026-11-22T03", "/data/0"),
        ("2026-11-22T20", "/hr=20/"),
    ):
        day, hr = hour.split("T")
        planned = [
            t.file.file_path
            for t in tbl.scan(row_filter=f"day = '{day}' AND hr = '{hr}'").plan_files()
        ]
        assert len(planned) == 1 and folder in planned[0], planned
        rows = tbl.scan(row_filter=f"day = '{day}' AND hr = '{hr}'").to_arrow()
        assert rows.num_rows == 20 and set(rows["hr"].to_pylist()) == {hr}


def converge(settings) -> int:
    """Compaction until a run finds nothing; the runs that did something."""
    for runs in range(4):
        if all(r.tables == [] for r in compact_each(settings).values()):
            return runs
    raise AssertionError("compaction did not converge in 3 runs")


def test_a_check_run_alone_measures_the_hour_not_its_coarse_file(lake):
    assert checks(lake["settings"]) == lake["before"]["checks"]
    assert [c["rows"] for c in lake["before"]["checks"]] == [20, 20, 20]
    assert all(c["repeated_message_ids"] == 0 for c in lake["before"]["checks"])


def test_a_second_run_finds_nothing_to_do(lake):
    """Idempotent: a day file stays a day (its hourly files' bytes said it fills one, though
    it is smaller than their sum), the month file is alone in its month."""
    root = lake["settings"].lake_root
    assert converge(lake["settings"]) == 0
    lake["converged"] = files(root)
    assert lake["converged"]["order_completed"] == 12 + 3
    assert contents(root) == lake["before"]["rows"]


def test_a_replay_of_a_compacted_hour_replaces_it_and_the_next_compaction_merges_again(lake):
    settings = lake["settings"]
    root = settings.lake_root
    report = sync(settings, [REPLAYED], replay=True)
    assert report.source.messages_written == 30
    # the overwrite on day/hr rewrote the day's file: the hour replaced, the day's other
    # hours kept (as hourly files), nothing twice
    assert contents(root) == lake["before"]["rows"]
    # the day file that held the hour was rewritten: its other 23 hours are hourly files
    assert files(root)["order_completed"] == 12 + 24 + 2
    again = compact_each(settings)
    assert [t.partitions for t in again["order_completed"].tables] == [["day=2026-11-21"]]
    assert converge(settings) == 0
    assert files(root) == lake["converged"]
    assert contents(root) == lake["before"]["rows"]


@pytest.mark.slow
def test_a_sync_while_compaction_runs_waits_for_the_lock_and_nothing_is_lost(lake):
    settings = lake["settings"]
    root = settings.lake_root
    sync(settings, [REPLAYED], replay=True)  # day 21 hourly again: something to compact
    results: dict[str, object] = {}

    def compaction():
        results["compact"] = compact_each(settings)

    def replay():
        results["sync"] = sync(settings, ["2026-11-21T09", "2026-11-22T20"], replay=True)

    threads = [threading.Thread(target=compaction), threading.Thread(target=replay)]
    snapshot = tables(sql_catalog(root), SRC)["order_completed"].current_snapshot().snapshot_id
    with SourceLock(root, SRC, "another-compaction"):  # e.g. the nightly job, one table in
        for t in threads:
            t.start()
        threads[0].join(timeout=1.5)
        # both wait for the lock: nothing committed meanwhile
        assert all(t.is_alive() for t in threads) and not results
        assert (
            tables(sql_catalog(root), SRC)["order_completed"].current_snapshot().snapshot_id
            == snapshot
        )
    for t in threads:
        t.join(timeout=120)
    assert results["sync"].source.messages_written == 60
    assert results["compact"]["order_completed"].tables  # it ran, before or after the sync
    assert contents(root) == lake["before"]["rows"]  # whichever went first
    converge(settings)
    assert files(root) == lake["converged"]


def test_a_commit_lost_to_another_writer_is_planned_again_on_the_new_version(lake, tmp_path):
    """A writer outside the lock (another tool on the same catalog) commits between the
    compaction's plan and its commit: Iceberg refuses the stale commit, the compaction
    re-reads the table and compacts what is there now."""
    settings = lake["settings"]
    root = settings.lake_root
    sync(settings, [REPLAYED], replay=True)
    fmt = table_format(FormatConfig.of_settings(settings), root)
    src = SourceTables(SRC, SRC)
    extra = pa.Table.from_pylist([{"message_id": "outside-1", "day": "2026-11-21", "hr": "05"}])
    calls = []

    def load():
        tbl = fmt.load(src, "pages")
        if not calls:  # the other writer commits after this version was read
            other = sql_catalog(root).load_table((SRC, "pages"))
            full = pa.Table.from_pylist(
                [{**{f.name: None for f in other.schema().fields}, **extra.to_pylist()[0]}],
                schema=other.schema().as_arrow(),
            )
            other.append(full)
        calls.append(tbl)
        return tbl

    target = TARGETS["pages"]
    cutoff = datetime(2026, 11, 22, 12, tzinfo=UTC)  # NOW - SETTLE
    done = compact_table(load, "pages", cutoff, target)
    assert done.attempts == 2 and done.partitions == ["day=2026-11-21"]
    rows = fmt.load(src, "pages").scan().to_arrow()
    assert "outside-1" in rows["message_id"].to_pylist()  # the other writer's row kept
    with fmt.load(src, "pages").transaction() as tx:  # and removed again for the next tests
        tx.delete("message_id = 'outside-1'")
    assert contents(root) == lake["before"]["rows"]


@pytest.mark.slow
def test_a_kill_between_writing_and_committing_leaves_the_table_and_maintain_removes_orphans(lake):
    settings = lake["settings"]
    root = settings.lake_root
    sync(settings, [REPLAYED], replay=True)
    fmt = table_format(FormatConfig.of_settings(settings), root)
    src = SourceTables(SRC, SRC)
    snapshot = fmt.load(src, "pages").current_snapshot().snapshot_id
    data = os.path.join(root, "iceberg", SRC, "pages", "data")
    stored = {os.path.join(d, f) for d, _, fs in os.walk(data) for f in fs}
    code = (
        "from datetime import datetime, UTC\n"
        "from datalake_assets.lake.formats import SourceTables\n"
        "from datalake_assets.settings.formats_section import FormatConfig\n"
        "from datalake_assets.lake.formats.compaction import compact_source\n"
        f"compact_source({root!r}, FormatConfig(format='iceberg'), SourceTables('{SRC}', "
        f"'{SRC}'), 'killed', settle_hours={SETTLE}, target_bytes=1 << 30, "
        "now=datetime(2026, 11, 24, 12, tzinfo=UTC), tables=['pages'])\n"
    )
    env = {**os.environ, FAULT_ENV: FAULT_POINT}
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == -9, proc.stderr
    assert fmt.load(src, "pages").current_snapshot().snapshot_id == snapshot
    assert contents(root) == lake["before"]["rows"]
    orphans = {os.path.join(d, f) for d, _, fs in os.walk(data) for f in fs} - stored
    assert orphans  # the killed run's files, referenced by nothing
    # the killed run's lock died with it (a local flock); maintain takes it
    done = maintain_source(root, fmt.config, src, "test-maintain", timedelta(0))
    assert done["pages"]["orphan_files_removed"] >= len(orphans)
    assert not any(os.path.exists(p) for p in orphans)
    assert contents(root) == lake["before"]["rows"]


@pytest.mark.slow
def test_an_erasure_after_compaction_removes_the_person_from_the_coarse_files(lake):
    from datalake_assets.privacy.forget import forget
    from datalake_assets.privacy.forget_request import ForgetRequest
    from datalake_assets.spec.identity import identity

    settings = lake["settings"]
    root = settings.lake_root
    converge(settings)  # the cold hours in coarse files again
    tbl = tables(sql_catalog(root), SRC)["order_completed"]
    for day, folder in (("2026-11-21", "/data/day=2026-11-21/"), ("2026-11-22", "/data/0")):
        coarse = [
            t.file.file_path
            for t in tbl.scan(row_filter=f"day = '{day}' AND hr < '12'").plan_files()
        ]
        assert len(coarse) == 1 and folder in coarse[0], coarse
    result = forget(settings, ForgetRequest("r-compacted", (identity("user_id", PERSON),)))
    assert result.status == "completed" and result.rows_remaining == 0, result
    # the hour's rows only: a coarse file's other hours are not counted, nor staged as its
    assert {t: result.rows_removed.get(t) for t in ("order_completed", "pages", "tracks")} == {
        "order_completed": 3,
        "pages": 3,
        "tracks": 3,
    }
    after = contents(root)
    for name in ("order_completed", "pages", "tracks"):  # everyone else's rows, as they were
        assert after[name] == [r for r in lake["before"]["rows"][name] if PERSON not in r]
        assert len(after[name]) == len(lake["before"]["rows"][name]) - 3
    lake["before"]["rows"] = after  # what the next tests must keep


def test_the_segment_layout_says_it_does_not_compact(tmp_path):
    report = compact_source(str(tmp_path), FormatConfig(), SourceTables(SRC, SRC), "t")
    assert not report.supported and report.note == SEGMENT_COMPACTION and report.tables == []


@pytest.mark.slow
def test_the_command_and_the_maintenance_job_compact_and_report(lake, capsys):
    """``datalake compact`` with the settings' defaults (512 MB: a cold day of hourly files
    goes to its month), then the nightly job after another replay: its ``compact_tables`` op's metadata
    and the reports under ``reports/compaction/``."""
    from dagster import DagsterInstance

    from datalake_assets.cli import main
    from datalake_assets.orchestration.maintenance.table_maintenance import (
        build_maintenance_automation,
    )

    settings = lake["settings"]
    root = settings.lake_root
    sync(settings, [REPLAYED], replay=True)
    settings_file = os.path.join(os.path.dirname(root), "lake.toml")
    assert main(["--settings", settings_file, "compact", "--source", SRC]) == 0
    out = capsys.readouterr().out
    assert "ice.order_completed: 72 files" in out and "1 partitions (month=2026-11)" in out, out
    [location] = [
        ln.split("report ", 1)[1] for ln in out.splitlines() if ln.startswith(f"{SRC}: report ")
    ]
    written = json.loads(Path(location).read_text())
    assert written["target_bytes"] == 512 << 20 and written["settle_hours"] == 2
    assert written["totals"]["files_before"] > written["totals"]["files_after"] > 0
    assert contents(root) == lake["before"]["rows"]

    sync(settings, ["2026-11-20T04"], replay=True)
    [job], _ = build_maintenance_automation(settings)
    result = job.execute_in_process(instance=DagsterInstance.ephemeral())
    assert result.success
    meta = {
        e.step_key: e.event_specific_data.metadata
        for e in result.all_events
        if e.event_type_value == "STEP_OUTPUT"
    }
    done = meta["compact_tables"]["sources"].value[SRC]
    tables_done = {t["table"]: t for t in done["tables"]}
    # the erasure's hours left hourly files in every cold day, so the command wrote every
    # hour (all cold by now) to the month file; the replay rewrote that file into hourly
    # files: 72 files, one after the job
    assert (
        tables_done["order_completed"]["files_before"],
        tables_done["order_completed"]["files_after"],
    ) == (72, 1)
    assert meta["compact_tables"]["files_before"].value == 3 * 72
    # each compacted table's asset page shows it (an observation of the table's asset)
    seen = {
        tuple(e.asset_key.path): e.event_specific_data.asset_observation.metadata
        for e in result.all_events
        if e.event_type_value == "ASSET_OBSERVATION"
    }
    observed = seen[(settings.sources[0].slug, "order_completed")]
    assert (
        observed["compaction/files_before"].value,
        observed["compaction/files_after"].value,
    ) == (72, 1)
    assert os.path.exists(done["report"])
    assert "maintain_tables" in meta  # the expiry ran after it
    assert contents(root) == lake["before"]["rows"]
