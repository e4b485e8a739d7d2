"""``datalake convert --to iceberg`` (``lake/formats/iceberg_convert.py``): a Segment-layout lake's
files registered in Iceberg tables where they are, then synced further in Iceberg, read back by
pyiceberg's own catalog, DuckDB's ``iceberg_scan`` and ``datalake sql`` against the oracle."""

from __future__ import annotations

import os
import re
import time
from datetime import UTC, datetime, timedelta

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyiceberg.typedef import Record

from datalake_assets.cli import main
from datalake_assets.ingest.demo import generate_archive
from datalake_assets.lake.formats import FormatError, SourceTables, format_record, table_format
from datalake_assets.lake.formats.iceberg import RUN_PROPERTY
from datalake_assets.lake.formats.iceberg_convert import NAME_MAPPING, convert_source
from datalake_assets.settings.formats_section import FormatConfig
from datalake_assets.spec.layout import ArchiveHour
from datalake_assets_tests.lake.test_iceberg import sync
from datalake_assets_tests.support.archive_builders import msg, write_hour
from datalake_assets_tests.support.iceberg_reader import (
    duckdb_with_iceberg,
    read_iceberg_lake,
    sql_catalog,
    tables,
)
from datalake_assets_tests.support.lake_reader import LocalStore, compare
from datalake_assets_tests.support.oracle import Oracle
from datalake_assets_tests.support.settings_files import load_lake_toml

SRC = "ice"
HOURS = ("2026-11-21T10", "2026-11-21T11", "2026-11-21T12", "2026-11-21T13")
SEGMENT_HOURS, ICEBERG_HOURS = HOURS[:2], HOURS[2:]
ICEBERG = FormatConfig(format="iceberg")
TOML = (
    'table_format = "iceberg"\narchive_root = "archive"\nlake_root = "lake"\n'
    '[catalog]\nbackend = "none"\n[[sources]]\nid = "ice"\nstart = "2026-11-01-00:00"\n'
)


class IcebergOnly(LocalStore):
    """The lake as an Iceberg reader sees it: the converted Segment folders are files of the
    tables now, not tables of their own (``read_iceberg_lake`` reads only the catalog's)."""

    def list(self, prefix: str):
        if re.search(r"/(data|quarantine)/", prefix.rstrip("/") + "/"):
            return []
        return super().list(prefix)


def segment_files(lake_root: str) -> dict[str, tuple[int, int]]:
    """``{path: (inode, mtime_ns)}`` of the Segment layout's Parquet files."""
    out = {}
    for folder in ("data", "quarantine"):
        for dirpath, _, names in os.walk(os.path.join(lake_root, folder)):
            for n in names:
                if n.endswith(".parquet"):
                    st = os.stat(os.path.join(dirpath, n))
                    out[os.path.join(dirpath, n)] = (st.st_ino, st.st_mtime_ns)
    return out


def by_message(t) -> list[str]:
    """A table's rows, columns by name, as sorted text (NULLs compare; a timestamp as its UTC
    time, whatever tzinfo object the reader gives it)."""

    def text(v):
        return v.astimezone(UTC).isoformat() if isinstance(v, datetime) else v

    return sorted(repr(sorted((k, text(v)) for k, v in r.items())) for r in t.to_pylist())


def column_diffs(a, b) -> dict:
    """Per column, a differing value of one message id (``a``'s, ``b``'s)."""
    ra = {r["message_id"] or repr(r): r for r in a.to_pylist()}
    rb = {r["message_id"] or repr(r): r for r in b.to_pylist()}
    out = {"ids": (len(set(ra) - set(rb)), len(set(rb) - set(ra)))}
    for k in set(ra) & set(rb):
        for c, v in ra[k].items():
            if rb[k].get(c) != v and c not in out:
                out[c] = (k, ra[k]["day"], ra[k]["hr"], v, rb[k].get(c))
    return out


def table_paths(tbl) -> set[str]:
    return {t.file.file_path.removeprefix("file://") for t in tbl.scan().plan_files()}


