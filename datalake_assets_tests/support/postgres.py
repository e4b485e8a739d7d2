"""A private PostgreSQL cluster on loopback for the production-instance tests: Debian's
``postgresql-15`` binaries, a data folder of its own under a temp folder, no system service.

    server = Postgres(); server.start()
    server.create_database("dagster")           # owned by the test user
    server.env()                                 # the DAGSTER_PG_* variables of infra/dagster/
    server.sql("SELECT count(*) FROM runs", "dagster")   # rows as tuples of strings
    server.stop()

PostgreSQL refuses to run as root, so as root the cluster runs as Debian's ``postgres`` user
(the package creates it), which then owns the private folder: a fresh one in the system's temp
folder (pytest's own temp folders are root's alone, not traversable by that user), removed
at ``stop``. The test user's password is
generated per cluster and reaches Dagster only through ``DAGSTER_PG_PASSWORD``, as an
operator's would.
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

USER = "dagster"


def bin_dir() -> str | None:
    """The newest installed PostgreSQL's binaries (Debian: /usr/lib/postgresql/<v>/bin)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=_version)
    if found:
        return os.path.dirname(found[-1])
    initdb = shutil.which("initdb")
    return os.path.dirname(initdb) if initdb else None


def _version(path: str) -> float:
    try:
        return float(path.split("/")[4])
    except (IndexError, ValueError):
        return 0.0


def missing() -> list[str]:
    """What this machine lacks to run the cluster (Debian: postgresql-15)."""
    return [] if bin_dir() else ["postgresql (initdb, pg_ctl, psql)"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Postgres:
    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="datalake-pg-"))
        self.datadir = self.folder / "data"
        self.port = 0
        self.user = USER
        self.password = secrets.token_urlsafe(18)
        self.bin = bin_dir() or ""
        # postgres refuses root: run it as Debian's postgres user, who then owns the folder
        self._run_as = pwd.getpwnam("postgres") if os.geteuid() == 0 else None

    def _cmd(self, name: str, *args: str) -> list[str]:
        cmd = [os.path.join(self.bin, name), *args]
        return ["runuser", "-u", "postgres", "--", *cmd] if self._run_as else cmd

    def start(self, timeout_s: float = 90) -> None:
        os.chmod(self.folder, 0o700)
        if self._run_as:
            os.chown(self.folder, self._run_as.pw_uid, self._run_as.pw_gid)
        subprocess.run(
            self._cmd(
                "initdb",
                "-D",
                str(self.datadir),
                "-U",
                "postgres",
                "--auth=trust",  # the superuser over the private socket folder only
                "--no-sync",
                "-E",
                "UTF8",
            ),
            check=True,
            capture_output=True,
            timeout=timeout_s,
        )
        # TCP: only the test user, by password; the superuser only over the private socket
        with open(self.datadir / "pg_hba.conf", "w") as hba:
            hba.write(f"local all postgres trust\nhost all {USER} 127.0.0.1/32 scram-sha-256\n")
        self.port = _free_port()
        options = (
            f"-c listen_addresses=127.0.0.1 -c port={self.port} "
            f"-c unix_socket_directories={self.folder} -c fsync=off "
            "-c synchronous_commit=off -c max_connections=200 -c shared_buffers=64MB"
        )
        subprocess.run(
            self._cmd(
                "pg_ctl",
                "-D",
                str(self.datadir),
                "-o",
                options,
                "-l",
                str(self.folder / "server.log"),
                "-w",
                "-t",
                str(int(timeout_s)),
                "start",
            ),
            check=True,
            capture_output=True,
            timeout=timeout_s + 10,
        )
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self.sql("SELECT 1")
                break
            except subprocess.CalledProcessError:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        "postgres did not accept connections in time: "
                        f"{(self.folder / 'server.log').read_text()[-2000:]}"
                    ) from None
                time.sleep(0.3)
        self.sql(f"CREATE ROLE {USER} LOGIN PASSWORD '{self.password}'")

    def sql(self, statement: str, database: str = "postgres") -> list[tuple[str, ...]]:
        """As the superuser over the private socket; rows as tab-split strings."""
        out = subprocess.run(
            self._cmd(
                "psql",
                "-h",
                str(self.folder),
                "-p",
                str(self.port),
                "-U",
                "postgres",
                "-d",
                database,
                "-v",
                "ON_ERROR_STOP=1",
                "-At",
                "-F",
                "\t",
                "-c",
                statement,
            ),
            check=True,
            capture_output=True,
            text=True,
            timeout=60,
        )
        return [tuple(line.split("\t")) for line in out.stdout.splitlines()]

    def create_database(self, name: str) -> str:
        self.sql(f'CREATE DATABASE "{name}" OWNER {USER}')
        return name

    def env(self, database: str) -> dict[str, str]:
        """The variables infra/dagster/dagster.yaml reads its connection from."""
        return {
            "DAGSTER_PG_HOST": "127.0.0.1",
            "DAGSTER_PG_PORT": str(self.port),
            "DAGSTER_PG_DB": database,
            "DAGSTER_PG_USERNAME": self.user,
            "DAGSTER_PG_PASSWORD": self.password,
        }

    def stop(self) -> None:
        if self.port and (self.datadir / "postmaster.pid").exists():
            subprocess.run(
                self._cmd("pg_ctl", "-D", str(self.datadir), "-m", "fast", "-w", "stop"),
                capture_output=True,
                timeout=60,
                check=False,
            )
        shutil.rmtree(self.folder, ignore_errors=True)
