"""The catalog tests' MariaDB server (``support/mariadb.py``): one private server on loopback
for the session, started on first use. Without Debian's ``mariadb-server`` and
``libmariadb-java`` the tests that need it skip, except under CI, where they fail."""

from __future__ import annotations

import os

import pytest

from datalake_assets_tests.support.mariadb import MariaDB, missing


@pytest.fixture(scope="session")
def mariadb(tmp_path_factory):
    lacking = missing()
    if lacking:
        why = (
            f"MariaDB is not installed ({', '.join(lacking)}): "
            "apt-get install -y mariadb-server libmariadb-java"
        )
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    server = MariaDB(tmp_path_factory.mktemp("mariadb"))
    server.start()
    yield server
    server.stop()
