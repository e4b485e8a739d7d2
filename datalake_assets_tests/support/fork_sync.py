"""Syncs killed at a fault point, in a tenth of the time of a fresh process each.

A killed sync must be a real process that dies by ``SIGKILL`` (``lake/faults.py``): no
``finally``, the lock dropped by the kernel, the journal left where it was. Starting
``python -m datalake_assets.transform.job`` costs about 1.2 s of imports; a generated history
kills many syncs. So one helper process (this module's ``main``) imports the job once and,
for each request, ``fork``s a child that sets ``DATALAKE_FAULT_AT`` and runs the job's entry
point. The helper starts no thread (it only reads its pipe and forks), so the child does not
inherit a lock some other thread held. The killed syncs take the driver-local path: the
child has no Spark session, and the commit protocol they exercise is the same on both paths.

    with ForkedSyncs() as syncs:
        outcome = syncs.run(request.to_args(), "mid_commit")  # "killed at mid_commit", "exit 0"
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Self

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TIMEOUT_S = 120.0


class ForkedSyncs:
    """The helper process, started on creation; ``close`` ends it."""

    def __init__(self) -> None:
        env = {k: v for k, v in os.environ.items() if k != "DATALAKE_FAULT_AT"}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, env.get("PYTHONPATH")) if p)
        env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", __name__],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._read() == {"ready": True}

    def run(self, job_args: list[str], fault: str) -> str:
        """Runs the job with ``job_args`` in a forked child that dies at ``fault``: what
        became of it, ``"killed at <point>"`` or ``"exit <code>"`` (a sync that never
        reached the point: a batch without files has none)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"args": job_args, "fault": fault}) + "\n")
        self.proc.stdin.flush()
        return self._read()["outcome"]

    def _read(self) -> dict:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the fork helper ended (exit {self.proc.wait()})")
        return json.loads(line)

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            self.proc.wait(timeout=30)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _child(args: list[str], fault: str, err_path: str) -> None:
    """In the forked child: the job, with its output away from the helper's pipe."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    err = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(devnull, 1)
    os.dup2(err, 2)
    os.environ["DATALAKE_FAULT_AT"] = fault
    code = 70
    try:
        from datalake_assets.transform.job import main as job_main

        code = job_main(args)
    finally:
        os._exit(code)


def _wait(pid: int) -> int:
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if time.monotonic() > deadline:  # a hung child must not hang the suite
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return -1
        time.sleep(0.005)


def main() -> None:
    import importlib
    import tempfile

    # imported once, before any fork (with what a small sync would load lazily)
    for module in (
        "pyarrow.acero",
        "pyarrow.dataset",
        "pyarrow.parquet",
        "datalake_assets.transform.job",
        "datalake_assets.transform.local_path",
    ):
        importlib.import_module(module)
    assert threading.active_count() == 1, "the helper must fork without other threads"

    print(json.dumps({"ready": True}), flush=True)
    err_path = os.path.join(tempfile.mkdtemp(prefix="fork-sync-"), "stderr")
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(request["args"], request["fault"], err_path)
        status = _wait(pid)
        with open(err_path, "rb") as f:
            err = f.read().decode("utf-8", "replace")
        if status == -1:
            outcome = f"timed out after {TIMEOUT_S:.0f} s: {err[-2000:]}"
        elif os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            point = err.rsplit("killed at ", 1)[-1].strip() if "killed at " in err else "?"
            outcome = (
                f"killed at {point}" if sig == signal.SIGKILL else f"signal {sig}: {err[-2000:]}"
            )
        else:
            code = os.WEXITSTATUS(status)
            outcome = f"exit {code}" + (f": {err[-2000:]}" if code else "")
        print(json.dumps({"outcome": outcome}), flush=True)


if __name__ == "__main__":
    main()
