"""The models' automation, evaluated the way the daemon does (``evaluate_automation_conditions``
on an ephemeral instance; the hours' materializations are recorded as a sync records them): a
day is requested once its 24 hours are in, also when the last one lands late, and again when
one of its hours is synced again; the whole tables once a day. No Spark, no dbt run."""

from datetime import datetime, timedelta

import pytest
from dagster import (
    AssetKey,
    AssetMaterialization,
    DagsterInstance,
    DefaultSensorStatus,
    evaluate_automation_conditions,
)

from datalake_assets.definitions import build_definitions
from datalake_assets.orchestration.sync.lake_state import LakeState, SourceState
from datalake_assets.spec.naming import STANDARD_TABLES
from datalake_assets_tests.support.settings_files import load_lake_toml

DAY = "2026-11-20"


@pytest.fixture(scope="module")
def defs(tmp_path_factory):
    home = tmp_path_factory.mktemp("automation")
    settings = load_lake_toml(
        home, '[[sources]]\nid = "web"\nstart = "2026-11-20-00:00"\n', models=True
    )
    state = LakeState({"web": SourceState(tuple(sorted(STANDARD_TABLES)), "2026-11-20-00:00")})
    return build_definitions(settings, state=state)


@pytest.mark.slow
def test_the_models_sensor_runs_by_default_and_targets_the_models(defs):
    sensor = defs.resolve_sensor_def("datalake_models_automation")
    assert sensor.default_status == DefaultSensorStatus.RUNNING
    targets = sensor.asset_selection.resolve(defs.resolve_asset_graph())
    assert {k.path[-1] for k in targets} == {
        "daily_event_counts",
        "sessions",
        "identity_graph",
        "users",
    }


def synced(instance: DagsterInstance, hour: int, day: str = DAY) -> None:
    """What a sync of one hour records: every table's materialization of the hour."""
    for table in sorted(STANDARD_TABLES):
        instance.report_runless_asset_event(
            AssetMaterialization(AssetKey(["web", table]), partition=f"{day}-{hour:02d}:00")
        )


@pytest.mark.slow
def test_a_day_runs_once_its_24_hours_are_in_and_again_when_one_is_synced_again(defs):
    instance = DagsterInstance.ephemeral()
    sessions, counts = AssetKey(["web", "sessions"]), AssetKey(["web", "daily_event_counts"])
    users = AssetKey(["web", "users"])
    at = datetime(2026, 11, 21, 0, 20)  # the day is over; its last hour is not synced yet
    # the daemon's first tick, before any sync: conditions count what happens after it
    result = evaluate_automation_conditions(defs, instance, evaluation_time=at)
    for hour in range(23):
        synced(instance, hour)
    result = evaluate_automation_conditions(
        defs, instance, evaluation_time=at, cursor=result.cursor
    )
    assert result.get_requested_partitions(sessions) == set()
    assert result.get_requested_partitions(counts) == set()
    assert result.get_num_requested(users) == 0  # the whole tables wait for 02:00
    # the 24th hour lands late, after midnight: the day runs, once
    synced(instance, 23)
    result = evaluate_automation_conditions(
        defs, instance, evaluation_time=at + timedelta(minutes=10), cursor=result.cursor
    )
    assert result.get_requested_partitions(sessions) == {DAY}
    assert result.get_requested_partitions(counts) == {DAY}
    _materialized(instance, [sessions, counts], DAY)
    result = evaluate_automation_conditions(
        defs, instance, evaluation_time=at + timedelta(minutes=20), cursor=result.cursor
    )
    assert result.get_requested_partitions(sessions) == set()
    # the whole tables: once, after 02:00, their tables having been synced since their last run
    graph = AssetKey(["web", "identity_graph"])
    result = evaluate_automation_conditions(
        defs, instance, evaluation_time=at + timedelta(minutes=101), cursor=result.cursor
    )
    assert result.get_num_requested(users) == result.get_num_requested(graph) == 1
    _materialized(instance, [graph, users], None)  # what the requested run records
    result = evaluate_automation_conditions(
        defs, instance, evaluation_time=at + timedelta(minutes=110), cursor=result.cursor
    )
    assert result.get_num_requested(users) == result.get_num_requested(graph) == 0
    # a late file re-synced one hour two days later: the day runs again
    synced(instance, 7)
    result = evaluate_automation_conditions(
        defs, instance, evaluation_time=at + timedelta(days=2), cursor=result.cursor
    )
    assert result.get_requested_partitions(sessions) == {DAY}


def _materialized(instance: DagsterInstance, keys: list[AssetKey], day: str | None) -> None:
    for key in keys:
        instance.report_runless_asset_event(AssetMaterialization(key, partition=day))


def test_the_next_day_waits_for_its_own_hours(defs):
    instance = DagsterInstance.ephemeral()
    at = datetime(2026, 11, 22, 1, 0)
    first = evaluate_automation_conditions(defs, instance, evaluation_time=at)
    for hour in range(24):
        synced(instance, hour)
    for hour in range(12):
        synced(instance, hour, "2026-11-21")
    result = evaluate_automation_conditions(defs, instance, evaluation_time=at, cursor=first.cursor)
    assert result.get_requested_partitions(AssetKey(["web", "sessions"])) == {DAY}
