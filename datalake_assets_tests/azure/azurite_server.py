"""Azurite, Microsoft's Azure Storage emulator (npm ``azurite``), for the Azure storage tests:
its blob service on loopback, in memory, telemetry off.

Installed into ``azurite/node_modules`` by ``npm ci`` (pinned by ``azurite/package-lock.json``;
``.ci/run`` does it on a fresh machine). Without it the tests skip with the reason, except
under CI (``CI`` set), where they fail: it is a test dependency. Azurite has no ``dfs``
endpoint (no hierarchical namespace): the ``abfss://`` rename protocol is tested against a
filesystem with the same rename rules instead (``hns_emulation.py``).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent / "azurite"
BIN = HERE / "node_modules" / ".bin" / "azurite-blob"
IN_CI = bool(os.environ.get("CI"))

# Azurite's well-known development account and key: published with the emulator, the same
# in every copy of it, accepted by nothing but an emulator. Not a secret.
ACCOUNT = "devstoreaccount1"
AZURITE_DEV_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)


def _missing(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"{reason} (CI: a test dependency, installed by .ci/run)")
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Azurite:
    """One ``azurite-blob`` process on ``127.0.0.1:<port>``; ``endpoint`` is its blob URL."""

    def __init__(self, workdir: str) -> None:
        if shutil.which("node") is None:
            _missing("node is not installed (Node 20)")
        if not BIN.exists():
            _missing(f"{BIN} is missing: (cd {HERE} && npm ci --no-audit --no-fund)")
        self.port = _free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.log = Path(workdir) / "azurite.log"
        with open(self.log, "wb") as log:  # a file, never a pipe nobody drains
            self.proc = subprocess.Popen(
                [
                    str(BIN),
                    "--silent",
                    "--inMemoryPersistence",
                    "--extentMemoryLimit",
                    "512",
                    "--disableTelemetry",
                    "--skipApiVersionCheck",
                    "--blobHost",
                    "127.0.0.1",
                    "--blobPort",
                    str(self.port),
                ],
                cwd=workdir,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    out = self.log.read_text(errors="replace")
                    raise RuntimeError(f"azurite did not start: {out[-2000:]}") from None
                time.sleep(0.1)

    def env(self) -> dict[str, str]:
        """The environment a process reaches Azurite's account with (az:// roots)."""
        return {
            "AZURE_STORAGE_ACCOUNT_NAME": ACCOUNT,
            "AZURE_STORAGE_ACCOUNT_KEY": AZURITE_DEV_KEY,
            "DATALAKE_AZURE_BLOB_ENDPOINT": self.endpoint,
        }

    def service(self):
        """The Azure SDK's client of the account (for the tests' own checks and setup)."""
        from azure.storage.blob import BlobServiceClient

        return BlobServiceClient(
            f"{self.endpoint}/{ACCOUNT}",
            credential={"account_name": ACCOUNT, "account_key": AZURITE_DEV_KEY},
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # our own process group only
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
