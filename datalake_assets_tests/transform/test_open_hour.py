"""An open hour's batches (``transform/open_hour.py``): the hour's new archive files appended to
an Iceberg lake as they arrive, read back through pyiceberg's own catalog, and the hour's close
(the hourly sync) leaving exactly what a sync of the archive gives.

Every sync here takes the driver-local path (no Spark session): the batch's commit, dedup and
ledger are the same on both paths, and the Spark path's stages are the sync's own tests'."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from datalake_assets.lake.formats.iceberg import BATCH_PROPERTY
from datalake_assets.lake.sync_status import lake_status
from datalake_assets.settings.formats_section import FormatConfig
from datalake_assets.spec.layout import ArchiveHour
from datalake_assets.transform import open_hour
from datalake_assets.transform.job import SyncRequest, run_sync
from datalake_assets.transform.sync_request import SyncError
from datalake_assets_tests.support.archive_builders import msg, write_hour
from datalake_assets_tests.support.fork_sync import ForkedSyncs
from datalake_assets_tests.support.iceberg_reader import (
    read_iceberg_lake,
    sorted_rows,
    sql_catalog,
    tables,
)
from datalake_assets_tests.support.lake_reader import LocalStore, compare
from datalake_assets_tests.support.oracle import Oracle

SRC = "web"
HOUR = "2026-11-21T10"
BEFORE = "2026-11-21T09"  # a closed hour in the dedup's lookback
LOCAL = 1 << 40  # local_max_bytes: the driver-local path


def no_spark():
    raise AssertionError("the driver-local path started a Spark session")


def request(lake: dict, hours, fmt: str = "iceberg", **kw) -> SyncRequest:
    return SyncRequest(
        lake["lake_root"],
        lake["archive_root"],
        SRC,
        tuple(hours),
        table_format=FormatConfig(format=fmt),
        local_max_bytes=LOCAL,
        **kw,
    )


def sync(lake: dict, hours, **kw):
    return run_sync(no_spark, request(lake, hours, **kw))


def lake_at(base, name: str) -> dict:
    (base / name).mkdir()
    return {"archive_root": str(base / "archive"), "lake_root": str(base / name / "lake")}


def first_file(archive: str) -> None:
    """The hour's first spool segment: known events, a line that is no JSON, a duplicate in
    the file, and a copy of a message of the closed hour before (a duplicate across hours)."""
    write_hour(
        archive,
        SRC,
        HOUR,
        [
            msg("a1", HOUR, 1, properties={"total": 10}),
            msg("a2", HOUR, 2, type="page", name="Home"),
            msg("a1", HOUR, 3, properties={"total": 10}),
            b"{not json",
            msg("old-1", HOUR, 4),
        ],
        name="part-0000.jsonl",
    )


def second_file(archive: str) -> None:
    """The next segment: new messages, a new event type (a new table), a copy of a message
    of the first segment (a duplicate across batches)."""
    write_hour(
        archive,
        SRC,
        HOUR,
        [
            msg("b1", HOUR, 20, properties={"total": 12}),
            msg("b2", HOUR, 21, event="Cart Viewed", properties={"items": 2}),
            msg("a2", HOUR, 22, type="page", name="Home"),
        ],
        name="part-0001.jsonl",
    )


def snapshots(lake: dict) -> dict[str, list]:
    return {
        name: [(s.snapshot_id, dict(s.summary.additional_properties)) for s in tbl.snapshots()]
        for name, tbl in tables(sql_catalog(lake["lake_root"]), SRC).items()
    }


def table_rows(lake: dict) -> dict[str, list[tuple]]:
    """Every table's rows, minus the quarantine's ``run_id`` (which run wrote a record)."""
    out = {}
    for name, tbl in tables(sql_catalog(lake["lake_root"]), SRC).items():
        t = tbl.scan().to_arrow()
        out[name] = sorted_rows(t.drop_columns([c for c in ("run_id",) if c in t.schema.names]))
    return out


def assert_holds_what_a_sync_gives(lake: dict) -> None:
    """Every line of the archive where the oracle puts it: a row once, a duplicate, a
    quarantined line (the batches' rules are the sync's)."""
    store = LocalStore()
    expected = Oracle(store, lake["archive_root"], SRC).sync([BEFORE, HOUR]).expected()
    found = compare(
        expected,
        read_iceberg_lake(store, sql_catalog(lake["lake_root"]), lake["lake_root"], SRC, SRC),
    )
    assert found.ok, str(found)


def assert_equals_a_lake_that_only_synced(lake: dict, tmp_path) -> dict:
    """The closed hour's tables row for row as a lake that synced the same archive once."""
    clean = lake_at(tmp_path, "clean")
    sync(clean, [BEFORE])
    sync(clean, [HOUR])
    assert table_rows(lake) == table_rows(clean)
    return clean


