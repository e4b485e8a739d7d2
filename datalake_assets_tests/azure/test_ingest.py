"""What writes and lists the raw archive, on Azure (Azurite, ``az://``): the archive listers,
the collector's roller, the Segment importer and the archive sensor."""

from __future__ import annotations

import gzip
import os

import pytest

from datalake_assets.ingest import segment_import as si
from datalake_assets.ingest import segment_listing as sl
from datalake_assets.ingest.collector.roller import roll_segment
from datalake_assets.lake import storage
from datalake_assets.lake.listing import FileSystemArchiveLister, fingerprint, lister_for
from datalake_assets.spec import layout
from datalake_assets.spec.layout import ArchiveHour
from datalake_assets_tests.ingest.collector.test_roller import make_segment
from datalake_assets_tests.orchestration.test_sensors import (
    SOURCE,
    Clock,
    Harness,
    make_settings,
    requests,
)
from datalake_assets_tests.support.segment_archive import (
    MS1,
    SEGMENT_ID,
    archive_files,
    build_segment_archive,
    output_lines,
)

H10, H11, H12 = (ArchiveHour.parse(f"2026-11-21T{h}") for h in ("10", "11", "12"))


def put_hour(root: str, hour: ArchiveHour, names=("part-0000.jsonl.gz",), body=b'{"a":1}\n'):
    for name in names:
        storage.write_bytes_atomic(
            layout.join(layout.archive_hour_dir(root, SOURCE, hour), name), gzip.compress(body)
        )


def test_the_archive_lister_walks_days_and_hours_from_since(container):
    root = f"az://{container}/raw"
    put_hour(root, ArchiveHour.parse("2026-11-20T23"))  # before `since`
    for hour in (H10, H11, H12):
        put_hour(root, hour, names=("p0.jsonl.gz", "p1.jsonl.gz", ".tmp-p2.jsonl.gz"))
    storage.write_bytes_atomic(f"{root}/{SOURCE}/day=2026-11-21/notes.txt", b"x")  # no hour
    lister = lister_for(root)
    assert isinstance(lister, FileSystemArchiveLister)
    listing = lister.list_hours(root, SOURCE, H10)
    assert list(listing.hours) == [H10, H11, H12]
    assert [f.name for f in listing.hours[H11]] == ["p0.jsonl.gz", "p1.jsonl.gz"]  # no hidden
    assert listing.calls == 5  # the source folder, one day, three hours: delimited listings
    assert all(f.size > 0 and int(f.version) > 0 for f in listing.hours[H10])
    # a listing limit stops at an hour boundary; the next tick goes on from there
    cut = lister.list_hours(root, SOURCE, H10, limit=10)  # entries: folders and files
    assert list(cut.hours) == [H10, H11] and cut.truncated_at == H12
    # a late file changes the hour's fingerprint
    before = fingerprint(listing.hours[H12])
    put_hour(root, H12, names=("late.jsonl.gz",))
    after = lister.list_hours(root, SOURCE, H12).hours[H12]
    assert fingerprint(after) != before and len(after) == 3


@pytest.mark.slow
def test_the_archive_sensor_requests_syncs_of_an_azure_archive(container, tmp_path):
    root = f"az://{container}/raw"
    put_hour(root, H10, names=("p0.jsonl.gz", "p1.jsonl.gz"))
    h = Harness(make_settings(tmp_path, archive_root=root), Clock("2026-11-21T11:06"))
    (req,) = requests(h.tick())
    assert req.partition_key == "2026-11-21-10:00"
    assert req.run_key.startswith(f"{SOURCE}:2026-11-21T10:")
    assert not requests(h.tick())  # nothing new
    put_hour(root, H10, names=("late.jsonl.gz",))
    h.clock.set("2026-11-21T12:06")
    (again,) = requests(h.tick())  # the late file: a new run of that hour
    assert again.partition_key == req.partition_key and again.run_key != req.run_key


def test_the_collector_rolls_its_segments_into_an_azure_archive(container, tmp_path):
    root = f"az://{container}/raw"
    seg = make_segment(tmp_path, b'{"a":1}\n{"b":2}\n{"torn')
    final = roll_segment(root, seg)
    assert final == (
        f"{root}/src1/day=2026-11-21/hr=10/"
        "collector-2026112110-20261121T100000-cccccccccccc.jsonl.gz"
    )
    assert gzip.decompress(storage.read_bytes(final)) == b'{"a":1}\n{"b":2}\n'
    assert not os.path.exists(seg.path)
    assert [loc for loc, _ in storage.list_files(root, recursive=True)] == [final]
    # a restart that rolls the same segment again finds the complete file and adds nothing
    again = make_segment(tmp_path, b'{"a":1}\n{"b":2}\n')
    assert roll_segment(root, again) == final
    assert [loc for loc, _ in storage.list_files(root, recursive=True)] == [final]


def test_the_importer_reads_and_writes_azure(container, tmp_path):
    """A Segment archive copied to Azure, imported into an Azure archive: the same lines in
    the same hours as locally (each exactly once), then unchanged on a second pass."""
    segment, archive = f"az://{container}/exports", f"az://{container}/archive"
    files = build_segment_archive(segment)
    listing = sl.segment_lister_for(segment).list_days(segment, SEGMENT_ID)
    assert isinstance(sl.segment_lister_for(segment), sl.FileSystemSegmentLister)
    assert sorted(o.name for o in listing.days[MS1]) == [
        "1763600000000.aaaa.gz",
        "1763610000000.bbbb.gz",
    ]
    assert listing.ignored == 2 and len(listing.invalid) == 3
    spool = tmp_path / "spool"
    spool.mkdir()
    run = si.SegmentImporter(segment, SEGMENT_ID, archive, SOURCE, spool_dir=str(spool))
    report = run.import_range()
    assert report.count("imported") == 3 and not report.failures
    nonblank = [line for _, lines in files.values() for line in lines if line.strip()]
    outputs = output_lines(archive)
    assert sum(sum(c.values()) for c in outputs.values()) == len(nonblank)
    assert not [r for r in archive_files(archive) if ".tmp-" in r]
    # the sensor's lister sees exactly the outputs
    hours = lister_for(archive).list_hours(archive, SOURCE, ArchiveHour.parse("2026-11-01T00"))
    assert sorted(
        f"day={h.day}/hr={h.hr}/{f.name}" for h, fs in hours.hours.items() for f in fs
    ) == sorted(outputs)
    again = si.SegmentImporter(segment, SEGMENT_ID, archive, SOURCE, spool_dir=str(spool))
    assert again.import_range().count("unchanged") == 3
