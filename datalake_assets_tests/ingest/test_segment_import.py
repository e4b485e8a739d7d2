"""Import of Segment's S3-destination archive: a Segment-layout archive in a temporary folder
and in S3 (moto's server on 127.0.0.1, reached by boto3 and pyarrow alike), the import sensor
and the syncs it leads to on an ephemeral Dagster instance, and one end-to-end sync."""

from __future__ import annotations

import gzip
import json
import logging
import os
import uuid
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest
from dagster import (
    AssetKey,
    DagsterInstance,
    SensorResult,
    SkipReason,
    build_run_status_sensor_context,
    build_sensor_context,
)

from datalake_assets import cli
from datalake_assets.orchestration import import_sensors as isn
from datalake_assets.ingest import segment_import as si
from datalake_assets.orchestration import sensors as sn
from datalake_assets.definitions import build_definitions
from datalake_assets.settings import SettingsError, SourceSettings, load_settings
from datalake_assets.spec import layout
from datalake_assets.spec.layout import ArchiveHour
from datalake_assets.lake import storage
from datalake_assets_tests.support.archive_builders import msg
from datalake_assets_tests.support.lake_reader import LocalStore, read_lake
from datalake_assets_tests.support.oracle import Oracle, segment_archive_lines

SOURCE = "web-prod"  # our source id
SEGMENT_ID = "gLrbTPPs3s"  # Segment's source id in segment-logs/
D1, D2 = "2026-11-20", "2026-11-21"
MS1, MS2 = si.day_ms_of(D1), si.day_ms_of(D2)


# ----------------------------------------------------------------------------- a Segment archive


def seg_msg(mid: str, received: str | None, **kw) -> bytes:
    m = msg(mid, **kw)
    if received is None:
        del m["receivedAt"]
    else:
        m["receivedAt"] = received
    return orjson.dumps(m)