@pytest.fixture()
def lake(tmp_path):
    lake = lake_at(tmp_path, "batches")
    write_hour(
        lake["archive_root"], SRC, BEFORE, [msg("old-1", BEFORE, 50)], name="part-0000.jsonl"
    )
    sync(lake, [BEFORE])
    return lake


def test_batches_append_as_files_arrive_and_the_close_equals_one_sync(lake, tmp_path):
    archive = lake["archive_root"]
    first_file(archive)
    one = sync(lake, [HOUR], batch=True).source
    # readable at once, through the catalog any reader opens
    rows = table_rows(lake)
    assert set(rows) >= {"order_completed", "pages", "tracks", "quarantine"}
    ids = lambda t: sorted(  # noqa: E731
        r["message_id"]
        for r in tables(sql_catalog(lake["lake_root"]), SRC)[t].scan().to_arrow().to_pylist()
    )
    assert ids("order_completed") == ["a1", "old-1"] and ids("pages") == ["a2"]
    assert (one.lines_in, one.messages_written, one.duplicates, one.lines_quarantined) == (
        5,
        2,
        2,
        1,
    )
    assert one.cross_hour_duplicates == 1  # old-1: the closed hour keeps it
    assert one.batch_id
    before = snapshots(lake)
    appended = {t: s[-1][1] for t, s in before.items() if s and s[-1][1].get(BATCH_PROPERTY)}
    assert set(appended) == {"order_completed", "pages", "tracks", "quarantine"}, appended
    assert {p[BATCH_PROPERTY] for p in appended.values()} == {one.batch_id}

    # the same batch again: nothing new, nothing changed
    again = sync(lake, [HOUR], batch=True).source
    assert again.lines_in == 0 and again.warning == "no_archive_files"
    assert snapshots(lake) == before

    # the next segment: only its lines are read; a copy of the first batch's message is a
    # duplicate, a new event type a new table; tables it does not touch get no snapshot
    second_file(archive)
    two = sync(lake, [HOUR], batch=True).source
    assert (two.lines_in, two.messages_written, two.duplicates) == (3, 2, 1)
    assert two.batch_id and two.batch_id != one.batch_id
    after = snapshots(lake)
    assert after["cart_viewed"] and after["pages"] == before["pages"]
    assert ids("order_completed") == ["a1", "b1", "old-1"]

    # the sync_reports table says which rows were batches
    reports = sql_catalog(lake["lake_root"]).load_table(("segment_datalake_meta", "sync_reports"))
    rows = reports.scan(selected_fields=("type", "batch_id")).to_arrow().to_pylist()
    assert {r["batch_id"] for r in rows if r["type"] == "source"} == {
        None,
        one.batch_id,
        two.batch_id,
    }
    # ``datalake status`` counts the batches' rows (the closed hour before: 1)
    day = lake_status(lake["lake_root"], SRC, datetime(2026, 11, 21, 11, 30, tzinfo=UTC))
    assert day.messages_per_day["2026-11-21"] == 5 and day.last_synced_hour == HOUR
    # the lake now holds what a sync of the archive gives
    assert_holds_what_a_sync_gives(lake)

    # the close: the hourly sync replaces the batches, one overwrite a table; the result
    # equals a lake that only ever synced the hour
    closed = sync(lake, [HOUR]).source
    assert closed.batch_id is None and closed.lines_in == 8
    # ... and expires the batches' snapshots (their rows are the close's now): a table's
    # history keeps a snapshot an hour, not one a batch
    left = [t for t, snaps in snapshots(lake).items() for _, p in snaps if p.get(BATCH_PROPERTY)]
    assert not left, left
    clean = assert_equals_a_lake_that_only_synced(lake, tmp_path)
    # ... and its ledger lists both files: a batch after the close takes nothing
    assert (
        lake_status(
            lake["lake_root"], SRC, datetime(2026, 11, 21, 11, 30, tzinfo=UTC)
        ).messages_per_day["2026-11-21"]
        == 5
    )  # the close's figures, the batches' replaced
    held = open_hour.taken(lake["lake_root"], SRC, "2026112110")
    assert {n for n, _ in held} == {"part-0000.jsonl", "part-0001.jsonl"}
    assert held == open_hour.taken(clean["lake_root"], SRC, "2026112110")
    late = sync(lake, [HOUR], batch=True).source
    assert late.lines_in == 0


