"""The Glue backend against moto's in-process Glue (no network), plus AWS faults injected at
the botocore layer (throttling, access denied) and a Stubber for multi-page listings."""

from __future__ import annotations

import json
import threading
import time
from types import SimpleNamespace

import boto3
import pytest
from botocore.stub import Stubber

from datalake_assets.catalog.catalog_interface import CatalogError, PartitionSpec
from datalake_assets.catalog.glue import GlueCatalog
from datalake_assets.catalog.glue_api import INPUT_FORMAT, OUTPUT_FORMAT, SERDE
from datalake_assets.catalog.register import read_schemas, register_sync
from datalake_assets.catalog.reports import register_quarantine, register_reports
from datalake_assets.spec.layout import ArchiveHour, hour_range
from datalake_assets.spec.types import TYPES, widen

LAKE = "s3://lake-bucket/segment"
H9, H10, H11 = (ArchiveHour.parse(f"2026-11-21T{h}") for h in ("09", "10", "11"))


@pytest.fixture()
def sleeps():
    return []


@pytest.fixture()
def glue(mocked_aws, sleeps):
    return GlueCatalog(region="us-east-1", sleep=sleeps.append)


def raw(catalog: GlueCatalog):
    """A plain client on the same (mocked) account, to look at what was registered."""
    return boto3.client("glue", region_name="us-east-1")


def inject(client, operation: str, code: str, message: str = "", times: int = 1) -> list:
    """Make the next ``times`` calls of ``operation`` fail with an AWS error, before they reach
    the (mocked) service. Returns the list of intercepted calls."""
    calls: list = []

    def handler(**kwargs):
        calls.append(kwargs.get("params"))
        if len(calls) > times:
            return None
        http = SimpleNamespace(status_code=400, headers={})
        return http, {
            "Error": {"Code": code, "Message": message},
            "ResponseMetadata": {"HTTPStatusCode": 400},
        }

    client.meta.events.register_first(f"before-call.glue.{operation}", handler)
    return calls


def count_calls(client, operation: str) -> list:
    sizes: list = []

    def handler(params, **kwargs):
        sizes.append(params)

    client.meta.events.register(f"provide-client-params.glue.{operation}", handler)
    return sizes


def sync(catalog, tables, partitions, **kw):
    args = dict(
        database="web",
        table_prefix="",
        lake_root=LAKE,
        source_dir="web",
        date_layout="day_hour",
        quarantine_hours=(),
    )
    args.update(kw)
    return register_sync(catalog, tables=tables, partitions=partitions, **args)


def assert_athena_compatible(client, database, table):
    """Athena's rule for partitioned Parquet tables: every partition column exists in the table
    with the same type or one Athena casts to it (our lattice), in the same order."""
    t = client.get_table(DatabaseName=database, Name=table)["Table"]
    table_cols = [(c["Name"], c["Type"]) for c in t["StorageDescriptor"]["Columns"]]
    for p in client.get_partitions(DatabaseName=database, TableName=table)["Partitions"]:
        cols = [(c["Name"], c["Type"]) for c in p["StorageDescriptor"]["Columns"]]
        assert [n for n, _ in cols] == [n for n, _ in table_cols[: len(cols)]], p["Values"]
        for (name, ptype), (_, ttype) in zip(cols, table_cols):
            assert ptype in TYPES and widen(ptype, ttype) == ttype, (p["Values"], name)


# ------------------------------------------------------------------------------- basics


