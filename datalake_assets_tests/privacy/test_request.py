"""Requests, the matcher and the identity-index lookup, without Spark."""

import gzip
import os
from datetime import UTC, datetime

import pyarrow as pa
import pytest

from datalake_assets.lake.identities import LINK, index_table
from datalake_assets.privacy.lookup import find_hours, follow_links
from datalake_assets.privacy.matching import Matcher, needles_of
from datalake_assets.privacy.request import (
    ForgetRequest,
    RequestError,
    load_request_file,
    request_from_dict,
)
from datalake_assets.spec import layout
from datalake_assets.spec.identity import IdentityError, identity, identity_hash

KEY = b"k" * 32


def test_request_from_dict_shapes_and_defaults():
    r = request_from_dict({"identities": ["user_id=u1", "email= A@B.com ",
                                          {"kind": "anonymous_id", "value": "a-9"}, "userId=u1"]})
    assert r.identities == (identity("id", "a-9"), identity("id", "u1"),
                            identity("email", "a@b.com"))
    assert (r.follow_links, r.sources, r.erase, r.suppress) == (False, (), True, True)
    assert len(r.request_id) == 32 and r.received_at.tzinfo is not None
    r = request_from_dict({"request_id": "T-1_x", "identities": ["user_id=42"],
                           "follow_links": True, "sources": ["web", "web"], "erase": False,
                           "received_at": "2026-11-20T10:00:00Z"})
    assert (r.request_id, r.sources, r.erase, r.follow_links) == ("T-1_x", ("web",), False, True)
    assert r.received_at == datetime(2026, 11, 20, 10, tzinfo=UTC)


@pytest.mark.parametrize("bad, words", [
    ({"identities": ["user_id=secret-value"], "colour": 1}, "unknown request keys"),
    ({"identities": ["secret-value"]}, "KIND=VALUE"),
    ({"identities": [{"kind": "user_id"}]}, "identities[0]"),
    ({"identities": ["user_id=secret-value", "user_id="]}, "identities[1]"),
    ({"identities": ["user_id=secret-value"], "follow_links": "yes"}, "follow_links"),
    ({"identities": ["user_id=secret-value"], "request_id": "a b"}, "request_id"),
    ([], "object"),
])
def test_request_errors_say_where_never_the_value(bad, words):
    with pytest.raises((RequestError, IdentityError)) as e:
        request_from_dict(bad)
    assert words in str(e.value) and "secret-value" not in str(e.value)


def test_request_files_json_and_text(tmp_path):
    (tmp_path / "ticket-9.json").write_text('{"identities": ["email=x@y.z"], "erase": false}')
    r = load_request_file(str(tmp_path / "ticket-9.json"))
    assert (r.request_id, r.erase, r.identities) == ("ticket-9", False,
                                                     (identity("email", "x@y.z"),))
    (tmp_path / "many ids.txt").write_text("# ids\r\nuser_id=a\r\n\r\nanonymous_id=b\n")
    r = load_request_file(str(tmp_path / "many ids.txt"))
    assert r.identities == (identity("id", "a"), identity("id", "b"))
    assert len(r.request_id) == 32  # the name is no request id: a new one
    (tmp_path / "bad.txt").write_text("user_id=a\nsecret-value\n")
    with pytest.raises(IdentityError, match="line 2") as e:
        load_request_file(str(tmp_path / "bad.txt"))
    assert "secret-value" not in str(e.value)
    (tmp_path / "bad.json").write_text('{"identities": ["secret-value"')
    with pytest.raises(RequestError, match="not valid JSON") as e:
        load_request_file(str(tmp_path / "bad.json"))
    assert "secret-value" not in str(e.value)


def test_a_request_does_something():
    with pytest.raises(RequestError):
        ForgetRequest("r", (identity("user_id", "u"),), erase=False, suppress=False)
    with pytest.raises(RequestError):
        ForgetRequest("r", ())


