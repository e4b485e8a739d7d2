"""What an identity is (``spec/identity.py``): the kinds, normalization, links, the keyed hash,
the fast ``identity_hashes`` against ``identities_of``, and hostile values."""

from __future__ import annotations

import random

import pytest

from datalake_assets.spec.identity import (
    ID,
    MAX_IDENTITY_CHARS,
    Identity,
    IdentityError,
    identities_of,
    identity,
    identity_hash,
    identity_hashes,
    links_of,
    normalize,
    parse_identity,
)

KEY = b"k" * 32


def test_user_anonymous_and_previous_ids_share_one_namespace():
    assert identity("user_id", "X") == identity("anonymousId", "X") == identity("previous_id", "X")
    assert identity("userId", "X") == Identity(ID, "X")
    assert identity("user_id", "X") != identity("user_id", "x")  # ids are case-sensitive
    assert identity("user_id", 42) == identity("user_id", "42")


def test_traits_are_trimmed_and_case_folded():
    assert identity("email", "  Ann@Example.COM ") == Identity("trait:email", "ann@example.com")
    assert identity("trait:email", "a@b.c") == identity("email", "A@B.C")


@pytest.mark.parametrize(
    "value,expected",
    [
        ("u1", "u1"),
        (42, "42"),
        (42.0, "42"),
        (1.5, "1.5"),
        ("", None),
        (None, None),
        (True, None),
        ({"a": 1}, None),
        ([1], None),
        (2.0**64, None),
        (float("nan"), "nan"),
    ],
)
def test_normalize(value, expected):
    assert normalize(ID, value) == expected


@pytest.mark.parametrize(
    "text",
    [
        "user_id=a'b\"c",
        "user_id=../../etc/passwd",
        "user_id=*",
        "user_id=%",
        "email=a=b@c",
        "user_id= spaced ",
        "user_id=\x00nul",
        "user_id=🙂",
    ],
)
def test_hostile_but_valid_values_are_taken_verbatim(text):
    kind, _, value = text.partition("=")
    ident = parse_identity(text)
    assert ident.value == (value if kind == "user_id" else value.strip().casefold())
    assert len(identity_hash(KEY, ident)) == 32


@pytest.mark.parametrize(
    "text,message",
    [
        ("nokind", "expected KIND=VALUE"),
        ("user_id=", "empty"),
        ("../x=1", "unknown identity kind"),
        ("e mail=x", "unknown identity kind"),
        ("trait:=x", "unknown identity kind"),
        ("user_id=" + "x" * (10 * 1024 * 1024), "characters; at most"),
    ],
)
def test_unusable_requests_fail_clearly_without_the_value(text, message):
    with pytest.raises(IdentityError, match=message) as e:
        parse_identity(text)
    assert "x" * 50 not in str(e.value)  # never the value itself


def test_identity_rejects_values_that_are_not_text():
    for bad in (None, True, 1.5, ["u1"], {"id": 1}):
        with pytest.raises(IdentityError):
            identity("user_id", bad)
    assert "secret" not in repr(identity("email", "secret@x.io"))


def test_identities_of_reads_ids_and_traits():
    m = {
        "type": "identify",
        "userId": "u1",
        "anonymousId": "a1",
        "traits": {"email": "A@x.io", "name": "Ann"},
        "context": {"traits": {"email": "other@x.io"}},
    }
    assert identities_of(m) == {
        Identity(ID, "u1"),
        Identity(ID, "a1"),
        Identity("trait:email", "a@x.io"),
        Identity("trait:email", "other@x.io"),
    }
    # traits of a non-identify call are not traits of the person; context.traits are
    track = {**m, "type": "track"}
    assert Identity("trait:email", "a@x.io") not in identities_of(track)
    assert identities_of({"userId": "x" * (MAX_IDENTITY_CHARS + 1)}) == set()
    assert identities_of({"userId": None, "anonymousId": "", "context": "nope"}) == set()
    assert identities_of(m, traits=()) == {Identity(ID, "u1"), Identity(ID, "a1")}


def test_only_identify_and_alias_link():
    ids = {Identity(ID, "u1"), Identity(ID, "a1"), Identity("trait:email", "e")}
    assert len(links_of({"type": "identify"}, ids)) == 3
    assert links_of({"type": "alias"}, {Identity(ID, "a")}) == set()
    assert links_of({"type": "track"}, ids) == set()  # a shared device would chain strangers


def test_the_hash_is_keyed():
    ident = identity("email", "a@b.c")
    assert identity_hash(KEY, ident) != identity_hash(b"j" * 32, ident)
    assert identity_hash(KEY, ident) != identity_hash(KEY, identity("user_id", "a@b.c"))


def _random_value(rnd: random.Random) -> object:
    pick = rnd.randrange(10)
    if pick == 0:
        return None
    if pick == 1:
        return rnd.choice([0, 42, -7, 2**70, 1.0, 3.5, float("inf"), True, False])
    if pick == 2:
        return rnd.choice(["", " ", "A@B.c", " a@b.C ", "x" * (MAX_IDENTITY_CHARS + 1)])
    if pick == 3:
        return rnd.choice([{"email": "n@x"}, ["u"], {"a": {"b": 1}}])
    return rnd.choice(["u1", "u2", "U1", "a1", "42", "e@x.io", " E@X.io", "\ud800x", "🙂"])


def test_identity_hashes_equals_hashing_identities_of_on_random_messages():
    rnd = random.Random(16)
    cache: dict = {}
    for _ in range(3000):
        m: dict = {}
        for field in ("userId", "anonymousId", "previousId"):
            if rnd.random() < 0.6:
                m[field] = _random_value(rnd)
        m["type"] = rnd.choice(["identify", "track", "alias", None])
        if rnd.random() < 0.5:
            m["traits"] = rnd.choice(
                [{"email": _random_value(rnd)}, "x", None, {"phone": _random_value(rnd)}]
            )
        if rnd.random() < 0.5:
            m["context"] = rnd.choice(
                [
                    {"traits": {"email": _random_value(rnd), "phone": _random_value(rnd)}},
                    {"traits": None},
                    "ctx",
                    None,
                ]
            )
        traits = rnd.choice([("email",), ("email", "phone"), ()])
        expected = {identity_hash(KEY, i) for i in identities_of(m, traits)}
        assert identity_hashes(m, traits, KEY, cache) == expected, m
