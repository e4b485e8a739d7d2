"""The alerts read from the instance's event log, of events no run holds: a table whose
freshness turned to FAIL (a ``FRESHNESS_STATE_CHANGE``, written by the daemon's freshness
evaluation of ``freshness_policies.py``) and a blocking check that failed outside a run (an
``ASSET_CHECK_EVALUATION`` not passed, severity ERROR, recorded by ``datalake sync`` from the
command line: ``sync/sync_records.py``). A failed check of a run fails that run: its alert
comes with the run's (``run_alerts.py``).

Only runless events are read, so the cursor works on both kinds of event storage: Postgres'
(one sequence of storage ids) and the default SQLite's, sharded by run, where only the runless
shard is opened (``RunShardedEventsCursor`` with no run updated since now) and its ids are one
sequence too, which SQLite's query ignores: the timestamp bounds it, the id decides."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

from dagster import (
    AssetKey,
    AssetRecordsFilter,
    DagsterEventType,
    DagsterInstance,
    EventLogRecord,
    EventRecordsFilter,
    RunShardedEventsCursor,
)

from datalake_assets.orchestration.alerts.alert_message import (
    STALE,
    Alert,
    asset_link,
    run_link,
)
from datalake_assets.settings.alerts_section import AlertsSettings

EVENT_TYPES = {
    "checks": DagsterEventType.ASSET_CHECK_EVALUATION,
    "freshness": DagsterEventType.FRESHNESS_STATE_CHANGE,
}
PAGE = 1000  # events read per kind and tick; the rest on the next tick
FAIL = "FAIL"  # FreshnessState.FAIL's value (a str enum)
# SQLite stores an event's timestamp as a datetime of the second's fraction it was written: a
# margin on the bound, the storage id excludes what was read already
_TS_MARGIN_S = 1.0


@dataclass
class EventCursor:
    after: dict[str, list[float]]  # kind -> [storage id, timestamp] of the last event read

    @classmethod
    def parse(cls, text: str | None, instance: DagsterInstance) -> EventCursor:
        if text:
            return cls(json.loads(text))
        # first tick: the history before the sensor is not news
        now = datetime.now(UTC).timestamp()
        cursor = cls({kind: [0, now] for kind in EVENT_TYPES})
        for _ in read_events(instance, cursor):
            pass  # (moves the cursor past what is there)
        return cursor

    def to_text(self) -> str:
        return json.dumps(self.after, sort_keys=True)


def read_events(
    instance: DagsterInstance, cursor: EventCursor
) -> Iterator[tuple[str, EventLogRecord]]:
    """(kind, record) of each new runless event, advancing ``cursor``."""
    now = datetime.now(UTC)
    for kind, event_type in EVENT_TYPES.items():
        last_id, last_ts = cursor.after.get(kind, [0, 0.0])
        records = instance.event_log_storage.get_event_records(
            EventRecordsFilter(
                event_type=event_type,
                after_cursor=RunShardedEventsCursor(id=int(last_id), run_updated_after=now),
                after_timestamp=max(last_ts - _TS_MARGIN_S, 0.0),
            ),
            limit=PAGE,
            ascending=True,
        )
        fresh = False
        for record in records:
            if record.storage_id <= last_id:
                continue  # read before (the timestamp's margin)
            fresh = True
            cursor.after[kind] = [record.storage_id, record.timestamp]
            if not record.event_log_entry.run_id:  # a run's: its run's alert names it
                yield kind, record
        if len(records) == PAGE and not fresh:
            # a page of events read before, all within the margin (a burst: the freshness
            # daemon's first look at every asset): start the next page after them
            cursor.after[kind] = [last_id, records[-1].timestamp + _TS_MARGIN_S]


def stale_alerts(
    instance: DagsterInstance, records: list[EventLogRecord], alerts: AlertsSettings
) -> list[Alert]:
    """One alert per source whose assets' freshness turned to FAIL: which assets, the
    latest hour that landed among them and the run that wrote it."""
    by_source: dict[str, list[AssetKey]] = {}
    for record in records:
        change = record.event_log_entry.dagster_event.event_specific_data
        if change.new_state.value == FAIL:
            by_source.setdefault(change.key.path[0], []).append(change.key)
    out = []
    for source, keys in sorted(by_source.items()):
        latest = None
        for key in keys:
            found = instance.fetch_materializations(AssetRecordsFilter(asset_key=key), limit=1)
            for r in found.records:
                if latest is None or r.timestamp > latest.timestamp:
                    latest = r
        names = ", ".join(sorted("/".join(k.path[1:]) for k in keys))
        run_id = latest.event_log_entry.run_id if latest is not None else ""
        partition = latest.partition_key if latest is not None else None
        out.append(
            Alert(
                kind=STALE,
                source=source,
                hour=partition or "",
                what=f"nothing new for more than {alerts.freshness_hours} h "
                f"(freshness failed): {names}",
                run_id=run_id,
                link=run_link(alerts.ui_url, run_id)
                if run_id
                else asset_link(alerts.ui_url, list(keys[0].path)),
                details="the hour shown is the latest that landed"
                if partition
                else "never materialized",
            )
        )
    return out
