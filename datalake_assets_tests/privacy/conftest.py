"""The privacy tests' lake: synced once per session, copied for each test."""

import pytest

from datalake_assets_tests.privacy.people import build_lake, copy_lake, write_identity_index


@pytest.fixture(scope="session")
def base_people_lake(spark, tmp_path_factory):
    """The people's archive of both sources, synced (no identity index: the sync of this
    branch does not write one yet; ``indexed_lake`` adds it as the sync will)."""
    root = str(tmp_path_factory.mktemp("people"))
    build_lake(spark, root)
    return root


@pytest.fixture()
def people_lake(base_people_lake, tmp_path):
    """A copy of the synced lake without an identity index (a lake synced before it existed):
    its settings."""
    return copy_lake(base_people_lake, str(tmp_path))


@pytest.fixture()
def indexed_lake(base_people_lake, tmp_path):
    """A copy of the synced lake with the identity index of every hour: its settings."""
    settings = copy_lake(base_people_lake, str(tmp_path))
    write_identity_index(settings)
    return settings
