"""The one path of a sync in Dagster: a source's hours -> the compute's sync -> Dagster events.

Whoever asks for a sync inside a run calls ``sync_hours``: the source's multi-asset (the UI's
Materialize, backfills, replays, the per-source sensors' runs; ``source_assets.py``) and the
batched sensor run (``automation/batch_sync.py``). It builds the request from the settings, runs
it on the run's ``SparkCompute`` (local, EMR, Databricks: ``compute/``), and yields what the sync
did as the hours' materializations and check evaluations (``sync_events.py``). A failure is
recorded the same way for every caller before it is raised again:

* the catalog is behind (``CatalogBehind``): the data is committed, so the hours'
  materializations and checks are yielded from the report it carries (the catalog's own asset
  and ``in_step`` check say what is missing);
* anything else: nothing was committed, so each hour gets a failed completeness check with
  the error and no materialization.

The caller decides what a failure means for its run: the asset fails its step, the batched run
goes on with the next source and fails at the end (``SyncFailed`` names the source and hours).
"""

from __future__ import annotations

from collections.abc import Iterator
from collections.abc import Set as AbstractSet

from dagster import AssetExecutionContext, AssetKey, OpExecutionContext

from datalake_assets.orchestration.compute.spark_compute import SparkCompute
from datalake_assets.orchestration.sync.sync_checks import completeness_results
from datalake_assets.orchestration.sync.sync_events import AddMetadata, sync_events
from datalake_assets.settings import LakeSettings, SourceSettings
from datalake_assets.spec.layout import ArchiveHour
from datalake_assets.transform.catalog_phase import CatalogBehind
from datalake_assets.transform.sync_request import request_from_settings


class SyncFailed(Exception):
    """A source's sync failed; what it committed (if anything) was already yielded as events.
    ``cause`` is the error the sync raised (``CatalogBehind``: the data is committed)."""

    def __init__(self, source: SourceSettings, hours: list[str], cause: BaseException):
        self.source = source
        self.hours = hours
        self.cause = cause
        what = (
            str(cause) if isinstance(cause, CatalogBehind) else f"{type(cause).__name__}: {cause}"
        )
        super().__init__(f"{source.id} {hours[0]}..{hours[-1]}: {what}")

    @property
    def committed(self) -> bool:
        """The data is in the lake (only its registration in the catalog failed)."""
        return isinstance(self.cause, CatalogBehind)


def sync_hours(
    context: AssetExecutionContext | OpExecutionContext,
    settings: LakeSettings,
    source: SourceSettings,
    tables: list[str],
    keys: list[str],
    compute: SparkCompute,
    *,
    replay: bool,
    selected: AbstractSet[AssetKey] | None = None,
    add_metadata: AddMetadata | None = None,
) -> Iterator:
    """Syncs ``keys`` (hourly partition keys) of ``source`` and yields the Dagster events of
    what it did; raises ``SyncFailed`` after yielding what a failure records (module
    docstring). ``tables``: the source's tables as the running code location declares them;
    ``selected``/``add_metadata``: the running multi-asset's selection and its partition-scoped
    metadata (``None`` outside it: every asset is recorded by runtime events,
    ``sync_events``)."""
    hours = [str(ArchiveHour.parse(k)) for k in keys]
    scope = f" (all tables of these hours; {len(selected)} assets selected)" if selected else ""
    context.log.info(f"syncing {source.id} hours {hours[0]} .. {hours[-1]}{scope}")
    request = request_from_settings(
        settings, source, hours, run_id=context.run.run_id, replay=replay
    )
    try:
        result = compute.run_sync(request, context=context)
    except CatalogBehind as e:
        yield from sync_events(
            settings,
            source,
            tables,
            keys,
            e.report,
            selected,
            add_metadata,
            instance=context.instance,
        )
        raise SyncFailed(source, hours, e) from e
    except Exception as e:  # noqa: BLE001 - recorded as the hours' failed check, then raised
        yield from completeness_results(source.slug, None, keys, str(e))
        raise SyncFailed(source, hours, e) from e
    yield from sync_events(
        settings, source, tables, keys, result, selected, add_metadata, instance=context.instance
    )
    # the run's line on a terminal (dagster.yaml's python_log_level): what it synced; each
    # hour's events are in the run's log in the UI
    context.log.info(
        f"synced {source.id} hours {hours[0]} .. {hours[-1]}: {result.source.summary()}"
    )
