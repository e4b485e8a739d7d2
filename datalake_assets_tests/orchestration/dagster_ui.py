"""Drive a real ``datalake dev`` (Dagster webserver + daemon) through GraphQL as the UI does.

The queries and mutations (``dagster_ui_queries.py``) and the launch logic here are those of the
UI bundle shipped with dagster-webserver 1.13 (``dagster_webserver/webapp/build/_next/static/
chunks/*.js``; their source maps hold the TypeScript): ``LaunchAssetLoaderQuery`` and ``stateForLaunchingAssets`` in
``ui-core/src/assets/LaunchAssetExecutionButton.tsx``, the partition dialog's
``onLaunchAsBackfill`` / ``onLaunchAsSingleRun`` in ``LaunchAssetChoosePartitionsDialog.tsx``,
``LAUNCH_PARTITION_BACKFILL_MUTATION`` in ``instance/backfill/BackfillUtils.tsx``,
``LAUNCH_PIPELINE_EXECUTION_MUTATION`` in ``runs/RunUtils.tsx``,
``CONFIG_PARTITION_FOR_ASSET_JOB_QUERY`` in ``launchpad/ConfigFetch.tsx``,
``BackfillDetailsQuery``, ``RunLogsQuery``, ``CodeLocationStatusQuery``. Fragments are cut to
the fields a launch decision or an assertion needs; field names and arguments are unchanged.
Only the standard library is used (urllib), so the harness adds no dependency.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from datalake_assets_tests.orchestration.dagster_ui_queries import (
    ALL_ASSET_NODES_QUERY,
    ASSET_CATALOG_TABLE_QUERY,
    BACKFILL_DETAILS_QUERY,
    CODE_LOCATION_STATUS_QUERY,
    CONFIG_PARTITION_FOR_ASSET_JOB_QUERY,
    LAUNCH_ASSET_LOADER_QUERY,
    LAUNCH_PARTITION_BACKFILL_MUTATION,
    LAUNCH_PIPELINE_EXECUTION_MUTATION,
    RUN_LOGS_QUERY,
    RUNS_QUERY,
)

FROM_UI_TAG = {"key": "dagster/from_ui", "value": "true"}  # uiExecutionTags.ts
HIDDEN_JOB_PREFIX = "__ASSET_JOB"  # isHiddenAssetGroupJob
TERMINAL_RUN = {"SUCCESS", "FAILURE", "CANCELED"}
TERMINAL_BACKFILL = {"COMPLETED", "COMPLETED_SUCCESS", "COMPLETED_FAILED", "FAILED", "CANCELED"}


class GraphQLError(AssertionError):
    pass


@dataclass
class GraphQL:
    url: str  # http://host:port/graphql
    timeout: float = 120.0  # a busy 2-core machine answers slowly while Spark runs

    def __call__(self, query: str, variables: dict | None = None) -> dict:
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        req = urllib.request.Request(
            self.url, data=body, method="POST", headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                out = json.loads(resp.read())
        except urllib.error.HTTPError as e:  # a resolver error comes back as HTTP 500 + JSON
            raise GraphQLError(
                f"HTTP {e.code} from {self.url}: {e.read().decode(errors='replace')[:3000]}"
            ) from None
        if out.get("errors"):
            raise GraphQLError(f"GraphQL errors: {json.dumps(out['errors'])[:3000]}")
        return out["data"]


def key_input(key: str | list[str]) -> dict:
    return {"path": key.split("/") if isinstance(key, str) else list(key)}


def key_str(node_or_key: dict) -> str:
    return "/".join(
        node_or_key["path"] if "path" in node_or_key else node_or_key["assetKey"]["path"]
    )


def python_error_text(err: dict | None) -> str:
    if not err:
        return ""
    parts = [err.get("message", ""), err.get("stack") and "".join(err["stack"][-8:]) or ""]
    for link in err.get("errorChain") or []:
        parts.append("caused by: " + link["error"]["message"])
    return "\n".join(p for p in parts if p)


def poll(what: str, fn, timeout: float, interval: float = 2.0):
    """Call ``fn`` until it returns something truthy; fail with ``what`` and the last value."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        last = fn()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


# ------------------------------------------------------------------------ what the UI sends


