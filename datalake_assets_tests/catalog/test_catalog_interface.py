"""Catalog rules without a catalog: names, column evolution, config round trip, DDL (parsed
with sqlglot in the Hive and Athena dialects), the sync_reports file and NoCatalog."""

from __future__ import annotations

import argparse
import os
from datetime import UTC, datetime

import orjson
import pyarrow.parquet as pq
import pytest
import sqlglot
from sqlglot import exp

from datalake_assets.catalog.catalog_interface import (
    CatalogError,
    InvalidNameError,
    NoCatalog,
    PartitionSpec,
    check_identifier,
    check_location,
    check_partition_value,
)
from datalake_assets.catalog.config import (
    CatalogConfig,
    catalog_from_config,
    config_from_settings,
    hive_spark_conf,
)
from datalake_assets.catalog.ddl import (
    add_partitions_ddl,
    create_table_ddl,
    print_table_ddl,
    scan_partitions,
    table_ddl,
)
from datalake_assets.catalog.evolution import merge_columns, partition_columns
from datalake_assets.catalog.register import read_schemas, register_sync
from datalake_assets.catalog.reports import REPORT_SCHEMA, report_rows, write_report_table
from datalake_assets.settings import LakeSettings, SourceSettings
from datalake_assets.settings.catalog_section import CatalogSettings
from datalake_assets.spec import layout
from datalake_assets.spec.layout import ArchiveHour

DIALECTS = ("hive", "athena")
HOSTILE_NAMES = [
    "a'b",
    'a"b',
    "a`b",
    "a;b",
    "x; DROP TABLE t; --",
    "a/b",
    "../etc",
    "a\\b",
    "a b",
    "a.b",
    "caf\u00e9",
    "\u00fcber",
    "\U0001f389",
    "UPPER",
    "",
    "a\nb",
    "a\x00b",
    "x" * 256,
    None,
    7,
]
HOSTILE_LOCATIONS = [
    "s3://b/x' LOCATION 's3://evil",
    "/tmp/a;b",
    "/tmp/a\\b",
    "/tmp/a`b",
    "/tmp/a\nb",
    "/tmp/a\tb",
    " /tmp/a",
    "",
    None,
]


# ------------------------------------------------------------------------------- names


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_hostile_identifiers_are_refused(name):
    with pytest.raises(InvalidNameError) as err:
        check_identifier(name, "table")
    assert err.value.code == "invalid_settings"
    assert "invalid table name" in str(err.value) and "[a-z0-9_]" in str(err.value)


@pytest.mark.parametrize("name", ["pages", "1pages", "order_completed", "a" * 255, "_x"])
def test_valid_identifiers(name):
    assert check_identifier(name) == name


@pytest.mark.parametrize(
    "value", ["2026-11-21'", "09;", "a/b", "..", ".", "-", "a b", "\u00e9", ""]
)
def test_hostile_partition_values_are_refused(value):
    with pytest.raises(InvalidNameError, match="partition value"):
        check_partition_value(value, "day")


@pytest.mark.parametrize("location", HOSTILE_LOCATIONS)
def test_hostile_locations_are_refused(location):
    with pytest.raises(InvalidNameError, match="location"):
        check_location(location)


@pytest.mark.parametrize(
    "location",
    ["s3://b/lake/data/web/segment_type=pages", "/home/jos\u00e9/lake", "/tmp/a b/c", "file:///x"],
)
def test_valid_locations(location):
    assert check_location(location) == location


# ---------------------------------------------------------------------------- evolution


def test_merge_columns_appends_and_widens_never_narrows():
    existing = [("id", "string"), ("n", "bigint"), ("flag", "boolean"), ("t", "timestamp")]
    m = merge_columns(
        existing,
        [
            ("new", "double"),
            ("n", "double"),
            ("id", "string"),
            ("flag", "bigint"),
            ("t", "string"),
            ("z", "boolean"),
        ],
    )
    assert m.columns == [
        ("id", "string"),
        ("n", "double"),
        ("flag", "string"),
        ("t", "string"),
        ("new", "double"),
        ("z", "boolean"),
    ]
    assert m.added == [("new", "double"), ("z", "boolean")]
    assert m.widened == [
        ("n", "bigint", "double"),
        ("flag", "boolean", "string"),
        ("t", "timestamp", "string"),
    ]
    # narrower requests change nothing, missing columns are kept
    m = merge_columns(m.columns, [("n", "bigint"), ("flag", "boolean")])
    assert not m.changed
    with pytest.raises(CatalogError, match="does not manage"):
        merge_columns([("a", "int")], [("a", "bigint")])


