"""The code location: every source's assets, its sync job and archive sensor (or one sensor and
job for all sources: ``[automation] sensor_runs``), the import of
Segment's archive for sources that have one, the compute resource, the definitions sensor, and
the privacy jobs (``forget_person``, its request-file sensor, the nightly summary compaction).

Each concern of ``orchestration/`` builds its own ``Definitions`` (``sync/``, ``automation/``,
``segment_import/``, ``dbt/``, ``erasure/``, ``maintenance/``, ``alerts/``, ``freshness/``); here
they are merged, and what holds for the whole code location is set once: the compute resource
(``compute/``), the in-process executor and the reconstruction metadata.

How the graph stays one graph across processes (docs/concepts/dagster-model.md, "Event types
and the asset graph"):
``defs`` reads the lake's state (each source's tables and partition start) once, when the code
server loads it for the webserver and the daemon, and attaches it to the definitions as
reconstruction metadata. Dagster stores that metadata with every run it creates from this load,
and a run worker rebuilds the definitions from it (``DefinitionsLoadType.RECONSTRUCTION``)
instead of reading the lake again. So a run's graph is always the graph its launcher showed,
even if syncs discovered tables since. ``automation/definitions_reload.py`` brings new tables in
with a reload.
"""

from __future__ import annotations

import warnings

from dagster import BetaWarning, Definitions, definitions, in_process_executor

# Dagster 1.13 documents reconstruction metadata (Definitions.with_reconstruction_metadata,
# preview) but exports the load context only from this module; one import, in one place.
from dagster._core.definitions.definitions_load_context import (
    DefinitionsLoadContext,
    DefinitionsLoadType,
)

from datalake_assets.lake.listing import ArchiveLister
from datalake_assets.orchestration.alerts.alert_definitions import build_alert_definitions
from datalake_assets.orchestration.automation.automation_definitions import (
    build_automation_definitions,
)
from datalake_assets.orchestration.automation.sensor_toolkit import Clock, utc_now
from datalake_assets.orchestration.compute.compute_factory import build_compute
from datalake_assets.orchestration.dbt.model_assets import build_dbt_definitions
from datalake_assets.orchestration.erasure.privacy_jobs import build_privacy_definitions
from datalake_assets.orchestration.freshness.open_hour_asset import build_freshness_definitions
from datalake_assets.orchestration.maintenance.table_maintenance import (
    build_maintenance_definitions,
)
from datalake_assets.orchestration.segment_import.import_definitions import (
    build_segment_import_definitions,
)
from datalake_assets.orchestration.sync.lake_state import LakeState, read_lake_state
from datalake_assets.orchestration.sync.sync_definitions import build_sync_definitions
from datalake_assets.settings import LakeSettings, load_settings

STATE_KEY = "datalake/lake_state"  # the reconstruction metadata key of the LakeState

# Dagster 1.13 itself passes a sensor's owners (an empty list: none of ours sets any) back to
# the beta `owners` parameter when Definitions attaches resources to a sensor's job
# (SensorDefinition.with_attributes), so every process that loads this code location warned
# that we use a beta parameter we do not use. Only that message is ignored.
warnings.filterwarnings(
    "ignore",
    message=r"Parameter `owners` of initializer `SensorDefinition.__init__` is currently in beta",
    category=BetaWarning,
)


def build_definitions(
    settings: LakeSettings | None = None,
    *,
    state: LakeState | None = None,
    clock: Clock = utc_now,
    lister: ArchiveLister | None = None,
) -> Definitions:
    """The definitions for ``state`` (default: the lake's state now). ``clock`` and ``lister``
    reach the archive sensors (tests, benchmarks)."""
    settings = settings or load_settings()
    state = state or read_lake_state(settings, clock)
    sync = build_sync_definitions(settings, state)
    sync_jobs = {job.name: job for job in sync.jobs or ()}
    return Definitions.merge(
        build_automation_definitions(settings, state, sync_jobs, clock=clock, lister=lister),
        sync,
        build_segment_import_definitions(settings, state, sync_jobs, clock=clock),
        build_dbt_definitions(settings, state),
        build_privacy_definitions(settings, clock=clock),
        build_maintenance_definitions(settings),
        build_alert_definitions(settings),
        build_freshness_definitions(settings),
        Definitions(
            resources={"compute": build_compute(settings)},
            # every job here is one step (a sync, an import): no step process per run (the
            # UI's Materialize runs the implicit asset job; <slug>_sync_job sets it too)
            executor=in_process_executor,
        ),
    ).with_reconstruction_metadata({STATE_KEY: state.to_json()})


def loaded_state(settings: LakeSettings) -> LakeState:
    """The state to build from: the one carried by the run (a run worker rebuilding the
    definitions its run was created from), else the lake's, read now (a code server loading)."""
    context = DefinitionsLoadContext.get()
    if context.load_type == DefinitionsLoadType.RECONSTRUCTION:
        carried = context.reconstruction_metadata.get(STATE_KEY)
        if carried is not None:
            return LakeState.from_json(carried)
    return read_lake_state(settings)


@definitions
def defs() -> Definitions:
    """What ``dagster dev -w workspace.yaml``, ``dg`` and the run workers load."""
    settings = load_settings()
    return build_definitions(settings, state=loaded_state(settings))
