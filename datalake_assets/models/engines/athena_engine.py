"""``[models] engine = "athena"``: the models on Amazon Athena (dbt-athena), for a lake whose
tables are in Glue: Athena reads the event tables where the catalog registered them and
writes each model's table into the lake itself (``s3_data_dir``: ``<lake_root>/models/<slug>/
<model>/``), registered in Glue beside them; nothing is published afterwards.

dbt-athena is an optional dependency (``pip install 'datalake-assets[athena]'``). Not run
here (no AWS account): the project parses and compiles with dbt-athena's macros in the suite
(``datalake_assets_tests/models/test_portable_sql.py``)."""

from __future__ import annotations

from datalake_assets.lake import storage
from datalake_assets.models.engines.engine_interface import ModelEngine
from datalake_assets.settings import LakeSettings, SourceSettings
from datalake_assets.settings.formats_section import FormatConfig
from datalake_assets.spec.layout import join

ATHENA_CATALOG = "awsdatacatalog"  # Glue's catalog as Athena names it


def staging_dir(settings: LakeSettings) -> str:
    """Where Athena writes query results: ``[models] athena_staging_dir``, else the lake's
    ``_athena/`` folder."""
    return settings.models.athena_staging_dir or join(settings.lake_root, "_athena") + "/"


class AthenaEngine(ModelEngine):
    name = "athena"

    def why_not(self, settings: LakeSettings) -> str | None:
        if settings.models.profiles_dir:
            return None
        in_glue = (
            FormatConfig.of_settings(settings).catalog == "glue"
            if settings.table_format == "iceberg"
            else settings.catalog.backend == "glue"
        )
        if not in_glue:
            return (
                "the Athena engine reads the lake's tables from Glue: set [catalog] backend = "
                '"glue" (or [iceberg] catalog = "glue"), or use [models] engine = "duckdb"'
            )
        if not storage.on_s3(settings.lake_root):
            return f"the Athena engine needs a lake on S3, not {settings.lake_root}"
        return None

    def profile(self, settings: LakeSettings, source: SourceSettings) -> dict:
        region = settings.catalog.glue_region or settings.iceberg.glue_region
        return {
            "type": "athena",
            "s3_staging_dir": staging_dir(settings),
            "s3_data_dir": join(settings.lake_root, "models", source.slug) + "/",
            "s3_data_naming": "table",  # <s3_data_dir>/<model>/: the lake's models folder
            "region_name": region or "us-east-1",
            "database": ATHENA_CATALOG,
            "schema": source.database,
            "threads": 4,
        }