def test_partition_columns_follow_the_table_order_with_file_types():
    table = [("id", "string"), ("n", "double"), ("c", "string"), ("g", "boolean")]
    assert partition_columns(table, [("g", "boolean"), ("n", "bigint"), ("id", "string")]) == [
        ("id", "string"),
        ("n", "bigint"),
        ("c", "string"),
        ("g", "boolean"),
    ]
    assert partition_columns(table, None) == table
    with pytest.raises(CatalogError, match="not columns of table"):
        partition_columns(table, [("zz", "string")])
    with pytest.raises(CatalogError, match="does not widen"):
        partition_columns(table, [("g", "bigint")])


# ------------------------------------------------------------------------------- config


def test_config_round_trips_through_argv():
    cfg = CatalogConfig(
        backend="glue",
        glue_region="eu-west-1",
        glue_catalog_id="123456789012",
        glue_endpoint_url="http://127.0.0.1:5000",
        reports_database="meta",
        partition_batch_size=50,
        max_attempts=3,
    )
    argv = cfg.to_args()
    assert argv[:2] == ["--catalog-backend", "glue"]
    assert CatalogConfig.from_args(argv) == cfg
    # the whole job argv can be passed: other options are ignored
    assert CatalogConfig.from_args(["--lake-root", "/l", *argv, "--hours", "2026-11-21T09"]) == cfg
    # or a namespace of a parser that has the job's options too
    parser = argparse.ArgumentParser()
    parser.add_argument("--lake-root")
    CatalogConfig.add_arguments(parser)
    ns = parser.parse_args(["--lake-root", "/l", *argv])
    assert CatalogConfig.from_args(ns) == cfg and ns.lake_root == "/l"
    assert CatalogConfig.from_args([]) == CatalogConfig()
    assert CatalogConfig().backend == "hive"


def test_config_is_validated():
    with pytest.raises(CatalogError, match="'athena'") as err:
        CatalogConfig(backend="athena")
    assert err.value.code == "invalid_settings"
    with pytest.raises(CatalogError, match="reports database"):
        CatalogConfig(reports_database="meta; DROP")
    with pytest.raises(CatalogError, match="at most 100"):
        CatalogConfig(backend="glue", partition_batch_size=500)


def test_hive_spark_conf(tmp_path):
    embedded = hive_spark_conf(str(tmp_path / "m"), str(tmp_path / "w"), None)
    assert embedded["spark.sql.catalogImplementation"] == "hive"
    assert embedded["spark.hadoop.javax.jdo.option.ConnectionURL"] == (
        f"jdbc:derby:;databaseName={tmp_path}/m/metastore_db;create=true"
    )
    assert embedded["spark.sql.warehouse.dir"] == str(tmp_path / "w")
    assert embedded["spark.driver.extraJavaOptions"] == (
        f"-Duser.timezone=UTC -Dderby.system.home={tmp_path}/m"
    )
    assert "spark.hadoop.hive.metastore.uris" not in embedded
    remote = hive_spark_conf("", str(tmp_path / "w"), "thrift://hms:9083")
    assert remote["spark.hadoop.hive.metastore.uris"] == "thrift://hms:9083"
    assert "spark.hadoop.javax.jdo.option.ConnectionURL" not in remote
    with pytest.raises(ValueError):
        hive_spark_conf("s3://b/m", "", None)
    assert CatalogConfig(metastore_dir=str(tmp_path)).spark_conf()["spark.sql.warehouse.dir"] == (
        f"{tmp_path}/warehouse"
    )
    assert CatalogConfig(backend="none").spark_conf() == {}


def test_catalog_from_config(monkeypatch):
    assert isinstance(catalog_from_config(CatalogConfig(backend="none")), NoCatalog)
    with pytest.raises(CatalogError, match="Spark session"):
        catalog_from_config(CatalogConfig(backend="hive", metastore_dir="/tmp/m"))
    glue = catalog_from_config(
        CatalogConfig(
            backend="glue", glue_region="eu-west-1", glue_catalog_id="123456789012", max_attempts=2
        )
    )
    assert glue.backend == "glue" and glue.catalog_id == "123456789012"
    assert glue.client.meta.region_name == "eu-west-1" and glue.max_attempts == 2