def test_tables_and_partitions_are_registered_as_external_parquet(glue):
    cols = [
        ("message_id", "string"),
        ("received_at", "timestamp"),
        ("revenue", "double"),
        ("quantity", "bigint"),
        ("gift", "boolean"),
    ]
    result = sync(
        glue,
        {"order_completed": cols, "pages": [("message_id", "string")]},
        {"order_completed": [H9, H10], "pages": [H10]},
    )
    assert result["order_completed"]["catalog_table"] == "order_completed"
    assert result["order_completed"]["partitions_added"] == 2
    assert result["order_completed"]["partitions"] == 2
    assert result["order_completed"]["is_new"] is True

    client = raw(glue)
    assert client.get_database(Name="web")["Database"]["Name"] == "web"
    t = client.get_table(DatabaseName="web", Name="order_completed")["Table"]
    sd = t["StorageDescriptor"]
    assert t["TableType"] == "EXTERNAL_TABLE"
    assert t["Parameters"]["classification"] == "parquet"
    assert t["Parameters"]["EXTERNAL"] == "TRUE"
    assert [(k["Name"], k["Type"]) for k in t["PartitionKeys"]] == [
        ("day", "string"),
        ("hr", "string"),
    ]
    assert [(c["Name"], c["Type"]) for c in sd["Columns"]] == cols
    assert sd["Location"] == f"{LAKE}/data/web/segment_type=order_completed"
    assert (sd["InputFormat"], sd["OutputFormat"]) == (INPUT_FORMAT, OUTPUT_FORMAT)
    assert sd["SerdeInfo"]["SerializationLibrary"] == SERDE
    parts = client.get_partitions(DatabaseName="web", TableName="order_completed")["Partitions"]
    root = f"{LAKE}/data/web/segment_type=order_completed"
    assert sorted((p["Values"], p["StorageDescriptor"]["Location"]) for p in parts) == [
        (["2026-11-21", "09"], f"{root}/day=2026-11-21/hr=09"),
        (["2026-11-21", "10"], f"{root}/day=2026-11-21/hr=10"),
    ]
    assert all(p["StorageDescriptor"]["SerdeInfo"]["SerializationLibrary"] == SERDE for p in parts)
    assert glue.list_tables("web") == ["order_completed", "pages"]
    assert read_schemas(glue, "web", "", ["order_completed", "pages", "screens"]) == {
        "order_completed": cols,
        "pages": [("message_id", "string")],
    }


@pytest.mark.parametrize(
    "layout, keys, values",
    [
        ("day_hour", ["day", "hr"], [["2026-11-21", "09"], ["2026-11-21", "10"]]),
        (
            "year_month_day_hour",
            ["year", "month", "day", "hr"],
            [["2026", "11", "21", "09"], ["2026", "11", "21", "10"]],
        ),
        ("year_month_day", ["year", "month", "day"], [["2026", "11", "21"]]),
        ("day", ["day"], [["2026-11-21"]]),
    ],
)
def test_partition_keys_follow_the_date_layout(glue, layout, keys, values):
    result = sync(
        glue, {"pages": [("message_id", "string")]}, {"pages": [H9, H10]}, date_layout=layout
    )
    assert result["pages"]["partitions_added"] == len(values)
    t = glue.get_table("web", "pages")
    assert t.partition_keys == keys
    parts = glue.list_partitions("web", "pages")
    assert [list(p.values) for p in parts] == values
    path = "/".join(f"{k}={v}" for k, v in zip(keys, values[0]))
    assert parts[0].location == f"{LAKE}/data/web/segment_type=pages/{path}"
    # the layout of an existing table cannot change under it
    other = "day" if layout != "day" else "day_hour"
    with pytest.raises(CatalogError) as err:
        sync(glue, {"pages": [("message_id", "string")]}, {"pages": [H9]}, date_layout=other)
    assert err.value.code == "invalid_settings" and "date_layout" in str(err.value)


# ----------------------------------------------------------------------- schema evolution


def test_schema_evolution_across_three_syncs(glue):
    client = raw(glue)
    # sync 1: a table with two columns
    v1 = [("message_id", "string"), ("amount", "bigint")]
    sync(glue, {"orders": v1}, {"orders": [H9]})
    # sync 2: a new column (appended), amount widens to double
    v2 = [("message_id", "string"), ("amount", "double"), ("coupon", "string")]
    r2 = sync(glue, {"orders": v2}, {"orders": [H10]})
    assert r2["orders"]["new_columns"] == [("coupon", "string")]
    assert r2["orders"]["widened_columns"] == [("amount", "bigint", "double")]
    # sync 3: the caller sends an older, narrower view and another column: never narrowed,
    # the new column goes to the end, coupon is kept although this sync did not see it
    v3 = [("amount", "bigint"), ("message_id", "string"), ("gift", "boolean")]
    r3 = sync(glue, {"orders": v3}, {"orders": [H11]})
    final = [
        ("message_id", "string"),
        ("amount", "double"),
        ("coupon", "string"),
        ("gift", "boolean"),
    ]
    assert r3["orders"]["columns"] == final
    assert r3["orders"]["widened_columns"] == []
    assert glue.get_table("web", "orders").columns == final
    assert read_schemas(glue, "web", "", ["orders"]) == {"orders": final}

    # each partition keeps the types its files were written with (Athena casts per partition),
    # in the table's column order; a column its files lack has the table's type (reads NULL)
    parts = {p.values: list(p.columns) for p in glue.list_partitions("web", "orders")}
    assert parts[("2026-11-21", "09")] == v1
    assert parts[("2026-11-21", "10")] == v2
    assert parts[("2026-11-21", "11")] == [
        ("message_id", "string"),
        ("amount", "bigint"),
        ("coupon", "string"),
        ("gift", "boolean"),
    ]
    assert_athena_compatible(client, "web", "orders")

    # a replay of hour 09 rewrites it with today's schema: its partition follows
    assert sync(glue, {"orders": final}, {"orders": [H9]})["orders"]["partitions_added"] == 0
    parts = {p.values: list(p.columns) for p in glue.list_partitions("web", "orders")}
    assert parts[("2026-11-21", "09")] == final
    assert_athena_compatible(client, "web", "orders")
    # widening to string, the top of the lattice
    r5 = sync(glue, {"orders": [("gift", "string"), ("amount", "string")]}, {})
    assert r5["orders"]["widened_columns"] == [
        ("amount", "double", "string"),
        ("gift", "boolean", "string"),
    ]
    assert_athena_compatible(client, "web", "orders")


