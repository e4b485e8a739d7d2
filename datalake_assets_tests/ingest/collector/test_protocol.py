"""The collector's protocol rules: stamps, clock skew, batches, limits, decoding, write keys."""

from __future__ import annotations

import base64
import gzip
import json
import re
from datetime import UTC, datetime

import orjson
import pytest

from datalake_assets.ingest.collector import clock_skew, message_rules, protocol
from datalake_assets_tests.ingest.collector.helpers import KEY, track

RECEIVED = datetime(2026, 11, 21, 10, 0, 10, 123456, tzinfo=UTC)
LIMITS = protocol.Limits()


def run(body, endpoint_type=None, limits=LIMITS):
    out = message_rules.process(body, endpoint_type, RECEIVED, limits)
    return [orjson.loads(line) for line in out.lines], out


def test_stamps_received_at_and_message_ids():
    msgs, out = run({"batch": [track("keep"), track(), track(""), track(42)]})
    assert [m["receivedAt"] for m in msgs] == ["2026-11-21T10:00:10.123Z"] * 4
    assert msgs[0]["messageId"] == "keep" and msgs[3]["messageId"] == 42
    assert re.fullmatch(r"[0-9a-f-]{36}", msgs[1]["messageId"])
    assert msgs[1]["messageId"] != msgs[2]["messageId"] and msgs[2]["messageId"]
    assert out.total == 4 and not out.rejected
    # a client's receivedAt never wins over the server's clock
    (m,), _ = run({"batch": [track("x", receivedAt="1999-01-01T00:00:00Z")]})
    assert m["receivedAt"] == "2026-11-21T10:00:10.123Z"


@pytest.mark.parametrize(
    "sent, expected",
    [
        # receivedAt - (sentAt - originalTimestamp): the device clock is 5 s late
        (
            {"timestamp": "2026-11-21T09:59:55.000Z", "sentAt": "2026-11-21T10:00:00.000Z"},
            {
                "timestamp": "2026-11-21T10:00:05.123Z",
                "originalTimestamp": "2026-11-21T09:59:55.000Z",
            },
        ),
        # offsets and the batch's sentAt work the same; only the message's own sentAt counts first
        (
            {"timestamp": "2026-11-21T11:59:55+02:00", "sentAt": "2026-11-21T10:00:00Z"},
            {
                "timestamp": "2026-11-21T10:00:05.123Z",
                "originalTimestamp": "2026-11-21T11:59:55+02:00",
            },
        ),
        # an originalTimestamp alone is the device time
        (
            {"originalTimestamp": "2026-11-21T09:00:00Z", "sentAt": "2026-11-21T09:00:01Z"},
            {"timestamp": "2026-11-21T10:00:09.123Z", "originalTimestamp": "2026-11-21T09:00:00Z"},
        ),
        # both sent: the client's decision, kept
        (
            {
                "timestamp": "2026-01-01T00:00:00Z",
                "originalTimestamp": "2025-12-31T23:59:00Z",
                "sentAt": "2026-11-21T10:00:00Z",
            },
            {"timestamp": "2026-01-01T00:00:00Z", "originalTimestamp": "2025-12-31T23:59:00Z"},
        ),
        # no sentAt: nothing to correct with, the client's timestamp is kept
        ({"timestamp": "2026-11-20T08:00:00Z"}, {"timestamp": "2026-11-20T08:00:00Z"}),
        # no time at all: the server's
        ({}, {"timestamp": "2026-11-21T10:00:10.123Z"}),
        # unparseable: kept as sent, uncorrected
        ({"timestamp": "yesterday", "sentAt": "2026-11-21T10:00:00Z"}, {"timestamp": "yesterday"}),
        ({"timestamp": "2026-11-21T10:00:00Z", "sentAt": 5}, {"timestamp": "2026-11-21T10:00:00Z"}),
    ],
)
def test_clock_skew_correction(sent, expected):
    (m,), _ = run({"batch": [track("a", **sent)]})
    assert {k: m.get(k) for k in expected} == expected
    if "originalTimestamp" not in expected:
        assert "originalTimestamp" not in m