def test_a_batch_that_widens_a_column_syncs_its_hours_whole(lake):
    archive = lake["archive_root"]
    write_hour(
        archive, SRC, HOUR, [msg("w1", HOUR, 1, properties={"total": 10})], name="part-0000.jsonl"
    )
    assert sync(lake, [HOUR], batch=True).source.batch_id
    write_hour(
        archive, SRC, HOUR, [msg("w2", HOUR, 2, properties={"total": 1.5})], name="part-0001.jsonl"
    )
    report = sync(lake, [HOUR], batch=True)
    # run as the hour's sync: both files, the column widened once, every value kept
    assert report.source.batch_id is None and report.source.lines_in == 2
    assert report.tables["order_completed"].widened_columns
    tbl = tables(sql_catalog(lake["lake_root"]), SRC)["order_completed"]
    totals = {r["message_id"]: r["properties_total"] for r in tbl.scan().to_arrow().to_pylist()}
    assert totals["w1"] == 10.0 and totals["w2"] == 1.5


def test_the_segment_layout_refuses_batches_in_one_line(tmp_path):
    lake = lake_at(tmp_path, "segment")
    write_hour(lake["archive_root"], SRC, HOUR, [msg("s1", HOUR, 1)], name="part-0000.jsonl")
    with pytest.raises(SyncError) as e:
        sync(lake, [HOUR], fmt="segment", batch=True)
    assert e.value.code == "unsupported" and "\n" not in str(e.value)
    assert 'table_format = "iceberg"' in str(e.value) and "interval_minutes = 0" in str(e.value)


@pytest.mark.parametrize("point", ["staged", "mid_commit", "committed"])
def test_a_batch_killed_at_a_commit_point_converges(lake, tmp_path, point):
    """Killed before its journal (``staged``): nothing visible, its files taken again by the
    next batch; after (``mid_commit``, ``committed``): rolled forward once by the next run.
    Either way the lake ends as the batches would have left it, and the close as one sync."""
    archive = lake["archive_root"]
    first_file(archive)
    sync(lake, [HOUR], batch=True)
    second_file(archive)
    with ForkedSyncs() as syncs:
        outcome = syncs.run(request(lake, [HOUR], batch=True).to_args(), point)
    assert outcome == f"killed at {point}", outcome
    sync(lake, [HOUR], batch=True)  # recovers, then takes what is left
    assert_holds_what_a_sync_gives(lake)
    sync(lake, [HOUR])
    assert_equals_a_lake_that_only_synced(lake, tmp_path)


