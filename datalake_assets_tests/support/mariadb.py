"""A private MariaDB server on loopback for the metastore tests: Debian's ``mariadb-server``
binaries, a datadir of its own under a temp folder, no system service and no root account
reachable over TCP (root logs in over the server's unix socket, in the same private folder).

    server = MariaDB(tmp_dir); server.start()
    server.create_database("ms", "latin1")      # and grants the test user everything on it
    server.jdbc_url("ms")                       # jdbc:mysql://127.0.0.1:<port>/ms
    server.sql("SHOW TABLES", database="ms")    # rows as tuples of strings
    server.stop()

The test user's password is generated per server; it reaches the code under test only through
``DATALAKE_METASTORE_PASSWORD`` or a password file, as a user's would.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from datalake_assets.settings.catalog_section import ENV_METASTORE_PASSWORD

BINARIES = ("mariadbd", "mariadb-install-db", "mariadb")
DRIVER_JAR = "/usr/share/java/mariadb-java-client.jar"
USER = "metastore"


def missing() -> list[str]:
    """What this machine lacks to run the server (Debian: mariadb-server libmariadb-java)."""
    out = [b for b in BINARIES if not _which(b)]
    return out + ([DRIVER_JAR] if not os.path.isfile(DRIVER_JAR) else [])


def _which(name: str) -> str | None:
    # mariadbd lives in /usr/sbin, which a non-root PATH may lack
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MariaDB:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.datadir = folder / "data"
        self.socket = folder / "mysqld.sock"
        self.port = 0
        self.user = USER
        self.password = secrets.token_urlsafe(18)
        self.proc: subprocess.Popen | None = None
        self._as_root = ["--user=root"] if os.geteuid() == 0 else []  # mariadbd refuses root

    def start(self, timeout_s: float = 90) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        os.chmod(self.folder, 0o700)  # the socket is root's way in
        subprocess.run(
            [
                _which("mariadb-install-db"),
                "--no-defaults",
                f"--datadir={self.datadir}",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                "--skip-name-resolve",
                *self._as_root,
            ],
            check=True,
            capture_output=True,
            timeout=timeout_s,
        )
        self.port = _free_port()
        log = open(self.folder / "server.log", "ab")
        self.proc = subprocess.Popen(
            [
                _which("mariadbd"),
                "--no-defaults",
                f"--datadir={self.datadir}",
                f"--socket={self.socket}",
                f"--port={self.port}",
                "--bind-address=127.0.0.1",
                "--skip-name-resolve",
                f"--pid-file={self.folder / 'mysqld.pid'}",
                "--innodb-buffer-pool-size=32M",
                "--performance-schema=OFF",
                "--skip-log-bin",
                "--max-connections=200",
                *self._as_root,
            ],
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + timeout_s
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"mariadbd exited with {self.proc.returncode}: "
                    f"{(self.folder / 'server.log').read_text()[-2000:]}"
                )
            try:
                self.sql("SELECT 1")
                break
            except subprocess.CalledProcessError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("mariadbd did not accept connections in time") from None
                time.sleep(0.3)
        self.sql(f"CREATE USER '{USER}'@'127.0.0.1' IDENTIFIED BY '{self.password}'")

    def sql(self, statement: str, database: str = "") -> list[tuple[str, ...]]:
        """As root over the private socket; rows as tab-split strings."""
        out = subprocess.run(
            [
                _which("mariadb"),
                "--no-defaults",
                f"--socket={self.socket}",
                "-uroot",
                "--batch",
                "--skip-column-names",
                *([database] if database else []),
                "-e",
                statement,
            ],
            check=True,
            capture_output=True,
            text=True,
            timeout=60,
        )
        return [tuple(line.split("\t")) for line in out.stdout.splitlines()]

    def create_database(self, name: str, charset: str = "latin1") -> str:
        self.sql(f"CREATE DATABASE `{name}` CHARACTER SET {charset}")
        self.sql(f"GRANT ALL ON `{name}`.* TO '{USER}'@'127.0.0.1'")
        return name

    def jdbc_url(self, database: str, params: str = "") -> str:
        return f"jdbc:mysql://127.0.0.1:{self.port}/{database}" + (f"?{params}" if params else "")

    def tables(self, database: str) -> list[str]:
        return sorted(r[0] for r in self.sql("SHOW TABLES", database))

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()  # a clean shutdown on SIGTERM
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)


def metastore_toml(
    server: MariaDB, folder, database: str, *, url_params: str = "", password_file: str = ""
) -> str:
    """A lake.toml in ``folder`` whose Hive catalog is ``database`` on ``server`` (the URL
    without ``useMysqlMetadata``, as users write it: the catalog adds it)."""
    from datalake_assets_tests.support.settings_files import write_lake_toml

    password = f'metastore_password_file = "{password_file}"' if password_file else ""
    return str(
        write_lake_toml(
            folder,
            f"""
        archive_root = "archive"
        lake_root = "lake"
        [spark]
        master = "local[1]"
        driver_memory = "1g"
        shuffle_partitions = 1
        [catalog]
        backend = "hive"
        metastore_dir = "metastore"
        metastore_jdbc_url = "{server.jdbc_url(database, url_params)}"
        metastore_user = "{server.user}"
        {password}
    """,
        )
    )


def run_datalake(
    settings: str, *args: str, password: str | None = None, timeout_s: float = 600
) -> subprocess.CompletedProcess:
    """``datalake --settings <settings> <args>`` in a process of its own; the password (if
    given) in its environment only."""
    env = {k: v for k, v in os.environ.items() if k != ENV_METASTORE_PASSWORD}
    if password is not None:
        env[ENV_METASTORE_PASSWORD] = password
    return subprocess.run(
        [sys.executable, "-m", "datalake_assets.cli", "--settings", settings, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
