"""Iceberg tables (``table_format = "iceberg"``, ``lake/formats/iceberg.py``), read back as
readers would: pyiceberg's own catalog and DuckDB's ``iceberg_scan``, against the Segment
layout's lake of the same archive and against the oracle.

The hours are small: most syncs take the driver-local path; one lake is synced through Spark
jobs (``local_max_bytes=0``) so both writers of the staged files are covered."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys

import pytest

from datalake_assets.ingest.demo import generate_archive
from datalake_assets.lake.faults import ENV as FAULT_ENV
from datalake_assets.lake.formats import SourceTables, table_format
from datalake_assets.lake.formats.iceberg import RUN_PROPERTY, applied
from datalake_assets.lake.formats.iceberg_hours import hours_filter
from datalake_assets.lake.records import read_schema_record
from datalake_assets.settings.formats_section import FormatConfig
from datalake_assets.spec.layout import ArchiveHour, hour_range
from datalake_assets.transform.job import SyncRequest, run_sync
from datalake_assets_tests.support.archive_builders import msg, write_hour
from datalake_assets_tests.support.iceberg_reader import (
    duckdb_with_iceberg,
    read_iceberg_lake,
    sql_catalog,
    tables,
)
from datalake_assets_tests.support.lake_reader import LocalStore, compare
from datalake_assets_tests.support.oracle import Oracle

SRC = "ice"
HOURS = ("2026-11-21T10", "2026-11-21T11", "2026-11-21T12")
LOCAL = 1 << 40  # local_max_bytes: the driver-local path
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ICEBERG = FormatConfig(format="iceberg")


def no_spark():
    raise AssertionError("the driver-local path started a Spark session")


def request(lake: dict, hours, fmt: str = "iceberg", **kw) -> SyncRequest:
    kw.setdefault("local_max_bytes", LOCAL)
    return SyncRequest(
        lake["lake_root"],
        lake["archive_root"],
        SRC,
        tuple(hours),
        table_format=FormatConfig(format=fmt),
        **kw,
    )


def sync(lake: dict, hours, fmt: str = "iceberg", spark=no_spark, **kw):
    return run_sync(spark, request(lake, hours, fmt, **kw))


def roots(base) -> dict:
    return {"archive_root": str(base / "archive"), "lake_root": str(base / "lake")}


def segment_rows(con, lake_root: str, table: str) -> tuple[list, list]:
    """``(columns and types, rows by message id)`` of a Segment-layout table."""
    rel = con.sql(
        f"SELECT * EXCLUDE (segment_type) FROM read_parquet('{lake_root}/data/{SRC}/segment_type={table}/"
        "*/*/*.parquet', hive_partitioning = true, hive_types_autocast = false, "
        "union_by_name = true) ORDER BY message_id"
    )
    return _described(rel), rel.fetchall()


def iceberg_rows(con, tbl) -> tuple[list, list]:
    rel = con.sql(f"SELECT * FROM iceberg_scan('{tbl.metadata_location}') ORDER BY message_id")
    return _described(rel), rel.fetchall()


def _described(rel) -> list[tuple[str, str]]:
    return sorted(zip(rel.columns, map(str, rel.types)))


def _by_name(columns: list, rows: list) -> list[dict]:
    names = [c for c, _ in columns]
    return [dict(zip(names, r)) for r in rows]


@pytest.fixture(scope="module")
def twins(tmp_path_factory, spark):
    """One archive synced into a Segment-layout lake (driver-local path) and an Iceberg lake
    (Spark jobs)."""
    base = tmp_path_factory.mktemp("twins")
    archive = str(base / "archive")
    generate_archive(
        archive,
        SRC,
        [ArchiveHour.parse(h) for h in HOURS],
        events_per_hour=300,
        files_per_hour=2,
        seed=3,
    )
    seg = {"archive_root": archive, "lake_root": str(base / "segment")}
    ice = {"archive_root": archive, "lake_root": str(base / "iceberg")}
    sync(seg, HOURS, "segment")
    report = sync(ice, HOURS, spark=spark, local_max_bytes=0)
    return {"segment": seg, "iceberg": ice, "report": report}


@pytest.mark.slow
@pytest.mark.spark
def test_every_table_holds_the_segment_layouts_columns_types_and_rows(twins):
    con = duckdb_with_iceberg()
    ice = tables(sql_catalog(twins["iceberg"]["lake_root"]), SRC)
    seg_root = twins["segment"]["lake_root"]
    assert set(ice) == {d.split("=", 1)[1] for d in os.listdir(f"{seg_root}/data/{SRC}")} | {
        "quarantine"
    }
    for folder in ("data", "quarantine", "sync_reports"):  # no Segment-layout folders
        assert not os.path.exists(f"{twins['iceberg']['lake_root']}/{folder}")
    # the quarantine holds the same records (each lake's own run id aside)
    seg_q = con.sql(
        f"SELECT * EXCLUDE (run_id) FROM read_parquet('{seg_root}/quarantine/{SRC}/"
        "*/*/*.parquet', hive_partitioning = true, hive_types_autocast = false)"
    )
    ice_q = con.sql(
        f"SELECT * EXCLUDE (run_id) FROM iceberg_scan('{ice.pop('quarantine').metadata_location}')"
    )
    assert _described(ice_q) == _described(seg_q)
    assert sorted(map(repr, _by_name(_described(ice_q), ice_q.fetchall()))) == sorted(
        map(repr, _by_name(_described(seg_q), seg_q.fetchall()))
    )
    for table, tbl in ice.items():
        seg_cols, seg_rows = segment_rows(con, seg_root, table)
        ice_cols, ice_rows = iceberg_rows(con, tbl)
        assert ice_cols == seg_cols, table
        assert _by_name(ice_cols, ice_rows) == _by_name(seg_cols, seg_rows), table
        # pyiceberg reads the same rows as DuckDB
        assert tbl.scan().to_arrow().num_rows == len(ice_rows)
        # partitioned by day and hour
        assert [f.name for f in tbl.spec().fields] == ["day", "hr"]
    # the report names each table as the Iceberg catalog holds it, with its snapshot
    entry = twins["report"].tables["pages"].catalog
    assert entry["table_format"] == "iceberg" and entry["catalog_table"] == "pages"
    assert entry["snapshot_id"] == ice["pages"].current_snapshot().snapshot_id


@pytest.mark.slow
@pytest.mark.spark
def test_the_lake_holds_what_the_oracle_says(twins):
    lake = twins["iceberg"]
    store = LocalStore()
    expected = Oracle(store, lake["archive_root"], SRC).sync(HOURS).expected()
    found = compare(
        expected,
        read_iceberg_lake(store, sql_catalog(lake["lake_root"]), lake["lake_root"], SRC, SRC),
    )
    assert found.ok, str(found)


@pytest.mark.spark
def test_a_query_on_one_hour_reads_only_that_hours_files(twins):
    con = duckdb_with_iceberg()
    tbl = tables(sql_catalog(twins["iceberg"]["lake_root"]), SRC)["tracks"]
    plan = con.sql(
        f"EXPLAIN ANALYZE SELECT count(message_id) FROM iceberg_scan('{tbl.metadata_location}')"
        " WHERE day = '2026-11-21' AND hr = '11'"
    ).fetchall()[0][1]
    assert re.search(r"Total Files Read: 1\b", plan), plan
    everything = con.sql(
        f"EXPLAIN ANALYZE SELECT count(message_id) FROM iceberg_scan('{tbl.metadata_location}')"
    ).fetchall()[0][1]
    assert re.search(r"Total Files Read: 3\b", everything), everything


@pytest.mark.spark
def test_a_commit_s_filter_of_a_year_of_hours_selects_exactly_their_files(twins):
    """A sync's commit finds the files of the hours it replaces with ``hours_filter``; one
    ``OR`` an hour was a chain pyiceberg's visitors recursed through, and a month synced in one
    run (720 hours) overflowed Python's stack. A year, whole days and a day without one hour."""
    tbl = tables(sql_catalog(twins["iceberg"]["lake_root"]), SRC)["tracks"]

    def files(hours) -> list[str]:
        return sorted(
            t.file.file_path for t in tbl.scan(row_filter=hours_filter(hours)).plan_files()
        )

    year = [
        str(h)
        for h in hour_range(ArchiveHour.parse("2026-01-01T00"), ArchiveHour.parse("2026-12-31T23"))
    ]
    assert len(files(HOURS)) == 3  # one file an hour here
    assert files(year) == files(HOURS)  # 2026-11-21 whole: day IN (...)
    all_but_10 = [h for h in year if h != HOURS[0]]  # that day: day = ... AND hr IN (...)
    assert files(all_but_10) == files(HOURS[1:]) and len(files(HOURS[1:])) == 2
    assert files(["2026-11-20T10", "2026-11-22T10"]) == []