def test_settings_give_the_config(tmp_path):
    s = LakeSettings(
        str(tmp_path / "a"),
        str(tmp_path / "l"),
        (SourceSettings("demo"),),
        catalog=CatalogSettings(metastore_dir=str(tmp_path / "m")),
    )
    cfg = config_from_settings(s.catalog)
    assert (cfg.backend, cfg.metastore_dir, cfg.reports_database) == (
        "hive",
        str(tmp_path / "m"),
        "segment_datalake_meta",
    )


def test_no_catalog_registers_nothing(tmp_path):
    none = NoCatalog()
    out = register_sync(
        none,
        database="web",
        table_prefix="",
        lake_root=str(tmp_path),
        source_dir="web",
        date_layout="day_hour",
        tables={"pages": [("message_id", "string")]},
        partitions={"pages": [ArchiveHour.parse("2026-11-21T09")]},
    )
    assert out["pages"]["partitions_added"] == 0 and out["pages"]["partitions"] == 0
    assert read_schemas(none, "web", "", ["pages"]) == {}
    with pytest.raises(InvalidNameError):
        register_sync(
            none,
            database="we b",
            table_prefix="",
            lake_root=str(tmp_path),
            source_dir="web",
            date_layout="day_hour",
            tables={"pages": [("message_id", "string")]},
            partitions={},
        )


# ---------------------------------------------------------------------------------- DDL

COLUMNS = [
    ("message_id", "string"),
    ("received_at", "timestamp"),
    ("amount", "double"),
    ("quantity", "bigint"),
    ("gift", "boolean"),
    ("type", "string"),
    ("1st", "string"),
]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_create_table_ddl_parses(dialect):
    sql = create_table_ddl(
        "web",
        "1order_completed",
        COLUMNS,
        ["day", "hr"],
        "s3://lake/data/web/segment_type=order_completed",
        "Segment order_completed of web; it's 'quoted'",
    )
    tree = sqlglot.parse_one(sql, read=dialect)
    assert isinstance(tree, exp.Create) and tree.kind == "TABLE"
    assert tree.this.this.name == "1order_completed" and tree.this.this.db == "web"
    assert [(c.name, c.args["kind"].sql("hive").lower()) for c in tree.this.expressions] == COLUMNS
    props = {type(p).__name__: p for p in tree.args["properties"].expressions}
    assert "ExternalProperty" in props
    assert [c.name for c in props["PartitionedByProperty"].this.expressions] == ["day", "hr"]
    assert props["LocationProperty"].this.this == "s3://lake/data/web/segment_type=order_completed"
    assert props["FileFormatProperty"].sql("hive") == "STORED AS PARQUET"
    assert "'" not in props["SchemaCommentProperty"].this.this  # sanitized, still one literal


@pytest.mark.parametrize("dialect", DIALECTS)
def test_add_partitions_ddl_parses(dialect):
    specs = [
        PartitionSpec(("2026-11-21", f"{h:02d}"), f"s3://lake/t/day=2026-11-21/hr={h:02d}")
        for h in range(5)
    ]
    # one partition per statement: sqlglot parses it completely
    singles = add_partitions_ddl("web", "pages", ["day", "hr"], specs, batch_size=1)
    assert len(singles) == 5
    for spec, sql in zip(specs, singles):
        tree = sqlglot.parse_one(sql, read=dialect)
        assert isinstance(tree, exp.Alter)
        (action,) = tree.args["actions"]
        assert isinstance(action, exp.AddPartition) and action.args["exists"]
        values = [(eq.this.name, eq.expression.this) for eq in action.this.expressions]
        assert values == list(zip(["day", "hr"], spec.values))
        assert action.args["location"].this.this == spec.location
    # several per statement (what Athena and Hive run): sqlglot keeps it as one command; its
    # tokens are exactly the keywords, quoted identifiers and string literals we wrote
    (batch,) = add_partitions_ddl("web", "pages", ["day", "hr"], specs, batch_size=100)
    assert len(sqlglot.parse(batch, read=dialect)) == 1
    tokens = sqlglot.Dialect.get_or_raise(dialect).tokenize(batch)
    strings = [t.text for t in tokens if t.token_type == sqlglot.TokenType.STRING]
    assert strings == [x for s in specs for x in (*s.values, s.location)]
    idents = [t.text for t in tokens if t.token_type == sqlglot.TokenType.IDENTIFIER]
    assert idents == ["web", "pages"] + ["day", "hr"] * 5
    assert batch.count("PARTITION (") == 5 and ";" not in batch


