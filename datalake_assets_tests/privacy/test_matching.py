"""The matcher: which lines and rows are the person's, from keyed hashes alone."""

import gzip

import pyarrow as pa

from datalake_assets.privacy.matching import Matcher, needles_of
from datalake_assets.spec.identity import identity, identity_hash

KEY = b"k" * 32


def matcher(*idents, traits=("email",)) -> Matcher:
    return Matcher(KEY, [identity_hash(KEY, i) for i in idents], needles_of(KEY, idents), traits)


def test_matcher_lines_by_identity_column_and_substring():
    m = matcher(identity("user_id", 'u/1"x'), identity("email", "Ab@C.de"))
    assert m.line(b'{"type":"track","userId":"u/1\\"x","messageId":"m1"}') == (True, "m1")
    assert m.line(
        b'{"type":"track","userId":"u2","context":{"traits":{"Email":" ab@c.DE"}},"messageId":7}'
    ) == (True, "7")  # column context_traits_email, folded
    assert m.line(b'{"type":"track","userId":"u2","traits":{"email":"ab@c.de"}}')[0]
    assert not m.line(b'{"type":"track","userId":"u/1","messageId":"m2"}')[0]
    # undecodable: the value raw, JSON-escaped, or case-folded for a trait
    assert m.line(b'{"userId": "u/1\\"x", "cut')[0]
    assert m.line(b"garbage AB@C.DE garbage")[0]
    assert not m.line(b'{"userId": "u/1x", "cut')[0]
    assert not matcher(identity("user_id", "U")).line(b"{u-cut")[0]  # ids keep their case


def test_matcher_rows():
    m = matcher(identity("user_id", "42"), identity("email", "a@b.c"))
    t = pa.table(
        {
            "message_id": ["m1", "m2", "m3", "m4", None],
            "user_id": ["42", "7", None, "7", None],
            "context_traits_email": [None, None, " A@B.C", None, None],
        }
    )
    assert m.row_mask(t, {m.mid_hash("m4")}).to_pylist() == [True, False, True, True, False]


def test_undecodable_matching_works_from_hashes_alone(tmp_path):
    """What ``resume`` has: the needles' hashes, no clear value."""
    idents = (identity("email", "Secret@Mail.org"),)
    restored = Matcher(
        KEY,
        [identity_hash(KEY, i) for i in idents],
        sorted(needles_of(KEY, idents), key=lambda n: n.digest),
    )
    data = gzip.compress(b'{"cut": "secret@mail.ORG')
    assert restored.line(gzip.decompress(data))[0]