class DagsterUI:
    """The UI's launch paths over GraphQL, against one webserver."""

    def __init__(self, gql: GraphQL):
        self.gql = gql

    def asset_nodes(self) -> dict[str, dict]:
        return {key_str(n): n for n in self.gql(ALL_ASSET_NODES_QUERY)["assetNodes"]}

    def catalog_keys(self) -> dict[str, dict | None]:
        """Every key in the asset catalog, with its definition (None: undeclared/external)."""
        out, cursor = {}, None
        while True:
            page = self.gql(ASSET_CATALOG_TABLE_QUERY, {"cursor": cursor, "limit": 1000})
            conn = page["assetsOrError"]
            if "nodes" not in conn:
                raise GraphQLError(python_error_text(conn))
            out.update({"/".join(n["key"]["path"]): n["definition"] for n in conn["nodes"]})
            if not conn["nodes"] or not conn.get("cursor"):
                return out
            cursor = conn["cursor"]

    def load_for_launch(self, keys: list[str]) -> dict:
        """What the Materialize button does before opening the partitions dialog: load the
        nodes, accept the "additional required assets" confirmation (the user clicks OK),
        refuse observable/external assets, pick the common job (getCommonJob)."""
        undeclared = sorted(set(keys) - set(self.asset_nodes()))
        assert not undeclared, (
            f"not declared assets (the UI shows them as external assets, "
            f"Materialize disabled): {undeclared}"
        )
        data = self.gql(LAUNCH_ASSET_LOADER_QUERY, {"assetKeys": [key_input(k) for k in keys]})
        additional = [key_str(k) for k in data["assetNodeAdditionalRequiredKeys"]]
        if additional:
            data = self.gql(
                LAUNCH_ASSET_LOADER_QUERY,
                {"assetKeys": [key_input(k) for k in [*keys, *additional]]},
            )
        nodes = data["assetNodes"]
        found = {key_str(n) for n in nodes}
        assert set(keys) <= found, f"not asset nodes: {sorted(set(keys) - found)}"
        bad = [key_str(n) for n in nodes if n["isObservable"] or not n["isExecutable"]]
        assert not bad, f"the UI refuses to materialize observable or external assets: {bad}"
        jobs = [j for j in nodes[0]["jobNames"] if all(j in n["jobNames"] for n in nodes)]
        assert jobs, f"no job common to {sorted(found)}: the UI would launch a pure backfill"
        return {"nodes": nodes, "job": jobs[0], "additional": additional}

    def launch_backfill(self, loaded: dict, partition_names: list[str]) -> str:
        """``onLaunchAsBackfill`` of the partitions dialog for ``target.type == 'job'``."""
        nodes, job = loaded["nodes"], loaded["job"]
        params = {
            "tags": [FROM_UI_TAG],
            "assetSelection": [{"path": n["assetKey"]["path"]} for n in nodes],
            "partitionNames": partition_names,
            "fromFailure": False,
        }
        if not job.startswith(HIDDEN_JOB_PREFIX):
            repo = nodes[0]["repository"]
            params["selector"] = {
                "partitionSetName": f"{job}_partition_set",
                "repositorySelector": {
                    "repositoryLocationName": repo["location"]["name"],
                    "repositoryName": repo["name"],
                },
            }
        out = self.gql(LAUNCH_PARTITION_BACKFILL_MUTATION, {"backfillParams": params})[
            "launchPartitionBackfill"
        ]
        assert out["__typename"] == "LaunchBackfillSuccess", f"backfill not launched: {out}"
        return out["backfillId"]

    def launch_partition_run(self, loaded: dict, partition: str) -> str:
        """``onLaunchAsSingleRun`` of the partitions dialog (one partition picked): partition
        tags and config from ConfigPartitionForAssetJobQuery, then launchPipelineExecution
        with the asset and check selection (executionParamsForAssetJob) and the UI tag."""
        nodes, job = loaded["nodes"], loaded["job"]
        repo = nodes[0]["repository"]
        keys = [{"path": n["assetKey"]["path"]} for n in nodes]
        cfg = self.gql(
            CONFIG_PARTITION_FOR_ASSET_JOB_QUERY,
            {
                "repositoryName": repo["name"],
                "repositoryLocationName": repo["location"]["name"],
                "jobName": job,
                "partitionName": partition,
                "assetKeys": keys,
            },
        )["pipelineOrError"]
        part = (cfg or {}).get("partition")
        assert part, f"no partition {partition!r} of job {job!r}: {cfg}"
        tags = [t for t in part["tagsOrError"]["results"] if t["key"] != FROM_UI_TAG["key"]]
        checks = [
            {"name": c["name"], "assetKey": {"path": n["assetKey"]["path"]}}
            for n in nodes
            for c in (n["assetChecksOrError"] or {}).get("checks", [])
            if not c["jobNames"] or job in c["jobNames"]
        ]
        params = {
            "mode": "default",
            "executionMetadata": {"tags": [*tags, FROM_UI_TAG]},
            "runConfigData": part["runConfigOrError"].get("yaml") or "{}",
            "selector": {
                "repositoryLocationName": repo["location"]["name"],
                "repositoryName": repo["name"],
                "pipelineName": job,
                "assetSelection": keys,
                "assetCheckSelection": checks,
            },
        }
        out = self.gql(LAUNCH_PIPELINE_EXECUTION_MUTATION, {"executionParams": params})[
            "launchPipelineExecution"
        ]
        assert out["__typename"] == "LaunchRunSuccess", f"run not launched: {out}"
        return out["run"]["id"]

    def launch_job(self, repository: dict, job: str, run_config: dict) -> str:
        """The launchpad's "Launch run" for a job that is not an asset job: the config the
        user typed (YAML; JSON is YAML) and the UI tag."""
        params = {
            "mode": "default",
            "executionMetadata": {"tags": [FROM_UI_TAG]},
            "runConfigData": json.dumps(run_config),
            "selector": {
                "repositoryLocationName": repository["location"]["name"],
                "repositoryName": repository["name"],
                "pipelineName": job,
            },
        }
        out = self.gql(LAUNCH_PIPELINE_EXECUTION_MUTATION, {"executionParams": params})[
            "launchPipelineExecution"
        ]
        assert out["__typename"] == "LaunchRunSuccess", f"run not launched: {out}"
        return out["run"]["id"]

    # ------------------------------------------------------------------------ status

    def runs(self, tags: dict[str, str] | None = None) -> list[dict]:
        filt = {"tags": [{"key": k, "value": v} for k, v in (tags or {}).items()]}
        out = self.gql(RUNS_QUERY, {"filter": filt})["runsOrError"]
        if "results" not in out:
            raise GraphQLError(python_error_text(out))
        for r in out["results"]:
            r["tag"] = {t["key"]: t["value"] for t in r["tags"]}
        return out["results"]

    def run_errors(self, run_id: str) -> str:
        """The errors and error-level messages of a run's event log, for assertion messages."""
        lines, cursor = [], None
        for _ in range(50):  # pages of 1000 events; a sync run logs far fewer
            out = self.gql(RUN_LOGS_QUERY, {"runId": run_id, "cursor": cursor, "limit": 1000})
            conn = out["logsForRun"]
            if "events" not in conn:
                return python_error_text(conn)
            for e in conn["events"]:
                err = e.get("error") or e.get("pipelineRunFailureError") or e.get("engineError")
                if err or e.get("level") == "ERROR" or e["__typename"] == "RunFailureEvent":
                    lines.append(
                        f"[{e['__typename']} {e.get('stepKey') or ''}] "
                        f"{e.get('message', '')}\n{python_error_text(err)}"
                    )
            if not conn["events"]:
                break
            cursor = conn["cursor"]
        return "\n".join(lines) or "(no error events)"

    def materialized_partitions(self, run_id: str) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        cursor = None
        while True:
            conn = self.gql(RUN_LOGS_QUERY, {"runId": run_id, "cursor": cursor, "limit": 1000})[
                "logsForRun"
            ]
            for e in conn.get("events", []):
                if e["__typename"] == "MaterializationEvent":
                    out.setdefault(key_str(e["assetKey"]), set()).add(e["partition"])
            if not conn.get("events"):
                return out
            cursor = conn["cursor"]

    def wait_run(self, run_id: str, timeout: float) -> dict:
        def done():
            r = [x for x in self.runs() if x["id"] == run_id]
            return r[0] if r and r[0]["status"] in TERMINAL_RUN else None

        run = poll(f"run {run_id} to finish", done, timeout)
        assert run["status"] == "SUCCESS", (
            f"run {run_id} ended {run['status']}:\n{self.run_errors(run_id)}"
        )
        return run

    def wait_backfill(self, backfill_id: str, timeout: float) -> dict:
        def done():
            b = self.gql(BACKFILL_DETAILS_QUERY, {"backfillId": backfill_id})
            b = b["partitionBackfillOrError"]
            assert b["__typename"] == "PartitionBackfill", f"backfill {backfill_id}: {b}"
            unfinished = [r for r in b["runs"] if r["status"] not in TERMINAL_RUN]
            return b if b["status"] in TERMINAL_BACKFILL and not unfinished else None

        return poll(f"backfill {backfill_id} to finish", done, timeout, interval=3.0)

    def reload_locations(self) -> list[str]:
        """Every code location reloaded, as the UI's "Reload" button does (a code server
        started by ``dagster code-server start`` loads the code again); their names."""
        data = self.gql(CODE_LOCATION_STATUS_QUERY)
        names = [e["name"] for e in data["workspaceOrError"]["locationEntries"]]
        for name in names:
            out = self.gql(RELOAD_LOCATION_MUTATION, {"name": name})
            kind = out["reloadRepositoryLocation"]["__typename"]
            assert kind == "WorkspaceLocationEntry", out
        return names

    def location_loaded(self) -> bool:
        data = self.gql(CODE_LOCATION_STATUS_QUERY)
        entries = data["workspaceOrError"]["locationEntries"]
        for e in entries:
            loc = e["locationOrLoadError"] or {}
            if loc.get("__typename") == "PythonError":
                raise AssertionError(
                    f"code location {e['name']} failed to load:\n{python_error_text(loc)}"
                )
        return bool(entries) and all(
            e["loadStatus"] == "LOADED" and e["locationOrLoadError"] for e in entries
        )