@pytest.mark.parametrize("bad", [n for n in HOSTILE_NAMES if n is not None and n != 7][:14])
def test_ddl_refuses_hostile_names(bad):
    loc = "s3://b/t"
    for call in (
        lambda: create_table_ddl(bad, "t", COLUMNS, ["day"], loc),
        lambda: create_table_ddl("web", bad, COLUMNS, ["day"], loc),
        lambda: create_table_ddl("web", "t", [(bad, "string")], ["day"], loc),
        lambda: create_table_ddl("web", "t", COLUMNS, [bad], loc),
        lambda: add_partitions_ddl(bad, "t", ["day"], [PartitionSpec(("2026-11-21",), loc)]),
    ):
        with pytest.raises(InvalidNameError) as err:
            call()
        assert "[a-z0-9_]" in str(err.value)


def test_ddl_refuses_hostile_values_locations_and_types():
    with pytest.raises(InvalidNameError, match="partition value"):
        add_partitions_ddl("web", "t", ["day"], [PartitionSpec(("x') LOCATION ('y",), "s3://b")])
    for loc in HOSTILE_LOCATIONS:
        with pytest.raises(InvalidNameError, match="location"):
            create_table_ddl("web", "t", COLUMNS, ["day"], loc)
        with pytest.raises(InvalidNameError, match="location"):
            add_partitions_ddl("web", "t", ["day"], [PartitionSpec(("2026-11-21",), loc)])
    with pytest.raises(CatalogError, match="type"):
        create_table_ddl("web", "t", [("a", "string) LOCATION 'x'; --")], ["day"], "s3://b")
    with pytest.raises(CatalogError, match="partition keys"):
        create_table_ddl("web", "t", [("day", "string")], ["day"], "s3://b")


def kinds(sql: str, dialect: str) -> list[str]:
    """Statement kinds; an ALTER with several partitions is a parsed ``Command('ALTER')``."""
    out = []
    for s in sqlglot.parse(sql, read=dialect):
        if s is None:
            continue
        is_alter = isinstance(s, exp.Command) and s.this.upper() == "ALTER"
        out.append("Alter" if is_alter else type(s).__name__)
    return out


def write_parquet(path: str) -> None:
    import pyarrow as pa

    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(pa.table({"message_id": ["a"]}), path)


def test_print_table_ddl_reads_the_schema_record_and_the_partitions_on_disk(tmp_path):
    lake = str(tmp_path / "lake")
    source = SourceSettings("Web-Prod", "web", "webdb", "w")
    record = {
        "version": 1,
        "tables": {
            "pages": {"columns": [["message_id", "string"], ["url", "string"]]},
            "order_completed": {"columns": [["message_id", "string"], ["revenue", "double"]]},
        },
    }
    path = layout.schema_record_path(lake, source.lake_dir)
    os.makedirs(os.path.dirname(path))
    with open(path, "wb") as f:
        f.write(orjson.dumps(record))
    root = layout.table_root(lake, "Web-Prod", "pages")
    for hr in ("09", "10"):
        write_parquet(f"{root}/day=2026-11-21/hr={hr}/part-2026112109-r-00000-000.parquet")
    write_parquet(f"{root}/day=2026-11-21/hr=11/_COMMITTED_BY.parquet")  # not data
    write_parquet(f"{root}/stray.parquet")  # not in a partition
    os.makedirs(f"{root}/day=2026-11-21/hr=12")  # empty: not a partition
    q = layout.quarantine_dir(lake, "Web-Prod", ArchiveHour.parse("2026-11-21T09"))
    write_parquet(f"{q}/part-0.parquet")
    write_report_table(
        lake, "Web-Prod", "run1", [{"type": "source", "status": "finished"}], "2026-11-21"
    )
    settings = LakeSettings(
        str(tmp_path / "archive"),
        lake,
        (source,),
        catalog=CatalogSettings(reports_database="meta", metastore_dir=str(tmp_path / "m")),
    )

    assert [p.values for p in scan_partitions(root, ["day", "hr"])] == [
        ("2026-11-21", "09"),
        ("2026-11-21", "10"),
    ]
    one = print_table_ddl(settings, source, "pages")
    assert one.startswith("-- Tables of Segment source 'Web-Prod'")
    for dialect in DIALECTS:
        assert kinds(one, dialect) == ["Create", "Create", "Alter"]
        create = sqlglot.parse(one, read=dialect)[1]
        assert create.this.this.name == "w_pages" and create.this.this.db == "webdb"
        assert [c.name for c in create.this.expressions] == ["message_id", "url"]
    assert f"LOCATION '{root}/day=2026-11-21/hr=09'" in one
    assert "hr=11" not in one and "hr=12" not in one

    everything = print_table_ddl(settings, "web", None)
    for dialect in DIALECTS:
        # database; order_completed (no partitions); pages + partitions; quarantine +
        # partition; reports database; sync_reports + partition
        assert kinds(everything, dialect) == [
            "Create",
            "Create",
            "Create",
            "Alter",
            "Create",
            "Alter",
            "Create",
            "Create",
            "Alter",
        ]
    assert "`webdb`.`w_quarantine`" in everything and "`meta`.`sync_reports`" in everything
    assert f"LOCATION '{lake}/sync_reports/source_id=Web-Prod/day=2026-11-21'" in everything
    with pytest.raises(CatalogError, match="no table 'nope'.*known: order_completed, pages"):
        print_table_ddl(settings, source, "nope")


