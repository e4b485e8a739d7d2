"""A minimal Databricks workspace on loopback: the REST endpoints ``DatabricksSparkCompute``
calls, served by a threaded HTTP server, with runs that are real processes.

Why not an emulator from PyPI: ``minilake`` 1.9.0 serves these endpoints, but its
``runs/cancel`` only stops a run *before its next task* (a running task is never killed), and
its subprocess executor runs ``python3`` from ``PATH`` without Spark. Cancellation and the real
job under Spark are what the tests must see, hence this fake (~300 lines).

Endpoints (what the Databricks SDK 0.60 sends):

- Jobs: ``POST /api/2.2/jobs/runs/submit``, ``GET runs/get``, ``POST runs/cancel``,
  ``GET runs/get-output``; Clusters: ``GET /api/2.1/clusters/get``.
- Files (Unity Catalog volumes): ``PUT``/``HEAD``/``GET /api/2.0/fs/files/Volumes/...``.
- Workspace: ``GET /api/2.0/workspace/get-status``, ``POST mkdirs``, ``POST import``.
- DBFS: ``GET /api/2.0/dbfs/get-status``, ``POST mkdirs``, ``create``, ``add-block``, ``close``.

Every request must carry ``Authorization: Bearer <token>``. Files live under ``root``:
``Volumes/``, ``Workspace/`` and ``dbfs/``. A run's task is what a cluster does with a
``spark_python_task``: ``spark-submit --master local[2] <python_file> <parameters>`` in a new
process group, the paths in them mapped as the nodes' mounts map them (``/Volumes/...``,
``/Workspace/...``, ``dbfs:/...`` -> the folders above), ``PYTHONPATH`` emptied (the job must
get its code from the package). ``libraries`` are recorded, not installed (this venv has
them). ``runs/cancel`` kills the process group (TERM, then KILL), as Databricks stops a task.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import threading
import time
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

FAKE_TOKEN = "dapi-fake-token-for-tests"
MOUNTS = (("/Volumes/", "Volumes/"), ("/Workspace/", "Workspace/"), ("dbfs:/", "dbfs/"))


def live_processes(pgid: int) -> list[int]:
    """The pids of process group ``pgid`` that still run (zombies excluded), from /proc."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:  # state, ppid, pgrp
            out.append(int(entry))
    return out


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code = status, code


def _spark_submit() -> str:
    from pyspark.find_spark_home import _find_spark_home

    return os.path.join(_find_spark_home(), "bin", "spark-submit")


class FakeRun:
    def __init__(self, run_id: int, body: dict) -> None:
        self.run_id, self.task_run_id, self.body = run_id, run_id + 1, body
        self.task = body["tasks"][0]
        self.life, self.result, self.message = "PENDING", None, ""
        self.process: subprocess.Popen | None = None
        self.cancelled = threading.Event()
        self.stdout = self.stderr = ""
        self.error = ""

    def state(self) -> dict:
        out = {"life_cycle_state": self.life, "state_message": self.message}
        if self.result:
            out["result_state"] = self.result
        return out


