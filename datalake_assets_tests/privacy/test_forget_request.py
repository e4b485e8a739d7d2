"""Privacy requests: the shapes they come in, and errors that never echo a value."""

from datetime import UTC, datetime

import pytest

from datalake_assets.privacy.forget_request import (
    ForgetRequest,
    RequestError,
    load_request_file,
    request_from_dict,
)
from datalake_assets.spec.identity import IdentityError, identity


def test_request_from_dict_shapes_and_defaults():
    r = request_from_dict(
        {
            "identities": [
                "user_id=u1",
                "email= A@B.com ",
                {"kind": "anonymous_id", "value": "a-9"},
                "userId=u1",
            ]
        }
    )
    assert r.identities == (
        identity("id", "a-9"),
        identity("id", "u1"),
        identity("email", "a@b.com"),
    )
    assert (r.follow_links, r.sources, r.erase, r.suppress) == (False, (), True, True)
    assert len(r.request_id) == 32 and r.received_at.tzinfo is not None
    r = request_from_dict(
        {
            "request_id": "T-1_x",
            "identities": ["user_id=42"],
            "follow_links": True,
            "sources": ["web", "web"],
            "erase": False,
            "received_at": "2026-11-20T10:00:00Z",
        }
    )
    assert (r.request_id, r.sources, r.erase, r.follow_links) == ("T-1_x", ("web",), False, True)
    assert r.received_at == datetime(2026, 11, 20, 10, tzinfo=UTC)


@pytest.mark.parametrize(
    "bad, words",
    [
        ({"identities": ["user_id=secret-value"], "colour": 1}, "unknown request keys"),
        ({"identities": ["secret-value"]}, "KIND=VALUE"),
        ({"identities": [{"kind": "user_id"}]}, "identities[0]"),
        ({"identities": ["user_id=secret-value", "user_id="]}, "identities[1]"),
        ({"identities": ["user_id=secret-value"], "follow_links": "yes"}, "follow_links"),
        ({"identities": ["user_id=secret-value"], "request_id": "a b"}, "request_id"),
        ([], "object"),
    ],
)
def test_request_errors_say_where_never_the_value(bad, words):
    with pytest.raises((RequestError, IdentityError)) as e:
        request_from_dict(bad)
    assert words in str(e.value) and "secret-value" not in str(e.value)


def test_request_files_json_and_text(tmp_path):
    (tmp_path / "ticket-9.json").write_text('{"identities": ["email=x@y.z"], "erase": false}')
    r = load_request_file(str(tmp_path / "ticket-9.json"))
    assert (r.request_id, r.erase, r.identities) == (
        "ticket-9",
        False,
        (identity("email", "x@y.z"),),
    )
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
