"""A whole sync into an ``abfss://`` lake (hierarchical namespace), on the emulation of its
rename rules (``hns_emulation.py``) in the driver and in Spark's Python workers: the run that
is killed between its renames (``swap_aside``) leaves every table partition whole, and the
next sync recovers the journaled commit and converges to the oracle."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from datalake_assets.catalog.config import CatalogConfig
from datalake_assets.ingest.demo import generate_archive
from datalake_assets.lake.faults import ENV as FAULT_ENV
from datalake_assets.spec.layout import ArchiveHour
from datalake_assets.transform.job import SyncRequest, run_sync
from datalake_assets_tests.azure.hns_emulation import (
    LOOPBACK_GUARD,
    ROOT_ENV,
    hns_filesystem,
    install,
)
from datalake_assets_tests.support.archive_builders import msg, write_hour
from datalake_assets_tests.support.lake_reader import LocalStore, read_lake
from datalake_assets_tests.support.oracle import Oracle

pytestmark = [pytest.mark.spark, pytest.mark.reliability]
SRC = "hnssrc"
HOURS = ("2026-11-21T10", "2026-11-21T11")
LAKE = "abfss://lake@acct1.dfs.core.windows.net/prod"
REPO = str(Path(__file__).resolve().parents[2])
SITE = str(Path(__file__).resolve().parent / "hns_site")  # its sitecustomize installs it


@pytest.fixture()
def hns_spark(spark, tmp_path, monkeypatch):
    """The shared session with the account emulated in ``tmp_path/account``: in the driver by
    a patch, in the Python workers by ``hns_site/sitecustomize.py`` (their environment)."""
    root = str(tmp_path / "account")
    fs, handler = hns_filesystem(root)
    install(monkeypatch.setattr, fs, root)
    for name, value in LOOPBACK_GUARD.items():
        monkeypatch.setenv(name, value)
    env = spark.sparkContext.environment
    saved = dict(env)
    env.update({ROOT_ENV: root, "PYTHONPATH": os.pathsep.join([SITE, REPO]), **LOOPBACK_GUARD})
    yield root, handler
    env.clear()
    env.update(saved)


def request(archive: str) -> SyncRequest:
    return SyncRequest(
        LAKE, archive, SRC, HOURS, lock_wait_seconds=30, catalog=CatalogConfig(backend="none")
    )


def partitions(local_lake: str) -> dict[str, list[str]]:
    """``{table/day/hr: sorted message ids}`` as a reader of the Parquet files sees them."""
    out: dict[str, list[str]] = defaultdict(list)
    base = Path(local_lake) / "data" / SRC
    for f in base.glob("segment_type=*/day=*/hr=*/*.parquet"):
        key = "/".join(f.relative_to(base).parts[:3])
        out[key] += pq.read_table(f, columns=["message_id"]).column(0).to_pylist()
    return {k: sorted(v) for k, v in out.items()}


@pytest.mark.slow
def test_a_sync_killed_between_its_renames_converges(spark, hns_spark, tmp_path, reliability):
    root, handler = hns_spark
    local_lake = os.path.join(root, "lake", "prod")
    archive = str(tmp_path / "archive")
    generate_archive(
        archive,
        SRC,
        [ArchiveHour.parse(h) for h in HOURS],
        events_per_hour=150,
        files_per_hour=2,
        seed=3,
    )
    first = run_sync(spark, request(archive))
    assert first.source.reconciled and handler.renames  # committed by renames
    v1 = partitions(local_lake)
    write_hour(
        archive,
        SRC,
        HOURS[0],
        [msg(f"late-{i}", properties={"n": i}) for i in range(20)] + [msg("late-0"), b'{"broken'],
        name="part-0009.jsonl.gz",
    )
    store = LocalStore()
    reliability.expect(
        Oracle(store, archive, SRC).sync(HOURS).expected(),
        lambda: read_lake(store, local_lake, SRC),
    )

    env = {
        **os.environ,
        FAULT_ENV: "swap_aside",
        ROOT_ENV: root,
        "PYTHONPATH": os.pathsep.join([SITE, REPO]),
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    killed = subprocess.run(
        [sys.executable, "-m", "datalake_assets.transform.job", *request(archive).to_args()],
        env=env,
        capture_output=True,
        timeout=600,
    )
    assert killed.returncode == -9, killed.stderr.decode()[-3000:]
    assert b"killed at swap_aside" in killed.stderr
    reliability.fault()
    seen = partitions(local_lake)
    replaced = [p for p in Path(local_lake, "_staging").rglob("*.replaced") if p.is_dir()]
    assert len(replaced) == 1  # one partition aside, the hour briefly absent

    lease = Path(local_lake, "_locks", f"{SRC}.json")  # the dead run's lease, left behind:
    held = json.loads(lease.read_text())  # age it past its expiry instead of waiting 300 s
    lease.write_text(json.dumps({**held, "expires_at": 0}))
    again = run_sync(spark, request(archive))  # takes the lease over, recovers, re-syncs
    assert again.source.reconciled and again.source.recovered_commits
    v2 = partitions(local_lake)
    for key, ids in seen.items():  # at the kill, every table partition was whole
        assert ids in (v1.get(key), v2.get(key)), key
    found = reliability.compare()
    assert found.ok, str(found)
    assert not [p for p in Path(local_lake, "_staging").rglob("*") if p.is_file()]
