"""The code location's names, as data: what ``build_definitions`` declares (asset keys, check
names, jobs, sensors, schedules, resources) was recorded on the tree before ``orchestration/``
became sub-packages (issue #41), and must not change when modules move. And each concern's
builder returns a ``dagster.Definitions``, which ``definitions.py`` merges."""

from __future__ import annotations

import pytest
from dagster import Definitions

from datalake_assets.definitions import build_definitions
from datalake_assets.orchestration.alerts.alert_definitions import build_alert_definitions
from datalake_assets.orchestration.automation.automation_definitions import (
    build_automation_definitions,
)
from datalake_assets.orchestration.dbt.model_assets import build_dbt_definitions
from datalake_assets.orchestration.erasure.privacy_jobs import build_privacy_definitions
from datalake_assets.orchestration.freshness.open_hour_asset import build_freshness_definitions
from datalake_assets.orchestration.maintenance.table_maintenance import (
    build_maintenance_definitions,
)
from datalake_assets.orchestration.segment_import.import_definitions import (
    build_segment_import_definitions,
)
from datalake_assets.orchestration.sync.lake_state import LakeState, SourceState
from datalake_assets.orchestration.sync.sync_definitions import build_sync_definitions
from datalake_assets.settings import load_settings
from datalake_assets.spec.naming import STANDARD_TABLES
from datalake_assets_tests.support.settings_files import load_lake_toml, per_source_sensors

pytestmark = [pytest.mark.dagster]

TWO_SOURCES = (
    'archive_root = "archive"\nlake_root = "lake"\n'
    '[[sources]]\nid = "web-prod"\nslug = "web_prod"\nstart = "2026-11-01-00:00"\n'
    'segment_archive = "segment"\nsegment_source_id = "seg123"\n'
    '[[sources]]\nid = "app"\nstart = "2026-11-01-00:00"\n'
)

# ------------------------------------------------------------------ the names, recorded before

# every source's assets and checks (the same for each source), then the models', then the
# Segment import's
SYNC_ASSETS = [
    "aliases",
    "catalog",
    "groups",
    "identifies",
    "pages",
    "quarantine",
    "raw_archive",
    "screens",
    "sync_reports",
    "tracks",
]
SYNC_CHECKS = [
    "aliases:duplicates",
    "aliases:schema_conformance",
    "aliases:type_drift",
    "catalog:in_step",
    "groups:duplicates",
    "groups:schema_conformance",
    "groups:type_drift",
    "identifies:duplicates",
    "identifies:schema_conformance",
    "identifies:type_drift",
    "pages:duplicates",
    "pages:schema_conformance",
    "pages:type_drift",
    "screens:duplicates",
    "screens:schema_conformance",
    "screens:type_drift",
    "sync_reports:completeness",
    "tracks:duplicates",
    "tracks:schema_conformance",
    "tracks:type_drift",
]
MODEL_ASSETS = ["daily_event_counts", "identity_graph", "sessions", "users"]
MODEL_CHECKS = [
    "daily_event_counts:accepted_values_daily_event_counts_type__track__page__screen__identify"
    "__group__alias",
    "daily_event_counts:not_null_daily_event_counts_daily_event_count_id",
    "daily_event_counts:unique_daily_event_counts_daily_event_count_id",
    "identity_graph:not_null_identity_graph_link_id",
    "identity_graph:relationships_identity_graph_user_id__user_id__ref_users_",
    "identity_graph:unique_identity_graph_link_id",
    "sessions:not_null_sessions_session_id",
    "sessions:unique_sessions_session_id",
    "users:not_null_users_user_id",
    "users:unique_users_user_id",
]
IMPORT_ASSETS = ["segment_import"]
IMPORT_CHECKS = ["segment_import:all_files_imported"]

COMMON_JOBS = ["compact_identity_summaries", "datalake_reload_definitions", "forget_person"]
COMMON_SENSORS = ["lake_definitions_sensor", "privacy_requests_sensor"]

EXPECTED = {
    # the built-in defaults: the demo source, batched sensor runs
    # no settings: an Iceberg lake (issue #45), so its compaction and maintenance job too
    "defaults": {
        # the open hour's batches every 5 minutes by default on Iceberg (issue #55)
        "slugs": {"demo": "sync models batches"},
        "jobs": [*COMMON_JOBS, "datalake_sync_job", "demo_sync_job", "table_maintenance"],
        "sensors": [*COMMON_SENSORS, "datalake_archive_sensor", "datalake_models_automation"],
        "schedules": ["compact_identity_summaries_nightly", "table_maintenance_nightly"],
    },
    "batched": {
        "slugs": {"app": "sync models", "web_prod": "sync models import"},
        "jobs": [
            *COMMON_JOBS,
            "app_sync_job",
            "datalake_sync_job",
            "web_prod_segment_import_job",
            "web_prod_sync_job",
        ],
        "sensors": [
            *COMMON_SENSORS,
            "datalake_archive_sensor",
            "datalake_models_automation",
            "web_prod_segment_import_sensor",
            "web_prod_segment_import_sync_sensor",
        ],
        "schedules": ["compact_identity_summaries_nightly"],
    },
    "per_source": {
        "slugs": {"app": "sync models", "web_prod": "sync models import"},
        "jobs": [*COMMON_JOBS, "app_sync_job", "web_prod_segment_import_job", "web_prod_sync_job"],
        "sensors": [
            *COMMON_SENSORS,
            "app_archive_sensor",
            "datalake_models_automation",
            "web_prod_archive_sensor",
            "web_prod_segment_import_sensor",
            "web_prod_segment_import_sync_sensor",
        ],
        "schedules": ["compact_identity_summaries_nightly"],
    },
    # [alerts] with a destination: the two alert sensors (with none, as everywhere above: none)
    "alerts": {
        "slugs": {"app": "sync models", "web_prod": "sync models import"},
        "jobs": [
            *COMMON_JOBS,
            "app_sync_job",
            "datalake_sync_job",
            "web_prod_segment_import_job",
            "web_prod_sync_job",
        ],
        "sensors": [
            *COMMON_SENSORS,
            "datalake_archive_sensor",
            "datalake_event_alerts",
            "datalake_models_automation",
            "datalake_run_failure_alerts",
            "web_prod_segment_import_sensor",
            "web_prod_segment_import_sync_sensor",
        ],
        "schedules": ["compact_identity_summaries_nightly"],
    },
    # the models on an Iceberg lake since issue #43 (the DuckDB engine reads Iceberg tables),
    # each source's open hour since issue #55
    "iceberg": {
        "slugs": {"app": "sync models batches", "web_prod": "sync models import batches"},
        "jobs": [
            *COMMON_JOBS,
            "app_sync_job",
            "datalake_sync_job",
            "table_maintenance",
            "web_prod_segment_import_job",
            "web_prod_sync_job",
        ],
        "sensors": [
            *COMMON_SENSORS,
            "datalake_archive_sensor",
            "datalake_models_automation",
            "web_prod_segment_import_sensor",
            "web_prod_segment_import_sync_sensor",
        ],
        "schedules": ["compact_identity_summaries_nightly", "table_maintenance_nightly"],
    },
}
PARTS = {
    "sync": (SYNC_ASSETS, SYNC_CHECKS),
    "models": (MODEL_ASSETS, MODEL_CHECKS),
    "import": (IMPORT_ASSETS, IMPORT_CHECKS),
    "batches": (["open_hour"], []),
}


