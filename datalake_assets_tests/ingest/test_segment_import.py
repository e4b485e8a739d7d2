"""Import of Segment's S3-destination archive: a Segment-layout archive in a temporary folder
and in S3 (moto's server on 127.0.0.1, reached by boto3 and pyarrow alike), its settings,
``datalake import``, and one end-to-end sync. The import sensor and job:
orchestration/test_import_sensors.py."""

from __future__ import annotations

import gzip
import json
import os
from collections import Counter
from pathlib import Path

import pytest

from datalake_assets import cli
from datalake_assets.ingest import segment_import as si
from datalake_assets.ingest import segment_layout as sl
from datalake_assets.ingest import segment_listing as sls
from datalake_assets.lake import storage
from datalake_assets.lake.listing import lister_for
from datalake_assets.settings import SourceSettings, load_settings
from datalake_assets.settings.fields import SettingsError
from datalake_assets.spec import layout
from datalake_assets.spec.layout import ArchiveHour
from datalake_assets_tests.support.lake_reader import LocalStore, read_lake
from datalake_assets_tests.support.oracle import Oracle, segment_archive_lines
from datalake_assets_tests.support.segment_archive import (
    D1,
    D2,
    FILE_A,
    FILE_B,
    FILE_C,
    MS1,
    MS2,
    SEGMENT_ID,
    SOURCE,
    archive_files,
    build_segment_archive,
    expected_hour,
    gz,
    output_lines,
    put,
    seg_msg,
    settings_file,
)


@pytest.fixture(params=["local", "s3"])
def roots(request, tmp_path):
    """``(segment_archive, archive_root)``: local folders, or prefixes of one S3 bucket."""
    if request.param == "local":
        return str(tmp_path / "segment"), str(tmp_path / "archive")
    _, bucket = request.getfixturevalue("moto_bucket")
    return f"s3://{bucket}/exports", f"s3://{bucket}/archive"


def importer(roots, tmp_path=None) -> si.SegmentImporter:
    spool = None
    if tmp_path is not None:
        spool = str(tmp_path / "spool")
        os.makedirs(spool, exist_ok=True)
    return si.SegmentImporter(roots[0], SEGMENT_ID, roots[1], SOURCE, spool_dir=spool)


def test_day_folders_are_epoch_ms_of_a_utc_midnight():
    assert sl.parse_day_folder("1795132800000") == MS1 == 1795132800000
    assert sl.day_of(MS1) == D1 and sl.day_ms_of(D1) == MS1
    for bad in (
        "1795132800001",
        "01795132800000",
        "notes",
        "-86400000",
        "1.7e12",
        "",
        "١٧٦٣٥٩٦٨٠٠٠٠٠",
        "253402300800000",
    ):
        assert sl.parse_day_folder(bad) is None, bad
    assert sl.parse_day_folder("0") == 0  # 1970-01-01


