"""The freshness policies (Dagster 1.13's ``FreshnessPolicy``, evaluated by the daemon's
freshness daemon, on by default: ``freshness: enabled`` in ``dagster.yaml``): a table that
stopped arriving shows as failing its freshness in the UI, and the event of that change feeds
the freshness alert (``event_alerts.py``).

* every hourly asset a sync materializes (each event table, the quarantine, the sync report,
  the catalog): failing once its latest materialization is older than ``[alerts]
  freshness_hours`` (``FreshnessPolicy.time_window``). Dagster measures the time since the
  latest materialization event, not the hour's partition key: hours synced keep it fresh,
  and so would a backfill of old hours.
* each source's open hour, with a ``[freshness]`` interval: late once a batch is overdue,
  failing once two are (``batches_policy``, set by the asset's builder).
* every daily model: its day must be built between midnight UTC and ``freshness_hours``
  after (at most 23:00, ``FreshnessPolicy.cron``), else it fails until the next build.
"""

from __future__ import annotations

from datetime import timedelta

from dagster import (
    AssetsDefinition,
    AssetSpec,
    DailyPartitionsDefinition,
    FreshnessPolicy,
    HourlyPartitionsDefinition,
    map_asset_specs,
)

from datalake_assets.settings.alerts_section import AlertsSettings
from datalake_assets.spec.naming import RAW_ARCHIVE


def hourly_policy(alerts: AlertsSettings) -> FreshnessPolicy:
    return FreshnessPolicy.time_window(fail_window=timedelta(hours=alerts.freshness_hours))


def batches_policy(minutes: int) -> FreshnessPolicy:
    """A source's open hour (``freshness/open_hour_asset.py``), materialized by each batch,
    empty or not, every ``minutes``: late once a batch is overdue, failing once two are (the
    loader stopped, or its batches fail), minutes after rather than ``freshness_hours``."""
    return FreshnessPolicy.time_window(
        fail_window=timedelta(minutes=2 * minutes + 1),
        warn_window=timedelta(minutes=minutes + 1),
    )


def daily_deadline_hour(alerts: AlertsSettings) -> int:
    return min(alerts.freshness_hours, 23)  # a cron hour: a day's deadline is that same day


def daily_policy(alerts: AlertsSettings) -> FreshnessPolicy:
    hour = daily_deadline_hour(alerts)
    # the window [00:00, deadline] of the day after the model's day: a build in it is that
    # day's (the day closes at midnight), an older one is the day before's
    return FreshnessPolicy.cron(
        deadline_cron=f"0 {hour} * * *", lower_bound_delta=timedelta(hours=hour), timezone="UTC"
    )


def policy_for(spec: AssetSpec, alerts: AlertsSettings) -> FreshnessPolicy | None:
    """The policy of an asset, by what it is: hourly lake assets, daily models. The raw
    archive has none: when it stops, every table of the source says so already."""
    if spec.key.path[-1] == RAW_ARCHIVE:
        return None
    if isinstance(spec.partitions_def, HourlyPartitionsDefinition):
        return hourly_policy(alerts)
    if isinstance(spec.partitions_def, DailyPartitionsDefinition):
        return daily_policy(alerts)
    return None


def with_freshness_policies(
    assets: list[AssetsDefinition | AssetSpec], alerts: AlertsSettings
) -> list[AssetsDefinition | AssetSpec]:
    """``assets`` with each spec's policy (``policy_for``); the others unchanged. Applied by
    the builders of the assets (``sync/``, ``dbt/``), so a job built on them has them too."""

    def apply(spec: AssetSpec) -> AssetSpec:
        policy = policy_for(spec, alerts)
        return spec if policy is None else spec.replace_attributes(freshness_policy=policy)

    return list(map_asset_specs(apply, assets))
