"""``datalake catalog init-metastore`` against a private MariaDB server: the schema created up
front (never on first use), idempotently; a database that is not ready refused with the reason
and the fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest

from datalake_assets.settings.catalog_section import ENV_METASTORE_PASSWORD
from datalake_assets_tests.support.mariadb import metastore_toml, run_datalake

pytestmark = pytest.mark.spark  # JVMs


def probe(settings: str, tmp_path, password: str) -> dict:
    """A Spark session of ``settings`` asks the metastore for a database's tables."""
    plan = tmp_path / "probe.json"
    out = tmp_path / "probe.out.json"
    plan.write_text(json.dumps({"settings": settings, "out": str(out), "probe": True}))
    env = {**os.environ, ENV_METASTORE_PASSWORD: password}
    proc = subprocess.run(
        [sys.executable, "-m", "datalake_assets_tests.catalog.metastore_worker", str(plan)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.mark.slow
def test_init_metastore_creates_the_schema_once(mariadb, tmp_path):
    db = mariadb.create_database(f"ms_{uuid.uuid4().hex[:8]}")
    settings = metastore_toml(mariadb, tmp_path, db)
    # a session never creates the schema: it says what to run
    refused = probe(settings, tmp_path, mariadb.password)
    assert "datalake catalog init-metastore" in refused["error"], refused
    assert mariadb.tables(db) == []

    first = run_datalake(settings, "catalog", "init-metastore", password=mariadb.password)
    assert first.returncode == 0, first.stderr[-3000:]
    assert f"metastore schema 2.3.0 created in database '{db}'" in first.stdout
    tables = mariadb.tables(db)
    for table in ("DBS", "TBLS", "PARTITIONS", "COLUMNS_V2", "SDS", "VERSION", "SEQUENCE_TABLE"):
        assert table in tables
    assert mariadb.sql("SELECT SCHEMA_VERSION FROM VERSION", db) == [("2.3.0",)]
    # the ids DataNucleus would otherwise add on first use, and Hive's own first-start rows
    sequences = dict(mariadb.sql("SELECT SEQUENCE_NAME, NEXT_VAL FROM SEQUENCE_TABLE", db))
    assert "org.apache.hadoop.hive.metastore.model.MPartition" in sequences
    assert mariadb.sql("SELECT NAME FROM DBS", db) == [("default",)]
    # every column in latin1 (the database's), none in utf8mb4
    charsets = mariadb.sql(
        "SELECT DISTINCT CHARACTER_SET_NAME FROM information_schema.COLUMNS "
        f"WHERE TABLE_SCHEMA = '{db}' AND CHARACTER_SET_NAME IS NOT NULL",
        db,
    )
    assert charsets == [("latin1",)]
    assert mariadb.password not in first.stdout + first.stderr

    again = run_datalake(settings, "catalog", "init-metastore", password=mariadb.password)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "already present" in again.stdout and mariadb.tables(db) == tables


@pytest.mark.slow
def test_init_metastore_refuses_what_would_break(mariadb, tmp_path):
    """utf8mb4 (the schema's keys and columns exceed MySQL's limits), a wrong password, and a
    missing password: each a clear error, exit code 2, nothing created."""
    db = mariadb.create_database(f"ms_{uuid.uuid4().hex[:8]}", "utf8mb4")
    settings = metastore_toml(mariadb, tmp_path, db)
    utf8 = run_datalake(settings, "catalog", "init-metastore", password=mariadb.password)
    assert utf8.returncode == 2, utf8.stderr[-3000:]
    assert "needs latin1" in utf8.stderr and f"ALTER DATABASE `{db}` CHARACTER SET latin1" in (
        utf8.stderr
    )
    assert mariadb.tables(db) == []
    wrong = run_datalake(settings, "catalog", "init-metastore", password="not-the-password")
    assert wrong.returncode == 2 and "refused the user or password" in wrong.stderr
    assert "not-the-password" not in wrong.stdout + wrong.stderr
    missing = run_datalake(settings, "catalog", "init-metastore")  # no JVM started
    assert missing.returncode == 2 and ENV_METASTORE_PASSWORD in missing.stderr
    assert mariadb.tables(db) == []
