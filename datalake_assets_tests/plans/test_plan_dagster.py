"""A tracking plan in Dagster: the ``tracking_plan`` asset check of each table and hour (its
violations by type; warning, or blocking when the settings say so), the plan's hash in the
sync's code version, and the violations table as an asset."""

from __future__ import annotations

import json

import pytest
from dagster import (
    AssetCheckKey,
    AssetCheckSeverity,
    AssetKey,
    AssetSelection,
    DagsterInstance,
    materialize,
)

from datalake_assets.orchestration.compute.spark_compute import LocalSparkCompute
from datalake_assets.orchestration.sync.source_assets import build_source_assets
from datalake_assets.plans.plan_load import load_plan
from datalake_assets_tests.plans.test_plan_sync import PLAN, lines
from datalake_assets_tests.support.archive_builders import write_hour
from datalake_assets_tests.support.settings_files import load_lake_toml

pytestmark = [pytest.mark.spark, pytest.mark.dagster]
HOUR = "2026-11-21T10"
PARTITION = "2026-11-21-10:00"


def settings_with_plan(tmp_path, check: str):
    (tmp_path / "web.json").write_text(json.dumps(PLAN))
    return load_lake_toml(
        tmp_path,
        'archive_root = "archive"\nlake_root = "lake"\n[catalog]\nbackend = "none"\n'
        '[[sources]]\nid = "web"\nstart = "2026-11-01-00:00"\ntracking_plan = "web.json"\n'
        f'tracking_plan_check = "{check}"\n',
    )


def sync_job(settings):
    _, sync = build_source_assets(settings, settings.sources[0])  # the raw archive, the sync
    return sync


def test_the_tracking_plan_check_blocks_an_hour_with_violations(spark, tmp_path):
    settings = settings_with_plan(tmp_path, "block")
    write_hour(settings.archive_root, "web", HOUR, lines())
    assets = build_source_assets(settings, settings.sources[0])
    sync = sync_job(settings)
    plan_hash = load_plan(tmp_path / "web.json").hash
    # the plan's hash in the code version: a changed plan shows the hours synced under the
    # older one as stale
    assert all(v.endswith(f"-plan-{plan_hash[:12]}") for v in sync.code_versions_by_key.values())
    specs = {(s.asset_key.path[-1], s.name): s for s in sync.check_specs}
    assert specs[("pages", "tracking_plan")].blocking
    result = materialize(
        assets,
        resources={"compute": LocalSparkCompute()},
        partition_key=PARTITION,
        instance=DagsterInstance.ephemeral(),
        raise_on_error=False,
    )
    checks = {(e.asset_key.path[-1], e.check_name): e for e in result.get_asset_check_evaluations()}
    order = checks[("order_completed", "tracking_plan")]
    assert not order.passed and order.severity == AssetCheckSeverity.ERROR
    by_type = order.metadata["violations_by_type"].value
    assert by_type["Datatype-Mismatch"] >= 3 and by_type["Required-Missing"] == 2
    assert order.metadata["violations"].value == sum(by_type.values())
    assert not checks[("pages", "tracking_plan")].passed  # "Pricing" is not planned
    assert checks[("tracks", "tracking_plan")].passed  # tracks: its events' own tables say
    # the next load declares the violations table, without a plan check of its own
    reloaded = sync_job(settings)
    assert AssetKey(["web", "violations"]) in reloaded.keys
    assert ("violations", "tracking_plan") not in {
        (s.asset_key.path[-1], s.name) for s in reloaded.check_specs
    }


def test_the_checks_run_alone_read_the_violations_from_the_lake(spark, tmp_path):
    """The Checks tab's *Execute all* (the checks without the assets): the figures are
    measured again from the lake (the violations table), the same as the sync's."""
    settings = settings_with_plan(tmp_path, "warn")
    write_hour(settings.archive_root, "web", HOUR, lines())
    synced = materialize(
        build_source_assets(settings, settings.sources[0]),
        resources={"compute": LocalSparkCompute()},
        partition_key=PARTITION,
        instance=DagsterInstance.ephemeral(),
    )
    by_sync = {
        e.asset_key.path[-1]: e
        for e in synced.get_asset_check_evaluations()
        if e.check_name == "tracking_plan"
    }
    keys = [
        AssetCheckKey(AssetKey(["web", t]), "tracking_plan")
        for t in ("order_completed", "identifies", "pages")
    ]
    alone = materialize(
        build_source_assets(settings, settings.sources[0]),
        selection=AssetSelection.checks(*keys),
        resources={"compute": LocalSparkCompute()},
        instance=DagsterInstance.ephemeral(),
    )
    assert not alone.get_asset_materialization_events(), "checks alone sync nothing"
    found = {e.asset_key.path[-1]: e for e in alone.get_asset_check_evaluations()}
    assert set(found) == {"order_completed", "identifies", "pages"}
    for table, e in found.items():
        assert e.severity == AssetCheckSeverity.WARN
        assert (e.passed, e.metadata["violations_by_type"].value) == (
            by_sync[table].passed,
            by_sync[table].metadata["violations_by_type"].value,
        ), table
    assert not found["identifies"].passed