@pytest.fixture
def lake(tmp_path):
    settings = load_lake_toml(tmp_path, TOML)
    lake = {"archive_root": settings.archive_root, "lake_root": settings.lake_root}
    generate_archive(
        lake["archive_root"],
        SRC,
        [ArchiveHour.parse(h) for h in HOURS],
        events_per_hour=150,
        files_per_hour=2,
        seed=11,
    )
    # a column that widens in the Segment lake (bigint, then string): hour 10's file keeps
    # its bigint, which Iceberg cannot read as a string: that hour is rewritten
    for i, (hour, amount) in enumerate(((HOURS[0], 5), (HOURS[1], "five"))):
        write_hour(
            lake["archive_root"],
            SRC,
            hour,
            [msg(f"w{i}", hour=hour, event="Widened Thing", properties={"amount": amount})]
            + [b"{not json"],
            name="widen.jsonl.gz",
        )
    # and one that widens in the Iceberg sync after the conversion (bigint, then string)
    for i, (hour, n) in enumerate(((HOURS[0], 1), (HOURS[2], "one"))):
        write_hour(
            lake["archive_root"],
            SRC,
            hour,
            [msg(f"l{i}", hour=hour, event="Late Widen", properties={"n": n})],
            name="late-widen.jsonl.gz",
        )
    for h in SEGMENT_HOURS:  # hour by hour: each hour's files written with its own types
        sync(lake, [h], "segment")
    return {**lake, "toml": str(tmp_path / "lake.toml")}


