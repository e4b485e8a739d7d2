"""New event tables become declared assets by themselves: the definitions sensor and its job.

The asset graph is fixed per code-location load (``lake_state.py``). Syncs discover event
tables at runtime, so after a sync that created one, the lake's state differs from the loaded
one. ``lake_definitions_sensor`` compares the two every ``definitions_interval_seconds``:

* equal: it skips ("definitions match the lake");
* different, and ``[automation] webserver_url`` set (``datalake dev`` sets it): it requests one
  run of ``datalake_reload_definitions`` (run key: the new state's hash, so one run per change).
  That run asks the webserver to reload this code location, through the same public GraphQL
  mutation as the UI's "Reload definitions" button (``reloadRepositoryLocation``). The reload
  reads the lake again, so the new tables are declared assets of their source, in its group and
  lineage, and the sensor of the new load finds nothing to do.
* different, no URL: it skips with a reason naming the new tables and the button to click.

Why a run and not the sensor itself: a sensor is evaluated inside the code server that the
reload replaces, and a reload waits for the new server to load; a run is its own process,
which the reload leaves running (Dagster keeps an old code server up until its runs end).

Meanwhile a user sees the new tables' materializations under their keys (the sync records
them), listed in the catalog as not yet part of the source's graph, until the reload lands.
"""

import hashlib
import json
import urllib.error
import urllib.request
from typing import Any

from dagster import (
    DefaultSensorStatus,
    Failure,
    OpExecutionContext,
    RunRequest,
    SensorDefinition,
    SensorEvaluationContext,
    SkipReason,
    in_process_executor,
    job,
    op,
    sensor,
)

from datalake_assets.orchestration.sync.lake_state import LakeState, read_lake_state
from datalake_assets.settings import LakeSettings

SENSOR_NAME = "lake_definitions_sensor"
JOB_NAME = "datalake_reload_definitions"
RELOAD_PRIORITY = "2"  # before queued syncs (sensor runs: 1, backfills: 0)
RELOAD_TIMEOUT_S = 300.0  # a reload imports the code again: Spark and Dagster, seconds each

RELOAD_MUTATION = """
mutation ReloadRepositoryLocationMutation($location: String!) {
  reloadRepositoryLocation(repositoryLocationName: $location) {
    __typename
    ... on WorkspaceLocationEntry {
      name
      locationOrLoadError { __typename ... on PythonError { message } }
    }
    ... on UnauthorizedError { message }
    ... on ReloadNotSupported { message }
    ... on RepositoryLocationNotFound { message }
    ... on PythonError { message }
  }
}
"""


def reload_code_location(
    webserver_url: str, location: str, timeout_s: float = RELOAD_TIMEOUT_S
) -> None:
    """Ask the webserver to reload ``location``; raise ``RuntimeError`` saying why it did not."""
    body = json.dumps({"query": RELOAD_MUTATION, "variables": {"location": location}}).encode()
    request = urllib.request.Request(
        webserver_url.rstrip("/") + "/graphql",
        data=body,
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            answer: dict[str, Any] = json.loads(response.read())
    except (urllib.error.URLError, TimeoutError, OSError) as e:
        raise RuntimeError(f"the Dagster webserver at {webserver_url} did not answer: {e}") from e
    if answer.get("errors"):
        raise RuntimeError(f"the webserver refused the reload: {answer['errors']}")
    result = answer["data"]["reloadRepositoryLocation"]
    if result["__typename"] != "WorkspaceLocationEntry":
        raise RuntimeError(
            f"reload of {location!r} failed: {result['__typename']}: {result.get('message', '')}"
        )
    loaded = result["locationOrLoadError"]
    if loaded["__typename"] != "RepositoryLocation":
        raise RuntimeError(
            f"code location {location!r} failed to load after the reload: "
            f"{loaded.get('message', loaded['__typename'])}"
        )


def state_hash(state: LakeState) -> str:
    return hashlib.sha256(state.to_json().encode()).hexdigest()[:16]


@op(
    description="Reloads this code location through the Dagster webserver, so that event "
    "tables the syncs created are declared assets of their source."
)
def reload_definitions(context: OpExecutionContext) -> None:
    tags = context.run.tags
    url = tags.get("datalake/webserver_url", "")
    origin = context.run.remote_job_origin
    if origin is None:  # launched outside a workspace (tests' execute_in_process)
        raise Failure("this run has no code location to reload (not launched from Dagster)")
    location = origin.location_name
    context.log.info(
        f"reloading code location {location!r} at {url}: {tags.get('datalake/changes', '')}"
    )
    try:
        reload_code_location(url, location)
    except RuntimeError as e:
        raise Failure(f"{e}. Reload it by hand: Deployment, Code locations, Reload.") from e
    context.log.info(f"code location {location!r} reloaded")


@job(
    name=JOB_NAME,
    executor_def=in_process_executor,  # one small step: no extra process
    description="Reloads the code location (requested by the definitions sensor when the "
    "lake has new event tables).",
)
def reload_job() -> None:
    reload_definitions()


def build_definitions_sensor(settings: LakeSettings, loaded: LakeState) -> SensorDefinition:
    """The sensor comparing the lake's state with ``loaded``, the state this load was built
    from."""
    auto = settings.automation

    @sensor(
        name=SENSOR_NAME,
        job=reload_job,
        minimum_interval_seconds=auto.definitions_interval_seconds,
        default_status=(
            DefaultSensorStatus.RUNNING
            if auto.sensors == "running"
            else DefaultSensorStatus.STOPPED
        ),
        description=(
            "Compares the event tables and partition starts this code location was "
            "loaded with against the lake's, and has the code location reloaded "
            "when they differ (new event tables become assets)."
        ),
    )
    def lake_definitions_sensor(context: SensorEvaluationContext) -> RunRequest | SkipReason:
        current = read_lake_state(settings, previous=loaded)
        changes = current.changes_since(loaded)
        if not changes:
            tables = sum(len(s.tables) for s in loaded.sources.values())
            return SkipReason(
                f"definitions match the lake ({tables} tables in {len(loaded.sources)} sources)"
            )
        summary = "; ".join(changes)
        if not auto.webserver_url:
            return SkipReason(
                f"the lake changed since the code location loaded ({summary}). Reload "
                "definitions in the UI to apply it, or set [automation] webserver_url "
                "(DATALAKE_WEBSERVER_URL) to have it reloaded automatically"
            )
        context.log.info(f"requesting a reload: {summary}")
        return RunRequest(
            run_key=f"reload:{state_hash(current)}",
            tags={
                "datalake/trigger": "definitions",
                "dagster/priority": RELOAD_PRIORITY,
                "datalake/webserver_url": auto.webserver_url,
                "datalake/changes": summary[:2000],
            },
        )

    return lake_definitions_sensor
