"""Syncs run outside Dagster (``datalake sync``, ``datalake import --sync``), recorded in the
Dagster instance when there is one.

Without this, an hour whose Dagster run failed and that a user then synced from a shell stays
red in the UI ("Run failed, did not materialize") although its data is in the lake. So after a
sync, the CLI records what a sensor run would have: each synced hour's materialization of the
source's tables, quarantine and report, with the hour's own figures, and the checks'
evaluations, as runless events (``DagsterInstance.report_runless_asset_event``), described as
synced by the CLI.

The instance is the one ``datalake dev`` uses (``dagster_home``): ``$DAGSTER_HOME``, else
``<DATALAKE_HOME>/dagster_home``, and only if it exists; the CLI never creates one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from dagster import AssetCheckEvaluation, AssetMaterialization, DagsterInstance

from datalake_assets.lake.report import SyncReport
from datalake_assets.orchestration.sync.lake_state import read_source_state
from datalake_assets.orchestration.sync.sync_events import sync_events
from datalake_assets.settings import LakeSettings, SourceSettings
from datalake_assets.settings.orchestration_section import dagster_home
from datalake_assets.spec.layout import ArchiveHour

CLI_NOTE = "synced outside Dagster (datalake sync), recorded by the CLI"


def existing_instance(env: Mapping[str, str] | None = None) -> DagsterInstance | None:
    """The instance at ``dagster_home`` if one was set up there (its ``dagster.yaml``)."""
    home = dagster_home(env)
    if not (home / "dagster.yaml").is_file():
        return None
    return DagsterInstance.from_config(str(home))


def record_sync(
    instance: DagsterInstance, settings: LakeSettings, source: SourceSettings, report: SyncReport
) -> int:
    """Records ``report``'s hours on the source's assets in ``instance``; returns how many
    events were recorded."""
    state = read_source_state(settings, source)
    source = replace(source, start=state.start)
    keys = [ArchiveHour.parse(h).partition_key for h in report.source.hours_synced]
    if not keys:
        return 0
    n = 0
    for event in sync_events(
        settings,
        source,
        list(state.tables),
        keys,
        report,
        None,
        unselected_note=CLI_NOTE,
        instance=instance,
    ):
        if isinstance(event, (AssetMaterialization, AssetCheckEvaluation)):
            instance.report_runless_asset_event(event)
            n += 1
    return n
