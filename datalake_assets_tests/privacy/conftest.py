"""The privacy tests' lake: synced once per session, copied for each test."""

import shutil

import pytest

from datalake_assets.spec import layout
from datalake_assets_tests.privacy.people import build_lake, copy_lake


@pytest.fixture(scope="session")
def base_people_lake(spark, tmp_path_factory):
    """The people's archive of both sources, synced (with the identity index the sync
    writes)."""
    root = str(tmp_path_factory.mktemp("people"))
    build_lake(spark, root)
    return root


@pytest.fixture()
def people_lake(base_people_lake, tmp_path):
    """A copy of the synced lake without an identity index (a lake synced before it existed):
    its settings."""
    settings = copy_lake(base_people_lake, str(tmp_path))
    shutil.rmtree(layout.join(settings.lake_root, "_identities"))
    return settings


@pytest.fixture()
def indexed_lake(base_people_lake, tmp_path):
    """A copy of the synced lake with the identity index of every hour (the sync's): its
    settings."""
    return copy_lake(base_people_lake, str(tmp_path))
