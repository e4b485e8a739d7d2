"""Fixtures shared by every test folder: the Spark session, lake roots, fake AWS (credentials,
in-process moto, a moto server on loopback). Settings files: ``support/settings_files.py``."""

import logging
import os
import uuid

import pytest

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


def pytest_collection_modifyitems(config, items):
    """Files that hold a slow test first, each file's own order kept (a module's tests may
    build on each other, and pytest groups them by their module fixtures' parameters):
    pytest-xdist hands whole files to its workers in this order (``--dist loadfile``), so the
    long end-to-end files start early and the many short ones fill the gaps at the end,
    instead of one worker finishing a 5-minute file alone while the other has nothing left."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)