def test_every_line_lands_in_exactly_one_hour(roots, tmp_path):
    files = build_segment_archive(roots[0])
    report = importer(roots, tmp_path).import_range()
    s = report.summary()
    assert (s["files"], s["files_imported"], s["files_failed"]) == (3, 3, 0)
    assert s["invalid_folders"] == ["12ab", str(MS1 + 1), "notes"]
    assert s["ignored_files"] == 2
    nonblank = [line for _, lines in files.values() for line in lines if line.strip()]
    assert s["lines_in"] == len(nonblank) == 17
    assert s["unrouted"] == {
        "invalid_json": 1,
        "invalid_received_at": 1,
        "missing_received_at": 1,
        "not_an_object": 1,
    }

    outputs = output_lines(roots[1])
    seen: Counter = Counter()
    for name, (day, lines) in files.items():
        fid = sl.file_id(SEGMENT_ID, sl.day_ms_of(day), name)
        for line in lines:
            if not line.strip():
                continue
            hour = ArchiveHour.parse(expected_hour(line, day))
            rel = f"day={hour.day}/hr={hour.hr}/segment-{fid}.jsonl.gz"
            assert outputs[rel][line] >= 1, (line, rel)
            seen[(rel, line)] += 1
    # ...and nowhere else: the outputs hold exactly the input lines, each once
    assert sum(sum(c.values()) for c in outputs.values()) == len(nonblank)
    assert all(outputs[rel][line] == n for (rel, line), n in seen.items())
    assert "day=2026-11-19/hr=23/segment-" in " ".join(outputs)  # previous day's edge
    assert (
        f"day={D2}/hr=00/segment-{sl.file_id(SEGMENT_ID, MS1, '1763600000000.aaaa.gz')}"
        in " ".join(outputs)
    )  # the next day's edge, from day 1's folder
    # every output is an archive file the sync and the sensor read; nothing hidden is left
    rels = list(archive_files(roots[1]))
    assert not [r for r in rels if "/.tmp-" in r or r.startswith(".tmp-")]
    assert all(layout.is_archive_file(r) for r in rels if r.startswith("day="))
    assert not os.listdir(tmp_path / "spool")

    # manifests reconcile: lines_in = sum of the hours' lines = what the outputs hold
    for name, (day, lines) in files.items():
        fid = sl.file_id(SEGMENT_ID, sl.day_ms_of(day), name)
        m = json.loads(storage.read_bytes(sl.manifest_location(roots[1], SOURCE, fid)))
        assert m["lines_in"] == sum(h["lines"] for h in m["hours"].values())
        assert m["lines_in"] == sum(1 for line in lines if line.strip())
        assert m["blank_lines"] == sum(1 for line in lines if not line.strip())
        for key, h in m["hours"].items():
            hour = ArchiveHour.parse(key)
            rel = f"day={hour.day}/hr={hour.hr}/segment-{fid}.jsonl.gz"
            assert sum(outputs[rel].values()) == h["lines"]
        assert m["input"].endswith(f"/segment-logs/{SEGMENT_ID}/{sl.day_ms_of(day)}/{name}")
    assert "_imports/" in " ".join(rels)  # the manifests: outside every hour folder...
    listing = lister_for(roots[1]).list_hours(
        roots[1], SOURCE, ArchiveHour.parse("2026-11-01T00")
    )  # ...so the archive sensor sees exactly the outputs
    assert sorted(
        f"day={h.day}/hr={h.hr}/{f.name}" for h, fs in listing.hours.items() for f in fs
    ) == sorted(outputs)


