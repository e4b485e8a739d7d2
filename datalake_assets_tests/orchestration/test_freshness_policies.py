"""Each asset's freshness policy (orchestration/alerts/freshness_policies.py), as the code
location declares it (what the daemon's freshness evaluation and the UI read), from
``[alerts] freshness_hours``. Through the daemon: test_alerts_daemon.py."""

from __future__ import annotations

from datetime import timedelta

import pytest
from dagster import FreshnessPolicy

from datalake_assets.definitions import build_definitions
from datalake_assets.orchestration.alerts.freshness_policies import (
    batches_policy,
    daily_policy,
    hourly_policy,
)
from datalake_assets.orchestration.sync.lake_state import LakeState, SourceState
from datalake_assets.settings.alerts_section import AlertsSettings
from datalake_assets.spec.naming import STANDARD_TABLES
from datalake_assets_tests.support.settings_files import load_lake_toml

pytestmark = [pytest.mark.dagster]


def policies(
    tmp_path, alerts: str, table_format: str = "segment", sources: str = ""
) -> dict[str, object]:
    settings = load_lake_toml(
        tmp_path,
        'archive_root = "archive"\nlake_root = "lake"\n'
        f'{alerts}[[sources]]\nid = "web"\nstart = "2026-11-01-00:00"\n{sources}',
        models=True,
        table_format=table_format,
    )
    tables = SourceState(tuple(sorted(STANDARD_TABLES)), "2026-11-01-00:00")
    state = LakeState({s.id: tables for s in settings.sources})
    graph = build_definitions(settings, state=state).resolve_asset_graph()
    return {k.to_user_string(): graph.get(k).freshness_policy for k in graph.get_all_asset_keys()}


@pytest.mark.slow
def test_hourly_assets_and_daily_models_carry_their_policy(tmp_path):
    got = policies(tmp_path, "[alerts]\nfreshness_hours = 5\n")
    hourly = FreshnessPolicy.time_window(fail_window=timedelta(hours=5))
    daily = FreshnessPolicy.cron(deadline_cron="0 5 * * *", lower_bound_delta=timedelta(hours=5))
    for table in [*STANDARD_TABLES, "quarantine", "sync_reports", "catalog"]:
        assert got[f"web/{table}"] == hourly, table
    for model in ("sessions", "daily_event_counts"):
        assert got[f"web/{model}"] == daily, model
    # the whole-table models are rebuilt daily from all history; the raw archive is the
    # collector's: no policy
    for other in ("identity_graph", "users", "raw_archive"):
        assert got[f"web/{other}"] is None, other


@pytest.mark.slow
def test_a_source_with_batches_has_an_open_hour_late_once_a_batch_is_overdue(tmp_path):
    """The open hour asset (orchestration/freshness/open_hour_asset.py) of each source whose
    batches run, failing when two batches are overdue: minutes, not ``freshness_hours``; none
    where batches do not run (an interval of 0, the Segment layout)."""
    got = policies(
        tmp_path,
        "[alerts]\nfreshness_hours = 5\n",
        "iceberg",
        'freshness_minutes = 2\n[[sources]]\nid = "app"\n'
        '[[sources]]\nid = "old"\nfreshness_minutes = 0\n',
    )
    assert (
        got["web/open_hour"]
        == batches_policy(2)
        == FreshnessPolicy.time_window(
            fail_window=timedelta(minutes=5), warn_window=timedelta(minutes=3)
        )
    )
    assert got["app/open_hour"] == batches_policy(5)  # the default interval
    assert "old/open_hour" not in got and got["old/pages"] is not None
    segment = policies(tmp_path, "", "segment", "freshness_minutes = 2\n")
    assert not [k for k in segment if k.endswith("/open_hour")]


@pytest.mark.parametrize(
    "hours, deadline", [(1, "0 1 * * *"), (23, "0 23 * * *"), (48, "0 23 * * *")]
)
def test_the_daily_deadline_stays_within_the_day(hours, deadline):
    alerts = AlertsSettings(freshness_hours=hours)
    assert hourly_policy(alerts) == FreshnessPolicy.time_window(fail_window=timedelta(hours=hours))
    assert daily_policy(alerts) == FreshnessPolicy.cron(
        deadline_cron=deadline, lower_bound_delta=timedelta(hours=min(hours, 23))
    )