def test_re_adding_an_hour_creates_no_second_partition(glue):
    cols = [("message_id", "string")]
    first = sync(glue, {"pages": cols}, {"pages": [H9, H10]})
    again = sync(glue, {"pages": cols}, {"pages": [H10, H9, H10]})
    assert (first["pages"]["partitions_added"], again["pages"]["partitions_added"]) == (2, 0)
    assert glue.partition_count("web", "pages") == 2
    # nothing changed, so nothing was updated either
    updates = count_calls(glue.client, "BatchUpdatePartition")
    sync(glue, {"pages": cols}, {"pages": [H9]})
    assert updates == []


def test_prefix_or_database_per_source(glue):
    cols = [("message_id", "string")]
    # two sources in one database, told apart by their prefixes
    sync(
        glue,
        {"pages": cols},
        {"pages": [H9]},
        database="lake",
        table_prefix="web",
        source_dir="web",
        quarantine_hours=[H9],
    )
    sync(
        glue,
        {"pages": cols},
        {"pages": [H9]},
        database="lake",
        table_prefix="ios",
        source_dir="ios",
    )
    assert glue.list_tables("lake") == ["ios_pages", "web_pages", "web_quarantine"]
    assert glue.get_table("lake", "ios_pages").location == f"{LAKE}/data/ios/segment_type=pages"
    assert read_schemas(glue, "lake", "web", ["pages"]) == {"pages": cols}
    # or a database per source, no prefix
    sync(glue, {"pages": cols}, {"pages": [H9]}, database="android", source_dir="android")
    assert glue.list_tables("android") == ["pages"]


def test_quarantine_and_sync_reports_tables(glue):
    out = register_quarantine(glue, "web", "", LAKE, "web", ["2026112109", H10, "2026-11-21T10"])
    assert (out["catalog_table"], out["partitions_added"], out["partitions"]) == (
        "quarantine",
        2,
        2,
    )
    q = glue.get_table("web", "quarantine")
    assert q.partition_keys == ["day", "hr"]
    assert ("reason", "string") in q.columns and ("line_number", "bigint") in q.columns
    assert q.location == f"{LAKE}/quarantine/web"
    assert glue.list_partitions("web", "quarantine")[0].location == (
        f"{LAKE}/quarantine/web/day=2026-11-21/hr=09"
    )

    assert register_reports(glue, "segment_datalake_meta", LAKE, "Web-Prod", "2026-11-21") == 1
    assert register_reports(glue, "segment_datalake_meta", LAKE, "Web-Prod", "2026-11-21") == 0
    r = glue.get_table("segment_datalake_meta", "sync_reports")
    assert r.partition_keys == ["source_id", "day"]
    assert ("status", "string") in r.columns and ("start_time", "timestamp") in r.columns
    assert glue.list_partitions("segment_datalake_meta", "sync_reports")[0].location == (
        f"{LAKE}/sync_reports/source_id=Web-Prod/day=2026-11-21"
    )


# ------------------------------------------------------------------------------ volume