@pytest.mark.spark
def test_the_files_stage_b_wrote_are_the_tables_files_with_their_field_ids_and_hours(twins):
    """Issue #42: the data files of the sync's tables are the ones stage B wrote in place
    (named by the hour and the run, in ``data/day=/hr=/``), each column under the field id
    the table gives it, ``day``/``hr`` inside the file equal to its partition; the commit
    wrote metadata only."""
    import pyarrow.parquet as pq

    run_id = twins["report"].source.run_id
    for name, tbl in tables(sql_catalog(twins["iceberg"]["lake_root"]), SRC).items():
        if name == "quarantine":  # committed from staged rows by pyiceberg's writer
            continue
        ids = {f.name: f.field_id for f in tbl.schema().fields}
        for task in tbl.scan().plan_files():
            f = task.file
            path = f.file_path.removeprefix("file://")
            day, hr = f.partition[0], f.partition[1]
            assert re.search(
                rf"/data/day={day}/hr={hr}/part-{day.replace('-', '')}{hr}-{run_id}-", path
            ), path
            written = pq.read_schema(path)
            assert {fld.name: int(fld.metadata[b"PARQUET:field_id"]) for fld in written} == {
                n: ids[n] for n in written.names
            }, path
            values = pq.read_table(path, columns=["day", "hr"])
            assert set(values["day"].to_pylist()) == {day}, path
            assert set(values["hr"].to_pylist()) == {hr}, path
            assert f.record_count == pq.read_metadata(path).num_rows
            assert f.file_size_in_bytes == os.path.getsize(path)


