"""A whole sync on Azure: the archive and the lake in Azurite (``az://``, blob-only), the
shared local Spark session with no hadoop-azure jars. Stages A and B, the id index read for
cross-hour dedup, the commit (copy and delete) and the lock all go through pyarrow and the
Azure SDK; the result is held to the oracle, read back through the Azure SDK."""

from __future__ import annotations

import gzip

import orjson
import pytest

from datalake_assets.catalog.config import CatalogConfig
from datalake_assets.ingest.demo import generate_archive
from datalake_assets.lake import storage
from datalake_assets.spec import layout
from datalake_assets.spec.layout import ArchiveHour
from datalake_assets.transform.dedup import spark_reads
from datalake_assets.transform.job import SyncRequest, run_sync
from datalake_assets_tests.azure.azure_store import AzureStore
from datalake_assets_tests.support.archive_builders import msg
from datalake_assets_tests.support.lake_reader import read_lake
from datalake_assets_tests.support.oracle import Oracle

pytestmark = [pytest.mark.spark, pytest.mark.reliability]
SRC = "azsrc"
H10, H11 = "2026-11-21T10", "2026-11-21T11"


def put_file(archive: str, hour: str, name: str, lines: list) -> None:
    body = b"".join((ln if isinstance(ln, bytes) else orjson.dumps(ln)) + b"\n" for ln in lines)
    where = layout.archive_hour_dir(archive, SRC, ArchiveHour.parse(hour))
    storage.write_bytes_atomic(f"{where}/{name}", gzip.compress(body))


def sync(spark, lake: str, archive: str, *hours: str):
    return run_sync(
        spark,
        SyncRequest(
            lake, archive, SRC, hours, lock_wait_seconds=30, catalog=CatalogConfig(backend="none")
        ),
    )


@pytest.mark.slow
def test_a_whole_sync_reads_and_writes_azurite(spark_on_azurite, container, azure_env, reliability):
    spark = spark_on_azurite
    archive, lake = f"az://{container}/archive", f"az://{container}/lake"
    assert not spark_reads(spark, lake)  # no hadoop-azure: Python workers read the lake
    s = generate_archive(
        archive,
        SRC,
        [ArchiveHour.parse(h) for h in (H10, H11)],
        events_per_hour=150,
        files_per_hour=2,
        seed=5,
    )
    put_file(archive, H10, "part-0009.jsonl.gz", [msg("cross-1"), b'{"broken'])
    put_file(archive, H11, "part-0009.jsonl.gz", [msg("cross-1", hour=H11)])  # seen in 10
    store = AzureStore(azure_env)
    oracle = Oracle(store, archive, SRC)
    reliability.expect(lambda: oracle.expected(), lambda: read_lake(store, lake, SRC))

    first = sync(spark, lake, archive, H10)
    oracle.sync([H10])
    second = sync(spark, lake, archive, H11)  # reads hour 10's id index from Azurite
    oracle.sync([H11])
    for r in (first, second):
        assert r.source.status == "finished" and r.source.reconciled, r.source
    assert first.source.lines_in + second.source.lines_in == s.lines + 3
    assert second.source.cross_hour_duplicates >= 1
    found = reliability.compare()
    assert found.ok, str(found)

    # A re-run of hour 10 replaces it (copy in, old objects deleted): the same lake.
    before = read_lake(store, lake, SRC).rows
    again = sync(spark, lake, archive, H10)
    assert again.source.reconciled and read_lake(store, lake, SRC).rows == before
    for leftover in ("_staging", "_commits"):  # staging cleaned, no journal left (an empty
        # folder's marker blob, "name/", may stay: pyarrow makes one for a created folder)
        assert not [loc for loc in store.list(f"{lake}/{leftover}") if not loc.endswith("/")]