@pytest.mark.parametrize(
    "text",
    [
        "2026-11-21T10:00:00Z",
        "2026-11-21T10:00:00.1Z",
        "2026-11-21T10:00:00.123Z",
        "2026-11-21T10:00:00.123456789Z",
        "2026-11-21T10:00:00.123+00:00",
        "2026-11-21T10:00:00+00:00",
        "2026-11-21T10:00:00.123+01:00",
        "2026-11-21 10:00:00Z",
        "2026-11-21T10:00:00",
        "2026-11-21",
        "2026-02-30T10:00:00Z",
        "2026-11-21T25:00:00.000Z",
        "2026-11-21T10:00:00.Z",
        "2026-11-21T10:00:00.12aZ",
        "2026-11-21T10:00:00.١٢٣Z",
        "0001-01-01T00:00:00.000Z",
        "9999-12-31T23:59:59.999Z",
        "2026-11-21T10:00:00z",
        "",
        "soon",
    ],
)
def test_fast_time_parse_agrees_with_the_sync(text):
    from datalake_assets.spec.types import parse_timestamp

    assert clock_skew.time_us(text) == parse_timestamp(text)
    assert clock_skew.time_us(text) == parse_timestamp(text)  # cached the second time


def test_batch_sent_at_context_and_integrations_merge_into_every_message():
    body = {
        "writeKey": KEY,
        "sentAt": "2026-11-21T10:00:00.000Z",
        "context": {"ip": "10.0.0.1", "library": {"name": "batch-lib"}},
        "integrations": {"All": False},
        "batch": [
            track("a", timestamp="2026-11-21T09:59:59.000Z"),
            track(
                "b",
                context={"ip": "10.9.9.9", "locale": "fr"},
                integrations={"Mixpanel": True},
                sentAt="2026-11-21T10:00:01.000Z",
                timestamp="2026-11-21T10:00:00.000Z",
                writeKey="leaked",
            ),
            track("c", context="not an object"),
        ],
    }
    (a, b, c), out = run(body)
    assert a["context"] == {"ip": "10.0.0.1", "library": {"name": "batch-lib"}}
    assert a["integrations"] == {"All": False} and a["sentAt"] == "2026-11-21T10:00:00.000Z"
    assert a["timestamp"] == "2026-11-21T10:00:09.123Z"
    # the message's own keys win; its own sentAt is used; no write key is ever archived
    assert b["context"] == {"ip": "10.9.9.9", "library": {"name": "batch-lib"}, "locale": "fr"}
    assert b["integrations"] == {"All": False, "Mixpanel": True}
    assert b["sentAt"] == "2026-11-21T10:00:01.000Z"
    assert b["timestamp"] == "2026-11-21T10:00:09.123Z"
    archived = b"".join(out.lines)
    assert "writeKey" not in b and b"leaked" not in archived and KEY.encode() not in archived
    assert c["context"] == "not an object"


def test_bad_messages_are_rejected_alone_with_their_index():
    big = track("big", properties={"blob": "x" * 40000})
    body = {
        "batch": [
            track("ok1"),
            7,
            {"userId": "u"},
            track("t", type="bogus"),
            track("nouser", userId=None),
            track("noevent", event=""),
            big,
            track("ok2", type="identify", event=None),
        ]
    }
    msgs, out = run(body)
    assert [m["messageId"] for m in msgs] == ["ok1", "ok2"]
    assert [(r["index"], r["code"]) for r in out.rejected] == [
        (1, "not_an_object"),
        (2, "missing_type"),
        (3, "unknown_type"),
        (4, "missing_user_id"),
        (5, "missing_event"),
        (6, "oversize"),
    ]
    assert all(r["message"] for r in out.rejected)
    status, reply = message_rules.reply_for(out, batch=True)
    assert status == 200 and reply["success"] and reply["accepted"] == 2
    assert [r["index"] for r in reply["rejected"]] == [1, 2, 3, 4, 5, 6]
    # all rejected: 400, with the list
    _, none = run({"batch": [5, 6]})
    status, reply = message_rules.reply_for(none, batch=True)
    assert status == 400 and reply["code"] == "invalid_batch" and len(reply["rejected"]) == 2