def test_forget_during_an_open_hour_erases_its_batches_and_later_batches_stay_suppressed(tmp_path):
    """``datalake forget`` while the hour is open: the person's rows of the batches so far go,
    nobody else's; their messages in the hour's next batch are suppressed; the close agrees."""
    from datalake_assets.privacy.forget import forget
    from datalake_assets.privacy.forget_request import ForgetRequest
    from datalake_assets.spec.identity import identity
    from datalake_assets.transform.sync_request import request_from_settings
    from datalake_assets_tests.support.settings_files import load_lake_toml

    settings = load_lake_toml(
        tmp_path,
        f'archive_root = "archive"\nlake_root = "lake"\n'
        f'[sync]\nlocal_max_bytes = {LOCAL}\n[[sources]]\nid = "{SRC}"\n',
        table_format="iceberg",
    )
    (source,) = settings.sources
    archive = settings.archive_root

    def batch(batch: bool = True):
        return run_sync(
            no_spark, request_from_settings(settings, source, [HOUR], replay=False, batch=batch)
        ).source

    def people() -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for name, tbl in tables(sql_catalog(settings.lake_root), SRC).items():
            if name != "quarantine":
                for r in (
                    tbl.scan(selected_fields=("message_id", "anonymous_id")).to_arrow().to_pylist()
                ):
                    out.setdefault(r["anonymous_id"], set()).add(r["message_id"])
        return out

    write_hour(
        archive,
        SRC,
        HOUR,
        [msg("t1", HOUR, 1, anonymousId="anon-t"), msg("o1", HOUR, 2, anonymousId="anon-o")],
        name="part-0000.jsonl",
    )
    batch()
    assert people() == {"anon-t": {"t1"}, "anon-o": {"o1"}}
    forget(settings, ForgetRequest("r-open", (identity("anonymous_id", "anon-t"),)))
    assert people() == {"anon-o": {"o1"}}
    write_hour(
        archive,
        SRC,
        HOUR,
        [msg("t2", HOUR, 30, anonymousId="anon-t"), msg("o2", HOUR, 31, anonymousId="anon-o")],
        name="part-0001.jsonl",
    )
    later = batch()
    # only the new file is read (the erasure kept the hour's ledger), its person's line
    # suppressed
    assert (later.lines_in, later.messages_written, later.suppressed) == (2, 1, 1)
    assert people() == {"anon-o": {"o1", "o2"}}
    closed = batch(batch=False)
    assert closed.suppressed == 1 and people() == {"anon-o": {"o1", "o2"}}


def test_status_counts_an_open_hour_from_its_last_batch(tmp_path):
    """The hour being written now: ``datalake status``'s lag runs from the newest batch, not
    from the hour's end (which has not come)."""
    lake = lake_at(tmp_path, "now")
    now = ArchiveHour.of(datetime.now(UTC))
    write_hour(lake["archive_root"], SRC, str(now), [msg("n1", str(now), 0)], name="p.jsonl")
    sync(lake, [str(now)], batch=True)
    status = lake_status(lake["lake_root"], SRC, datetime.now(UTC) + timedelta(minutes=3))
    assert status.last_synced_hour == str(now)
    assert 3 * 60 <= status.lag_seconds < 5 * 60, status
    assert status.messages_per_day[now.start.date().isoformat()] == 1


@pytest.mark.parametrize("fmt", ["iceberg", "segment"])
def test_datalake_sync_batch_appends_or_refuses_in_one_line(tmp_path, fmt):
    """``datalake sync --batch`` as a user runs it: the batch's report, and nothing recorded
    in Dagster as a materialized hour; on the Segment layout, exit 1 and the reason."""
    import json

    from datalake_assets_tests.support.settings_files import write_lake_toml
    from datalake_assets_tests.test_cli import run_datalake

    write_lake_toml(
        tmp_path,
        f'archive_root = "archive"\nlake_root = "lake"\n[[sources]]\nid = "{SRC}"\n',
        table_format=fmt,
    )
    write_hour(str(tmp_path / "archive"), SRC, HOUR, [msg("c1", HOUR, 1)], name="p.jsonl")
    done = run_datalake(tmp_path, "sync", "--source", SRC, "--batch", "--hours", HOUR)
    if fmt == "segment":
        assert done.returncode == 1, done.stderr
        out = json.loads(done.stdout)
        assert out["error_code"] == "unsupported" and "interval_minutes = 0" in out["error"]
        return
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["batch_id"] and report["messages_written"] == 1
    assert "recorded in the Dagster instance" not in done.stderr


@pytest.mark.spark
def test_batches_on_the_spark_path_hold_what_a_sync_gives(lake, spark):
    """The same two batches as Spark jobs (``local_max_bytes = 0``): the dedup's window and the
    output's re-read run in Spark, against the hour's earlier batch too."""
    archive = lake["archive_root"]
    first_file(archive)
    one = run_sync(spark, replace(request(lake, [HOUR], batch=True), local_max_bytes=0)).source
    second_file(archive)
    two = run_sync(spark, replace(request(lake, [HOUR], batch=True), local_max_bytes=0)).source
    assert one.batch_id and two.batch_id
    assert (two.lines_in, two.messages_written, two.duplicates) == (3, 2, 1)
    assert_holds_what_a_sync_gives(lake)
