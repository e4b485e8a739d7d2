"""The identity-index lookup: the hours holding a person, the links, the bytes read."""

import os

import pyarrow.parquet as pq

from datalake_assets.lake.identities import LINK, index_table
from datalake_assets.privacy.lookup import find_hours, follow_links
from datalake_assets.spec import layout


def write_index(lake: str, source: str, hour: str, rows) -> None:
    h = layout.ArchiveHour.parse(hour)
    d = os.path.join(layout.identity_index_root(lake, source), layout.index_partition_path(h))
    os.makedirs(d, exist_ok=True)
    pq.write_table(index_table(rows), os.path.join(d, layout.data_file_name(h, "t", 0, 0)))


def test_find_hours_reads_the_index_only_and_counts_bytes(tmp_path):
    lake = str(tmp_path)
    a, b, c, d = ("a" * 32, "b" * 32, "c" * 32, "d" * 32)
    write_index(
        lake,
        "web",
        "2026-11-21T10",
        [(a, "pages", 2, None), (b, "tracks", 1, None), (a, LINK, 0, b)],
    )
    write_index(lake, "web", "2026-11-21T11", [(c, "pages", 1, None), (b, LINK, 0, c)])
    write_index(lake, "web", "2026-11-22T00", [(d, "pages", 1, None), (c, LINK, 0, d)])
    found = find_hours(lake, "web", frozenset({a}))
    assert found.hours == {"2026112110"} and found.files_read == 3
    assert found.bytes_read == sum(os.path.getsize(p) for p in tmp_path.rglob("*.parquet"))
    assert find_hours(lake, "web", frozenset({"e" * 32})).hours == frozenset()
    assert find_hours(lake, "nope", frozenset({a})) == find_hours(lake, "nope", frozenset())
    assert follow_links(lake, "web", frozenset({a}), 0) == {a}
    assert follow_links(lake, "web", frozenset({a}), 1) == {a, b}
    assert follow_links(lake, "web", frozenset({a}), 2) == {a, b, c}
    assert follow_links(lake, "web", frozenset({d}), 10) == {a, b, c, d}


def test_a_sorted_index_is_read_by_row_group(tmp_path):
    """A large index file sorted by identity (as a compacted index is) is pruned by its
    row-group statistics: a fraction of it is read."""
    lake = str(tmp_path)
    hashes = sorted(f"{i:032x}" for i in range(200_000))
    h = layout.ArchiveHour.parse("2026-11-21T10")
    d = os.path.join(layout.identity_index_root(lake, "web"), layout.index_partition_path(h))
    os.makedirs(d)
    path = os.path.join(d, "part-2026112110-compacted.parquet")
    pq.write_table(
        index_table([(x, "tracks", 1, None) for x in hashes]), path, row_group_size=20_000
    )
    found = find_hours(lake, "web", frozenset({hashes[17]}))
    assert found.hours == {"2026112110"}
    assert found.bytes_read < os.path.getsize(path) / 4
