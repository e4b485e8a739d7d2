import orjson
import pytest

from datalake_assets.spec import types as T
from datalake_assets.spec.messages import Rejected, flatten, parse_line
from datalake_assets.spec.schema import plan_table


def line(**kw):
    base = {
        "type": "track",
        "event": "Order Completed",
        "messageId": "m1",
        "anonymousId": "a1",
        "receivedAt": "2026-11-21T10:00:00.000Z",
    }
    base.update(kw)
    return orjson.dumps({k: v for k, v in base.items() if v is not ...})


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b'{"type": "track"', "invalid_json"),
        (b"\xff\xfe{}", "invalid_json"),
        (b'{"a": "\x00"}', "invalid_json"),
        (b"[1, 2]", "not_an_object"),
        (b'"text"', "not_an_object"),
        (line(type=...), "missing_type"),
        (line(type="bogus"), "unknown_type"),
        (line(type=3), "unknown_type"),
        (line(messageId=...), "missing_message_id"),
        (line(messageId=""), "missing_message_id"),
        (line(messageId={"a": 1}), "invalid_message_id"),
        (line(anonymousId=...), "missing_user_id"),
        (line(event=...), "missing_event"),
        (line(event="   "), "missing_event"),
        (line(event="🎉"), "unusable_event_name"),
        (b"{" + b'"a":' * 0 + b'"x": "' + b"y" * 40_000 + b'"}', "oversize"),
    ],
)
def test_rejected_lines(raw, reason):
    with pytest.raises(Rejected) as e:
        parse_line(raw)
    assert e.value.reason == reason


def test_message_is_flattened_with_segment_names():
    m = parse_line(
        line(
            userId=12345,
            context={"library": {"name": "analytics.js"}, "ip": "1.2.3.4"},
            properties={"orderId": "o1", "products": [{"sku": 1}], "nested": {"deep": {"x": 1.5}}},
            integrations={"All": True},
        )
    )
    assert m.table == "order_completed" and m.type == "track" and m.message_id == "m1"
    assert m.received_at == T.parse_timestamp("2026-11-21T10:00:00Z")
    assert m.flat["context_library_name"] == "analytics.js"
    assert m.flat["properties_order_id"] == "o1"
    assert m.flat["properties_products"] == '[{"sku":1}]'  # arrays as JSON text
    assert m.flat["properties_nested_deep_x"] == 1.5
    assert m.flat["integrations_all"] is True
    assert m.flat["user_id"] == 12345
    assert len(m.kinds) == len(m.flat)


def test_numeric_message_id_becomes_text():
    assert parse_line(line(messageId=42)).message_id == "42"


def test_nulls_and_empty_objects_make_no_columns():
    m = parse_line(line(properties={"a": None, "b": {}, "c": 1}))
    assert "properties_a" not in m.flat and "properties_b" not in m.flat
    assert m.flat["properties_c"] == 1


def test_integers_beyond_64_bits_keep_their_digits():
    m = parse_line(
        b'{"type":"identify","messageId":"m","userId":"u","receivedAt":"2026-11-21T10:00:00Z",'
        b'"traits":{"big":123456789012345678901234567890}}'
    )
    assert m.flat["traits_big"] == "123456789012345678901234567890"
    assert m.kinds[list(m.flat).index("traits_big")] == T.K_BIGNUM


def test_nan_and_infinity_are_accepted_as_non_finite_numbers():
    m = parse_line(
        b'{"type":"identify","messageId":"m","userId":"u","receivedAt":"2026-11-21T10:00:00Z",'
        b'"traits":{"x":NaN,"y":-Infinity}}'
    )
    kinds = dict(zip(m.flat, m.kinds))
    assert kinds["traits_x"] == T.K_NONFINITE and kinds["traits_y"] == T.K_NONFINITE


def test_deep_nesting_is_cut_to_json_text():
    deep: dict = {"v": 1}
    for _ in range(100):
        deep = {"n": deep}
    flat, _, problems, _ = flatten({"properties": deep}, max_depth=4)
    ((col, value),) = flat.items()
    assert col == "properties_n_n_n"
    assert value.startswith('{"n":') and value.endswith("}")
    assert not problems


def test_collisions_keep_canonical_key_and_quarantine_the_other_value():
    flat, _, problems, _ = flatten(
        {"properties": {"firstName": "A", "first_name": "B", "FirstName": "B"}}
    )
    assert flat["properties_first_name"] == "B"  # canonical snake_case spelling wins
    lost = sorted((p[1], p[2]) for p in problems)
    assert lost == [("A", "column_name_collision: properties/firstName")]