def gz(lines: list[bytes], members: int = 1) -> bytes:
    """Gzipped JSON lines, in ``members`` concatenated gzip members (Segment writes one)."""
    body = [line + b"\n" for line in lines]
    step = max(1, -(-len(body) // members))
    return b"".join(gzip.compress(b"".join(body[i:i + step])) for i in range(0, len(body), step))


def put(segment_root: str, day_ms: int | str, name: str, data: bytes) -> str:
    """Write an object of Segment's archive, byte for byte (S3: one PUT, as Segment does)."""
    location = f"{si.segment_source_dir(segment_root, SEGMENT_ID)}/{day_ms}/{name}"
    fs, path = storage.resolve(location)
    if "://" not in location:
        os.makedirs(os.path.dirname(path), exist_ok=True)
    with fs.open_output_stream(path, compression=None) as f:  # pyarrow would gzip a ".gz"
        f.write(data)
    return location


def expected_hour(line: bytes, day: str) -> str:
    """The test's own statement of the rule: receivedAt's hour, else hour 00 of the day."""
    try:
        obj = json.loads(line)
        ts = datetime.fromisoformat(obj["receivedAt"])
        ts = ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)  # no zone: UTC
        return ts.strftime("%Y-%m-%dT%H")
    except (ValueError, TypeError, KeyError, AttributeError):
        return f"{day}T00"


FILE_A = [  # day 1: several hours, both day edges, the four kinds of unroutable lines
    seg_msg("a1", "2026-11-20T00:10:00.000Z"),
    seg_msg("a2", "2026-11-20T05:30:00.000Z"),
    seg_msg("a3", "2026-11-20T05:45:59.999Z"),
    seg_msg("a4", "2026-11-20T23:59:59.999Z"),
    seg_msg("a5-next-day", "2026-11-21T00:00:00.100Z"),  # received day's edge: goes to its hour
    seg_msg("a6-prev-day", "2026-11-19T23:59:59Z"),
    b'{"type": "track", "messageId": "broken',  # not JSON
    b"[1, 2, 3]",  # JSON, not an object
    seg_msg("a7-no-received", None),
    seg_msg("a8-bad-received", "yesterday at noon"),
    b"",  # blank: carries nothing, not counted (as in the sync)
    seg_msg("a9", "2026-11-20T05:01:00Z"),
]
FILE_B = [  # day 1, a second file
    seg_msg("b1", "2026-11-20T10:00:00.000Z"),
    seg_msg("b2", "2026-11-20T10:59:59.000Z"),
    seg_msg("b3", "2026-11-20T13:30:00+02:00"),  # 11:30 UTC
    seg_msg("b4", "2026-11-20 11:45:00"),  # no zone: UTC, as the sync reads it
]
FILE_C = [seg_msg("c1", "2026-11-21T01:00:00Z"), seg_msg("c2", "2026-11-21T02:15:00Z")]


def build_segment_archive(root: str) -> dict[str, tuple[str, list[bytes]]]:
    """Two day folders, three files (one of two gzip members), and what must be skipped."""
    files = {
        "1763600000000.aaaa.gz": (D1, FILE_A),
        "1763610000000.bbbb.gz": (D1, FILE_B),
        "1763700000000.cccc.gz": (D2, FILE_C),
    }
    for name, (day, lines) in files.items():
        put(root, si.day_ms_of(day), name, gz(lines, members=2 if "aaaa" in name else 1))
    put(root, MS1, "README.txt", b"not an export")  # not *.gz: ignored
    put(root, MS1, ".in-progress.gz", b"x")  # hidden: ignored
    for folder in ("notes", str(MS1 + 1), "12ab"):  # not a midnight's epoch ms: reported
        put(root, folder, "x.gz", gz([seg_msg("z", "2026-11-20T00:00:00Z")]))
    return files


def archive_files(archive_root: str) -> dict[str, bytes]:
    """Every file under the source's archive folder, by relative path."""
    base = layout.join(archive_root, SOURCE)
    return {loc[len(base) + 1:]: raw_bytes(loc)
            for loc, _ in storage.list_files(base, recursive=True)}


def raw_bytes(location: str) -> bytes:
    """The stored bytes (pyarrow would decompress a ".gz" name by default)."""
    fs, path = storage.resolve(location)
    with fs.open_input_stream(path, compression=None) as f:
        return f.read()


def output_lines(archive_root: str) -> dict[str, Counter]:
    """Output hour files -> Counter of their lines."""
    out = {}
    for rel, data in archive_files(archive_root).items():
        if rel.startswith("day="):
            out[rel] = Counter(gzip.decompress(data).split(b"\n")[:-1])
    return out


# ---------------------------------------------------------------------------------- S3 (moto)


@pytest.fixture(scope="module")
def moto_endpoint():

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture()
def s3(moto_endpoint, monkeypatch):
    """A fresh bucket; boto3 and pyarrow both reach moto through AWS_ENDPOINT_URL_S3."""
    import boto3

    for k, v in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                 "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1",
                 "AWS_ENDPOINT_URL_S3": moto_endpoint, "AWS_EC2_METADATA_DISABLED": "true"
                 }.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    storage._fs_for.cache_clear()  # pyarrow filesystems read the endpoint when created
    client = boto3.client("s3", region_name="us-east-1")
    bucket = f"seg-{uuid.uuid4().hex[:12]}"
    client.create_bucket(Bucket=bucket)
    yield client, bucket
    storage._fs_for.cache_clear()


@pytest.fixture(params=["local", "s3"])
def roots(request, tmp_path):
    """``(segment_archive, archive_root)``: local folders, or prefixes of one S3 bucket."""
    if request.param == "local":
        return str(tmp_path / "segment"), str(tmp_path / "archive")
    _, bucket = request.getfixturevalue("s3")
    return f"s3://{bucket}/exports", f"s3://{bucket}/archive"


def importer(roots, tmp_path=None) -> si.SegmentImporter:
    spool = None
    if tmp_path is not None:
        spool = str(tmp_path / "spool")
        os.makedirs(spool, exist_ok=True)
    return si.SegmentImporter(roots[0], SEGMENT_ID, roots[1], SOURCE, spool_dir=spool)


# ------------------------------------------------------------------------------- the importer


def test_day_folders_are_epoch_ms_of_a_utc_midnight():
    assert si.parse_day_folder("1795132800000") == MS1 == 1795132800000
    assert si.day_of(MS1) == D1 and si.day_ms_of(D1) == MS1
    for bad in ("1795132800001", "01795132800000", "notes", "-86400000", "1.7e12", "",
                "١٧٦٣٥٩٦٨٠٠٠٠٠", "253402300800000"):
        assert si.parse_day_folder(bad) is None, bad
    assert si.parse_day_folder("0") == 0  # 1970-01-01


