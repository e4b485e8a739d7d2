"""``[freshness]``: how often an open hour's batches take its new archive files in
(``transform/open_hour.py``; ``orchestration/freshness/open_hour_loader.py`` runs them;
docs/concepts/freshness.md)."""

from typing import Annotated, Any

from pydantic import PlainValidator

from datalake_assets.settings.fields import Int, SettingsError, got, settings_model

MAX_INTERVAL_MINUTES = 60  # an hour: the hourly sync's own cadence
DEFAULT_INTERVAL_MINUTES = 5


def _source_minutes(value: Any) -> int | None:
    """A source's own interval: absent (``None``: the lake's), or minutes."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise SettingsError(f"must be an integer from 0 to {MAX_INTERVAL_MINUTES}, {got(value)}")
    if not 0 <= value <= MAX_INTERVAL_MINUTES:
        raise SettingsError(
            f"must be an integer from 0 to {MAX_INTERVAL_MINUTES} (0: hourly syncs only), "
            f"got {value!r}"
        )
    return value


# ``[[sources]] freshness_minutes``: the source's interval, overriding ``[freshness]``'s
SourceMinutes = Annotated[int | None, PlainValidator(_source_minutes)]


@settings_model
class FreshnessSettings:
    """``[freshness]``: minutes between two batches of a source's open hour (0: hourly syncs
    only). A table format that replaces whole hours (the Segment layout) takes no batches:
    the loader says so in one line and its sources are synced hourly."""

    interval_minutes: Int(0, MAX_INTERVAL_MINUTES) = DEFAULT_INTERVAL_MINUTES