@pytest.mark.slow
def test_a_segment_lake_converts_in_place_and_syncs_on_in_iceberg(lake, capsys):
    root = lake["lake_root"]
    before = segment_files(root)
    assert any("/quarantine/" in p for p in before)
    capsys.readouterr()
    assert main(["--settings", lake["toml"], "convert", "--to", "iceberg"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert any(
        re.match(r"ice\.tracks: 2 hours registered \(0 already .*\), \d+ files, \d+ rows", line)
        for line in printed
    ), printed
    assert re.match(r"ice: \d+ tables, \d+ hours registered", printed[-2]), printed
    assert printed[-1].startswith("the lake is Iceberg now")
    assert format_record.recorded(root) == "iceberg"

    cat = sql_catalog(root)
    converted = tables(cat, SRC)
    assert "quarantine" in converted and "widened_thing" in converted
    src = SourceTables(SRC, SRC)
    fmt = table_format(ICEBERG, root)
    registered: set[str] = set()
    for name, tbl in converted.items():
        assert tbl.location() == "file://" + fmt.location(src, name)
        assert NAME_MAPPING in tbl.properties
        assert len(tbl.snapshots()) == 1, name  # one commit a table
        registered |= table_paths(tbl)
    # the files were not copied: the tables' files are the Segment files, untouched; only an
    # hour holding a column under an older type (a bigint before a widening) was written
    # again, under the table's own data folder (its old file stays, unreferenced)
    rewritten = {p for p in registered if p not in before}
    folders = set()
    for p in rewritten:
        m = re.search(r"/iceberg/ice/(\w+)/data/(day=[\d-]+/hr=\d\d)/part-", p)
        assert m, p
        folders.add(f"/data/ice/segment_type={m.group(1)}/{m.group(2)}/")
    assert "/data/ice/segment_type=widened_thing/day=2026-11-21/hr=10/" in folders
    assert set(before) - registered == {p for p in before if any(f in p for f in folders)}
    assert len(folders) < len({os.path.dirname(p) for p in before}) / 4
    assert segment_files(root) == before
    # each entry's metrics are its file's: rows and bytes, and bounds to prune on
    for task in converted["tracks"].scan().plan_files():
        f = task.file
        path = f.file_path.removeprefix("file://")
        assert f.record_count == pq.read_metadata(path).num_rows > 0
        assert f.file_size_in_bytes == os.path.getsize(path)
        mid = converted["tracks"].schema().find_field("message_id").field_id
        assert f.lower_bounds[mid] <= f.upper_bounds[mid] and f.null_value_counts[mid] == 0
        assert re.search(rf"/day={f.partition[0]}/hr={f.partition[1]}/", path)
    widened = converted["widened_thing"].scan().to_arrow()
    assert sorted(widened["properties_amount"].to_pylist()) == ["5", "five"]
    # the erasure's reader of an hour: its live files are the Segment folder's
    hour11 = fmt.live_files(src, "tracks", "2026112111")
    assert hour11 and {loc for loc, _ in hour11} == {
        p for p in before if "segment_type=tracks/day=2026-11-21/hr=11/" in p
    }
    assert sum(size for _, size in hour11) == sum(os.path.getsize(loc) for loc, _ in hour11)

    # a second conversion commits nothing
    again = convert_source(root, ICEBERG, src, "test")
    assert again.totals()["hours"] == 0 and again.totals()["skipped_hours"] > 0
    assert all(len(t.snapshots()) == 1 for t in tables(cat, SRC).values())

    # the lake syncs on in Iceberg: new hours, and a replay of a converted hour
    sync(lake, ICEBERG_HOURS)
    replay = sync(lake, HOURS[:1], replay=True)
    tracks = tables(cat, SRC)["tracks"]
    late = tables(cat, SRC)["late_widen"].scan().to_arrow()
    assert sorted(late["properties_n"].to_pylist()) == ["1", "one"]
    assert tracks.current_snapshot().summary[RUN_PROPERTY] == replay.source.run_id
    paths = table_paths(tracks)
    assert any("/data/ice/segment_type=tracks/day=2026-11-21/hr=11/" in p for p in paths)
    assert not any("/data/ice/segment_type=tracks/day=2026-11-21/hr=10/" in p for p in paths)
    assert any("/iceberg/ice/tracks/data/day=2026-11-21/hr=12/" in p for p in paths)

    # the replaced Segment files of hour 10 are deleted by the maintenance once no version
    # references them; the live ones of hour 11 stay
    replaced = [p for p in before if "segment_type=tracks/day=2026-11-21/hr=10/" in p]
    kept = [p for p in before if "segment_type=tracks/day=2026-11-21/hr=11/" in p]
    assert replaced and kept and all(os.path.exists(p) for p in replaced)
    fmt.maintain(src, ["tracks"], timedelta(0))
    assert not any(os.path.exists(p) for p in replaced if p.endswith(".parquet"))
    assert all(os.path.exists(p) for p in kept)

    # every row once, nothing lost, through pyiceberg's own catalog
    store = IcebergOnly()
    expected = Oracle(store, lake["archive_root"], SRC).sync(HOURS).expected()
    found = compare(expected, read_iceberg_lake(store, cat, root, SRC, SRC))
    assert found.ok, str(found)

    # DuckDB's iceberg_scan reads the same rows (columns by name, day/hr from the metadata)
    con = duckdb_with_iceberg()
    for name, tbl in tables(cat, SRC).items():
        ours = tbl.scan().to_arrow()
        assert ours.filter(pc.is_null(ours["day"])).num_rows == 0, name
        theirs = con.sql(f"SELECT * FROM iceberg_scan('{tbl.metadata_location}')").arrow()
        theirs = theirs.read_all() if hasattr(theirs, "read_all") else theirs
        assert theirs.schema.names == ours.schema.names, name
        assert by_message(theirs) == by_message(ours), (name, column_diffs(theirs, ours))

    # ``datalake sql``: the project's DuckDB views over the tables
    capsys.readouterr()
    query = "SELECT hr, count(*) AS n FROM ice.tracks WHERE day = '2026-11-21' GROUP BY hr"
    assert main(["--settings", lake["toml"], "sql", query + " ORDER BY hr"]) == 0
    out = capsys.readouterr().out
    counts = pc.value_counts(tracks.scan().to_arrow()["hr"]).to_pylist()
    for c in counts:
        assert re.search(rf"│ {c['values']} +│ +{c['counts']} │", out), out


@pytest.mark.slow
def test_the_rewrite_writes_each_hour_as_a_sync_would(lake):
    root = lake["lake_root"]
    src = SourceTables(SRC, SRC)
    t0 = time.monotonic()
    report = convert_source(root, ICEBERG, src, "test", rewrite=True)
    seconds = time.monotonic() - t0
    tot = report.totals()
    assert tot["rewritten_hours"] == tot["hours"] > 0
    cat = sql_catalog(root)
    for name, tbl in tables(cat, SRC).items():
        for task in tbl.scan().plan_files():
            assert f"/iceberg/ice/{name}/data/day=" in task.file.file_path
    store = IcebergOnly()
    expected = Oracle(store, lake["archive_root"], SRC).sync(SEGMENT_HOURS).expected()
    found = compare(expected, read_iceberg_lake(store, cat, root, SRC, SRC))
    assert found.ok, str(found)
    print(f"rewrite: {tot['hours']} hours, {tot['bytes']} bytes, {seconds:.2f} s")


def test_a_date_layout_other_than_day_hour_is_refused(tmp_path):
    with pytest.raises(FormatError, match="day_hour"):
        convert_source(str(tmp_path), ICEBERG, SourceTables(SRC, SRC, "", "day"), "test")


@pytest.mark.slow
def test_without_the_name_mapping_pyiceberg_refuses_and_duckdb_reads_nulls(lake):
    """Why the conversion sets ``schema.name-mapping.default``: the Segment files carry no field
    ids, and without the mapping pyiceberg refuses to read them while DuckDB's iceberg_scan
    reads every column as NULL (``day``/``hr``, from the partition values, still right)."""
    root = lake["lake_root"]
    convert_source(root, ICEBERG, SourceTables(SRC, SRC), "test")
    tbl = sql_catalog(root).load_table((SRC, "tracks"))
    rows = tbl.scan().to_arrow().num_rows
    con = duckdb_with_iceberg()
    count = "SELECT count(*), count(message_id), count(day) FROM iceberg_scan('{}')"
    assert con.sql(count.format(tbl.metadata_location)).fetchall() == [(rows, rows, rows)]
    with tbl.transaction() as tx:
        tx.remove_properties(NAME_MAPPING)
    tbl = sql_catalog(root).load_table((SRC, "tracks"))
    with pytest.raises(ValueError, match="name-mapping"):
        tbl.scan().to_arrow()
    assert con.sql(count.format(tbl.metadata_location)).fetchall() == [(rows, 0, rows)]


def test_an_erasures_stored_files_of_a_converted_hour_include_its_segment_files(lake):
    root = lake["lake_root"]
    src = SourceTables(SRC, SRC)
    convert_source(root, ICEBERG, src, "test")
    live = table_format(ICEBERG, root).live_files(src, "tracks", "2026112111")
    stored = table_format(ICEBERG, root).stored_files(src, "tracks", "2026112111")
    assert live and set(live) <= set(stored)


def test_pyicebergs_add_files_loses_the_hour_of_a_segment_file(lake):
    """Why the conversion builds each data-file entry itself: ``Transaction.add_files`` infers a
    file's partition from its ``day``/``hr`` columns, which a Segment file does not have, and
    registers it under the NULL partition (every row's ``day``/``hr`` NULL)."""
    from datalake_assets.lake.formats.iceberg_schema import new_table_schema
    from datalake_assets.lake.records import read_schema_record

    root = lake["lake_root"]
    os.makedirs(f"{root}/_iceberg", exist_ok=True)
    cat = sql_catalog(root)
    cat.create_namespace_if_not_exists(SRC)
    schema, spec = new_table_schema(read_schema_record(root, SRC)["tracks"])
    probe = cat.create_table(
        (SRC, "probe"), schema=schema, partition_spec=spec, location=f"file://{root}/probe"
    )
    path = min(p for p in segment_files(root) if "segment_type=tracks/day=2026-11-21/hr=10/" in p)
    probe.add_files([f"file://{path}"])
    assert [t.file.partition for t in probe.scan().plan_files()] == [Record(None, None)]
    assert probe.scan().to_arrow()["day"].null_count > 0


def test_the_conversion_waits_for_the_sources_lock(lake):
    from datalake_assets.lake.lock import LockTimeout, SourceLock

    root = lake["lake_root"]
    with SourceLock(root, SRC, "a-sync"):
        with pytest.raises(LockTimeout):
            convert_source(root, ICEBERG, SourceTables(SRC, SRC), "test", lock_wait_s=0.5)
    assert not os.path.exists(f"{root}/_iceberg/catalog.db") or not tables(sql_catalog(root), SRC)