def test_a_table_whose_columns_another_writer_changed_during_the_sync_commits_nothing(
    tmp_path,
):
    """The field ids stage B wrote are decided before it writes: if the table's columns
    change in between (another writer), the commit refuses with a clear error instead of
    adding files whose columns readers would read as others."""
    import pyarrow as pa
    from pyiceberg.types import StringType

    from datalake_assets.lake.formats import FormatError, TablesToCommit
    from datalake_assets.lake.formats.iceberg_in_place import write_schema
    from datalake_assets.transform.hour_files import HourFiles

    TABLE = "order_completed"
    lake = roots(tmp_path)
    write_hour(lake["archive_root"], SRC, HOURS[0], [msg("m1", HOURS[0])])
    sync(lake, HOURS[:1])
    fmt = table_format(ICEBERG, lake["lake_root"])
    src = SourceTables(SRC, SRC)
    tbl = fmt.load(src, TABLE)
    columns = tuple((f.name, "string") for f in tbl.schema().fields if f.name in ("message_id",))
    targets = fmt.write_targets(
        src, {TABLE: columns + (("brand_new", "string"),)}, {}, ["2026112111"]
    )
    schema = targets[TABLE].schema
    assert schema == write_schema(
        columns + (("brand_new", "string"),),
        {
            **{f.name: f.field_id for f in tbl.schema().fields},
            "brand_new": tbl.metadata.last_column_id + 1,
        },
    )
    files = HourFiles(
        targets[TABLE].directories["2026112111"], ArchiveHour.parse(HOURS[1]), "r2", 0, schema
    )
    files.write(
        pa.Table.from_pylist(
            [{"message_id": "m2", "brand_new": "x", "day": "2026-11-21", "hr": "11"}],
            schema=schema,
        )
    )
    written = files.close()
    with tbl.update_schema() as us:  # another writer, in between
        us.add_column("someone_elses", StringType())
    before = fmt.load(src, TABLE).current_snapshot().snapshot_id
    batch = TablesToCommit(
        src,
        "r2",
        "",
        ("2026112111",),
        {TABLE: tuple(columns) + (("brand_new", "string"),)},
        written={TABLE: tuple((w.location, w.bytes, "2026112111") for w in written)},
    )
    _, steps = fmt.plan(batch)
    with pytest.raises(FormatError, match="other field ids.*nothing committed"):
        fmt.apply(steps[0], "r2")
    assert fmt.load(src, TABLE).current_snapshot().snapshot_id == before


@pytest.mark.slow
def test_a_replay_replaces_an_hour_and_a_late_file_adds_to_it(tmp_path):
    lake = roots(tmp_path)
    generate_archive(
        lake["archive_root"],
        SRC,
        [ArchiveHour.parse(h) for h in HOURS[:2]],
        events_per_hour=200,
        files_per_hour=1,
        seed=5,
    )
    sync(lake, HOURS[:2])
    cat = sql_catalog(lake["lake_root"])
    before = {t: tbl.scan().to_arrow().num_rows for t, tbl in tables(cat, SRC).items()}
    replay = sync(lake, HOURS[:1], replay=True)
    after = tables(cat, SRC)
    assert {t: tbl.scan().to_arrow().num_rows for t, tbl in after.items()} == before
    assert after["tracks"].current_snapshot().summary[RUN_PROPERTY] == replay.source.run_id

    write_hour(
        lake["archive_root"],
        SRC,
        HOURS[0],
        [msg(f"late-{i}", hour=HOURS[0], properties={"total": i}) for i in range(7)]
        + [msg("late-0", hour=HOURS[0])],
        name="late.jsonl.gz",
    )
    sync(lake, HOURS[:1], replay=True)
    rows = tables(cat, SRC)["order_completed"].scan().to_arrow()
    assert rows.num_rows == before["order_completed"] + 7
    ids = rows["message_id"].to_pylist()
    assert len(ids) == len(set(ids))  # never a row twice
    store = LocalStore()
    expected = Oracle(store, lake["archive_root"], SRC).sync(HOURS[:2]).expected()
    found = compare(expected, read_iceberg_lake(store, cat, lake["lake_root"], SRC, SRC))
    assert found.ok, str(found)


