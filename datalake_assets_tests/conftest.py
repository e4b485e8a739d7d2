"""Fixtures shared by every test folder: the Spark session, lake roots, fake AWS (credentials,
in-process moto, a moto server on loopback). Settings files: ``support/settings_files.py``."""

import logging
import os
import uuid

import pytest

from datalake_assets_tests.support import jvm_cds
from datalake_assets_tests.support.aws import FAKE_CREDENTIALS, reset_moto

pytest_plugins = ["datalake_assets_tests.support.ledger"]

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("DAGSTER_HOME", "")  # tests use ephemeral instances
# Every JVM the suite starts (the shared session, each ``datalake`` command, each Dagster run,
# PySpark 3.5's) compiles with C1 only. They live seconds to minutes over tiny data, where
# C2's compiler threads cost more CPU than its faster code gives back: on a quiet 2-core
# machine `test_cli.py -k "successful_sync or unknown_table"` took 62 s with C2 and 44 s
# without, `transform/test_job.py test_native_parse.py reliability/test_standalone_cluster.py`
# 140 s and 104 s. Spark's launcher puts SPARK_SUBMIT_OPTS on the java command line (no
# "Picked up ..." notice on stderr, as JAVA_TOOL_OPTIONS would print). The product's own JVMs,
# which run real hours, keep the JVM's defaults.
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1")


def pytest_configure(config):
    """... and loads its classes from one class-data-sharing archive (``support/jvm_cds.py``),
    built once per machine and JDK, in the background while the workers start."""
    if not hasattr(config, "workerinput"):  # the controller, or a run without workers
        jvm_cds.start_build()
    jvm_cds.use_if_ready()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    jvm_cds.use_if_ready()  # the JVMs this test starts, once the archive is built


def pytest_collection_modifyitems(config, items):
    """Files that hold a slow test first, each file's own order kept (a module's tests may
    build on each other, and pytest groups them by their module fixtures' parameters):
    pytest-xdist hands whole files to its workers in this order (``--dist loadfile``), so the
    long end-to-end files start early and the many short ones fill the gaps at the end,
    instead of one worker finishing a 5-minute file alone while the other has nothing left."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)


@pytest.fixture(scope="session")
def hive_metastore_dir(tmp_path_factory):
    """The embedded Derby metastore of the shared session (Derby: one JVM per folder)."""
    return str(tmp_path_factory.mktemp("hive_metastore"))


@pytest.fixture(scope="session")
def spark(hive_metastore_dir):
    """One local Spark session per worker (sized for a 2-core machine), with a Hive
    catalog whose metastore, warehouse and derby.log live in a session temp folder (never in
    the repo: ``derby.system.home`` is set, next to the ``-Duser.timezone=UTC`` the job sets)."""
    from datalake_assets.catalog.config import hive_spark_conf
    from datalake_assets.transform.job import local_spark_session

    session = local_spark_session(
        "local[2]",
        "2g",
        {
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.sql.adaptive.enabled": "true",
            **hive_spark_conf(hive_metastore_dir, f"{hive_metastore_dir}/warehouse", None),
        },
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


# ------------------------------------------------------------------------------ fake AWS (moto)


@pytest.fixture()
def fake_aws_credentials(monkeypatch, tmp_path):
    """moto's fake credentials; nothing from the real environment or ~/.aws (every ``AWS_``
    variable of the environment is removed first). Returns the variables set."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    env = {
        **FAKE_CREDENTIALS,
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": str(tmp_path / "no-aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-aws-credentials"),
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


@pytest.fixture()
def mocked_aws(fake_aws_credentials):
    """In-process moto: every boto3 call of the test is answered from moto's memory (pyarrow's
    S3 client does not go through boto3: it needs ``moto_endpoint``)."""
    from moto import mock_aws

    with mock_aws():
        yield


@pytest.fixture(scope="session")
def moto_server():
    """One moto server on loopback per worker, its URL (``http://127.0.0.1:<port>``).
    Tests that share it without a reset make their own buckets; ``moto_endpoint`` empties it."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture()
def moto_endpoint(moto_server, fake_aws_credentials):
    """The moto server emptied (as a fresh server would be), with fake credentials: its URL.
    boto3 and pyarrow reach it through ``AWS_ENDPOINT_URL(_S3)``, which each test sets."""
    reset_moto(moto_server)
    return moto_server


@pytest.fixture()
def moto_bucket(moto_endpoint, monkeypatch):
    """A fresh bucket on the moto server: ``(boto3 client, bucket name)``; boto3 and pyarrow
    both reach moto through AWS_ENDPOINT_URL_S3."""
    import boto3

    from datalake_assets.lake import storage

    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", moto_endpoint)
    storage._fs_for.cache_clear()  # pyarrow filesystems read the endpoint when created
    client = boto3.client("s3", region_name="us-east-1")
    bucket = f"seg-{uuid.uuid4().hex[:12]}"
    client.create_bucket(Bucket=bucket)
    yield client, bucket
    storage._fs_for.cache_clear()
