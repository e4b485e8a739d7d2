import os

import pytest

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("DAGSTER_HOME", "")  # tests use ephemeral instances


@pytest.fixture(scope="session")
def spark():
    """One local Spark session for the whole suite (sized for a 2-core machine)."""
    from datalake_assets.transform.job import local_spark_session

    session = local_spark_session(
        "local[2]", "2g",
        {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2",
         "spark.sql.adaptive.enabled": "true"},
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