RELOAD_LOCATION_MUTATION = """
mutation Reload($name: String!) {
  reloadRepositoryLocation(repositoryLocationName: $name) {
    __typename
    ... on PythonError { message }
  }
}
"""


# --------------------------------------------------------------------------- the processes


def _proc_stat(pid: int) -> tuple[int, int, int] | None:
    """(ppid, pgid, sid) of a live process, None if gone or a zombie."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    if fields[0] == "Z":
        return None
    return int(fields[1]), int(fields[2]), int(fields[3])


def _all_pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def session_members(sids: set[int]) -> list[int]:
    """Live processes of these sessions: ``datalake dev`` runs in its own session and starts
    ``dagster dev`` in another one; both sessions' members are ours, even once reparented."""
    return [p for p in _all_pids() if (s := _proc_stat(p)) and s[2] in sids]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class DevServer:
    proc: subprocess.Popen
    port: int
    log: Path
    ui: DagsterUI

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_tail(self, n: int = 60) -> str:
        try:
            return "".join(self.log.read_text(errors="replace").splitlines(True)[-n:])
        except OSError:
            return ""


def _sessions_of(proc: subprocess.Popen) -> set[int]:
    """The sessions of ``proc`` and of all its descendants now alive."""
    children: dict[int, list[int]] = {}
    stats = {p: s for p in _all_pids() if (s := _proc_stat(p))}
    for p, (ppid, _, _) in stats.items():
        children.setdefault(ppid, []).append(p)
    out, todo = {proc.pid}, [proc.pid]  # the leader's sid is its pid (start_new_session)
    while todo:
        for c in children.get(todo.pop(), []):
            out.add(stats[c][2])
            todo.append(c)
    return out


