"""How the model assets behave: their group, the daily models' partitions and tag, and the
automation conditions (``model_assets.py`` says what the assets are). No dagster-dbt here: both
``model_assets.py`` and ``dbt_assets.py`` (its translator) read these.
"""

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from dagster import AutomationCondition, DailyPartitionsDefinition

from datalake_assets.settings import SourceSettings

DAILY_TAG = "daily"
# a day is built again by itself when one of its hours is re-synced within this many days
REPLAY_DAYS = 31


def models_group(source: SourceSettings) -> str:
    return f"{source.slug}_models"


def daily_partitions(source: SourceSettings) -> DailyPartitionsDefinition:
    """Closed days (UTC) from the day of the source's first hour: a day of a model holds
    exactly its 24 hours, so today is not a partition yet. (With today included, a range
    selected in the UI up to today failed Dagster's validation: its later hours are not
    partitions of the tables yet.)"""
    first = datetime.strptime(source.start, "%Y-%m-%d-%H:%M")
    return DailyPartitionsDefinition(start_date=first.strftime("%Y-%m-%d"), timezone="UTC")


def is_daily(props: Mapping[str, Any]) -> bool:
    return DAILY_TAG in props.get("tags", []) or DAILY_TAG in props.get("config", {}).get(
        "tags", []
    )


def daily_condition() -> AutomationCondition:
    """``eager()`` over the last ``REPLAY_DAYS`` closed days: a day runs once none of its 24
    hours is missing or in progress (the day closes at midnight; its last hour is synced a
    few minutes later), and again when one of them is materialized again."""
    recent = AutomationCondition.in_latest_time_window(lookback_delta=timedelta(days=REPLAY_DAYS))
    return AutomationCondition.eager().replace("in_latest_time_window", recent)


TABLES_CRON = "0 2 * * *"  # after the day's last hour has had time to land and be synced


def table_condition() -> AutomationCondition:
    """Once a day (02:00 UTC) if a table it reads was synced since it was last requested:
    a whole-table model reads all of history (30 days of the demo: ~2 min of the local
    server's core, ``bench/README.md``), so it is not rebuilt after every hourly sync."""
    # not on_cron(): it waits for every dependency to update *after* the tick, and the day's
    # hours were synced before it
    return (
        AutomationCondition.cron_tick_passed(TABLES_CRON)
        & AutomationCondition.any_deps_updated().since_last_handled()
        & ~AutomationCondition.any_deps_in_progress()
        & ~AutomationCondition.in_progress()
    ).with_label("daily_rebuild")