def test_outputs_are_invisible_until_complete(roots, tmp_path):
    """While a file is imported its outputs exist only under hidden names; a file that fails
    half-way (a truncated gzip) leaves nothing visible, no manifest and no temporary file."""
    put(roots[0], MS1, "good.gz", gz(FILE_A))
    with pytest.MonkeyPatch.context() as mp:
        snapshots, renames = spy_on_commits(roots, mp)
        report = importer(roots, tmp_path).import_range()
    assert report.count("imported") == 1
    (snapshot,) = snapshots  # before the first commit: hidden temporary files only
    assert not [r for r in snapshot if layout.is_archive_file(r)]
    assert all(os.path.basename(r).startswith(".tmp-") for r in snapshot)
    assert len(snapshot) == (0 if roots[0].startswith("s3://") else 5)  # S3: spooled locally
    renames = [r for r in renames if r[0].endswith(".jsonl.gz")]  # not the manifest's
    assert len(renames) == 5
    for src, visible in renames:  # each output appears by a rename of a hidden name
        assert os.path.basename(src).startswith(".tmp-") and not layout.is_archive_file(src)
        assert all(not os.path.basename(r).startswith(".tmp-") for r in visible)
    assert len(renames[-1][1]) == 4  # the outputs already renamed, nothing else

    before = archive_files(roots[1])
    whole = gz(FILE_B * 2000)
    put(roots[0], MS1, "truncated.gz", whole[: len(whole) // 2])
    report = importer(roots, tmp_path).import_range()
    (failed,) = report.failures
    assert failed.name == "truncated.gz" and failed.error
    assert report.count("unchanged") == 1
    assert archive_files(roots[1]) == before  # not one line of it, no manifest, no .tmp- file
    assert not os.listdir(tmp_path / "spool")


def spy_on_commits(roots, mp) -> tuple[list[list[str]], list[tuple[str, list[str]]]]:
    """``(archive files when the first output is committed, [(hidden name renamed, archive
    files visible to the sync at that moment)])``: rename locally, S3 move."""
    snapshots: list[list[str]] = []
    renames: list[tuple[str, list[str]]] = []
    real_commit = storage.StagedFile.commit

    def commit(self):
        if not snapshots:
            snapshots.append(list(archive_files(roots[1])))
        return real_commit(self)

    def visible() -> list[str]:
        return [
            r for r in archive_files(roots[1]) if layout.is_archive_file(r) and r.startswith("day=")
        ]

    mp.setattr(storage.StagedFile, "commit", commit)
    if roots[0].startswith("s3://"):
        real_resolve = storage.resolve

        class Spy:  # pyarrow's S3 filesystem, with its move watched
            def __init__(self, fs):
                self._fs = fs

            def __getattr__(self, name):
                return getattr(self._fs, name)

            def move(self, src, dst):
                renames.append((src, visible()))
                return self._fs.move(src, dst)

        def resolve(loc):
            fs, path = real_resolve(loc)
            return Spy(fs), path

        mp.setattr(storage, "resolve", resolve)
    else:
        real_replace = os.replace

        def replace(src, dst):
            renames.append((src, visible()))
            return real_replace(src, dst)

        mp.setattr(os, "replace", replace)
    return snapshots, renames


def test_reimport_is_idempotent(roots, tmp_path):
    build_segment_archive(roots[0])
    imp = importer(roots, tmp_path)
    first = imp.import_range()
    assert len(first.hours_changed) == 9
    before = archive_files(roots[1])
    mtimes = (
        {p: os.stat(os.path.join(roots[1], SOURCE, p)).st_mtime_ns for p in before}
        if "://" not in roots[1]
        else {}
    )

    again = imp.import_range()  # manifests say unchanged: nothing is read
    assert again.count("unchanged") == 3 and again.hours_changed == []
    assert again.summary()["lines_in"] == 0  # lines of imported files only
    assert archive_files(roots[1]) == before

    forced = imp.import_range(force=True)  # read again: the same bytes, so nothing replaced
    assert forced.count("imported") == 3 and forced.hours_changed == []
    after = archive_files(roots[1])
    outputs = [p for p in before if p.startswith("day=")]
    assert {p: after[p] for p in outputs} == {p: before[p] for p in outputs}
    assert set(after) == set(before)
    for p, t in mtimes.items():
        if p.startswith("day="):
            assert os.stat(os.path.join(roots[1], SOURCE, p)).st_mtime_ns == t


def test_a_changed_file_is_imported_again_and_stale_hours_removed(roots, tmp_path):
    build_segment_archive(roots[0])
    imp = importer(roots, tmp_path)
    imp.import_range()
    name = "1763610000000.bbbb.gz"
    fid = sl.file_id(SEGMENT_ID, MS1, name)
    assert f"day={D1}/hr=10/segment-{fid}.jsonl.gz" in archive_files(roots[1])
    # the same file rewritten (new size / ETag): hour 10 gone, hour 15 new, hour 11 changed
    new_b = [seg_msg("b3", "2026-11-20T11:30:00Z"), seg_msg("b5", "2026-11-20T15:00:00Z")]
    put(roots[0], MS1, name, gz(new_b))
    report = imp.import_range()
    by_name = {f.name: f for f in report.files}
    assert by_name[name].status == "imported"
    assert [f.status for n, f in by_name.items() if n != name] == ["unchanged", "unchanged"]
    assert by_name[name].hours_removed == [f"{D1}T10"]
    assert [str(h) for h in report.hours_changed] == [f"{D1}T10", f"{D1}T11", f"{D1}T15"]
    files = archive_files(roots[1])
    mine = sorted(p for p in files if p.endswith(f"segment-{fid}.jsonl.gz"))
    assert mine == [
        f"day={D1}/hr=11/segment-{fid}.jsonl.gz",
        f"day={D1}/hr=15/segment-{fid}.jsonl.gz",
    ]
    assert gzip.decompress(files[mine[0]]).split(b"\n")[:-1] == [new_b[0]]
    m = json.loads(files[f"_imports/{fid}.json"])
    assert m["lines_in"] == 2 and sorted(m["hours"]) == [f"{D1}T11", f"{D1}T15"]
    # the other files' outputs in the same hours are untouched
    assert sum(1 for p in files if p.startswith(f"day={D1}/hr=05/")) == 1


def test_unreadable_manifest_or_input_is_reported_not_lost(tmp_path):
    roots = (str(tmp_path / "segment"), str(tmp_path / "archive"))
    put(roots[0], MS1, "f.gz", gz(FILE_C))
    imp = importer(roots)
    assert imp.import_range().count("imported") == 1
    fid = sl.file_id(SEGMENT_ID, MS1, "f.gz")
    Path(sl.manifest_location(roots[1], SOURCE, fid)).write_text("{not json")
    assert imp.import_range().count("imported") == 1  # a corrupt manifest: imported again
    put(roots[0], MS1, "f.gz", b"\x1f\x8b\x08\x00garbage")
    report = imp.import_range()
    assert report.count("failed") == 1 and report.summary()["failures"][f"{D1}/f.gz"]
    assert report.hours_changed == []  # the outputs of its previous version are still there


def test_range_and_listing_bounds(tmp_path):
    roots = (str(tmp_path / "segment"), str(tmp_path / "archive"))
    build_segment_archive(roots[0])
    imp = importer(roots)
    assert [sl.day_of(d) for d in imp.list(D2).days] == [D2]
    assert [sl.day_of(d) for d in imp.list(None, D1).days] == [D1]
    report = imp.import_range(D2, D2)
    assert report.days == [D2] and report.count("imported") == 1


def test_s3_listing_starts_after_the_day_and_pages(moto_bucket):
    client, bucket = moto_bucket
    root = f"s3://{bucket}/exports"
    for ms in (MS1 - sl.DAY_MS, MS1, MS2):
        for i in range(3):
            put(root, ms, f"f{i}.gz", gz([seg_msg("x", "2026-11-20T00:00:00Z")]))
    put(root, "notes", "x.gz", b"x")
    calls: list[str | None] = []
    client.meta.events.register(
        "before-parameter-build.s3.ListObjectsV2",
        lambda params, **_: calls.append(params.get("StartAfter")),
    )
    lister = sls.S3SegmentLister(client=client, page_size=2)
    listing = lister.list_days(root, SEGMENT_ID, since=MS1)
    assert sorted(listing.days) == [MS1, MS2]
    assert [f.name for f in listing.days[MS1]] == ["f0.gz", "f1.gz", "f2.gz"]
    assert all(f.version and f.size for f in listing.days[MS1])  # ETag and size
    assert calls[0] == f"exports/segment-logs/{SEGMENT_ID}/{MS1}" and len(calls) == 4
    assert listing.invalid == ["notes"]
    calls.clear()
    listing = lister.list_days(root, SEGMENT_ID, since=MS1, until=MS1)
    assert sorted(listing.days) == [MS1] and len(calls) == 2  # stops at the first later day
    cut = lister.list_days(root, SEGMENT_ID, limit=4)  # finishes a day, then stops
    assert sorted(cut.days) == [MS1 - sl.DAY_MS, MS1] and cut.truncated_at == MS2
    assert sls.S3SegmentLister.split("s3://b/p", "S") == ("b", "p/segment-logs/S/")
    assert sls.S3SegmentLister.split("s3://b", "S") == ("b", "segment-logs/S/")
    assert isinstance(sls.segment_lister_for("/data/x"), sls.LocalSegmentLister)
    with pytest.raises(ValueError, match="gs://"):
        sls.segment_lister_for("gs://b/p")


def test_hour_ranges():
    hours = [
        ArchiveHour.parse(h)
        for h in ("2026-11-19T23", "2026-11-20T00", "2026-11-20T01", "2026-11-20T05")
    ]
    assert [(str(a), str(b)) for a, b in si.hour_ranges(hours, 24)] == [
        ("2026-11-19T23", "2026-11-20T01"),
        ("2026-11-20T05", "2026-11-20T05"),
    ]
    assert [(str(a), str(b)) for a, b in si.hour_ranges(hours, 2)] == [
        ("2026-11-19T23", "2026-11-20T00"),
        ("2026-11-20T01", "2026-11-20T01"),
        ("2026-11-20T05", "2026-11-20T05"),
    ]
    assert si.hour_ranges([], 24) == []


def test_settings(tmp_path):
    s = settings_file(tmp_path, "exports/segment/")
    assert s.sources[0].segment_archive == str(tmp_path / "exports" / "segment")
    assert s.sources[0].segment_source_id == SEGMENT_ID
    s = settings_file(tmp_path, "s3://bucket/prefix/")
    assert s.sources[0].segment_archive == "s3://bucket/prefix"
    imported = SourceSettings("web", segment_archive="/x", start="2026-11-01-00:00")
    assert imported.segment_source_id == "web"  # default
    with pytest.raises(SettingsError, match="needs an explicit start") as e:
        SourceSettings("web", segment_archive="/x")  # start "auto" cannot come from an import
    assert e.value.key == "start"
    assert SourceSettings("web").segment_source_id == ""  # no import
    bad = [
        ({"segment_source_id": "abc"}, "segment_source_id", "set segment_archive too"),
        ({"segment_archive": "gs://b/p"}, "segment_archive", "s3://bucket"),
        ({"segment_archive": "s3:/b/p"}, "segment_archive", "invalid URI"),
        (
            {"segment_archive": "/x", "segment_source_id": "a/b"},
            "segment_source_id",
            "invalid Segment source id",
        ),
        ({"segment_archive": 3}, "segment_archive", "must be a string"),
    ]
    for kwargs, key, text in bad:
        with pytest.raises(SettingsError, match=text) as e:
            SourceSettings("web", **kwargs)
        assert e.value.key == key
    f = tmp_path / "two.toml"
    f.write_text(
        '[[sources]]\nid = "a"\nsegment_archive = "s3://b/p"\nsegment_source_id = "S"\n'
        'start = "2026-11-01-00:00"\n'
        '[[sources]]\nid = "b"\nsegment_archive = "s3://b/p"\nsegment_source_id = "S"\n'
        'start = "2026-11-01-00:00"\n'
    )
    with pytest.raises(SettingsError, match="already imports") as e:
        load_settings(str(f), env={})
    assert e.value.key == "sources[1].segment_source_id"
    f.write_text('[[sources]]\nid = "a"\nsegment_archive = "gs://b"\n')
    with pytest.raises(SettingsError, match=r"sources\[0\]\.segment_archive"):
        load_settings(str(f), env={})


def test_cli_import(tmp_path, capsys):
    s = settings_file(tmp_path, "segment")
    build_segment_archive(s.sources[0].segment_archive)
    f = s.settings_file
    assert cli.main(["--settings", f, "import", "--from", D1, "--to", D1]) == 0
    out = capsys.readouterr().out
    assert f"{D1}: 2 files (2 imported, 0 unchanged, 0 failed), 15 lines" in out
    assert "7 archive hours changed, 2026-11-19T23 .. 2026-11-21T00" in out
    assert "backfill `web_prod/sync_reports`" in out
    assert "2026-11-19-23:00 ... 2026-11-21-00:00" in out
    assert "synced by `datalake_archive_sensor` anyway" in out  # the default: batched runs
    assert cli.main(["--settings", f, "import"]) == 0
    out = capsys.readouterr().out
    assert f"{D1}: 2 files (0 imported, 2 unchanged" in out and f"{D2}: 1 files (1 imported" in out
    assert cli.main(["--settings", f, "import", "--from", "2026-11"]) == 2
    plain = tmp_path / "plain.toml"
    plain.write_text('[[sources]]\nid = "web"\n')
    assert cli.main(["--settings", str(plain), "import"]) == 2
    assert "no segment_archive" in capsys.readouterr().err


@pytest.mark.spark
@pytest.mark.reliability
def test_import_then_sync_finds_every_message_once(spark, tmp_path, reliability):
    """Segment's archive imported, then synced: the lake compared id by id with the oracle
    over Segment's files themselves (not the importer's output), so a file the importer
    skipped or a line it dropped is lost here."""
    import duckdb

    from datalake_assets.transform.job import SyncRequest, run_sync

    roots = (str(tmp_path / "segment"), str(tmp_path / "archive"))
    lake = str(tmp_path / "lake")
    files = build_segment_archive(roots[0])
    # a message Segment delivered twice, in two files: the sync keeps one
    put(roots[0], MS2, "1763710000000.dup.gz", gz([FILE_C[0]]))
    store = LocalStore()
    segment_lines = segment_archive_lines(store, roots[0], SEGMENT_ID)
    reliability.expect(
        Oracle(store, roots[1], SOURCE, hour_lines=segment_lines)
        .sync(segment_lines.hours)
        .expected(),
        lambda: read_lake(store, lake, SOURCE),
    )
    report = importer(roots).import_range()
    hours = tuple(str(h) for h in report.hours_changed)
    result = run_sync(
        spark, SyncRequest(lake, roots[1], SOURCE, hours, replay=True, database="web_prod")
    )
    found = reliability.compare()
    assert found.ok, str(found)
    lines = [line for _, ls in files.values() for line in ls if line.strip()] + [FILE_C[0]]
    assert found.lines == report.lines_in == len(lines) == result.source.lines_in
    assert result.tables["order_completed"].checks.conformance_failures == []
    # Lines without a usable receivedAt were routed to hour 00 of the folder's day by the
    # importer, and the sync quarantines them with their reason (never a NULL received_at).
    quarantined = duckdb.sql(
        f"select reason, day, hr from read_parquet('{lake}/quarantine/{SOURCE}/*/*/*.parquet', "
        "hive_partitioning = true) where level = 'line'"
    ).fetchall()
    assert sorted(r[0] for r in quarantined) == [
        "invalid_json",
        "invalid_received_at",
        "missing_received_at",
        "not_an_object",
    ]
    assert {(str(r[1]), int(r[2])) for r in quarantined} == {(D1, 0)}


@pytest.mark.spark
def test_cli_import_then_sync(spark, tmp_path, capsys):
    import duckdb

    s = settings_file(tmp_path, "segment", extra='[catalog]\nbackend = "none"\n')
    build_segment_archive(s.sources[0].segment_archive)
    assert cli.main(["--settings", s.settings_file, "import", "--from", D2, "--sync"]) == 0
    out = capsys.readouterr().out
    assert "synced 2026-11-21T01 .. 2026-11-21T02: 2 lines, 2 rows" in out
    ((n,),) = duckdb.sql(
        f"select count(*) from read_parquet('{s.lake_root}/data/{SOURCE}/"
        "segment_type=order_completed/*/*/*.parquet')"
    ).fetchall()
    assert n == 2
