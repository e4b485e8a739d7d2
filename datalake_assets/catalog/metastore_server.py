"""The embedded metastore served by one long-lived local Spark: what ``datalake dev`` starts.

Derby, the embedded metastore's database, admits one JVM at a time, so every run that
registered tables started its own: a JVM (5-6 s) and Derby's boot (3-4 s) for about a second of
work on a 1,000-event hour (``bench/README.md``, "Small hours"). ``datalake dev`` therefore
starts one Spark Connect server, PySpark's own persistent local server
(``pyspark.sql.connect.local_server``, PySpark >= 4.3), that opens the metastore and keeps it
open. A process that syncs with that metastore (a Dagster run, ``datalake sync``,
``datalake forget``) finds the server through a discovery file in the metastore folder
(``<metastore_dir>/spark-connect/``, ``0700``; the file holds the server's token, ``0600``) and
sends its catalog statements there; its own Spark session, if a large batch needs one, starts
without Hive support, so only the server ever opens Derby.

Which way a process goes is decided once per process and metastore (``served_url``): a process
that opened Derby itself keeps it, one that found the server keeps using it. With no server (or
``[catalog] metastore_server = "off"``, or an older PySpark) everything works as before, one
JVM at a time. The server binds 127.0.0.1 only and requires its token.

Functions take the metastore folder; ``CatalogConfig`` (``config.py``) says whether its
metastore may be served (``servable``) and gives a session its settings (``session_conf``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from typing import Any

SERVER_DIR = "spark-connect"
DISCOVERY_FILE = "connect-local.json"
# The server runs the syncs' catalog statements and, under `datalake dev`, the dbt models
# (docs/guides/models.md): two cores (one made the models' Spark the whole cost of a build,
# bench/README.md) and a heap for a few days of the demo's sessions.
SERVER_MASTER = "local[2]"
SERVER_MEMORY = "1g"
_TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"

_decided: dict[str, str | None] = {}  # discovery file -> the server's URL (None: not served)
_sessions: dict[str, Any] = {}  # URL -> the process's Connect session to it
_lock = threading.Lock()


def _local_server():
    """PySpark's persistent local Connect server (``None`` before PySpark 4.3)."""
    try:
        from pyspark.sql.connect import local_server
    except ImportError:
        return None
    return local_server


def discovery_path(metastore_dir: str) -> str:
    return os.path.join(metastore_dir.rstrip("/"), SERVER_DIR, DISCOVERY_FILE)


def served_url(metastore_dir: str) -> str | None:
    """The URL of the server that holds the metastore in ``metastore_dir``, or ``None`` when
    there is none; decided on the first call of the process and kept (see the module doc).
    Waits while the server is starting (its starter holds the discovery file's lock)."""
    path = discovery_path(metastore_dir)
    with _lock:
        if path not in _decided:
            _decided[path] = _lookup(path)
        return _decided[path]


def _lookup(path: str) -> str | None:
    ls = _local_server()
    if ls is None or not os.path.exists(os.path.dirname(path)):
        return None
    with ls.Discovery(path) as discovery:
        server = ls.LocalConnectServer(discovery)
        if not server.is_reusable():  # none recorded, its process gone, or not listening
            return None
        return f"sc://localhost:{server.port}/;token={server.token}"


def served_session(metastore_dir: str) -> Any | None:
    """A Spark Connect session to the server of the metastore in ``metastore_dir`` (one per
    process), or ``None`` when it is not served."""
    url = served_url(metastore_dir)
    if url is None:
        return None
    with _lock:
        session = _sessions.get(url)
        if session is None:
            session = _sessions[url] = _connect(url)
        return session


def _connect(url: str) -> Any:
    """A new Spark Connect session to ``url``, made for short catalog statements."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    session = ConnectSession.builder.remote(url).create()
    # Reattachable execution (a release call after each statement, so a long query survives
    # a dropped connection) costs ~50 ms a statement; ours are short catalog calls over
    # loopback: 90-140 ms an ADD PARTITION instead of 145-200.
    session.client.disable_reattachable_execute()
    return session


def server_conf(metastore_conf: dict[str, str]) -> dict[str, str]:
    """The server's settings: the metastore's (``CatalogConfig.spark_conf()``), small, quiet."""
    return {
        **metastore_conf,
        "spark.app.name": "datalake-metastore",
        "spark.driver.memory": SERVER_MEMORY,
        "spark.ui.enabled": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.log.level": "WARN",  # INFO logs every statement: megabytes an hour
        # A query through the server lists a table's files afresh: a long-lived cache of
        # them would name the files a re-sync has since replaced (FILE_NOT_EXIST).
        "spark.sql.hive.filesourcePartitionFileCacheSize": "0",
    }


def start(
    metastore_dir: str, metastore_conf: dict[str, str], *, started: threading.Event | None = None
) -> str:
    """Start the server of the metastore in ``metastore_dir`` (its Spark settings:
    ``metastore_conf``), or find it running; returns its address (without the token).
    ``started`` is set once the discovery file is locked: from then on every ``served_url``
    waits for this call's outcome instead of opening Derby itself."""
    ls = _local_server()
    if ls is None:
        raise RuntimeError(
            "a served metastore needs PySpark >= 4.3 (pyspark.sql.connect.local_server)"
        )
    path = discovery_path(metastore_dir)
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    os.chmod(os.path.dirname(path), 0o700)
    had_token = os.environ.get(_TOKEN_ENV)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    try:
        with ls.Discovery(path) as discovery:
            if started is not None:
                started.set()
            server = ls.LocalConnectServer(discovery)
            server.reuse_or_start(SERVER_MASTER, server_conf(metastore_conf))
            _warm_up(f"sc://localhost:{server.port}/;token={server.token}")
            return f"sc://localhost:{server.port}"
    finally:
        # reuse_or_start leaves the token in our environment: it must not reach every child
        if had_token is None:
            os.environ.pop(_TOKEN_ENV, None)
        if started is not None:
            started.set()


def _warm_up(url: str) -> None:
    """Open the metastore now (Derby's boot, the Hive client: seconds), not in the first
    run's catalog step; a failure here is left to that step to report."""
    with contextlib.suppress(Exception):
        session = _connect(url)
        try:
            session.sql("SHOW DATABASES").collect()
        finally:
            session.stop()


def stop(metastore_dir: str, timeout_s: float = 30.0) -> bool:
    """Stop the server of the metastore in ``metastore_dir``, if one runs, and wait until its
    process is gone (Derby released); ``True`` if one was stopped."""
    ls = _local_server()
    path = discovery_path(metastore_dir)
    if ls is None or not os.path.exists(path):
        return False
    with _lock:  # this process's sessions to it first: they would retry a dead server
        url = _decided.pop(path, None)
        session = _sessions.pop(url, None) if url else None
    if session is not None:
        with contextlib.suppress(Exception):
            session.stop()
    with ls.Discovery(path) as discovery:
        server = ls.LocalConnectServer(discovery)
        pid = server.pid
        if not server.stop():
            return False
    deadline = time.monotonic() + timeout_s
    while pid is not None and _alive(pid):
        if time.monotonic() > deadline:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            break
        time.sleep(0.2)
    return True


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, exited but not yet reaped by init, does not)."""
    if not os.path.isdir("/proc"):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except OSError:
            pass
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def forget_decisions() -> None:
    """Forget what this process decided, closing its sessions (tests that start and stop
    servers for the same metastore in one process)."""
    with _lock:
        sessions = list(_sessions.values())
        _decided.clear()
        _sessions.clear()
    for session in sessions:
        with contextlib.suppress(Exception):
            session.stop()