def test_every_line_lands_in_exactly_one_hour(roots, tmp_path):
    files = build_segment_archive(roots[0])
    report = importer(roots, tmp_path).import_range()
    s = report.summary()
    assert (s["files"], s["files_imported"], s["files_failed"]) == (3, 3, 0)
    assert s["invalid_folders"] == ["12ab", str(MS1 + 1), "notes"]
    assert s["ignored_files"] == 2
    nonblank = [line for _, lines in files.values() for line in lines if line.strip()]
    assert s["lines_in"] == len(nonblank) == 17
    assert s["unrouted"] == {"invalid_json": 1, "invalid_received_at": 1,
                             "missing_received_at": 1, "not_an_object": 1}

    outputs = output_lines(roots[1])
    seen: Counter = Counter()
    for name, (day, lines) in files.items():
        fid = si.file_id(SEGMENT_ID, si.day_ms_of(day), name)
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
    assert f"day={D2}/hr=00/segment-{si.file_id(SEGMENT_ID, MS1, '1763600000000.aaaa.gz')}" \
        in " ".join(outputs)  # the next day's edge, from day 1's folder
    # every output is an archive file the sync and the sensor read; nothing hidden is left
    rels = list(archive_files(roots[1]))
    assert not [r for r in rels if "/.tmp-" in r or r.startswith(".tmp-")]
    assert all(layout.is_archive_file(r) for r in rels if r.startswith("day="))
    assert not os.listdir(tmp_path / "spool")

    # manifests reconcile: lines_in = sum of the hours' lines = what the outputs hold
    for name, (day, lines) in files.items():
        fid = si.file_id(SEGMENT_ID, si.day_ms_of(day), name)
        m = json.loads(storage.read_bytes(si.manifest_location(roots[1], SOURCE, fid)))
        assert m["lines_in"] == sum(h["lines"] for h in m["hours"].values())
        assert m["lines_in"] == sum(1 for line in lines if line.strip())
        assert m["blank_lines"] == sum(1 for line in lines if not line.strip())
        for key, h in m["hours"].items():
            hour = ArchiveHour.parse(key)
            rel = f"day={hour.day}/hr={hour.hr}/segment-{fid}.jsonl.gz"
            assert sum(outputs[rel].values()) == h["lines"]
        assert m["input"].endswith(f"/segment-logs/{SEGMENT_ID}/{si.day_ms_of(day)}/{name}")
    assert "_imports/" in " ".join(rels)  # the manifests: outside every hour folder...
    listing = sn.lister_for(roots[1]).list_hours(roots[1], SOURCE, ArchiveHour.parse(
        "2026-11-01T00"))  # ...so the archive sensor sees exactly the outputs
    assert sorted(f"day={h.day}/hr={h.hr}/{f.name}" for h, fs in listing.hours.items()
                  for f in fs) == sorted(outputs)


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
        return [r for r in archive_files(roots[1]) if layout.is_archive_file(r)
                and r.startswith("day=")]

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
    mtimes = ({p: os.stat(os.path.join(roots[1], SOURCE, p)).st_mtime_ns for p in before}
              if "://" not in roots[1] else {})

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
    fid = si.file_id(SEGMENT_ID, MS1, name)
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
    assert mine == [f"day={D1}/hr=11/segment-{fid}.jsonl.gz",
                    f"day={D1}/hr=15/segment-{fid}.jsonl.gz"]
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
    fid = si.file_id(SEGMENT_ID, MS1, "f.gz")
    Path(si.manifest_location(roots[1], SOURCE, fid)).write_text("{not json")
    assert imp.import_range().count("imported") == 1  # a corrupt manifest: imported again
    put(roots[0], MS1, "f.gz", b"\x1f\x8b\x08\x00garbage")
    report = imp.import_range()
    assert report.count("failed") == 1 and report.summary()["failures"][f"{D1}/f.gz"]
    assert report.hours_changed == []  # the outputs of its previous version are still there


def test_range_and_listing_bounds(tmp_path):
    roots = (str(tmp_path / "segment"), str(tmp_path / "archive"))
    build_segment_archive(roots[0])
    imp = importer(roots)
    assert [si.day_of(d) for d in imp.list(D2).days] == [D2]
    assert [si.day_of(d) for d in imp.list(None, D1).days] == [D1]
    report = imp.import_range(D2, D2)
    assert report.days == [D2] and report.count("imported") == 1


