"""The catalog as an asset (issue #34): ``[<slug>, catalog]``, each hour's Glue or Hive metadata.

Downstream of the source's tables and quarantine, hourly-partitioned like them, materialized
by the same run right after the sync registers its hours (one Spark job per source-hour stays
the rule). Its metadata says what was registered for the hour (the ``CatalogHour`` that
``catalog/step.py`` puts on the report's entry of the hour). Its blocking check ``in_step`` reads
the catalog back: every table with files in the hour has that partition, at the files' folder, with the
files' columns (and, on Glue, their types); it fails naming what is missing or different.

When registration fails after the data commit, the tables' hours are materialized and the
catalog's are not (the run fails with the error that says so); materializing the catalog
asset alone registers the hours again from the lake's files, syncing nothing. With
``[catalog] backend = "none"`` there is no such asset.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from dagster import (
    AssetCheckEvaluation,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetKey,
    AssetSpec,
    MetadataValue,
)

from datalake_assets.catalog.config import CatalogConfig, config_from_settings
from datalake_assets.lake.hour_report import CatalogHour
from datalake_assets.lake.report import SyncReport
from datalake_assets.settings import LakeSettings, SourceSettings
from datalake_assets.settings.formats_section import FormatConfig
from datalake_assets.spec.layout import ArchiveHour
from datalake_assets.spec.naming import CATALOG
from datalake_assets.spec.table_formats import ICEBERG

CHECK_IN_STEP = "in_step"


def has_catalog(settings: LakeSettings) -> bool:
    return settings.catalog.backend != "none"


def catalog_key(slug: str) -> AssetKey:
    return AssetKey([slug, CATALOG])


def location(cfg: CatalogConfig) -> str:
    """Where the catalog is, in words a user recognises."""
    if cfg.backend == "glue":
        return (
            "AWS Glue Data Catalog"
            + (f" {cfg.glue_catalog_id}" if cfg.glue_catalog_id else "")
            + f" in {cfg.glue_region or 'the default region'}"
            + (f" at {cfg.glue_endpoint_url}" if cfg.glue_endpoint_url else "")
        )
    if cfg.hive_metastore_uri:
        return f"Hive metastore {cfg.hive_metastore_uri}"
    if cfg.metastore_jdbc_url:
        return f"Hive metastore in {cfg.metastore_jdbc_url}"
    return f"embedded Hive metastore in {cfg.metastore_dir}"


def iceberg_location(settings: LakeSettings) -> str:
    """Where an Iceberg lake's catalog is: its tables are registered there by their commits."""
    ice = FormatConfig.of_settings(settings)
    if ice.catalog == "glue":
        region = ice.glue_region or "the default region"
        return f"Iceberg tables in the AWS Glue Data Catalog in {region}"
    if ice.uri:
        return "Iceberg SQL catalog at the configured uri"  # it may hold a password
    return f"Iceberg SQL catalog in {settings.lake_root}/_iceberg/catalog.db"


def catalog_specs(
    settings: LakeSettings,
    source: SourceSettings,
    tables: list[str],
    partitions: Any,
    deps: list[AssetKey],
) -> tuple[list[AssetSpec], list[AssetCheckSpec]]:
    """The catalog asset and its check (none with ``backend = "none"``)."""
    if not has_catalog(settings):
        return [], []
    cfg = config_from_settings(settings.catalog)
    key = catalog_key(source.slug)
    where, kinds = location(cfg), {cfg.backend}
    if settings.table_format == ICEBERG:
        # the tables are the Iceberg catalog's (their commits register them), not the
        # [catalog] backend's, whose settings an Iceberg lake does not use for its tables
        where, kinds = iceberg_location(settings), {ICEBERG}
    spec = AssetSpec(
        key=key,
        deps=deps,
        partitions_def=partitions,
        group_name=source.slug,
        kinds=kinds,
        owners=list(source.owners),
        skippable=True,  # not materialized when registration fails (the run fails, saying so)
        description=(
            f"The catalog metadata of source {source.id}'s tables in database "
            f"{source.database} ({where}): tables, columns and each hour's "
            "partitions. Materialized after the sync registers its hours; "
            "materialized alone, it registers them again from the lake's files."
        ),
        metadata={
            "catalog": ICEBERG if settings.table_format == ICEBERG else cfg.backend,
            "database": source.database,
            "location": where,
        },
    )
    check = AssetCheckSpec(
        CHECK_IN_STEP,
        asset=key,
        blocking=True,
        partitions_def=partitions,
        description="Every table with files in the hour has that partition registered, at "
        "the files' folder, with the files' columns (on Glue, their types)",
    )
    return [spec], [check]


def _entry(report: SyncReport, key: str) -> CatalogHour | None:
    entry = report.source.hour(str(ArchiveHour.parse(key)))
    return entry.catalog if entry is not None else None


def hour_metadata(entry: CatalogHour) -> dict[str, Any]:
    return {
        "catalog": entry.kind,
        "database": entry.database,
        "tables": MetadataValue.json(entry.tables),
        "partitions_registered": entry.partitions_registered,
        "tables_created": MetadataValue.json(entry.tables_created),
        "columns_added": MetadataValue.json(entry.columns_added),
        "columns_widened": MetadataValue.json(entry.columns_widened),
    }


def registered_hours(
    report: SyncReport, keys: list[str]
) -> tuple[dict[str, dict[str, Any]], str | None]:
    """Partition key -> the hour's catalog metadata, and the registration's error if it
    failed (then nothing is recorded: the hours stay as they were)."""
    out: dict[str, dict[str, Any]] = {}
    for k in keys:
        entry = _entry(report, k)
        if entry is not None and entry.error is not None:
            return {}, entry.error
        out[k] = (
            hour_metadata(entry)
            if entry is not None
            else {"partitions_registered": 0, "note": "no files in this hour: nothing to register"}
        )
    return out, None


def in_step_results(
    slug: str, report: SyncReport, keys: list[str]
) -> Iterator[AssetCheckEvaluation]:
    """The ``in_step`` check of each hour the report has a catalog entry for."""
    for k in keys:
        entry = _entry(report, k)
        if entry is None:
            continue
        problems = ([entry.error] if entry.error is not None else []) + entry.problems
        hour = str(ArchiveHour.parse(k))
        yield AssetCheckEvaluation(
            asset_key=catalog_key(slug),
            check_name=CHECK_IN_STEP,
            passed=not problems,
            severity=AssetCheckSeverity.ERROR,
            partition=k,
            metadata={
                "hour": hour,
                "problems": MetadataValue.json(problems),
                "tables_checked": len(entry.tables),
            },
            description=(
                f"the catalog is in step with the lake for hour {hour}"
                if not problems
                else f"FAILED for hour {hour}: {problems[0]}"
                + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")
            ),
        )