def expected(case: str) -> dict[str, list[str]]:
    e = EXPECTED[case]
    assets, checks = [], []
    for slug, parts in e["slugs"].items():
        for part in parts.split():
            part_assets, part_checks = PARTS[part]
            assets += [f"{slug}/{a}" for a in part_assets]
            checks += [f"{slug}/{c}" for c in part_checks]
    return {
        "assets": sorted(assets),
        "checks": sorted(checks),
        "jobs": sorted(e["jobs"]),
        "sensors": sorted(e["sensors"]),
        "schedules": sorted(e["schedules"]),
        "resources": ["compute"],
    }


def names(defs: Definitions) -> dict[str, list[str]]:
    graph = defs.resolve_asset_graph()
    return {
        "assets": sorted(k.to_user_string() for k in defs.resolve_all_asset_keys()),
        "checks": sorted(
            f"{k.asset_key.to_user_string()}:{k.name}" for k in graph.asset_check_keys
        ),
        "jobs": sorted(j.name for j in defs.jobs or ()),
        "sensors": sorted(s.name for s in defs.sensors or ()),
        "schedules": sorted(s.name for s in defs.schedules or ()),
        "resources": sorted(defs.resources or {}),
    }


def full_state(*ids: str) -> LakeState:
    return LakeState(
        {i: SourceState(tuple(sorted(STANDARD_TABLES)), "2026-11-01-00:00") for i in ids}
    )


def settings_of(case: str, tmp_path):
    if case == "defaults":
        return load_settings(env={"DATALAKE_HOME": str(tmp_path)})
    text = 'table_format = "iceberg"\n' + TWO_SOURCES if case == "iceberg" else TWO_SOURCES
    if case == "alerts":
        text = TWO_SOURCES.replace(
            "[[sources]]", '[alerts]\nwebhook_url = "http://127.0.0.1:9/hook"\n[[sources]]', 1
        )
    settings = load_lake_toml(tmp_path, text, models=True)
    return per_source_sensors(settings) if case == "per_source" else settings


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_the_code_location_declares_the_names_it_declared_before(case, tmp_path):
    settings = settings_of(case, tmp_path)
    state = None if case == "defaults" else full_state("web-prod", "app")
    assert names(build_definitions(settings, state=state)) == expected(case)


@pytest.mark.slow
def test_each_concern_builds_a_definitions(tmp_path):
    settings = load_lake_toml(tmp_path, TWO_SOURCES, models=True)
    state = full_state("web-prod", "app")
    sync = build_sync_definitions(settings, state)
    sync_jobs = {job.name: job for job in sync.jobs or ()}
    for defs in [
        sync,
        build_automation_definitions(settings, state, sync_jobs),
        build_segment_import_definitions(settings, state, sync_jobs),
        build_dbt_definitions(settings, state),
        build_privacy_definitions(settings),
        build_maintenance_definitions(settings),
        build_alert_definitions(settings),
        build_freshness_definitions(settings),
    ]:
        assert isinstance(defs, Definitions)


@pytest.mark.slow
def test_an_iceberg_lakes_assets_say_iceberg_and_where_its_catalog_is(tmp_path):
    """Issue #45's finding: the catalog asset of an Iceberg lake said kind ``hive`` and an
    embedded Hive metastore while its tables are in the Iceberg catalog."""
    from dagster import AssetKey

    settings = load_lake_toml(
        tmp_path, 'table_format = "iceberg"\n[[sources]]\nid = "demo"\nstart = "2026-11-01-00:00"\n'
    )
    defs = build_definitions(settings, state=full_state("demo"))
    graph = defs.resolve_asset_graph()
    catalog = graph.get(AssetKey(["demo", "catalog"]))
    assert catalog.kinds == {"iceberg"}
    assert catalog.metadata["catalog"] == "iceberg"
    assert catalog.metadata["location"].startswith("Iceberg SQL catalog in ")
    assert "Hive" not in catalog.description
    assert graph.get(AssetKey(["demo", "pages"])).kinds == {"iceberg", "spark"}