def test_the_message_limit_applies_to_the_archived_line():
    limits = protocol.Limits(max_message_bytes=400)
    m = track("m", properties={"p": "x" * 150})
    size = len(orjson.dumps(m))
    assert size < 400
    # the batch context merged into it pushes it over
    _, out = run({"batch": [m], "context": {"big": "y" * (400 - size)}}, limits=limits)
    assert [r["code"] for r in out.rejected] == ["oversize"]


def test_single_calls_take_the_endpoint_type():
    (m,), _ = run({"userId": "u", "traits": {"a": 1}, "type": "track"}, endpoint_type="identify")
    assert m["type"] == "identify"
    _, out = run({"event": "x"}, endpoint_type="track")
    assert message_rules.reply_for(out, batch=False) == (
        400,
        {"success": False, "code": "missing_user_id", "message": "missing user id"},
    )


def test_whole_requests_refused():
    with pytest.raises(protocol.RequestError) as e:
        message_rules.process({"batch": {"a": 1}}, None, RECEIVED, LIMITS)
    assert (e.value.status, e.value.code) == (400, "invalid_batch")
    with pytest.raises(protocol.RequestError, match="missing 'batch'"):
        message_rules.process({}, None, RECEIVED, LIMITS)
    for raw in (b"{nope", b"[1, 2]", b"", b'"text"'):
        with pytest.raises(protocol.RequestError) as e:
            protocol.parse_json(raw)
        assert (e.value.status, e.value.code) == (400, "invalid_json")


def test_wide_integers_stay_exact_and_nan_becomes_null():
    wide = 123456789012345678901234567890
    raw = (
        b'{"batch": [{"type": "track", "event": "e", "userId": "u", "messageId": "m", '
        b'"n": 123456789012345678901234567890, '
        b'"f": NaN, "g": 1e20}]}'
    )
    assert protocol.parse_json(raw)["batch"][0]["n"] == wide  # NaN: the exact parser
    # orjson, the fast path, rounds wide integers to floats: the body is read again exactly
    assert protocol.parse_json(raw.replace(b"NaN", b"1"))["batch"][0]["n"] != wide
    for body in (raw, raw.replace(b"NaN", b"1")):
        (line,) = message_rules.process_body(body, None, RECEIVED, LIMITS).lines
        out = json.loads(line)  # valid JSON, exact digits
        assert out["n"] == wide and out["g"] == 1e20
    assert json.loads(line)["f"] == 1
    (line,) = message_rules.process_body(raw, None, RECEIVED, LIMITS).lines
    assert json.loads(line)["f"] is None


def test_body_decoding():
    limits = protocol.Limits(max_batch_bytes=2000)
    data = json.dumps({"batch": []}).encode()
    assert protocol.decode_body(gzip.compress(data), "gzip", limits) == data
    two = gzip.compress(data[:5]) + gzip.compress(data[5:])  # multi-member gzip
    assert protocol.decode_body(two, "gzip", limits) == data
    for raw, enc, status, code in [
        (gzip.compress(b" " * 5000), "gzip", 400, "batch_too_large"),  # small gzip, big body
        (b" " * 2001, None, 400, "batch_too_large"),
        (b"not gzip", "gzip", 400, "invalid_body"),
        (gzip.compress(data)[:-12], "gzip", 400, "invalid_body"),
        (data, "br", 415, "unsupported_encoding"),
    ]:
        with pytest.raises(protocol.RequestError) as e:
            protocol.decode_body(raw, enc, limits)
        assert (e.value.status, e.value.code) == (status, code)


@pytest.mark.parametrize(
    "header, key",
    [
        (None, None),
        ("", None),
        ("Basic " + base64.b64encode(b"abc:").decode(), "abc"),
        ("basic " + base64.b64encode(b"abc").decode(), "abc"),
        ("Basic " + base64.b64encode(b"abc:ignored").decode(), "abc"),
        ("Bearer abc", ""),
        ("Basic !!!", ""),
    ],
)
def test_write_key_from_header(header, key):
    assert protocol.write_key_from_header(header) == key