def test_a_type_that_widens_every_hour_keeps_every_value_readable(tmp_path):
    """``properties.v`` is a bigint in hour 10, a double in hour 11, a string in hour 12:
    the column is replaced and the table's rows rewritten at each widening, so readers see
    every value in the table's current type (never an unreadable table)."""
    lake = roots(tmp_path)
    values = {HOURS[0]: 7, HOURS[1]: 2.5, HOURS[2]: "seven"}
    for i, (hour, v) in enumerate(values.items()):
        write_hour(
            lake["archive_root"], SRC, hour, [msg(f"m{i}", hour=hour, properties={"v": v, "n": i})]
        )
    con = duckdb_with_iceberg()
    seen = []
    for hour, expected_type, expected in (
        (HOURS[0], "BIGINT", {"m0": 7}),
        (HOURS[1], "DOUBLE", {"m0": 7.0, "m1": 2.5}),
        # the stored double 7.0 becomes '7.0' (a re-sync of hour 10 writes '7')
        (HOURS[2], "VARCHAR", {"m0": "7.0", "m1": "2.5", "m2": "seven"}),
    ):
        report = sync(lake, [hour])
        tbl = tables(sql_catalog(lake["lake_root"]), SRC)["order_completed"]
        rel = con.sql(
            f"SELECT message_id, properties_v, properties_n, day, hr FROM "
            f"iceberg_scan('{tbl.metadata_location}') ORDER BY 1"
        )
        assert str(dict(zip(rel.columns, rel.types))["properties_v"]) == expected_type
        rows = rel.fetchall()
        assert {r[0]: r[1] for r in rows} == expected
        assert [r[2] for r in rows] == list(range(len(rows)))  # other columns untouched
        seen.append(report.tables["order_completed"].widened_columns)
        # the columns in the order of the lake's schema record, then the partition columns
        record = [n for n, _ in read_schema_record(lake["lake_root"], SRC)["order_completed"]]
        assert [f.name for f in tbl.schema().fields] == record + ["day", "hr"]
    assert seen == [
        [],
        [{"name": "properties_v", "from": "bigint", "to": "double"}],
        [{"name": "properties_v", "from": "double", "to": "string"}],
    ]


# ------------------------------------------------------------------------------- kills