def test_unusable_keys_are_quarantined_not_merged():
    flat, _, problems, _ = flatten({"properties": {"": 1, "%": 2, "ok": 3}})
    assert flat == {"properties_ok": 3}
    assert sorted(p[0] for p in problems) == ["properties/", "properties/%"]
    assert {p[2] for p in problems} == {"unusable_key"}


def test_top_level_partition_key_names_are_renamed():
    flat, *_ = flatten({"day": "monday", "hr": 3})
    assert flat == {"day_field": "monday", "hr_field": 3}


def test_plan_table_appends_new_columns_and_widens():
    existing = [("message_id", "string"), ("properties_price", "bigint")]
    c = [0] * T.N_KINDS
    c[T.K_FLOAT] = 3
    s = [0] * T.N_KINDS
    s[T.K_STR] = 2
    ts = [0] * T.N_KINDS
    ts[T.K_INT] = 1  # an int where a timestamp is fixed: misfit
    change = plan_table(
        "t", existing, {"properties_price": c, "properties_a": s, "received_at": ts}
    )
    assert change.columns == [
        ("message_id", "string"),
        ("properties_price", "double"),
        ("properties_a", "string"),
        ("received_at", "timestamp"),
    ]
    assert change.widened == [("properties_price", "bigint", "double")]
    assert change.new_columns == [("properties_a", "string"), ("received_at", "timestamp")]
    assert change.expected_misfits == {"received_at": 1}
    assert "received_at" in change.cast_columns and "properties_a" not in change.cast_columns


R = b'"receivedAt":"2026-11-21T10:00:00Z",'


def test_missing_or_unparseable_received_at_is_quarantined_with_its_reason():
    with pytest.raises(Rejected, match="missing_received_at"):
        parse_line(b'{"type":"identify","messageId":"m","userId":"u"}')
    with pytest.raises(Rejected, match="invalid_received_at"):
        parse_line(b'{"type":"identify","messageId":"m","userId":"u","receivedAt":"yesterday"}')
    with pytest.raises(Rejected, match="invalid_received_at"):
        parse_line(b'{"type":"identify","messageId":"m","userId":"u","receivedAt":1700000000}')


def test_nesting_beyond_the_limit_is_quarantined_not_a_crash():
    line = (
        b'{"type":"identify","messageId":"m","userId":"u",'
        + R
        + b'"traits":'
        + b'{"n":' * 1020
        + b"1"
        + b"}" * 1021
    )
    with pytest.raises(Rejected, match="nesting_too_deep"):
        parse_line(line)
    ok = (
        b'{"type":"identify","messageId":"m","userId":"u",'
        + R
        + b'"traits":'
        + b'{"n":' * 150
        + b"1"
        + b"}" * 151
    )
    assert parse_line(ok).flat  # 150 levels: cut to JSON text at depth 16, kept


def test_wide_integers_keep_their_digits_inside_arrays_and_cut_objects():
    big = b"1180591620717411303425"
    m = parse_line(
        b'{"type":"identify","messageId":"m","userId":"u",'
        + R
        + b'"traits":{"a":['
        + big
        + b',1],"o":'
        + b'{"n":' * 20
        + big
        + b"}" * 20
        + b"}}"
    )
    assert m.flat["traits_a"] == "[" + big.decode() + ",1]"
    cut = [v for k, v in m.flat.items() if k.startswith("traits_o")]
    assert len(cut) == 1 and big.decode() in cut[0]


def test_a_numeric_message_id_beyond_64_bits_is_rejected_not_rounded_into_a_collision():
    for mid in (b"1180591620717411303424", b"1180591620717411303425"):
        with pytest.raises(Rejected, match="invalid_message_id"):
            parse_line(b'{"type":"identify","messageId":' + mid + b',"userId":"u",' + R[:-1] + b"}")
    assert (
        parse_line(b'{"type":"identify","messageId":12345,"userId":"u",' + R[:-1] + b"}").message_id
        == "12345"
    )


def test_an_object_under_an_unusable_key_is_quarantined_as_json():
    _, _, problems, _ = flatten({"properties": {"": {"a": True}}})
    assert [(p[1], p[2]) for p in problems] == [('{"a":true}', "unusable_key")]
