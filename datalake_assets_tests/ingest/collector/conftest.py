import pytest

from datalake_assets.ingest.collector import Collector
from datalake_assets_tests.ingest.collector.helpers import lake_settings


@pytest.fixture()
def collector(tmp_path):
    c = Collector(lake_settings(tmp_path)).start()
    yield c
    c.stop()
