"""The code location: every source's assets, and the compute resource."""

from __future__ import annotations

from dagster import Definitions

from datalake_assets.assets import build_source_assets
from datalake_assets.resources import LocalSparkCompute
from datalake_assets.settings import LakeSettings, load_settings


def build_definitions(settings: LakeSettings | None = None) -> Definitions:
    settings = settings or load_settings()
    assets = [a for source in settings.sources for a in build_source_assets(settings, source)]
    compute = LocalSparkCompute(
        master=settings.spark.master,
        driver_memory=settings.spark.driver_memory,
        conf={
            "spark.sql.shuffle.partitions": str(settings.spark.shuffle_partitions),
            **settings.spark.extra_conf,
        },
    )
    return Definitions(assets=assets, resources={"compute": compute})


defs = build_definitions()
