"""The identity summary (privacy/summary.py) over synthetic per-hour index files written in
INDEX_SCHEMA: a lookup finds exactly the hours that reading every index file finds, also after
hours were re-synced, rewritten or added since the compaction, and reads far less."""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from datalake_assets.lake import storage
from datalake_assets.lake.identities import LINK, QUARANTINE, index_table
from datalake_assets.privacy import summary, summary_lookup
from datalake_assets.privacy.index_files import list_index_hours
from datalake_assets.spec import layout
from datalake_assets.spec.identity import identity, identity_hash

SOURCE = "web"
KEY = b"k" * 32
TABLES = ("pages", "tracks", "order_completed", "identifies")


def h(text: str) -> str:
    return identity_hash(KEY, identity("user_id", text))


PERSON = h("the-person")
ALIAS = identity_hash(KEY, identity("email", "Person@Example.com"))
STRANGER = h("nobody-has-this")


def write_hour(lake: str, hour: str, rows, name: str | None = None) -> str:
    """One index file of ``hour`` (a new name unless given, as a sync's run id would)."""
    name = name or f"part-{hour}-{uuid.uuid4().hex[:8]}-00000-000.parquet"
    location = layout.join(layout.identity_index_root(lake, SOURCE), f"hour={hour}", name)
    out = pa.BufferOutputStream()
    pq.write_table(index_table(rows), out)
    storage.write_bytes_atomic(location, out.getvalue().to_pybytes())
    return location


def crowd(rng: random.Random, hour: str, n: int = 20) -> list:
    return [
        (h(f"u{rng.randrange(5000)}"), rng.choice(TABLES), rng.randint(1, 9), None)
        for _ in range(n)
    ]


def hours_between(first: str, last: str, step: int = 1) -> list[str]:
    a = datetime.strptime(first, "%Y%m%d%H").replace(tzinfo=UTC)
    b = datetime.strptime(last, "%Y%m%d%H").replace(tzinfo=UTC)
    out = []
    while a <= b:
        out.append(a.strftime("%Y%m%d%H"))
        a += timedelta(hours=step)
    return out


def brute_force(lake: str, hashes: set[str]) -> set[str]:
    """What reading every per-hour index file says."""
    found = set()
    for hour, files in list_index_hours(lake, SOURCE)[0].items():
        for name, _, _ in files:
            t = pq.read_table(
                layout.join(layout.identity_index_root(lake, SOURCE), f"hour={hour}", name),
                columns=["identity"],
            )
            if pc.any(pc.is_in(t["identity"], pa.array(sorted(hashes)))).as_py():
                found.add(hour)
    return found


@pytest.fixture()
def world(tmp_path):
    """Two months of every other hour; the person in 12 of them (one a quarantined line, one
    an identify linking them to an email), strangers everywhere."""
    lake = str(tmp_path / "lake")
    rng = random.Random(5)
    hours = hours_between("2026010100", "2026022822", step=2)
    person_hours = set(rng.sample(hours, 12))
    quarantined, linked = sorted(person_hours)[:2]
    for hour in hours:
        rows = crowd(rng, hour)
        if hour in person_hours:
            rows.append((PERSON, QUARANTINE if hour == quarantined else "pages", 2, None))
        if hour == linked:
            rows += [(ALIAS, "identifies", 1, None), (PERSON, LINK, 1, ALIAS)]
        write_hour(lake, hour, rows)
    return lake, hours, person_hours, linked


def test_a_lookup_finds_exactly_the_hours_and_reads_little(world):
    lake, hours, person_hours, linked = world
    stats = summary.compact(lake, SOURCE)
    assert stats.months_written == 2 and stats.hours_read == len(hours)
    assert stats.months == ["2026-01", "2026-02"]
    found = summary_lookup.find_hours_compacted(lake, SOURCE, {PERSON})
    assert found.hours == person_hours == brute_force(lake, {PERSON})
    assert found.stale_hours == 0 and found.summaries_read == 2
    assert found.links == {(PERSON, ALIAS)}
    # The linked identity is found through its own rows, and knows its link back.
    by_alias = summary_lookup.find_hours_compacted(lake, SOURCE, [ALIAS])
    assert by_alias.hours == {linked} and by_alias.links == {(ALIAS, PERSON)}
    # Two footers and a row group or two per month, against every index file of the source.
    every_file = sum(s for files in list_index_hours(lake, SOURCE)[0].values() for _, s, _ in files)
    assert found.files_read == 2 and found.row_groups_read <= 4
    assert found.bytes_read * 20 < every_file
    # Nobody, and no hash at all.
    assert summary_lookup.find_hours_compacted(lake, SOURCE, {STRANGER}).hours == frozenset()
    nothing = summary_lookup.find_hours_compacted(lake, SOURCE, set())
    assert nothing.hours == frozenset() and nothing.bytes_read == 0