def test_table_ddl_without_partitions():
    sql = table_ddl("web", "t", [("a", "string")], ["day"], "s3://b/t")
    assert sql.count(";") == 1
    assert kinds(sql, "athena") == ["Create"]


# --------------------------------------------------------------------------- sync reports


def test_report_rows_tolerate_missing_extra_and_odd_values():
    rows = report_rows(
        [
            {
                "type": "event",
                "run_id": "r",
                "table_name": "pages",
                "row_count": "12",
                "partitions": [{"day": "2026-11-21", "hr": "09"}],
                "is_new": "true",
                "start_time": "2026-11-21T10:00:00Z",
                "duration_mins": 1,
                "source_id": "web",
                "brand_new_key": [1, 2],
                "bytes": "lots",
            },
            {},
        ]
    )
    first, empty = rows
    assert first["row_count"] == 12 and first["is_new"] is True and first["duration_mins"] == 1.0
    assert first["partitions"] == '[{"day":"2026-11-21","hr":"09"}]'
    assert first["start_time"] == datetime(2026, 11, 21, 10, tzinfo=UTC)
    assert "source_id" not in first  # a partition value, not a column
    assert orjson.loads(first["extra"]) == {"brand_new_key": [1, 2], "bytes": "lots"}
    assert first["bytes"] is None
    assert set(empty) == set(REPORT_SCHEMA.names) and all(v is None for v in empty.values())


def test_write_report_table(tmp_path):
    lake = str(tmp_path / "lake")
    report = [
        {
            "type": "event",
            "table_name": "pages",
            "run_id": "r1",
            "status": "finished",
            "row_count": 3,
            "finish_time": "2026-11-21T10:05:00+00:00",
        },
        {"type": "source", "run_id": "r1", "status": "finished", "lines_in": 4},
    ]
    loc = write_report_table(lake, "demo", "r1", report, "2026-11-21")
    assert loc == f"{lake}/sync_reports/source_id=demo/day=2026-11-21/r1.parquet"
    table = pq.read_table(loc)
    assert table.schema.equals(REPORT_SCHEMA)
    assert table.column("row_count").to_pylist() == [3, None]
    assert str(table.schema.field("finish_time").type) == "timestamp[us, tz=UTC]"
    assert os.listdir(os.path.dirname(loc)) == ["r1.parquet"]  # no temporary file left
    # the run's report is replaced, not duplicated
    write_report_table(lake, "demo", "r1", report[:1], "2026-11-21")
    assert pq.read_table(loc).num_rows == 1
    for bad in ("../x", ".hidden", "a/b", ""):
        with pytest.raises(ValueError):
            write_report_table(lake, "demo", bad, report, "2026-11-21")
    with pytest.raises(InvalidNameError):
        write_report_table(lake, "../demo", "r2", report, "2026-11-21")
    with pytest.raises(ValueError):
        write_report_table(lake, "demo", "r2", report, "21/11/2026")
