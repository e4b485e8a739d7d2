"""What a command-line Spark session prints: its errors, not Spark's chatter.

A ``datalake sync`` of one small hour printed 45 lines on stderr, none of them a problem:
the JVM's notice that Spark 4 adds an incubator module (``WARNING: Using incubator modules:
jdk.incubator.vector``, printed by the JVM itself: no flag silences it), Spark's banner about
its default log4j profile, Hadoop's ``NativeCodeLoader`` warning, and Hive's ``WARN log:
Updating partition stats fast for ...`` twice per table registered. And PySpark 4 logs every
query error as a JSON line with the JVM's stack trace (9 KB) before raising it.

A quiet session (``local_spark_session(..., quiet=True)``, the ``datalake`` commands only;
Dagster runs keep Spark's defaults) therefore:

* uses ``log4j2-quiet.properties``: the JVM's log at ERROR, so a failing task or a lost
  executor still prints (unless the user's own Java options name a log4j configuration;
  ``[spark.conf] "spark.log.level" = "WARN"`` brings the warnings back);
* starts its JVM with stderr through a pipe that drops that one incubator notice and copies
  every other line, as it comes, to this process's stderr;
* turns off PySpark's JSON logging of query errors (the caller reports the error raised).
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

QUIET_LOG4J2 = Path(__file__).with_name("log4j2-quiet.properties")
JVM_NOTICE = b"WARNING: Using incubator modules:"
# PySpark 4's loggers that print a query error (as JSON, with the JVM's stack trace) when the
# exception is made: the exception itself still reaches the caller.
QUERY_ERROR_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")


def quiet_java_options(java_options: str) -> str:
    """``spark.driver.extraJavaOptions`` with the quiet log4j configuration added, unless the
    options already name a configuration of their own."""
    if "log4j2.configurationFile" in java_options or "log4j.configurationFile" in java_options:
        return java_options
    # a file: URI, percent-encoded: the options are split on spaces
    return f"{java_options} -Dlog4j2.configurationFile={QUIET_LOG4J2.resolve().as_uri()}".strip()


def quiet_query_error_logs() -> None:
    """PySpark's JSON logging of query errors off (PySpark 3.5 has none)."""
    try:
        from pyspark.logger import PySparkLogger
    except ImportError:
        return
    for name in QUERY_ERROR_LOGGERS:
        # PySpark's own class: it logs with keyword arguments a plain Logger refuses
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL + 1)


@contextmanager
def jvm_notice_dropped() -> Iterator[None]:
    """While the JVM starts, file descriptor 2 (which it inherits) is a pipe copied to the real
    stderr by a thread, without the incubator notice; this process's own fd 2 is restored on
    exit. Without a usable fd 2 nothing is changed."""
    try:
        real = os.dup(2)
    except OSError:  # no fd 2 at all
        yield
        return
    saved = os.dup(real)
    read_end, write_end = os.pipe()
    copier = _Copier(read_end, real)
    copier.start()
    os.dup2(write_end, 2)
    os.close(write_end)
    try:
        yield
    finally:
        os.dup2(saved, 2)  # from here the JVM (and its Python workers) hold the only writer
        os.close(saved)
        atexit.register(copier.drain)


class _Copier(threading.Thread):
    """Copies the JVM's stderr, line by line, to the real stderr until the JVM closes it. A
    daemon: the JVM outlives this process by a moment (it exits when its stdin closes)."""

    def __init__(self, read_end: int, real_stderr: int) -> None:
        super().__init__(name="jvm-stderr", daemon=True)
        self.read_end, self.real_stderr = read_end, real_stderr
        self.busy = threading.Lock()  # held while a chunk is copied, and while closing
        self.pending = b""  # the start of a line not ended yet
        self.closed = False

    def run(self) -> None:
        while True:
            chunk = os.read(self.read_end, 65536)
            with self.busy:
                if not chunk:  # every writer gone
                    self._write(self.pending)
                    os.close(self.read_end)
                    os.close(self.real_stderr)
                    self.closed = True
                    return
                *lines, self.pending = (self.pending + chunk).split(b"\n")
                self._write(
                    b"".join(line + b"\n" for line in lines if not line.startswith(JVM_NOTICE))
                )

    def _write(self, data: bytes) -> None:
        try:
            while data:
                data = data[os.write(self.real_stderr, data) :]
        except OSError:
            pass  # stderr gone (a closed pipe): keep reading, or the JVM would block on it

    def drain(self, timeout: float = 1.0) -> None:
        """At exit: what the JVM wrote so far reaches stderr (its last error before this
        process ends), an unfinished last line included."""
        deadline = time.monotonic() + timeout
        while True:
            with self.busy:  # not in the middle of a chunk
                if self.closed:
                    return
                if not _readable(self.read_end) or time.monotonic() > deadline:
                    self._write(self.pending)
                    self.pending = b""
                    return
            time.sleep(0.02)


def _readable(fd: int) -> bool:
    import select

    try:
        return bool(select.select([fd], [], [], 0)[0])
    except (OSError, ValueError):
        return False