def stop_tree(proc: subprocess.Popen, sids: set[int], grace: float = 45.0) -> None:
    """SIGINT (what Ctrl-C sends; ``datalake dev`` forwards it to Dagster's group), then
    SIGKILL whatever of the sessions is left after ``grace`` s. Asserts nothing is left."""
    sids |= _sessions_of(proc)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        sids |= _sessions_of(proc) if proc.poll() is None else set()
        if proc.poll() is not None and not session_members(sids):
            return
        time.sleep(0.5)
    for pid in session_members(sids):  # Spark's JVM ignores SIGINT (pyspark sets SIG_IGN)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(timeout=10)
    poll(
        f"processes of sessions {sorted(sids)} to exit after SIGKILL",
        lambda: not session_members(sids),
        15,
        0.5,
    )


@contextmanager
def datalake_dev(home: Path, settings: Path, *, start_timeout: float = 240.0, attempts: int = 3):
    """``datalake dev`` on a free loopback port with ``DATALAKE_HOME=home``, yielding a
    ``DevServer`` once the code location is loaded; always stops the whole process tree."""
    env = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME",)}
    env.update(
        DATALAKE_HOME=str(home),
        DATALAKE_SETTINGS=str(settings),
        SPARK_LOCAL_IP="127.0.0.1",
        PYTHONUNBUFFERED="1",
    )
    for attempt in range(1, attempts + 1):
        # The port is free when chosen and taken a moment later by the webserver; another
        # process may win that race: the webserver then exits and we try another port.
        port = free_port()
        log = home / f"datalake-dev-{port}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "datalake_assets.cli",
                    "dev",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                ],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                # SIGINT restored (ENVIRONMENT-NOTES: dagster dev ignores SIGTERM otherwise);
                # the handler only resets a signal, which is safe in the forked child.
                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # noqa: PLW1509
            )
        sids: set[int] = set()
        server = DevServer(proc, port, log, DagsterUI(GraphQL(f"http://127.0.0.1:{port}/graphql")))
        try:
            if _wait_ready(server, start_timeout):
                sids |= _sessions_of(proc)
                yield server
                return
        finally:
            stop_tree(proc, sids)
        if attempt == attempts:
            raise AssertionError(
                f"datalake dev did not start ({attempts} ports tried):\n{server.log_tail()}"
            )


def _wait_ready(server: DevServer, timeout: float) -> bool:
    """True once the webserver answers and the code location is loaded; False if the process
    exited (a lost port race); raises on a timeout or a code location that failed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            return False
        try:
            if server.ui.location_loaded():
                return True
        except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError):
            pass  # not listening yet
        time.sleep(1.0)
    raise AssertionError(
        f"datalake dev: no loaded code location after {timeout:.0f} s:\n{server.log_tail()}"
    )