def test_s3_listing_starts_after_the_day_and_pages(s3):
    client, bucket = s3
    root = f"s3://{bucket}/exports"
    for ms in (MS1 - si.DAY_MS, MS1, MS2):
        for i in range(3):
            put(root, ms, f"f{i}.gz", gz([seg_msg("x", "2026-11-20T00:00:00Z")]))
    put(root, "notes", "x.gz", b"x")
    calls: list[str | None] = []
    client.meta.events.register("before-parameter-build.s3.ListObjectsV2",
                                lambda params, **_: calls.append(params.get("StartAfter")))
    lister = si.S3SegmentLister(client=client, page_size=2)
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
    assert sorted(cut.days) == [MS1 - si.DAY_MS, MS1] and cut.truncated_at == MS2
    assert si.S3SegmentLister.split("s3://b/p", "S") == ("b", "p/segment-logs/S/")
    assert si.S3SegmentLister.split("s3://b", "S") == ("b", "segment-logs/S/")
    assert isinstance(si.segment_lister_for("/data/x"), si.LocalSegmentLister)
    with pytest.raises(ValueError, match="gs://"):
        si.segment_lister_for("gs://b/p")


def test_hour_ranges():
    hours = [ArchiveHour.parse(h) for h in
             ("2026-11-19T23", "2026-11-20T00", "2026-11-20T01", "2026-11-20T05")]
    assert [(str(a), str(b)) for a, b in si.hour_ranges(hours, 24)] == [
        ("2026-11-19T23", "2026-11-20T01"), ("2026-11-20T05", "2026-11-20T05")]
    assert [(str(a), str(b)) for a, b in si.hour_ranges(hours, 2)] == [
        ("2026-11-19T23", "2026-11-20T00"), ("2026-11-20T01", "2026-11-20T01"),
        ("2026-11-20T05", "2026-11-20T05")]
    assert si.hour_ranges([], 24) == []


# -------------------------------------------------------------------------------- settings


def settings_file(tmp_path: Path, segment_archive: str, extra: str = "", source_extra: str = ""):
    f = tmp_path / "lake.toml"
    f.write_text(
        f'archive_root = "archive"\nlake_root = "lake"\n{extra}'
        f'[[sources]]\nid = "{SOURCE}"\nslug = "web_prod"\nstart = "2026-11-01-00:00"\n'
        f'segment_archive = "{segment_archive}"\nsegment_source_id = "{SEGMENT_ID}"\n'
        f"{source_extra}"
    )
    return load_settings(str(f), env={})


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
        ({"segment_archive": "/x", "segment_source_id": "a/b"}, "segment_source_id",
         "invalid Segment source id"),
        ({"segment_archive": 3}, "segment_archive", "must be a string"),
    ]
    for kwargs, key, text in bad:
        with pytest.raises(SettingsError, match=text) as e:
            SourceSettings("web", **kwargs)
        assert e.value.key == key
    f = tmp_path / "two.toml"
    f.write_text('[[sources]]\nid = "a"\nsegment_archive = "s3://b/p"\nsegment_source_id = "S"\n'
                 'start = "2026-11-01-00:00"\n'
                 '[[sources]]\nid = "b"\nsegment_archive = "s3://b/p"\nsegment_source_id = "S"\n'
                 'start = "2026-11-01-00:00"\n')
    with pytest.raises(SettingsError, match="already imports") as e:
        load_settings(str(f), env={})
    assert e.value.key == "sources[1].segment_source_id"
    f.write_text('[[sources]]\nid = "a"\nsegment_archive = "gs://b"\n')
    with pytest.raises(SettingsError, match=r"sources\[0\]\.segment_archive"):
        load_settings(str(f), env={})


# -------------------------------------------------------------------------------- Dagster


