import os

import pytest

pytest_plugins = ["datalake_assets_tests.support.ledger"]

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("DAGSTER_HOME", "")  # tests use ephemeral instances


@pytest.fixture(scope="session")
def hive_metastore_dir(tmp_path_factory):
    """The embedded Derby metastore of the shared session (Derby: one JVM per folder)."""
    return str(tmp_path_factory.mktemp("hive_metastore"))


@pytest.fixture(scope="session")
def spark(hive_metastore_dir):
    """One local Spark session for the whole suite (sized for a 2-core machine), with a Hive
    catalog whose metastore, warehouse and derby.log live in a session temp folder (never in
    the repo: ``derby.system.home`` is set, next to the ``-Duser.timezone=UTC`` the job sets)."""
    from datalake_assets.catalog.config import hive_spark_conf
    from datalake_assets.transform.job import local_spark_session

    session = local_spark_session(
        "local[2]", "2g",
        {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2",
         "spark.sql.adaptive.enabled": "true",
         **hive_spark_conf(hive_metastore_dir, f"{hive_metastore_dir}/warehouse", None)},
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture()
def lake(tmp_path):
    """Fresh archive and lake roots."""
    archive = tmp_path / "archive"
    lake_root = tmp_path / "lake"
    archive.mkdir()
    return {"archive_root": str(archive), "lake_root": str(lake_root)}