def test_hours_changed_or_added_after_the_compaction_are_still_found(world):
    lake, hours, person_hours, _ = world
    summary.compact(lake, SOURCE)
    index = layout.identity_index_root(lake, SOURCE)
    rng = random.Random(9)
    # A re-sync of an hour without the person: new file, old one gone.
    left = sorted(person_hours)[5]
    for location, _ in storage.list_files(layout.join(index, f"hour={left}")):
        storage.delete_file(location)
    write_hour(lake, left, crowd(rng, left))
    # A re-sync of an hour that now holds the person (late files).
    joined = next(x for x in hours if x not in person_hours)
    old = storage.list_files(layout.join(index, f"hour={joined}"))
    write_hour(lake, joined, crowd(rng, joined) + [(PERSON, "tracks", 1, None)])
    for location, _ in old:
        storage.delete_file(location)
    # An erasure-like rewrite in place: same file name, other content.
    rewritten = sorted(person_hours)[7]
    ((location, _),) = storage.list_files(layout.join(index, f"hour={rewritten}"))
    write_hour(lake, rewritten, crowd(rng, rewritten, 5), name=location.rsplit("/", 1)[-1])
    # New hours since the compaction, in a compacted month and in a new one.
    write_hour(lake, "2026022823", [(PERSON, "pages", 1, None)])
    write_hour(lake, "2026030100", crowd(rng, "2026030100") + [(PERSON, "pages", 1, None)])

    expected = (person_hours - {left, rewritten}) | {joined, "2026022823", "2026030100"}
    assert brute_force(lake, {PERSON}) == expected
    found = summary_lookup.find_hours_compacted(lake, SOURCE, {PERSON})
    assert found.hours == expected
    assert found.stale_hours == 5
    # The next compaction reads only those hours, and the summaries answer alone again.
    stats = summary.compact(lake, SOURCE)
    assert (stats.months_written, stats.hours_read) == (3, 5)
    again = summary_lookup.find_hours_compacted(lake, SOURCE, {PERSON})
    assert again.hours == expected and again.stale_hours == 0
    # With nothing new, a compaction reads the footers only.
    idle = summary.compact(lake, SOURCE)
    assert (idle.months_unchanged, idle.months_written, idle.hours_read) == (3, 0, 0)
    sizes = sum(s for _, s in storage.list_files(summary.summary_root(lake, SOURCE), True))
    assert idle.files_read == 3 and idle.bytes_read < sizes / 2


def test_a_month_whose_index_is_gone_loses_its_summary(world):
    lake, hours, person_hours, _ = world
    summary.compact(lake, SOURCE)
    index = layout.identity_index_root(lake, SOURCE)
    for hour in hours:
        if hour.startswith("202602"):
            storage.delete_dir(layout.join(index, f"hour={hour}"))
    # Before the next compaction, the summary's February rows are not trusted any more.
    january = {x for x in person_hours if x.startswith("202601")}
    assert summary_lookup.find_hours_compacted(lake, SOURCE, {PERSON}).hours == january
    stats = summary.compact(lake, SOURCE)
    assert stats.months_removed == 1 and stats.months == ["2026-02"]
    assert not storage.exists(summary.summary_location(lake, SOURCE, "2026-02"))
    assert summary_lookup.find_hours_compacted(lake, SOURCE, {PERSON}).hours == january


def test_compacting_chosen_months_and_forcing(world):
    lake, _, person_hours, _ = world
    stats = summary.compact(lake, SOURCE, months=["2026-02"])
    assert stats.months == ["2026-02"]
    found = summary_lookup.find_hours_compacted(lake, SOURCE, {PERSON})
    assert found.hours == person_hours
    assert found.stale_hours == len(
        [x for x in list_index_hours(lake, SOURCE)[0] if x.startswith("202601")]
    )
    forced = summary.compact(lake, SOURCE, months=["2026-02"], force=True)
    assert forced.months_written == 1 and forced.hours_read == stats.hours_read
    with pytest.raises(ValueError, match="YYYY-MM"):
        summary.compact(lake, SOURCE, months=["2026/02/../x"])


def test_a_damaged_or_foreign_summary_is_not_trusted(world):
    lake, _, person_hours, _ = world
    summary.compact(lake, SOURCE)
    location = summary.summary_location(lake, SOURCE, "2026-01")
    # A Parquet file without our manifest (another version, a hand-made file) answers nothing.
    out = pa.BufferOutputStream()
    pq.write_table(
        pa.table(
            {"identity": [PERSON], "hour": ["2026013123"], "linked": [None]},
            schema=summary.SUMMARY_SCHEMA,
        ),
        out,
    )
    storage.write_bytes_atomic(location, out.getvalue().to_pybytes())
    assert summary_lookup.find_hours_compacted(lake, SOURCE, {PERSON}).hours == person_hours
    storage.write_bytes_atomic(location, b"not parquet")
    found = summary_lookup.find_hours_compacted(lake, SOURCE, {PERSON})
    assert found.hours == person_hours
    assert found.stale_hours == len(
        [x for x in list_index_hours(lake, SOURCE)[0] if x.startswith("202601")]
    )
    # Compaction rebuilds it from the per-hour files.
    assert summary.compact(lake, SOURCE).months_written == 1
    assert summary_lookup.find_hours_compacted(lake, SOURCE, {PERSON}).stale_hours == 0


def test_on_s3(moto_bucket, tmp_path):
    _, bucket = moto_bucket
    lake = f"s3://{bucket}/lake"
    rng = random.Random(3)
    for hour in hours_between("2026013120", "2026020103"):
        write_hour(
            lake,
            hour,
            crowd(rng, hour, 5) + ([(PERSON, "pages", 1, None)] if hour.endswith("22") else []),
        )
    assert summary.compact(lake, SOURCE).months_written == 2
    write_hour(lake, "2026020104", [(PERSON, "pages", 1, None)])
    found = summary_lookup.find_hours_compacted(lake, SOURCE, {PERSON})
    assert found.hours == {"2026013122", "2026020104"} and found.stale_hours == 1