class Clock:
    def __init__(self, text: str):
        self.now = datetime.fromisoformat(text).replace(tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


class ImportHarness:
    """The code location of one source with a Segment archive, ticked like the daemon."""

    def __init__(self, tmp_path: Path, now: str, segment_archive: str | None = None,
                 extra: str = ""):
        self.segment_archive = segment_archive or str(tmp_path / "segment")
        self.settings = settings_file(tmp_path, self.segment_archive, extra)
        self.source = self.settings.sources[0]
        self.clock = Clock(now)
        self.defs = build_definitions(self.settings, clock=self.clock)
        sensors = {s.name: s for s in self.defs.sensors}
        self.sensor = sensors["web_prod_segment_import_sensor"]
        self.sync_sensor = sensors["web_prod_segment_import_sync_sensor"]
        self.archive_sensor = sensors["web_prod_archive_sensor"]
        self.instance = DagsterInstance.ephemeral()
        self.cursor: str | None = None

    def tick(self):
        ctx = build_sensor_context(instance=self.instance, cursor=self.cursor,
                                   definitions=self.defs)
        result = self.sensor(ctx)
        if isinstance(result, SensorResult) and result.cursor is not None:
            self.cursor = result.cursor
        return result

    def import_day(self, day: str):
        job = self.defs.resolve_job_def("web_prod_segment_import_job")
        result = job.execute_in_process(instance=self.instance, partition_key=day)
        assert result.success
        return result

    def syncs_after(self, result):
        ctx = build_run_status_sensor_context(
            sensor_name=self.sync_sensor.name, dagster_event=result.get_run_success_event(),
            dagster_instance=self.instance, dagster_run=result.dagster_run)
        return self.sync_sensor(ctx)


def requests(result) -> list:
    return list(result.run_requests or []) if isinstance(result, SensorResult) else []


def test_definitions_of_a_source_with_a_segment_archive(tmp_path):
    h = ImportHarness(tmp_path, "2026-11-22T12:00")
    names = {s.name for s in h.defs.sensors}
    assert names == {"web_prod_archive_sensor", "web_prod_segment_import_sensor",
                     "web_prod_segment_import_sync_sensor", "lake_definitions_sensor"}
    job = h.defs.resolve_job_def("web_prod_segment_import_job")
    assert job.partitions_def.get_first_partition_key() == "2026-11-01"
    assert AssetKey(["web_prod", "segment_import"]) in h.defs.resolve_all_asset_keys()
    f = tmp_path / "plain.toml"
    f.write_text('[[sources]]\nid = "web"\n')
    plain = build_definitions(load_settings(str(f), env={}))
    assert sorted(s.name for s in plain.sensors) == ["lake_definitions_sensor",
                                                     "web_archive_sensor"]


def test_import_sensor_requests_new_and_changed_days(tmp_path):
    h = ImportHarness(tmp_path, "2026-11-22T12:00")
    build_segment_archive(h.segment_archive)
    put(h.segment_archive, si.day_ms_of("2026-10-31"), "old.gz", gz(FILE_C))  # before start
    put(h.segment_archive, si.day_ms_of("2026-11-30"), "future.gz", gz(FILE_C))  # not yet
    result = h.tick()
    reqs = requests(result)
    assert [r.partition_key for r in reqs] == [D1, D2]
    fp = reqs[0].tags[sn.FINGERPRINT_TAG]
    assert reqs[0].run_key == f"{SOURCE}:segment:{D1}:{fp}"
    assert reqs[0].tags[sn.TRIGGER_TAG] == "sensor"
    # requests resolve against the import job (daily partitions, today included)
    data = h.sensor.evaluate_tick(build_sensor_context(instance=h.instance, cursor=None,
                                                       definitions=h.defs))
    assert [r.tags["dagster/partition"] for r in data.run_requests] == [D1, D2]
    # nothing new: nothing requested, and the invalid folders are named
    again = h.tick()
    assert not requests(again) and "not a day's epoch ms" in again.skip_reason.skip_message
    # a new file in day 2's folder: that day again, with a new run key
    put(h.segment_archive, MS2, "1763710000000.dddd.gz", gz(FILE_C))
    (req,) = requests(h.tick())
    assert req.partition_key == D2 and req.run_key != reqs[1].run_key
    cursor = isn.ImportCursor.parse(h.cursor)
    assert isn.ImportCursor.parse(cursor.serialize()) == cursor
    assert cursor.position == si.day_ms_of("2026-11-20")  # 48 h before 2026-11-22T12
    # later, day 1 leaves the re-check window: a change there is not seen (replay it)
    h.clock.now = datetime(2026, 11, 24, 12, tzinfo=UTC)
    assert not requests(h.tick())
    assert isn.ImportCursor.parse(h.cursor).position == si.day_ms_of("2026-11-22")
    put(h.segment_archive, MS1, "late.gz", gz(FILE_C))
    assert not requests(h.tick())


def test_import_sensor_works_off_a_long_history_a_queue_at_a_time(tmp_path):
    h = ImportHarness(tmp_path, "2026-11-22T12:00", extra="[automation]\nmax_queued_runs = 3\n")
    days = [f"2026-11-{d:02d}" for d in range(1, 11)]
    for day in days:
        put(h.segment_archive, si.day_ms_of(day), "f.gz", gz(FILE_C))
    assert [r.partition_key for r in requests(h.tick())] == days[:3]
    assert isn.ImportCursor.parse(h.cursor).position == si.day_ms_of(days[3])
    assert [r.partition_key for r in requests(h.tick())] == days[3:6]


def test_import_sensor_job_and_syncs_over_s3(s3, tmp_path):
    _, bucket = s3
    h = ImportHarness(tmp_path, "2026-11-25T12:00", segment_archive=f"s3://{bucket}/exports")
    build_segment_archive(h.segment_archive)
    assert [r.partition_key for r in requests(h.tick())] == [D1, D2]
    result = h.import_day(D2)
    (req,) = h.syncs_after(result)
    assert (req.tags["dagster/asset_partition_range_start"],
            req.tags["dagster/asset_partition_range_end"]) == ("2026-11-21-01:00",
                                                               "2026-11-21-02:00")
    out = output_lines(h.settings.archive_root)
    assert sorted(out) == [f"day={D2}/hr=0{i}/segment-{si.file_id(SEGMENT_ID, MS2, n)}.jsonl.gz"
                           for i, n in ((1, "1763700000000.cccc.gz"),
                                        (2, "1763700000000.cccc.gz"))]


def test_evaluate_days_is_pure():
    listing = si.SegmentListing(days={MS1: [si.SegmentObject("a.gz", 10, "e1")], MS2: []})
    ev = isn.evaluate_days(listing, isn.ImportCursor(), start_ms=MS1,
                           now=datetime(2026, 11, 21, 5, tzinfo=UTC), recheck_hours=48, budget=5)
    assert [r.day for r in ev.requests] == [D1]  # an empty folder requests nothing
    assert ev.cursor.position == MS1 and MS1 in ev.cursor.fingerprints


def test_import_run_then_syncs_of_the_old_hours(tmp_path):
    """An import run of an old day leads to syncs of exactly the hours it changed, a day per
    run; the same import of a recent day is left to the archive sensor, which requests it."""
    h = ImportHarness(tmp_path, "2026-11-25T12:00")
    build_segment_archive(h.segment_archive)
    result = h.import_day(D1)
    mat = h.instance.get_latest_materialization_event(AssetKey(["web_prod", "segment_import"]))
    md = mat.asset_materialization.metadata
    assert (md["files"].value, md["files_imported"].value, md["lines_in"].value) == (2, 2, 15)
    changed = md["hours_changed"].value
    assert changed == ["2026-11-19T23", f"{D1}T00", f"{D1}T05", f"{D1}T10", f"{D1}T11",
                       f"{D1}T23", f"{D2}T00"]
    (check,) = result.get_asset_check_evaluations()
    assert check.check_name == isn.CHECK_ALL_FILES and check.passed

    reqs = h.syncs_after(result)
    assert all(r.tags[sn.TRIGGER_TAG] == isn.IMPORT_TRIGGER for r in reqs)
    assert all(r.tags[isn.IMPORT_RUN_TAG] == result.run_id for r in reqs)
    spans = [(r.tags.get("dagster/asset_partition_range_start", r.partition_key),
              r.tags.get("dagster/asset_partition_range_end", r.partition_key)) for r in reqs]
    assert spans == [("2026-11-19-23:00", "2026-11-20-00:00"), ("2026-11-20-05:00",) * 2,
                     ("2026-11-20-10:00", "2026-11-20-11:00"),
                     ("2026-11-20-23:00", "2026-11-21-00:00")]
    assert len({r.run_key for r in reqs}) == len(reqs)

    # a second import of the same day changes nothing: nothing to sync
    assert isinstance(h.syncs_after(h.import_day(D1)), SkipReason)

    # a recent day: its hours are the archive sensor's, which requests them itself
    h.clock.now = datetime(2026, 11, 21, 6, 30, tzinfo=UTC)
    result = h.import_day(D2)
    skipped = h.syncs_after(result)
    assert isinstance(skipped, SkipReason) and "left to the archive sensor" in \
        skipped.skip_message
    archive = h.archive_sensor(build_sensor_context(instance=h.instance, definitions=h.defs))
    assert {r.partition_key for r in requests(archive)} >= {"2026-11-21-01:00",
                                                           "2026-11-21-02:00"}


def test_sync_requests_after_import_hand_off_to_the_archive_sensor(tmp_path):
    s = settings_file(tmp_path, "/seg")
    src, auto = s.sources[0], s.automation
    now = datetime(2026, 11, 22, 12, 30, tzinfo=UTC)
    hours = [ArchiveHour.parse(x) for x in
             ("2026-10-31T23", "2026-11-01T00", "2026-11-20T13", "2026-11-20T14",
              "2026-11-20T15", "2026-11-22T12")]
    reqs, left = isn.sync_requests_after_import(src, hours, run_id="r1", now=now,
                                                automation=auto)
    # handoff: 2026-11-22T12 - (48 - 2) h = 2026-11-20T14; before the start: no partition
    assert isn.handoff_hour(now, auto) == ArchiveHour.parse("2026-11-20T14")
    assert [r.partition_key for r in reqs] == ["2026-11-01-00:00", "2026-11-20-13:00"]
    assert [str(h) for h in left] == ["2026-11-20T14", "2026-11-20T15", "2026-11-22T12"]


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
    assert cli.main(["--settings", f, "import"]) == 0
    out = capsys.readouterr().out
    assert f"{D1}: 2 files (0 imported, 2 unchanged" in out and f"{D2}: 1 files (1 imported" in out
    assert cli.main(["--settings", f, "import", "--from", "2026-11"]) == 2
    plain = tmp_path / "plain.toml"
    plain.write_text('[[sources]]\nid = "web"\n')
    assert cli.main(["--settings", str(plain), "import"]) == 2
    assert "no segment_archive" in capsys.readouterr().err


# ----------------------------------------------------------------------------- end to end


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
        .sync(segment_lines.hours).expected(),
        lambda: read_lake(store, lake, SOURCE))
    report = importer(roots).import_range()
    hours = tuple(str(h) for h in report.hours_changed)
    result = run_sync(spark, SyncRequest(lake, roots[1], SOURCE, hours, replay=True,
                                         database="web_prod"))
    found = reliability.compare()
    assert found.ok, str(found)
    lines = [line for _, ls in files.values() for line in ls if line.strip()] + [FILE_C[0]]
    assert found.lines == report.lines_in == len(lines) == result.source["lines_in"]
    assert result.tables["order_completed"]["checks"]["conformance_failures"] == []
    # Lines without a usable receivedAt were routed to hour 00 of the folder's day by the
    # importer, and the sync quarantines them with their reason (never a NULL received_at).
    quarantined = duckdb.sql(
        f"select reason, day, hr from read_parquet('{lake}/quarantine/{SOURCE}/*/*/*.parquet', "
        "hive_partitioning = true) where level = 'line'").fetchall()
    assert sorted(r[0] for r in quarantined) == [
        "invalid_json", "invalid_received_at", "missing_received_at", "not_an_object"]
    assert {(str(r[1]), int(r[2])) for r in quarantined} == {(D1, 0)}


@pytest.mark.spark
def test_cli_import_then_sync(spark, tmp_path, capsys):
    import duckdb

    s = settings_file(tmp_path, "segment", extra='[catalog]\nbackend = "none"\n')
    build_segment_archive(s.sources[0].segment_archive)
    assert cli.main(["--settings", s.settings_file, "import", "--from", D2, "--sync"]) == 0
    out = capsys.readouterr().out
    assert "synced 2026-11-21T01 .. 2026-11-21T02: 2 lines, 2 rows" in out
    (n,), = duckdb.sql(
        f"select count(*) from read_parquet('{s.lake_root}/data/{SOURCE}/"
        "segment_type=order_completed/*/*/*.parquet')").fetchall()
    assert n == 2