def test_more_than_100_partitions_and_tables(glue):
    sizes = count_calls(glue.client, "BatchCreatePartition")
    hours = hour_range(ArchiveHour.parse("2026-11-01T00"), ArchiveHour.parse("2026-11-11T09"))
    assert len(hours) == 250
    result = sync(glue, {"tracks": [("event", "string")]}, {"tracks": hours})
    assert result["tracks"]["partitions_added"] == 250
    assert result["tracks"]["partitions"] == 250
    assert [len(p["PartitionInputList"]) for p in sizes] == [100, 100, 50]  # Glue's limit
    assert (
        sync(glue, {"tracks": [("event", "string")]}, {"tracks": hours})["tracks"][
            "partitions_added"
        ]
        == 0
    )
    assert glue.partition_count("web", "tracks") == 250

    tables = {f"event_{i:03d}": [("event", "string")] for i in range(120)}
    sync(glue, tables, {})
    assert len(glue.list_tables("web")) == 121
    assert len(read_schemas(glue, "web", "", list(tables))) == 120


def test_list_calls_follow_next_token():
    """Every listing is paginated: three pages of each, served by a Stubber (AWS's wire
    format, no network)."""
    client = boto3.client(
        "glue", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    catalog = GlueCatalog(client=client, sleep=lambda s: None)

    def part(v):
        return {"Values": ["2026-11-21", v], "StorageDescriptor": {"Location": "s3://b/p"}}

    def table(n):
        return {
            "Name": n,
            "StorageDescriptor": {"Columns": [], "Location": "s3://b"},
            "PartitionKeys": [],
        }

    with Stubber(client) as stub:
        base = {
            "DatabaseName": "web",
            "TableName": "pages",
            "ExcludeColumnSchema": True,
            "MaxResults": 1000,
        }
        stub.add_response(
            "get_partitions", {"Partitions": [part("01"), part("02")], "NextToken": "p2"}, base
        )
        stub.add_response(
            "get_partitions",
            {"Partitions": [part("03")], "NextToken": "p3"},
            {**base, "NextToken": "p2"},
        )
        stub.add_response(
            "get_partitions", {"Partitions": [part("04")]}, {**base, "NextToken": "p3"}
        )
        assert catalog.partition_count("web", "pages") == 4

        stub.add_response(
            "get_tables",
            {"TableList": [table("b"), table("a")], "NextToken": "t2"},
            {"DatabaseName": "web"},
        )
        stub.add_response(
            "get_tables", {"TableList": [table("c")]}, {"DatabaseName": "web", "NextToken": "t2"}
        )
        assert catalog.list_tables("web") == ["a", "b", "c"]
        stub.assert_no_pending_responses()


# ------------------------------------------------------------------------------- faults


def test_access_denied_is_insufficient_permissions_and_registers_nothing(glue):
    inject(
        glue.client,
        "CreateDatabase",
        "AccessDeniedException",
        "User: arn:aws:iam::123456789012:user/sync is not authorized to perform: "
        "glue:CreateDatabase",
    )
    with pytest.raises(CatalogError) as err:
        sync(glue, {"pages": [("message_id", "string")]}, {"pages": [H9]})
    assert err.value.code == "insufficient_permissions"
    assert str(err.value).startswith("glue:CreateDatabase on database 'web'")
    client = raw(glue)
    assert client.get_databases()["DatabaseList"] == []
    with pytest.raises(client.exceptions.EntityNotFoundException):
        client.get_table(DatabaseName="web", Name="pages")


def test_access_denied_on_a_table_names_the_table(glue):
    glue.ensure_database("web")
    inject(glue.client, "CreateTable", "AccessDeniedException", "not authorized")
    with pytest.raises(CatalogError, match=r"^glue:CreateTable on table 'web\.pages'") as err:
        sync(glue, {"pages": [("message_id", "string")]}, {"pages": [H9]})
    assert err.value.code == "insufficient_permissions"


def test_tables_register_concurrently_and_a_failing_one_leaves_the_others_registered(glue):
    """register_sync registers tables at once (each a few round trips); one table refused
    fails the call with its name, once every other table's registration has ended."""
    glue.ensure_database("web")
    lock, flight = threading.Lock(), {"now": 0, "peak": 0}

    def enter(**kwargs):  # every Glue call holds ~40 ms, as a round trip to AWS would
        with lock:
            flight["now"] += 1
            flight["peak"] = max(flight["peak"], flight["now"])
        time.sleep(0.04)

    def leave(**kwargs):
        with lock:
            flight["now"] -= 1

    glue.client.meta.events.register("before-call.glue.*", enter)
    glue.client.meta.events.register("after-call.glue.*", leave)
    refused = []

    def refuse_t3(params, **kwargs):  # AccessDenied for one table only (the request's body)
        name = json.loads(params["body"])["TableInput"]["Name"]
        if name != "t3":
            return None
        refused.append(name)
        return SimpleNamespace(status_code=400, headers={}), {
            "Error": {"Code": "AccessDeniedException", "Message": "not authorized"},
            "ResponseMetadata": {"HTTPStatusCode": 400},
        }

    glue.client.meta.events.register_first("before-call.glue.CreateTable", refuse_t3)
    tables = {f"t{i}": [("message_id", "string"), (f"c{i}", "bigint")] for i in range(8)}
    with pytest.raises(CatalogError, match=r"^glue:CreateTable on table 'web\.t3'"):
        sync(glue, tables, {t: [H9, H10] for t in tables})
    assert refused == ["t3"]
    assert flight["peak"] >= 2  # tables overlapped
    client = raw(glue)
    for t in tables:
        if t == "t3":
            with pytest.raises(client.exceptions.EntityNotFoundException):
                client.get_table(DatabaseName="web", Name=t)
            continue
        cols = client.get_table(DatabaseName="web", Name=t)["Table"]["StorageDescriptor"]["Columns"]
        assert [(c["Name"], c["Type"]) for c in cols] == tables[t]
        parts = client.get_partitions(DatabaseName="web", TableName=t)["Partitions"]
        assert sorted(p["Values"][1] for p in parts) == ["09", "10"]


def test_throttling_is_retried_with_backoff(glue, sleeps):
    calls = inject(glue.client, "CreateTable", "ThrottlingException", "Rate exceeded", times=2)
    rate = inject(glue.client, "GetTable", "LimitExceeded", "Rate exceeded", times=1)
    result = sync(glue, {"pages": [("message_id", "string")]}, {"pages": [H9]})
    assert result["pages"]["partitions"] == 1
    assert len(calls) == 3 and len(rate) >= 2  # 2 throttled + 1 through; "Rate exceeded" too
    assert sleeps == [0.25, 0.25, 0.5]  # exponential per call: GetTable 1st, CreateTable 1st, 2nd


def test_throttling_gives_up_after_max_attempts(mocked_aws, sleeps):
    glue = GlueCatalog(region="us-east-1", sleep=sleeps.append, max_attempts=3)
    inject(glue.client, "GetDatabase", "ThrottlingException", "Rate exceeded", times=10)
    with pytest.raises(CatalogError) as err:
        glue.ensure_database("web")
    assert err.value.code == "internal" and "ThrottlingException" in str(err.value)
    assert sleeps == [0.25, 0.5]


def test_per_entry_partition_errors(glue, sleeps):
    sync(glue, {"pages": [("message_id", "string")]}, {})

    def entry_errors(code, times):
        state = {"n": 0}

        def handler(params, **kwargs):
            state["n"] += 1
            if state["n"] > times:
                return None
            first = json.loads(params["body"])["PartitionInputList"][0]["Values"]
            http = SimpleNamespace(status_code=200, headers={})
            return http, {
                "Errors": [
                    {
                        "PartitionValues": first,
                        "ErrorDetail": {"ErrorCode": code, "ErrorMessage": "x"},
                    }
                ]
            }

        glue.client.meta.events.register_first("before-call.glue.BatchCreatePartition", handler)

    entry_errors("InternalServiceException", 1)  # transient: that entry is retried
    glue.add_partitions("web", "pages", [PartitionSpec(("2026-11-21", "09"), f"{LAKE}/a")])
    assert glue.partition_count("web", "pages") == 1
    entry_errors("ResourceNumberLimitExceededException", 99)
    with pytest.raises(CatalogError, match="ResourceNumberLimitExceededException") as err:
        glue.add_partitions("web", "pages", [PartitionSpec(("2026-11-21", "10"), f"{LAKE}/b")])
    assert err.value.code == "internal"


def test_hostile_names_never_reach_glue(glue):
    calls = count_calls(glue.client, "CreateDatabase")
    for bad in ("web'; DROP", "a`b", "../etc", "caf\u00e9", "UPPER", "", "a b"):
        with pytest.raises(CatalogError) as err:
            glue.ensure_database(bad)
        assert err.value.code == "invalid_settings"
    with pytest.raises(CatalogError, match="partition value"):
        sync(glue, {"pages": [("message_id", "string")]}, {})
        glue.add_partitions("web", "pages", [PartitionSpec(("2026-11-21'", "09"), f"{LAKE}/a")])
    with pytest.raises(CatalogError, match="location"):
        glue.add_partitions("web", "pages", [PartitionSpec(("2026-11-21", "09"), "s3://b/x'y")])
    assert [c["DatabaseInput"]["Name"] for c in calls] == ["web"]
