"""``datalake collect`` as users run it: a process of its own, stopped by a signal."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

from datalake_assets_tests.ingest.collector.helpers import REPO


class CollectorProcess:
    """``datalake collect`` in a subprocess; its output is collected by a thread."""

    def __init__(self, settings_file: Path, env: dict[str, str], workers: int = 1) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "datalake_assets.cli",
                "--settings",
                str(settings_file),
                "collect",
                "--workers",
                str(workers),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            cwd=REPO,
            start_new_session=True,
        )  # its own process group: kill_all() reaches the workers
        self.lines: list[str] = []
        self._url: list[str] = []
        self._started = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if not self._started.wait(60) or not self._url:
            self.proc.kill()
            raise AssertionError("collector did not start:\n" + self.output())
        self.url = self._url[0]

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            m = re.search(r"listening on (http://\S+)", line)
            if m:
                self._url.append(m.group(1))
                self._started.set()
        self._started.set()

    def stop(self, sig: int) -> int:
        self.proc.send_signal(sig)
        code = self.proc.wait(120)
        self._reader.join(30)
        return code

    def kill_all(self) -> None:
        """SIGKILL to the collector and its workers at once (a crash of the machine's
        processes, not a shutdown)."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        assert self.proc.wait(60) == -signal.SIGKILL
        self._reader.join(30)

    def output(self) -> str:
        return "".join(self.lines)
