import pytest

from datalake_assets.spec import naming


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("firstName", "first_name"),
        ("FirstName", "first_name"),
        ("first_name", "first_name"),
        ("first name", "first_name"),
        ("HTMLParser", "html_parser"),
        ("userID", "user_id"),
        ("product2Id", "product2_id"),
        ("utm.source", "utm_source"),
        ("% complete", "complete"),
        ("Plan Name", "plan_name"),
        ("Café Visited", "cafe_visited"),
        ("../../etc/passwd", "etc_passwd"),
        ("'; DROP TABLE x; --", "drop_table_x"),
        ("a/b", "a_b"),
        ("__already__snake__", "already_snake"),
        ("🎉", ""),
        ("", ""),
        ("123abc", "123abc"),
    ],
)
def test_snake(raw, expected):
    assert naming.snake(raw) == expected


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (("context", "library", "name"), "context_library_name"),
        (("properties", "firstName"), "properties_first_name"),
        (("messageId",), "message_id"),
        (("day",), "day_field"),  # would shadow a partition key
        (("properties", "day"), "properties_day"),
        (("properties", "🎉"), None),
    ],
)
def test_column_name(path, expected):
    assert naming.column_name(path) == expected


def test_long_names_are_cut_with_a_hash_and_stay_distinct():
    a = naming.column_name(("properties", "x" * 300))
    b = naming.column_name(("properties", "x" * 299 + "y"))
    assert a is not None and b is not None
    assert len(a) == len(b) == naming.MAX_COLUMN_NAME
    assert a != b
    assert naming.is_valid_name(a)


@pytest.mark.parametrize(
    ("event", "table"),
    [
        ("Order Completed", "order_completed"),
        ("order_completed", "order_completed"),
        ("Tracks", "track_tracks"),  # reserved table names get a prefix
        ("pages", "track_pages"),
        ("quarantine", "track_quarantine"),
        ("Catalog", "track_catalog"),  # the assets beside the tables: [<slug>, catalog]
        ("Open Hour", "track_open_hour"),
        ("select", "select"),  # SQL keywords are fine as (quoted) names
        ("1st Purchase", "1st_purchase"),
        ("../../etc/passwd", "etc_passwd"),
        ("🎉🎉", None),
    ],
)
def test_event_table_name(event, table):
    assert naming.event_table_name(event) == table


def test_event_table_name_length_limit():
    name = naming.event_table_name("e" * 300)
    assert name is not None and len(name) == naming.MAX_TABLE_NAME and naming.is_valid_name(name)


def test_catalog_table_name_with_prefix():
    assert naming.catalog_table_name("pages", "iOS Prod") == "i_os_prod_pages"
    assert naming.catalog_table_name("pages") == "pages"
