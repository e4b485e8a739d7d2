"""The sync concern's definitions: each source's assets (its tables, quarantine, sync reports,
raw archive, catalog, with their checks and freshness policies) and its ``<slug>_sync_job``. What requests the syncs
is ``automation/``; the Segment import's syncs, ``segment_import/``."""

from __future__ import annotations

from dagster import Definitions

from datalake_assets.orchestration.alerts.freshness_policies import with_freshness_policies
from datalake_assets.orchestration.sync.lake_state import LakeState
from datalake_assets.orchestration.sync.source_assets import build_source_assets
from datalake_assets.orchestration.sync.sync_job import build_sync_job, find_lake_sync
from datalake_assets.settings import LakeSettings


def build_sync_definitions(settings: LakeSettings, state: LakeState) -> Definitions:
    """Every source's assets and sync job, for the tables of ``state``."""
    assets, jobs = [], []
    for source_settings in settings.sources:
        source = state.effective(source_settings)  # start resolved ("auto")
        source_assets = with_freshness_policies(
            build_source_assets(settings, source, state.source(source)), settings.alerts
        )
        assets.extend(source_assets)
        jobs.append(build_sync_job(source, find_lake_sync(source, source_assets)))
    return Definitions(assets=assets, jobs=jobs)
