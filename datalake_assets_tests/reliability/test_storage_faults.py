"""Storage and catalog faults on an ``s3://`` lake: moto behind a proxy that injects errors.

Every sync here is a real process with ``AWS_ENDPOINT_URL`` on the proxy (loopback only), its
archive and lake in a moto bucket, Glue in moto as its catalog. Throttling is retried and the
result is exact; an outage fails the sync with a clear error, leaves the lake and the catalog
consistent, and one re-run after the outage converges to the clean result.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid

import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from datalake_assets.catalog.config import CatalogConfig
from datalake_assets.ingest.demo import generate_archive
from datalake_assets.spec.layout import ArchiveHour
from datalake_assets.transform.job import SyncRequest
from datalake_assets_tests.reliability.s3_fault_proxy import FaultProxy
from datalake_assets_tests.support.aws import FAKE_CREDENTIALS, reset_moto
from datalake_assets_tests.support.lake_reader import S3Store, compare, read_lake
from datalake_assets_tests.support.oracle import Oracle

pytestmark = [pytest.mark.spark, pytest.mark.reliability]

SRC = "s3src"
# One hour: a sync against moto through the proxy makes a few thousand S3 requests, each a
# round trip through two Python servers, and every fault a retry with back-off; a second hour
# doubles the test's minutes without reaching another code path.
HOURS = ("2026-11-21T10",)
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CREDS = FAKE_CREDENTIALS


@pytest.fixture(scope="module")
def moto_with_proxy(moto_server):
    """The moto server, emptied, and a fault-injecting proxy in front of it: their URLs."""
    reset_moto(moto_server)
    host, port = moto_server.rsplit("/", 1)[1].rsplit(":", 1)
    proxy = FaultProxy(host, int(port)).start()
    yield {"moto": moto_server, "proxy": proxy}
    proxy.stop()


def s3fs(endpoint: str) -> pafs.S3FileSystem:
    return pafs.S3FileSystem(
        access_key="testing",
        secret_key="testing",
        region="us-east-1",
        endpoint_override=endpoint,
        scheme="http",
    )


@pytest.fixture()
def bucket(moto_with_proxy, fake_aws_credentials, monkeypatch):
    """A fresh bucket with two archive hours (written straight to moto, not through faults)."""
    import boto3

    name = f"lake-{uuid.uuid4().hex[:12]}"
    boto3.client(
        "s3",
        endpoint_url=moto_with_proxy["moto"],
        **{
            "aws_access_key_id": "testing",
            "aws_secret_access_key": "testing",
            "region_name": "us-east-1",
        },
    ).create_bucket(Bucket=name)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_with_proxy["moto"])
    s = generate_archive(
        f"s3://{name}/archive",
        SRC,
        [ArchiveHour.parse(h) for h in HOURS],
        events_per_hour=300,
        files_per_hour=2,
        seed=13,
    )
    moto_with_proxy["proxy"].fail = lambda m, p, h, b: None
    return {
        "name": name,
        "lines": s.lines,
        "lake": f"s3://{name}/lake",
        "archive": f"s3://{name}/archive",
    }


def glue_config(moto_with_proxy) -> CatalogConfig:
    return CatalogConfig(
        backend="glue",
        glue_region="us-east-1",
        glue_endpoint_url=moto_with_proxy["proxy"].url,
        max_attempts=3,
    )


def sync(moto_with_proxy, b: dict, database: str, **kw) -> tuple[int, dict]:
    kw.setdefault("catalog", glue_config(moto_with_proxy))
    req = SyncRequest(
        b["lake"], b["archive"], SRC, HOURS, database=database, lock_wait_seconds=30, **kw
    )
    env = {
        **os.environ,
        **CREDS,
        "AWS_ENDPOINT_URL": moto_with_proxy["proxy"].url,
        "PYTHONPATH": REPO,
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    done = subprocess.run(
        [sys.executable, "-m", "datalake_assets.transform.job", *req.to_args()],
        env=env,
        capture_output=True,
        timeout=600,
    )
    out = done.stdout.decode().strip().splitlines()
    assert out, done.stderr.decode()[-3000:]
    return done.returncode, json.loads(out[-1])


def s3_state(moto_with_proxy, b: dict) -> dict[tuple[str, str], list[str]]:
    fs = s3fs(moto_with_proxy["moto"])
    state: dict[tuple[str, str], list[str]] = {}
    base = f"{b['name']}/lake/data/{SRC}"
    infos = fs.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True))
    for i in infos:
        if i.type != pafs.FileType.File or not i.path.endswith(".parquet"):
            continue
        rel = i.path[len(base) + 1 :].split("/")
        key = (rel[0].split("=", 1)[1], f"{rel[1]}/{rel[2]}")
        ids = pq.read_table(i.path, filesystem=fs, columns=["message_id"]).column(0).to_pylist()
        state.setdefault(key, []).extend(ids)
    return {k: sorted(v) for k, v in state.items()}


def glue_partitions(moto_with_proxy, database: str) -> dict[str, int]:
    import boto3

    glue = boto3.client(
        "glue",
        endpoint_url=moto_with_proxy["moto"],
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    try:
        tables = glue.get_tables(DatabaseName=database)["TableList"]
    except glue.exceptions.EntityNotFoundException:
        return {}
    return {
        t["Name"]: len(
            glue.get_partitions(DatabaseName=database, TableName=t["Name"])["Partitions"]
        )
        for t in tables
    }


@pytest.fixture(scope="module")
def reference(moto_with_proxy, tmp_path_factory):
    """A clean sync of the same archive (same seed) with no fault: the truth to converge to."""
    import boto3

    name = f"lake-ref-{uuid.uuid4().hex[:8]}"
    boto3.client(
        "s3",
        endpoint_url=moto_with_proxy["moto"],
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    ).create_bucket(Bucket=name)
    with pytest.MonkeyPatch.context() as mp:  # restored after: nothing leaks to later modules
        for k, v in {**CREDS, "AWS_ENDPOINT_URL": moto_with_proxy["moto"]}.items():
            mp.setenv(k, v)
        s = generate_archive(
            f"s3://{name}/archive",
            SRC,
            [ArchiveHour.parse(h) for h in HOURS],
            events_per_hour=300,
            files_per_hour=2,
            seed=13,
        )
    b = {
        "name": name,
        "lines": s.lines,
        "lake": f"s3://{name}/lake",
        "archive": f"s3://{name}/archive",
    }
    moto_with_proxy["proxy"].fail = lambda m, p, h, b: None
    code, report = sync(moto_with_proxy, b, "ref_db")
    assert code == 0, report
    assert report["lines_in"] == s.lines
    store = S3Store(moto_with_proxy["moto"])  # the reference itself is held to the oracle
    found = compare(
        Oracle(store, b["archive"], SRC).sync(HOURS).expected(), read_lake(store, b["lake"], SRC)
    )
    assert found.ok, str(found)
    return {
        "state": s3_state(moto_with_proxy, b),
        "report": report,
        "partitions": glue_partitions(moto_with_proxy, "ref_db"),
    }


def expect_oracle(reliability, moto_with_proxy, b: dict) -> None:
    """The lake must hold what the oracle says for the bucket's archive (read from moto
    directly, not through the proxy or the sync's storage layer)."""
    store = S3Store(moto_with_proxy["moto"])
    expected = Oracle(store, b["archive"], SRC).sync(HOURS).expected()
    reliability.expect(expected, lambda: read_lake(store, b["lake"], SRC))


