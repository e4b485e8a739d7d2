"""What the UI shows of assets and checks, read through the UI's GraphQL: a partition's latest
materialization, the partition bar's statuses (hourly and daily), each check's statuses by
partition; and ``Steps``, the failure collector of the tests that drive ``datalake dev``."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timedelta

from datalake_assets.spec.layout import ArchiveHour
from datalake_assets_tests.orchestration.dagster_ui import DagsterUI, key_input
from datalake_assets_tests.orchestration.dagster_ui_queries import (
    ASSET_CHECK_STATUSES_QUERY,
    ASSET_PARTITION_EVENTS_QUERY,
    ASSET_PARTITION_STATUSES_QUERY,
)


def latest_metadata(ui: DagsterUI, key: str, partition: str) -> dict:
    """The latest materialization of one partition: its description and metadata values."""
    out = ui.gql(
        ASSET_PARTITION_EVENTS_QUERY, {"assetKey": key_input(key), "partitions": [partition]}
    )["assetOrError"]
    events = sorted(out.get("assetMaterializations") or [], key=lambda e: float(e["timestamp"]))
    assert events, f"{key} {partition}: no materialization"
    last = events[-1]
    values = {}
    for e in last["metadataEntries"]:
        for field in ("intValue", "floatValue", "text", "jsonString"):
            if field in e:
                values[e["label"]] = e[field]
    return {"description": last["description"], **values}


def partition_status(ui: DagsterUI, key: str) -> dict[str, str]:
    """Partition key -> MATERIALIZED / FAILED / ... as the partition bar shows it."""
    return _expand(_status_ranges(ui, key))


def day_status(ui: DagsterUI, key: str) -> dict[str, str]:
    """Day -> MATERIALIZED / FAILED / ... as the partition bar of a daily asset shows it."""
    out = {}
    for r in _status_ranges(ui, key):
        day = datetime.strptime(r["startKey"], "%Y-%m-%d")
        while day.strftime("%Y-%m-%d") <= r["endKey"]:
            out[day.strftime("%Y-%m-%d")] = r["status"]
            day += timedelta(days=1)
    return out


def _status_ranges(ui: DagsterUI, key: str) -> list[dict]:
    node = ui.gql(ASSET_PARTITION_STATUSES_QUERY, {"assetKeys": [key_input(key)]})["assetNodes"]
    assert node, f"{key} is not a declared asset"
    return node[0]["assetPartitionStatuses"].get("ranges") or []


def _expand(ranges: list[dict]) -> dict[str, str]:
    out = {}
    for r in ranges:
        h, end = ArchiveHour.parse(r["startKey"]), ArchiveHour.parse(r["endKey"])
        while h.start <= end.start:
            out[h.partition_key] = r["status"]
            h = h.next()
    return out


def check_statuses(ui: DagsterUI, key: str) -> tuple[dict, dict[str, dict[str, str]]]:
    """The asset node (for launching) and, per check, partition key -> status."""
    node = ui.gql(ASSET_CHECK_STATUSES_QUERY, {"assetKeys": [key_input(key)]})["assetNodes"]
    if not node:
        return {}, {}
    checks = node[0]["assetChecksOrError"].get("checks") or []
    return node[0], {
        c["name"]: _expand((c["partitionStatuses"] or {}).get("ranges") or []) for c in checks
    }


class Steps:
    """Named checks of one ``datalake dev`` session, run in order: a failure (an assertion, an
    OS error) is collected and the next check still runs, so one run tells everything that is
    wrong; ``assert_all_passed`` at the end reports them together."""

    def __init__(self, t0: float) -> None:
        self.t0 = t0  # time.monotonic() at the test's start, for the progress lines
        self.failures: list[str] = []

    def __call__(self, name: str, fn: Callable[[], object]) -> None:
        try:
            fn()
        except (AssertionError, OSError) as e:
            self.failures.append(f"({name}) {e}")
        print(f"({name}) done at {time.monotonic() - self.t0:.0f} s")

    def assert_all_passed(self) -> None:
        print(f"test wall time {time.monotonic() - self.t0:.0f} s")
        assert not self.failures, "\n\n".join(self.failures)
