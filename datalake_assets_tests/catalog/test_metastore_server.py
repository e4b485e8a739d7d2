"""The embedded metastore served by one Spark Connect server (``catalog/metastore_server.py``):
a real server (PySpark's own, started the way ``datalake dev`` starts it) holding a Derby
metastore of its own, and real syncs of generated traffic that register through it."""

from __future__ import annotations

import os
import stat

import pytest

from datalake_assets import cli
from datalake_assets.catalog import metastore_server
from datalake_assets.catalog.config import CatalogConfig
from datalake_assets.catalog.hive import HiveCatalog
from datalake_assets.catalog.register import register_sync
from datalake_assets.ingest.demo import generate_archive
from datalake_assets.spec.layout import DEFAULT_DATE_LAYOUT, ArchiveHour
from datalake_assets.transform.job import SyncRequest, run_sync

pytestmark = pytest.mark.spark
SRC = "served"
HOURS = ("2026-11-21T10", "2026-11-21T11")


def no_spark():
    raise AssertionError("the sync started a Spark session of its own")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A server for a metastore of this module, stopped (and its process gone) at the end."""
    cfg = CatalogConfig(
        backend="hive", metastore_dir=str(tmp_path_factory.mktemp("served") / "metastore")
    )
    address = metastore_server.start(cfg.metastore_dir, cfg.spark_conf())
    assert address.startswith("sc://localhost:") and "token" not in address
    yield cfg
    assert metastore_server.stop(cfg.metastore_dir)
    metastore_server.forget_decisions()


@pytest.fixture()
def archive(tmp_path):
    root = str(tmp_path / "archive")
    generate_archive(
        root,
        SRC,
        [ArchiveHour.parse(h) for h in HOURS],
        events_per_hour=300,
        files_per_hour=2,
        seed=3,
    )
    return root


def count(session, sql: str) -> int:
    return session.sql(sql).collect()[0][0]


@pytest.mark.slow
def test_the_server_is_found_and_keeps_its_token_private(served):
    url = metastore_server.served_url(served.metastore_dir)
    assert url is not None and url.startswith("sc://localhost:")
    # a sync's own session must not open Derby: no Hive settings for it while served
    assert served.servable and served.session_conf() == {}
    discovery = metastore_server.discovery_path(served.metastore_dir)
    assert stat.S_IMODE(os.stat(os.path.dirname(discovery)).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(discovery).st_mode) == 0o600
    for off in (
        CatalogConfig(backend="hive", metastore_dir=served.metastore_dir, metastore_server="off"),
        CatalogConfig(
            backend="hive",
            metastore_dir=served.metastore_dir,
            hive_metastore_uri="thrift://127.0.0.1:9083",
        ),
        CatalogConfig(backend="glue"),
    ):
        assert not off.servable and off.served_session() is None


@pytest.mark.slow
def test_a_small_sync_registers_through_the_server_without_a_jvm_of_its_own(
    served, archive, tmp_path, capsys
):
    lake_root = str(tmp_path / "lake")
    report = run_sync(no_spark, SyncRequest(lake_root, archive, SRC, HOURS, catalog=served))
    assert report.source.status == "finished"
    session = served.served_session()
    written = {t.table_name: t.row_count for t in report.tables.values()}
    assert written["tracks"] > 0
    for table, rows in written.items():
        info = report.tables[table].catalog
        assert (
            info is not None
            and info["partitions_added"] == len(report.tables[table].partitions) > 0
        ), table
        assert count(session, f"SELECT count(*) FROM {SRC}.{table}") == rows, table
    # the same hours again: nothing new to register, the tables' rows unchanged
    again = run_sync(
        no_spark, SyncRequest(lake_root, archive, SRC, HOURS, catalog=served, replay=True)
    )
    assert {t: r.catalog["partitions_added"] for t, r in again.tables.items()} == {
        t: 0 for t in written
    }
    assert count(session, f"SELECT count(*) FROM {SRC}.tracks") == written["tracks"]
    # what a user types to look, while the server holds the metastore
    settings = tmp_path / "lake.toml"
    settings.write_text(  # the lake the sync above wrote: the Segment layout
        f'table_format = "segment"\narchive_root = "{archive}"\nlake_root = "{lake_root}"\n'
        "[catalog]\n"
        f'metastore_dir = "{served.metastore_dir}"\n[[sources]]\nid = "{SRC}"\n'
    )
    capsys.readouterr()
    assert (
        cli.main(["--settings", str(settings), "sql", f"SELECT count(*) AS n FROM {SRC}.tracks"])
        == 0
    )
    assert f"|{written['tracks']}|" in capsys.readouterr().out.replace(" ", "")
    # a table that does not exist: the user's mistake, one line (test_cli.py: a local session)
    assert cli.main(["--settings", str(settings), "sql", "SELECT * FROM nowhere.t"]) == 2
    err = capsys.readouterr().err
    assert "nowhere" in err and len(err.splitlines()) == 1, err


@pytest.mark.slow
def test_the_spark_path_computes_locally_and_registers_through_the_server(
    spark, served, archive, tmp_path, hive_metastore_dir
):
    """A batch too big for the driver uses the process's own Spark (here the suite's, whose
    Hive metastore is another one) for its stages, and the server for its catalog."""
    lake_root = str(tmp_path / "lake")
    report = run_sync(
        spark,
        SyncRequest(
            lake_root,
            archive,
            SRC,
            HOURS,
            catalog=served,
            database="served_spark",
            local_max_bytes=0,
        ),
    )
    assert report.source.status == "finished"
    session = served.served_session()
    assert (
        count(session, "SELECT count(*) FROM served_spark.tracks")
        == report.tables["tracks"].row_count
    )
    assert not spark.catalog.databaseExists("served_spark")  # not in the suite's metastore


@pytest.mark.slow
def test_a_column_widens_through_the_server(served, tmp_path):
    """No JVM gateway over Spark Connect: a widening replaces the table's definition (the
    fallback ``hive.py`` describes) and keeps every partition."""
    catalog = HiveCatalog(served.served_session())
    hours = [ArchiveHour.parse(h) for h in HOURS]
    common = {
        "database": "widen",
        "table_prefix": "",
        "lake_root": str(tmp_path / "lake"),
        "source_dir": "widen",
        "date_layout": DEFAULT_DATE_LAYOUT,
    }
    register_sync(catalog, tables={"t": [("n", "bigint")]}, partitions={"t": hours[:1]}, **common)
    out = register_sync(
        HiveCatalog(served.served_session()),
        tables={"t": [("n", "double"), ("s", "string")]},
        partitions={"t": hours[1:]},
        **common,
    )
    assert out["t"]["widened_columns"] == [("n", "bigint", "double")]
    fresh = HiveCatalog(served.served_session())
    info = fresh.get_table("widen", "t")
    assert info is not None and info.columns == [("n", "double"), ("s", "string")]
    assert fresh.partition_count("widen", "t") == 2