def assert_oracle_holds(reliability) -> None:
    found = reliability.compare()
    assert found.ok, str(found)


# The hour is small: the sync takes the driver-local path (its calls retried like Spark tasks);
# throttling is also run on the Spark path (local_max_bytes=0), whose tasks Spark retries.
@pytest.mark.slow
@pytest.mark.parametrize("path", ["local", "spark"])
def test_throttled_storage_and_catalog_are_retried_and_the_result_is_exact(
    moto_with_proxy, bucket, reference, reliability, path
):
    expect_oracle(reliability, moto_with_proxy, bucket)
    proxy = moto_with_proxy["proxy"]
    n = {"i": 0}
    throttled: set[tuple] = set()
    lock = threading.Lock()

    def every_fourth(method, path, headers, body):  # S3 SlowDown / Glue ThrottlingException
        # A request throttled once goes through when it is sent again: catalog calls and
        # stage-B writes run several at once, so a pure "every 4th request" could throttle one
        # call's every retry while the others' requests fill the gaps.
        target = next((v for k, v in headers.items() if k.lower() == "x-amz-target"), None)
        key = (method, path, target, hash(body))
        with lock:  # the proxy serves each request in a thread of its own
            if key in throttled:
                throttled.discard(key)
                return None
            n["i"] += 1
            if n["i"] % 4:
                return None
            throttled.add(key)
            return 503

    proxy.fail = every_fourth
    before = proxy.failed
    code, report = sync(
        moto_with_proxy,
        bucket,
        f"throttled_{path}_db",
        **({"local_max_bytes": 0} if path == "spark" else {}),
    )
    injected = proxy.failed - before
    reliability.fault(injected)
    proxy.fail = lambda m, p, h, b: None
    assert code == 0, report
    assert injected >= 5  # the sync really went through throttling
    assert_oracle_holds(reliability)
    assert s3_state(moto_with_proxy, bucket) == reference["state"]
    assert glue_partitions(moto_with_proxy, f"throttled_{path}_db") == reference["partitions"]