def spawn_sync(lake: dict, hours, fault: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != FAULT_ENV}
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    env[FAULT_ENV] = fault
    args = request(lake, hours).to_args()
    return subprocess.Popen(
        [sys.executable, "-m", "datalake_assets.transform.job", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def table_hours(lake_root: str) -> dict[tuple[str, str], list[str]]:
    """``{(table, hour): sorted message ids}`` of every table's current snapshot."""
    out: dict[tuple[str, str], list[str]] = {}
    for name, tbl in tables(sql_catalog(lake_root), SRC).items():
        if name == "quarantine":  # line records have no message id: compared by the oracle
            continue
        t = tbl.scan(selected_fields=("message_id", "day", "hr")).to_arrow()
        for mid, day, hr in zip(*(t[c].to_pylist() for c in ("message_id", "day", "hr"))):
            out.setdefault((name, f"{day}T{hr}"), []).append(mid)
    return {k: sorted(v) for k, v in out.items()}


@pytest.fixture(scope="module")
def converged(tmp_path_factory):
    """v1 of two hours, then a late file for the first: the clean result of syncing both."""
    base = tmp_path_factory.mktemp("converged")
    lake = roots(base)
    write_v1(lake["archive_root"])
    write_late(lake["archive_root"])
    sync(lake, HOURS[:2])
    return table_hours(lake["lake_root"])


def write_v1(archive_root: str) -> None:
    generate_archive(
        archive_root,
        SRC,
        [ArchiveHour.parse(h) for h in HOURS[:2]],
        events_per_hour=200,
        files_per_hour=1,
        seed=9,
    )


def write_late(archive_root: str) -> None:
    write_hour(
        archive_root,
        SRC,
        HOURS[0],
        [msg(f"late-{i}", hour=HOURS[0], properties={"total": i}) for i in range(12)]
        + [msg(f"late-id-{i}", hour=HOURS[0], type="identify") for i in range(5)],
        name="late.jsonl.gz",
    )


@pytest.mark.slow
@pytest.mark.reliability
@pytest.mark.parametrize("point", ["staged", "mid_commit", "committed"])
def test_killed_at_a_commit_point_readers_see_whole_hours_and_the_next_run_converges(
    tmp_path, converged, point, reliability
):
    lake = roots(tmp_path)
    write_v1(lake["archive_root"])
    sync(lake, HOURS[:2])
    v1 = table_hours(lake["lake_root"])
    write_late(lake["archive_root"])
    store = LocalStore()
    reliability.expect(
        Oracle(store, lake["archive_root"], SRC).sync(HOURS[:2]).expected(),
        lambda: read_iceberg_lake(
            store, sql_catalog(lake["lake_root"]), lake["lake_root"], SRC, SRC
        ),
    )
    reliability.fault()

    proc = spawn_sync(lake, HOURS[:2], point)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == -signal.SIGKILL, err.decode()[-2000:]
    during = table_hours(lake["lake_root"])
    for key in set(during) | set(v1) | set(converged):  # every hour old or new, whole
        assert during.get(key) in (v1.get(key), converged.get(key)), key
    if point == "staged":
        assert during == v1
    if point == "committed":
        assert during == converged
    if point == "mid_commit":
        # cut between tables' commits (a few run at once): some tables have the killed run's
        # snapshot, the others not yet
        (journal,) = os.listdir(f"{lake['lake_root']}/_commits/{SRC}")
        killed = journal.removesuffix(".json")
        done = [applied(t, killed) for t in tables(sql_catalog(lake["lake_root"]), SRC).values()]
        assert 0 < sum(done) < len(done)
        # the next sync of the source, of any hour, rolls the journal forward
        other = sync(lake, ["2026-11-21T15"])
        assert other.source.recovered_commits
        assert table_hours(lake["lake_root"]) == converged
    sync(lake, HOURS[:2])
    assert table_hours(lake["lake_root"]) == converged
    assert not os.listdir(f"{lake['lake_root']}/_commits/{SRC}")
    found = reliability.compare()  # the ledger: every line of the archive accounted for
    assert found.ok, str(found)


# ------------------------------------------------------------------------- maintenance


@pytest.mark.slow
def test_maintenance_expires_old_snapshots_and_deletes_files_no_snapshot_references(tmp_path):
    from datetime import timedelta

    lake = roots(tmp_path)
    generate_archive(
        lake["archive_root"],
        SRC,
        [ArchiveHour.parse(HOURS[0])],
        events_per_hour=100,
        files_per_hour=1,
        seed=2,
    )
    sync(lake, HOURS[:1])
    sync(lake, HOURS[:1], replay=True)  # the first version's files are now replaced
    fmt = table_format(ICEBERG, lake["lake_root"])
    src = SourceTables(SRC, SRC)
    tbl = fmt.load(src, "pages")
    rows = tbl.scan().to_arrow().num_rows
    # a writer that died after writing its data files, before its catalog commit
    with pytest.raises(RuntimeError):
        with tbl.transaction() as tx:
            tx.append(tbl.scan().to_arrow())
            raise RuntimeError("killed before the commit")
    data = f"{tbl.location().removeprefix('file://')}/data"
    files = {os.path.join(d, f) for d, _, fs in os.walk(data) for f in fs}
    live = {loc for loc, _ in fmt.live_files(src, "pages", "2026112110")}
    assert len(files - live) >= 2  # the replaced version and the dead writer's file
    assert fmt.load(src, "pages").scan().to_arrow().num_rows == rows  # invisible to readers

    kept = fmt.maintain(src, ["pages"])  # default retention (168 h): everything is younger
    assert kept["pages"]["snapshots_expired"] == 0 and kept["pages"]["orphan_files_removed"] == 0
    done = fmt.maintain(src, ["pages"], retention=timedelta(0))
    # the first append (the replay is one overwrite snapshot: the hour's files out and in)
    assert done["pages"]["snapshots_expired"] == 1
    assert tbl.current_snapshot().summary.operation.value == "overwrite"
    left = {os.path.join(d, f) for d, _, fs in os.walk(data) for f in fs}
    assert left == live
    tbl = fmt.load(src, "pages")
    assert len(tbl.snapshots()) == 1 and tbl.scan().to_arrow().num_rows == rows
    assert (
        duckdb_with_iceberg()
        .sql(f"SELECT count(*) FROM iceberg_scan('{tbl.metadata_location}')")
        .fetchone()[0]
        == rows
    )


# ----------------------------------------------------------------------------- settings


def test_the_table_format_is_chosen_by_settings_or_environment_and_travels_to_a_job(tmp_path):
    from datalake_assets.settings import load_settings
    from datalake_assets.settings.fields import SettingsError
    from datalake_assets.transform.sync_request import parse_args, request_from_settings

    # not named: Iceberg, with a SQL catalog; on Azure storage the Segment layout (also when
    # the environment moves the lake there); Glue as [catalog] is Glue as the Iceberg catalog
    defaults = load_settings(env={})
    assert defaults.table_format == "iceberg"
    assert FormatConfig.of_settings(defaults).catalog == "sql"
    azure = "abfss://lake@acct.dfs.core.windows.net/l"
    assert load_settings(env={"DATALAKE_LAKE_ROOT": azure}).table_format == "segment"
    named = tmp_path / "named.toml"
    named.write_text(f'table_format = "iceberg"\nlake_root = "{azure}"\n')
    assert load_settings(named, env={}).table_format == "iceberg"
    glue = tmp_path / "glue.toml"
    glue.write_text('[catalog]\nbackend = "glue"\nglue_region = "eu-west-1"\n')
    assert FormatConfig.of_settings(load_settings(glue, env={})).catalog == "glue"
    file = tmp_path / "lake.toml"
    file.write_text(
        'table_format = "iceberg"\n[iceberg]\nretention_hours = 24\n'
        '[catalog]\nbackend = "glue"\nglue_region = "eu-west-1"\n'
    )
    settings = load_settings(file, env={})
    cfg = FormatConfig.of_settings(settings)
    # [iceberg]'s Glue keys left empty take [catalog]'s
    assert (cfg.format, cfg.retention_hours, cfg.glue_region) == ("iceberg", 24, "eu-west-1")
    assert load_settings(env={"DATALAKE_TABLE_FORMAT": "iceberg"}).table_format == "iceberg"
    with pytest.raises(SettingsError, match="DATALAKE_TABLE_FORMAT.*unknown table format 'delta'"):
        load_settings(env={"DATALAKE_TABLE_FORMAT": "delta"})
    # a sync started elsewhere (EMR, Pipes) gets the same format from its argv
    req = request_from_settings(settings, settings.sources[0], ["2026-11-21T10"], replay=False)
    assert parse_args(req.to_args()).table_format == cfg


# ------------------------------------------------------------------------------- Dagster


@pytest.mark.spark
@pytest.mark.dagster
def test_dagster_materializes_iceberg_tables_and_runs_their_checks_alone(spark, tmp_path):
    """A materialization in Iceberg mode names the Iceberg table, its location and the
    snapshot it committed; the checks run alone read the hour's files through Iceberg."""
    from dagster import AssetCheckKey, AssetKey, AssetSelection, DagsterInstance, materialize

    from datalake_assets.orchestration.compute.spark_compute import LocalSparkCompute
    from datalake_assets.orchestration.sync.source_assets import build_source_assets
    from datalake_assets_tests.support.settings_files import load_lake_toml

    settings = load_lake_toml(
        tmp_path,
        'archive_root = "archive"\nlake_root = "lake"\n'
        'table_format = "iceberg"\n[catalog]\nbackend = "none"\n'
        '[[sources]]\nid = "web"\nstart = "2026-11-01-00:00"\n',
    )
    write_hour(
        settings.archive_root,
        "web",
        HOURS[0],
        [msg(f"m{i}", hour=HOURS[0], type="page", name="Home") for i in range(12)],
    )
    assets = build_source_assets(settings, settings.sources[0])
    instance = DagsterInstance.ephemeral()
    result = materialize(
        assets,
        resources={"compute": LocalSparkCompute()},
        partition_key="2026-11-21-10:00",
        instance=instance,
    )
    assert result.success
    pages = next(
        m
        for m in result.get_asset_materialization_events()
        if m.asset_key == AssetKey(["web", "pages"])
    ).materialization.metadata
    fmt = table_format(FormatConfig(format="iceberg"), settings.lake_root)
    tbl = fmt.load(SourceTables("web", "web"), "pages")
    assert pages["dagster/uri"].value == tbl.location().removeprefix("file://")
    assert pages["iceberg_snapshot_id"].value == str(tbl.current_snapshot().snapshot_id)
    assert pages["dagster/table_name"].value == "web.pages"
    assert pages["rows"].value == 12
    # files and bytes are those a reader of the table reads for the hour (not the staged ones)
    read = [
        (f.file_path, f.file_size_in_bytes)
        for f in (
            t.file for t in tbl.scan(row_filter="day = '2026-11-21' AND hr = '10'").plan_files()
        )
    ]
    assert (pages["files"].value, pages["bytes"].value) == (len(read), sum(b for _, b in read))

    checks = [
        AssetCheckKey(AssetKey(["web", "pages"]), n)
        for n in ("duplicates", "type_drift", "schema_conformance")
    ]

    def alone() -> dict:
        out = materialize(
            assets,
            selection=AssetSelection.checks(*checks),
            resources={"compute": LocalSparkCompute()},
            instance=instance,
        )
        assert out.success and not out.get_asset_materialization_events()
        return {e.check_name: e for e in out.get_asset_check_evaluations()}

    assert all(e.passed for e in alone().values())
    # a file in the table's folder that no snapshot references (a dead writer's) is not read
    (live,) = fmt.live_files(SourceTables("web", "web"), "pages", "2026112110")
    shutil.copy(live[0], live[0].replace(".parquet", "-orphan.parquet"))
    assert alone()["duplicates"].passed
    # rows committed twice are: the checks read the table's current snapshot
    tbl.append(tbl.scan().to_arrow())
    again = alone()["duplicates"]
    assert not again.passed and again.metadata["repeated_message_ids"].value == 12


# ------------------------------------------------------------------------------- erasure


@pytest.mark.spark
def test_forget_erases_through_iceberg_and_no_file_or_snapshot_keeps_the_person(spark, tmp_path):
    """The people's lake in Iceberg mode: ``forget`` replaces each hour of each table holding
    the person in one Iceberg commit, then expires the older snapshots and deletes the files
    only they referenced. The proof reads every Parquet file under the lake (old versions
    included), not only the current snapshot."""
    from datalake_assets.lake.identities import lake_key
    from datalake_assets.privacy.forget import forget
    from datalake_assets.privacy.forget_request import ForgetRequest
    from datalake_assets.spec.identity import identity, identity_hash
    from datalake_assets_tests.privacy import people

    root = str(tmp_path)
    text = people.settings_text(root).replace("[catalog]", 'table_format = "iceberg"\n[catalog]', 1)
    settings = people.load(root, text)
    assert settings.table_format == "iceberg"
    _build_people(spark, settings, people)
    assert not os.path.exists(f"{root}/lake/data")
    before = people.lake_snapshot(settings)
    assert people.target_traces(before)
    hashes = frozenset(
        identity_hash(lake_key(settings.lake_root), i)
        for i in (
            identity("user_id", "u-target"),
            identity("anonymous_id", "anon-t"),
            identity("anonymous_id", "anon-old"),
            identity("email", people.EMAIL),
        )
    )

    result = forget(
        settings, ForgetRequest("r-ice", (identity("user_id", "u-target"),), follow_links=True)
    )
    assert result.status == "completed" and result.rows_remaining == 0, result
    after = people.lake_snapshot(settings)  # every Parquet file under the lake
    assert people.target_traces(after, hashes) == []
    assert people.without_target(after, hashes) == people.without_target(before, hashes)
    assert result.rows_removed["tracks"] == 6 and result.rows_removed["order_completed"] == 4
    # every table readable, one snapshot left in each table the erasure touched
    con = duckdb_with_iceberg()
    for _name, tbl in tables(sql_catalog(settings.lake_root), "web").items():
        n = con.sql(f"SELECT count(*) FROM iceberg_scan('{tbl.metadata_location}')").fetchone()
        assert n[0] == tbl.scan().to_arrow().num_rows
    assert len(tables(sql_catalog(settings.lake_root), "web")["tracks"].snapshots()) == 1


def _build_people(spark, settings, people) -> None:
    from datalake_assets.transform.sync_request import request_from_settings

    for source, lines in (("web", people.web_lines()), ("app", people.app_lines())):
        for hour, hour_lines in lines.items():
            cleaned = [
                {k: v for k, v in ln.items() if v is not None} if isinstance(ln, dict) else ln
                for ln in hour_lines
            ]
            write_hour(settings.archive_root, source, hour, cleaned)
        run_sync(
            spark,
            request_from_settings(settings, settings.source(source), people.HOURS, replay=False),
        )


# ------------------------------------------------------------------- maintenance job, CLI


@pytest.mark.slow
def test_the_maintenance_job_and_command_expire_what_the_retention_allows(tmp_path, capsys):
    from dagster import DagsterInstance

    from datalake_assets.cli import main
    from datalake_assets.orchestration.maintenance.table_maintenance import (
        MAINTENANCE_JOB,
        build_maintenance_automation,
    )
    from datalake_assets_tests.support.settings_files import load_lake_toml

    base = (
        'archive_root = "archive"\nlake_root = "lake"\n[catalog]\nbackend = "none"\n'
        '[[sources]]\nid = "ice"\nstart = "2026-11-01-00:00"\n'
    )
    (tmp_path / "seg").mkdir()
    assert build_maintenance_automation(load_lake_toml(tmp_path / "seg", base)) == ([], [])
    settings = load_lake_toml(tmp_path, 'table_format = "iceberg"\n' + base)
    lake = {"archive_root": settings.archive_root, "lake_root": settings.lake_root}
    generate_archive(
        lake["archive_root"],
        SRC,
        [ArchiveHour.parse(HOURS[0])],
        events_per_hour=100,
        files_per_hour=1,
        seed=4,
    )
    sync(lake, HOURS[:1])
    sync(lake, HOURS[:1], replay=True)
    [job], [schedule] = build_maintenance_automation(settings)
    assert job.name == MAINTENANCE_JOB and schedule.job_name == MAINTENANCE_JOB
    result = job.execute_in_process(instance=DagsterInstance.ephemeral())
    assert result.success
    [event] = [
        e
        for e in result.all_events
        if e.event_type_value == "STEP_OUTPUT" and e.step_key == "maintain_tables"
    ]  # after compact_tables (test_compaction)
    done = event.event_specific_data.metadata["sources"].value[SRC]
    # the default retention (168 h) keeps this hour's versions
    assert done["pages"]["snapshots_expired"] == 0 and done["pages"]["orphan_files_removed"] == 0

    settings_file = str(tmp_path / "lake.toml")
    assert main(["--settings", settings_file, "maintain", "--retention-hours", "0"]) == 0
    out = capsys.readouterr().out
    # the first sync's append expired (the replay is one overwrite snapshot, kept)
    assert re.search(r"^ice\.pages: 1 snapshots expired, [1-9]\d* files deleted", out, re.M), out
    fmt = table_format(ICEBERG, lake["lake_root"])
    assert len(fmt.load(SourceTables(SRC, SRC), "pages").snapshots()) == 1


# ------------------------------------------------------------------------- Glue and S3


@pytest.mark.slow
def test_glue_catalog_and_s3_lake_hold_what_the_oracle_says(
    tmp_path, moto_bucket, moto_endpoint, monkeypatch
):
    """An S3 lake with its Iceberg tables in Glue (moto's server on loopback): the tables are
    Glue tables of type ICEBERG pointing at their metadata (what Athena reads), and hold what
    the oracle says; a replay replaces an hour there too."""
    import boto3
    from pyiceberg.catalog.glue import GlueCatalog

    from datalake_assets_tests.support.lake_reader import S3Store

    client, bucket = moto_bucket
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    archive = str(tmp_path / "archive")
    generate_archive(
        archive,
        SRC,
        [ArchiveHour.parse(h) for h in HOURS[:2]],
        events_per_hour=150,
        files_per_hour=1,
        seed=8,
    )
    glue = FormatConfig(
        format="iceberg",
        catalog="glue",
        glue_region="us-east-1",
        glue_endpoint_url=moto_endpoint,
        s3_endpoint_url=moto_endpoint,
    )
    lake = {"archive_root": archive, "lake_root": f"s3://{bucket}/lake"}

    def glue_sync(hours, **kw):
        return run_sync(
            no_spark,
            SyncRequest(
                lake["lake_root"],
                archive,
                SRC,
                tuple(hours),
                local_max_bytes=LOCAL,
                table_format=glue,
                **kw,
            ),
        )

    glue_sync(HOURS[:2])
    glue_sync(HOURS[1:2], replay=True)
    described = boto3.client("glue", region_name="us-east-1", endpoint_url=moto_endpoint).get_table(
        DatabaseName=SRC, Name="tracks"
    )["Table"]
    assert described["Parameters"]["table_type"] == "ICEBERG"
    assert described["Parameters"]["metadata_location"].startswith(
        f"s3://{bucket}/lake/iceberg/{SRC}/tracks/metadata/"
    )
    reader = GlueCatalog(
        "reader",
        **{
            "glue.region": "us-east-1",
            "glue.endpoint": moto_endpoint,
            "s3.endpoint": moto_endpoint,
            "s3.region": "us-east-1",
        },
    )
    store = S3Store(moto_endpoint)
    expected = Oracle(LocalStore(), archive, SRC).sync(HOURS[:2]).expected()
    found = compare(expected, read_iceberg_lake(store, reader, lake["lake_root"], SRC, SRC))
    assert found.ok, str(found)


def test_datalake_sql_reads_the_iceberg_tables_and_the_lakes_own_records(tmp_path, capsys):
    from datalake_assets.cli import main
    from datalake_assets_tests.support.settings_files import load_lake_toml

    settings = load_lake_toml(
        tmp_path,
        'table_format = "iceberg"\narchive_root = "archive"\n'
        'lake_root = "lake"\n[catalog]\nbackend = "none"\n'
        '[[sources]]\nid = "ice"\nstart = "2026-11-01-00:00"\n',
    )
    lake = {"archive_root": settings.archive_root, "lake_root": settings.lake_root}
    write_hour(
        lake["archive_root"],
        SRC,
        HOURS[0],
        [msg(f"m{i}", hour=HOURS[0], type="page", name="Home") for i in range(9)]
        + [b"{not json", msg("no-type", hour=HOURS[0], type=None)],
    )
    sync(lake, HOURS[:1])
    file = str(tmp_path / "lake.toml")
    capsys.readouterr()
    assert (
        main(
            [
                "--settings",
                file,
                "sql",
                "SELECT hr, count(*) AS n FROM ice.pages WHERE day = '2026-11-21' GROUP BY hr",
            ]
        )
        == 0
    )
    assert re.search(r"│ 10 +│ +9 │", capsys.readouterr().out)
    assert (
        main(
            [
                "--settings",
                file,
                "sql",
                "SELECT count(*) AS n FROM ice.quarantine WHERE level = 'line'",
            ]
        )
        == 0
    )
    assert re.search(r"│ +2 │", capsys.readouterr().out)
    assert (
        main(
            [
                "--settings",
                file,
                "sql",
                "SELECT sum(row_count) AS r FROM "
                "segment_datalake_meta.sync_reports WHERE table_name = 'pages'",
            ]
        )
        == 0
    )
    assert re.search(r"│ +9 │", capsys.readouterr().out)
    assert main(["--settings", file, "sql", "SELECT * FROM ice.nope"]) == 2
    assert "nope does not exist" in capsys.readouterr().err
    # the sync reports are an Iceberg table too (no Parquet folder of its own)
    assert not os.path.exists(f"{settings.lake_root}/sync_reports")
    reports = sql_catalog(settings.lake_root).load_table(("segment_datalake_meta", "sync_reports"))
    assert [f.name for f in reports.spec().fields] == ["source_id", "day"]


def test_appends_of_several_writers_to_the_reports_table_all_land(tmp_path):
    """Every source's syncs append to the one sync_reports table: a commit that loses the race
    is retried on the new version, none is lost."""
    import threading

    import pyarrow as pa

    fmt = table_format(ICEBERG, str(tmp_path / "lake"))
    rows = [
        pa.table({"run_id": [f"w{w}-{i}"], "source_id": [f"s{w}"], "day": ["2026-11-21"]})
        for w in range(3)
        for i in range(6)
    ]

    def writer(w: int) -> None:
        for r in rows[w * 6 : (w + 1) * 6]:
            assert table_format(ICEBERG, str(tmp_path / "lake")).append(
                "meta", "sync_reports", r, ("source_id", "day")
            )

    fmt.append("meta", "sync_reports", rows[0].slice(0, 0), ("source_id", "day"))
    threads = [threading.Thread(target=writer, args=(w,)) for w in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = sql_catalog(str(tmp_path / "lake")).load_table(("meta", "sync_reports")).scan()
    assert sorted(got.to_arrow()["run_id"].to_pylist()) == sorted(
        r["run_id"][0].as_py() for r in rows
    )
