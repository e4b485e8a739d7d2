"""Fixtures of the Azure storage tests: one Azurite for the session (``azurite_server.py``),
its account in the environment, a fresh container per test, and the same account for the
shared Spark session's Python workers."""

from __future__ import annotations

import os
import uuid

import pytest

from datalake_assets.lake import azure, storage
from datalake_assets_tests.azure.azurite_server import Azurite


@pytest.fixture(scope="session")
def azurite(tmp_path_factory):
    server = Azurite(str(tmp_path_factory.mktemp("azurite")))
    yield server
    server.stop()


@pytest.fixture()
def azure_env(azurite, monkeypatch):
    """Azurite's account in the environment, and nothing else of Azure's (a developer's real
    credentials never reach a test)."""
    for name in list(os.environ):
        if name.startswith(("AZURE_", "DATALAKE_AZURE_")):
            monkeypatch.delenv(name)
    for name, value in azurite.env().items():
        monkeypatch.setenv(name, value)
    azure.clear_caches()
    storage._fs_for.cache_clear()
    yield azurite
    azure.clear_caches()


@pytest.fixture()
def container(azure_env) -> str:
    """A fresh container of the Azurite account: its name."""
    name = f"t{uuid.uuid4().hex[:12]}"
    azure_env.service().create_container(name)
    return name


@pytest.fixture()
def spark_on_azurite(spark, azure_env):
    """The shared session, its Python workers reaching Azurite: the workers of a session that
    started before this test do not see the test's environment, so the account is passed as
    the workers' environment (``SparkContext.environment``), as a cluster's would be set."""
    env = spark.sparkContext.environment
    saved = dict(env)
    env.update(azure_env.env())
    yield spark
    env.clear()
    env.update(saved)