def matcher(*idents, traits=("email",)) -> Matcher:
    return Matcher(KEY, [identity_hash(KEY, i) for i in idents], needles_of(KEY, idents), traits)


def test_matcher_lines_by_identity_column_and_substring():
    m = matcher(identity("user_id", "u/1\"x"), identity("email", "Ab@C.de"))
    assert m.line(b'{"type":"track","userId":"u/1\\"x","messageId":"m1"}') == (True, "m1")
    assert m.line(b'{"type":"track","userId":"u2","context":{"traits":{"Email":" ab@c.DE"}},'
                  b'"messageId":7}') == (True, "7")  # column context_traits_email, folded
    assert m.line(b'{"type":"track","userId":"u2","traits":{"email":"ab@c.de"}}')[0]
    assert not m.line(b'{"type":"track","userId":"u/1","messageId":"m2"}')[0]
    # undecodable: the value raw, JSON-escaped, or case-folded for a trait
    assert m.line(b'{"userId": "u/1\\"x", "cut')[0]
    assert m.line(b'garbage AB@C.DE garbage')[0]
    assert not m.line(b'{"userId": "u/1x", "cut')[0]
    assert not matcher(identity("user_id", "U")).line(b"{u-cut")[0]  # ids keep their case


def test_matcher_rows():
    m = matcher(identity("user_id", "42"), identity("email", "a@b.c"))
    t = pa.table({"message_id": ["m1", "m2", "m3", "m4", None],
                  "user_id": ["42", "7", None, "7", None],
                  "context_traits_email": [None, None, " A@B.C", None, None]})
    assert m.row_mask(t, {m.mid_hash("m4")}).to_pylist() == [True, False, True, True, False]


def write_index(lake: str, source: str, hour: str, rows) -> None:
    h = layout.ArchiveHour.parse(hour)
    d = os.path.join(layout.identity_index_root(lake, source), layout.index_partition_path(h))
    os.makedirs(d, exist_ok=True)
    import pyarrow.parquet as pq

    pq.write_table(index_table(rows), os.path.join(d, layout.data_file_name(h, "t", 0, 0)))


def test_find_hours_reads_the_index_only_and_counts_bytes(tmp_path):
    lake = str(tmp_path)
    a, b, c, d = ("a" * 32, "b" * 32, "c" * 32, "d" * 32)
    write_index(lake, "web", "2026-11-21T10", [(a, "pages", 2, None), (b, "tracks", 1, None),
                                              (a, LINK, 0, b)])
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


def test_undecodable_matching_works_from_hashes_alone(tmp_path):
    """What ``resume`` has: the needles' hashes, no clear value."""
    idents = (identity("email", "Secret@Mail.org"),)
    restored = Matcher(KEY, [identity_hash(KEY, i) for i in idents],
                       sorted(needles_of(KEY, idents), key=lambda n: n.digest))
    data = gzip.compress(b'{"cut": "secret@mail.ORG')
    assert restored.line(gzip.decompress(data))[0]


def test_a_sorted_index_is_read_by_row_group(tmp_path):
    """A large index file sorted by identity (as a compacted index is) is pruned by its
    row-group statistics: a fraction of it is read."""
    import pyarrow.parquet as pq

    lake = str(tmp_path)
    hashes = sorted(f"{i:032x}" for i in range(200_000))
    h = layout.ArchiveHour.parse("2026-11-21T10")
    d = os.path.join(layout.identity_index_root(lake, "web"), layout.index_partition_path(h))
    os.makedirs(d)
    path = os.path.join(d, "part-2026112110-compacted.parquet")
    pq.write_table(index_table([(x, "tracks", 1, None) for x in hashes]), path,
                   row_group_size=20_000)
    found = find_hours(lake, "web", frozenset({hashes[17]}))
    assert found.hours == {"2026112110"}
    assert found.bytes_read < os.path.getsize(path) / 4