@pytest.mark.slow
def test_a_storage_outage_mid_commit_fails_clearly_and_one_rerun_converges(
    moto_with_proxy, bucket, reference, reliability
):
    expect_oracle(reliability, moto_with_proxy, bucket)
    proxy = moto_with_proxy["proxy"]
    # Every write into the live tables fails: the commit's copies (staging -> lake) break.
    proxy.fail = lambda m, p, h, b: 500 if m == "PUT" and "/lake/data/" in p else None
    before = proxy.failed
    code, report = sync(moto_with_proxy, bucket, "outage_db")
    injected = proxy.failed - before
    reliability.fault(injected)
    proxy.fail = lambda m, p, h, b: None
    assert code == 1, report
    assert report["status"] == "failed" and report["error"]
    assert injected >= 1
    # nothing registered for a failed commit
    assert glue_partitions(moto_with_proxy, "outage_db") == {}

    code, report = sync(moto_with_proxy, bucket, "outage_db")
    assert code == 0, report
    assert report["recovered_commits"]  # the journaled commit was rolled forward first
    assert_oracle_holds(reliability)
    assert s3_state(moto_with_proxy, bucket) == reference["state"]
    assert glue_partitions(moto_with_proxy, "outage_db") == reference["partitions"]


@pytest.mark.slow
def test_an_unavailable_catalog_commits_nothing_and_a_rerun_registers_everything(
    moto_with_proxy, bucket, reference, reliability
):
    expect_oracle(reliability, moto_with_proxy, bucket)
    proxy = moto_with_proxy["proxy"]
    proxy.fail = lambda m, p, h, b: (
        500
        if any(k.lower() == "x-amz-target" and v.startswith("AWSGlue") for k, v in h.items())
        else None
    )
    before = proxy.failed
    code, report = sync(moto_with_proxy, bucket, "down_db")
    reliability.fault(proxy.failed - before)
    proxy.fail = lambda m, p, h, b: None
    assert code == 1
    assert "nothing committed" in report["error"]
    assert s3_state(moto_with_proxy, bucket) == {}  # the lake was not touched
    code, report = sync(moto_with_proxy, bucket, "down_db")
    assert code == 0, report
    assert_oracle_holds(reliability)
    assert s3_state(moto_with_proxy, bucket) == reference["state"]
    assert glue_partitions(moto_with_proxy, "down_db") == reference["partitions"]


@pytest.mark.slow
def test_an_iceberg_lake_through_an_s3_outage_mid_commit_fails_clearly_and_converges(
    moto_with_proxy, bucket, reliability
):
    """``table_format = "iceberg"`` with its tables in Glue: every write of an Iceberg
    metadata file fails, so the table commits break after the journal and the data files
    are written. The sync
    fails with the error, readers see no table change, and one re-run rolls the journaled
    commit forward to exactly what the oracle says (read through Glue, from moto directly)."""
    from pyiceberg.catalog.glue import GlueCatalog

    from datalake_assets.settings.formats_section import FormatConfig
    from datalake_assets_tests.support.iceberg_reader import read_iceberg_lake, tables

    store = S3Store(moto_with_proxy["moto"])
    proxy = moto_with_proxy["proxy"]
    iceberg = FormatConfig(
        format="iceberg",
        catalog="glue",
        glue_region="us-east-1",
        glue_endpoint_url=proxy.url,
        s3_endpoint_url=proxy.url,
    )
    reader = GlueCatalog(
        "reader",
        **{
            "glue.region": "us-east-1",
            "glue.endpoint": moto_with_proxy["moto"],
            "s3.endpoint": moto_with_proxy["moto"],
            "s3.region": "us-east-1",
        },
    )

    def lake():
        return read_iceberg_lake(store, reader, bucket["lake"], SRC, "ice_db")

    reliability.expect(Oracle(store, bucket["archive"], SRC).sync(HOURS).expected(), lake)
    # the tables' metadata files: each table commit fails once its data files are written
    proxy.fail = lambda m, p, h, b: (
        500 if m == "PUT" and "/lake/iceberg/" in p and ".metadata.json" in p else None
    )
    before = proxy.failed
    code, report = sync(
        moto_with_proxy,
        bucket,
        "ice_db",
        table_format=iceberg,
        catalog=CatalogConfig(backend="none"),
    )
    injected = proxy.failed - before
    reliability.fault(injected)
    proxy.fail = lambda m, p, h, b: None
    assert code == 1 and report["status"] == "failed" and report["error"], report
    assert injected >= 1
    assert not any(t.current_snapshot() for t in tables(reader, "ice_db").values())

    code, report = sync(
        moto_with_proxy,
        bucket,
        "ice_db",
        table_format=iceberg,
        catalog=CatalogConfig(backend="none"),
    )
    assert code == 0, report
    assert report["recovered_commits"]  # the journaled table commits rolled forward
    assert_oracle_holds(reliability)