class FakeDatabricks:
    def __init__(
        self, root: Path, *, clusters: dict[str, str] | None = None, token: str = FAKE_TOKEN
    ) -> None:
        self.root, self.token = Path(root), token
        self.clusters = dict(clusters or {"0123-456789-abcd1234": "TERMINATED"})
        self.calls: list[tuple[str, str]] = []  # (method, path) of every authorized request
        self.runs: dict[int, FakeRun] = {}
        self.hold = threading.Event()  # set: runs stay PENDING (the cluster never frees up)
        self.env: dict[str, str] = {}  # added to the task's environment
        self._next_id = 1000
        self._handles: dict[int, tuple[Path, bytearray]] = {}
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> FakeDatabricks:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        for run in self.runs.values():
            self._kill(run)
        self._server.shutdown()
        self._server.server_close()

    # ------------------------------------------------------------------------------ files

    def local(self, cluster_path: str) -> Path | None:
        """Where a node's mount puts ``cluster_path`` (None: not a mounted path)."""
        for prefix, folder in MOUNTS:
            if cluster_path.startswith(prefix):
                return self.root / folder / cluster_path[len(prefix) :]
        return None

    def _workspace(self, path: str) -> Path:
        return self.root / "Workspace" / path.removeprefix("/Workspace").lstrip("/")

    def _dbfs(self, path: str) -> Path:
        return self.root / "dbfs" / path.removeprefix("dbfs:").lstrip("/")

    # ------------------------------------------------------------------------------ jobs

    def submit(self, body: dict) -> dict:
        tasks = body.get("tasks") or []
        if len(tasks) != 1 or "spark_python_task" not in tasks[0]:
            raise ApiError(400, "INVALID_PARAMETER_VALUE", "one spark_python_task expected")
        cluster = tasks[0].get("existing_cluster_id")
        if cluster is not None and cluster not in self.clusters:
            raise ApiError(400, "INVALID_PARAMETER_VALUE", f"Cluster {cluster} does not exist")
        if cluster is None and "new_cluster" not in tasks[0]:
            raise ApiError(400, "INVALID_PARAMETER_VALUE", "existing_cluster_id or new_cluster")
        with self._lock:
            run = FakeRun(self._next_id, body)
            self._next_id += 2
            self.runs[run.run_id] = run
        threading.Thread(target=self._execute, args=(run,), daemon=True).start()
        return {"run_id": run.run_id}

    def _execute(self, run: FakeRun) -> None:
        try:
            self._run_task(run)
        except Exception as e:  # noqa: BLE001 - a broken fake must end the run, not hang it
            run.life, run.result, run.message = "INTERNAL_ERROR", "FAILED", f"fake: {e!r}"

    def _run_task(self, run: FakeRun) -> None:
        while self.hold.is_set() and not run.cancelled.is_set():
            time.sleep(0.05)
        if run.cancelled.is_set():
            return
        spark_task = run.task["spark_python_task"]
        script = self.local(spark_task["python_file"])
        if script is None or not script.exists():
            run.life, run.result = "INTERNAL_ERROR", "FAILED"
            run.message = f"file {spark_task['python_file']} not found"
            return
        args = [str(self.local(a) or a) for a in spark_task.get("parameters", [])]
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env.update(
            PYSPARK_PYTHON=sys.executable,
            PYSPARK_DRIVER_PYTHON=sys.executable,
            SPARK_LOCAL_IP="127.0.0.1",
        )
        env.update(self.env)
        env.update(run.task.get("new_cluster", {}).get("spark_env_vars", {}))
        workdir = self.root / "runs" / str(run.run_id)
        workdir.mkdir(parents=True)
        command = [
            _spark_submit(),
            "--master",
            "local[2]",
            "--driver-memory",
            "1g",
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            "spark.ui.showConsoleProgress=false",
            str(script),
            *args,
        ]
        with open(workdir / "stdout", "wb") as out, open(workdir / "stderr", "wb") as err:
            with self._lock:
                if run.cancelled.is_set():
                    return
                run.process = subprocess.Popen(
                    command, cwd=workdir, env=env, stdout=out, stderr=err, start_new_session=True
                )
                run.life = "RUNNING"
            timeout = run.body.get("timeout_seconds") or None
            try:
                code = run.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self._kill(run)
                run.life, run.result, run.message = "TERMINATED", "TIMEDOUT", "Run timed out."
                return
        run.stdout = (workdir / "stdout").read_text(errors="replace")
        run.stderr = (workdir / "stderr").read_text(errors="replace")
        if run.cancelled.is_set():
            return  # cancel() sets the state
        if code == 0:
            run.life, run.result = "TERMINATED", "SUCCESS"
        else:
            # runs/get-output's "error": the exception, not the stack trace's last frame
            lines = [ln for ln in run.stderr.splitlines() if ln.strip()]
            # (Python's is its last unindented line, the JVM's the "Exception in thread" one)
            errors = [ln for ln in lines if ln.startswith("Exception in thread")] or [
                ln for ln in lines if not ln[0].isspace() and ("Error" in ln or "Exception" in ln)
            ]
            run.error = (errors or lines or [f"exit code {code}"])[-1]
            run.life, run.result = "TERMINATED", "FAILED"
            run.message = "Workload failed, see run output for details"

    def cancel(self, run_id: int) -> None:
        run = self._run(run_id)
        if run.life in ("TERMINATED", "INTERNAL_ERROR"):
            return
        run.cancelled.set()
        run.life = "TERMINATING"
        self._kill(run)
        run.life, run.result, run.message = "TERMINATED", "CANCELED", "Run cancelled."

    def _kill(self, run: FakeRun) -> None:
        """TERM the task's process group, then KILL what is left, until no process of it
        lives: the JVM's Python driver is its child and may outlive spark-submit."""
        with self._lock:
            process = run.process
        if process is None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + 10
            while live_processes(process.pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if not live_processes(process.pid):
                break
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def _run(self, run_id: Any) -> FakeRun:
        run = self.runs.get(int(run_id))
        if run is None:
            raise ApiError(404, "RESOURCE_DOES_NOT_EXIST", f"Run {run_id} does not exist.")
        return run

    def get_run(self, run_id: str) -> dict:
        run = self._run(run_id)
        return {
            "run_id": run.run_id,
            "run_name": run.body.get("run_name"),
            "state": run.state(),
            "run_page_url": f"{self.url}/#job/runs/{run.run_id}",
            "tasks": [
                {"run_id": run.task_run_id, "task_key": run.task["task_key"], "state": run.state()}
            ],
        }

    def get_output(self, task_run_id: str) -> dict:
        run = next((r for r in self.runs.values() if r.task_run_id == int(task_run_id)), None)
        if run is None:
            raise ApiError(
                400,
                "INVALID_PARAMETER_VALUE",
                f"Run {task_run_id} is not a task run of a submitted run",
            )
        out: dict[str, Any] = {"metadata": self.get_run(str(run.run_id))}
        if run.error:
            out.update(error=run.error, error_trace=run.stderr[-20000:])
        return out

    # ---------------------------------------------------------------------- the handler

    def route(self, method: str, path: str, query: dict, body: bytes) -> tuple[int, Any]:
        data = json.loads(body) if body and method == "POST" else {}
        if path.startswith("/api/2.0/fs/files/"):
            return self._files(method, unquote(path[len("/api/2.0/fs/files") :]), query, body)
        routes = {
            ("POST", "jobs/runs/submit"): lambda: self.submit(data),
            ("GET", "jobs/runs/get"): lambda: self.get_run(query["run_id"]),
            ("POST", "jobs/runs/cancel"): lambda: self.cancel(data["run_id"]) or {},
            ("GET", "jobs/runs/get-output"): lambda: self.get_output(query["run_id"]),
            ("GET", "clusters/get"): lambda: self._cluster(query["cluster_id"]),
            ("GET", "workspace/get-status"): lambda: self._status(
                self._workspace(query["path"]), "workspace", query["path"]
            ),
            ("POST", "workspace/mkdirs"): lambda: self._mkdirs(self._workspace(data["path"])),
            ("POST", "workspace/import"): lambda: self._import(data),
            ("GET", "dbfs/get-status"): lambda: self._status(
                self._dbfs(query["path"]), "dbfs", query["path"]
            ),
            ("POST", "dbfs/mkdirs"): lambda: self._mkdirs(self._dbfs(data["path"])),
            ("POST", "dbfs/create"): lambda: self._dbfs_create(data),
            ("POST", "dbfs/add-block"): lambda: (
                self._handles[data["handle"]][1].extend(base64.b64decode(data["data"])) or {}
            ),
            ("POST", "dbfs/close"): lambda: self._dbfs_close(data["handle"]),
        }
        parts = path.split("/", 3)  # "", "api", "2.x", rest
        action = routes.get((method, parts[3] if len(parts) == 4 else ""))
        if action is None:
            raise ApiError(404, "ENDPOINT_NOT_FOUND", f"no fake for {method} {path}")
        return 200, action()

    def _cluster(self, cluster_id: str) -> dict:
        if cluster_id not in self.clusters:
            raise ApiError(400, "INVALID_PARAMETER_VALUE", f"Cluster {cluster_id} does not exist")
        return {
            "cluster_id": cluster_id,
            "cluster_name": "customer-cluster",
            "state": self.clusters[cluster_id],
        }

    def _files(self, method: str, path: str, query: dict, body: bytes) -> tuple[int, Any]:
        local = self.local(path)
        if local is None:
            raise ApiError(400, "INVALID_PARAMETER_VALUE", f"not a volume path: {path}")
        if method == "PUT":
            if local.exists() and query.get("overwrite") == "false":
                raise ApiError(409, "ALREADY_EXISTS", f"{path} exists")
            local.parent.mkdir(parents=True, exist_ok=True)  # the Files API makes parents
            local.write_bytes(body)
            return 204, None
        if not local.is_file():
            raise ApiError(404, "NOT_FOUND", f"{path} does not exist")
        return 200, local  # HEAD: its headers; GET: its bytes

    def _status(self, local: Path, api: str, path: str) -> dict:
        if not local.exists():
            raise ApiError(404, "RESOURCE_DOES_NOT_EXIST", f"Path ({path}) doesn't exist.")
        size, mtime = local.stat().st_size, int(local.stat().st_mtime * 1000)
        if api == "dbfs":
            return {
                "path": path,
                "is_dir": local.is_dir(),
                "file_size": size,
                "modification_time": mtime,
            }
        return {
            "path": path,
            "object_type": "DIRECTORY" if local.is_dir() else "FILE",
            "size": size,
            "modified_at": mtime,
        }

    def _mkdirs(self, local: Path) -> dict:
        local.mkdir(parents=True, exist_ok=True)
        return {}

    def _import(self, data: dict) -> dict:
        local = self._workspace(data["path"])
        if not local.parent.is_dir():
            raise ApiError(
                404,
                "RESOURCE_DOES_NOT_EXIST",
                f"The parent folder ({os.path.dirname(data['path'])}) does not exist.",
            )
        if local.exists() and not data.get("overwrite"):
            raise ApiError(400, "RESOURCE_ALREADY_EXISTS", f"{data['path']} already exists.")
        local.write_bytes(base64.b64decode(data["content"]))
        return {}

    def _dbfs_create(self, data: dict) -> dict:
        local = self._dbfs(data["path"])
        if local.exists() and not data.get("overwrite"):
            raise ApiError(400, "RESOURCE_ALREADY_EXISTS", f"{data['path']} already exists.")
        with self._lock:
            handle = self._next_id
            self._next_id += 1
            self._handles[handle] = (local, bytearray())
        return {"handle": handle}

    def _dbfs_close(self, handle: int) -> dict:
        local, data = self._handles.pop(handle)
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_bytes(bytes(data))
        return {}


def _handler(fake: FakeDatabricks) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # quiet: pytest shows failures
            pass

        def _serve(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            url = urlsplit(self.path)
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            if self.headers.get("Authorization") != f"Bearer {fake.token}":
                return self._json(
                    401,
                    {"error_code": "UNAUTHENTICATED", "message": "Invalid access token."},
                    method,
                )
            fake.calls.append((method, url.path))
            try:
                status, result = fake.route(method, url.path, query, body)
            except ApiError as e:
                return self._json(e.status, {"error_code": e.code, "message": str(e)}, method)
            if isinstance(result, Path):
                return self._file(result, method)
            if status == 204:
                self.send_response(204)
                self.end_headers()
                return None
            return self._json(status, result, method)

        def _json(self, status: int, payload: Any, method: str) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if method != "HEAD":
                self.wfile.write(data)

        def _file(self, path: Path, method: str) -> None:
            data = path.read_bytes()
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Last-Modified", formatdate(path.stat().st_mtime, usegmt=True))
            self.end_headers()
            if method == "GET":
                self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 - http.server's names
            self._serve("GET")

        def do_POST(self) -> None:  # noqa: N802
            self._serve("POST")

        def do_PUT(self) -> None:  # noqa: N802
            self._serve("PUT")

        def do_HEAD(self) -> None:  # noqa: N802
            self._serve("HEAD")

    return Handler
