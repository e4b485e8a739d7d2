"""``<slug>_sync_job``: the job of a source's sync, what its archive sensor (and the Segment
import's sync sensor) requests for each hour."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dagster import AssetsDefinition, AssetSelection, define_asset_job, in_process_executor

from datalake_assets.orchestration.automation.sensor_toolkit import AssetJob
from datalake_assets.settings import SourceSettings


def job_name(source: SourceSettings) -> str:
    return f"{source.slug}_sync_job"


def find_lake_sync(source: SourceSettings, assets: Sequence[Any]) -> AssetsDefinition:
    """The source's ``<slug>_lake_sync`` multi-asset among ``build_source_assets``' result."""
    name = f"{source.slug}_lake_sync"
    for a in assets:
        if isinstance(a, AssetsDefinition) and a.node_def is not None and a.node_def.name == name:
            return a
    raise ValueError(f"no multi-asset named {name!r} among the assets of source {source.id!r}")


def build_sync_job(source: SourceSettings, lake_sync: AssetsDefinition) -> AssetJob:
    """``<slug>_sync_job``: the source's lake-sync multi-asset; its partitions (the source's
    hourly partitions) are inferred from the asset (passing them is deprecated in 1.13)."""
    return define_asset_job(
        job_name(source),
        selection=AssetSelection.assets(lake_sync),
        description=f"Sync hours of source {source.id} from the raw archive to the lake.",
        executor_def=in_process_executor,  # one step: no step process (~2.5 s; bench/README)
    )
