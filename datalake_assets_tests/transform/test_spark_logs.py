"""What a command-line session lets through (``transform/spark_logs.py``), without Spark: a
child process started inside ``jvm_notice_dropped`` stands for the JVM."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from datalake_assets.transform.spark_logs import QUIET_LOG4J2, quiet_java_options

# The child writes as the JVM does: the notice first, then log lines, a stack trace, and a
# last line without a newline; and it outlives this process (the JVM exits once its Python is
# gone), so what it wrote last must be copied before this process ends.
JVM = textwrap.dedent(r"""
    import pathlib, sys, time
    sys.stderr.write("WARNING: Using incubator modules: jdk.incubator.vector\n")
    sys.stderr.flush()
    time.sleep(0.3)
    sys.stderr.write("26/11/26 05:49:25 ERROR Executor: Exception in task 0.0\n")
    sys.stderr.write("\tat a.b(C.java:1)\n\n" + "x" * 100000 + "\nthe end")
    sys.stderr.flush()
    pathlib.Path(sys.argv[1]).touch()
    time.sleep(0.5)
""")
PROGRAM = textwrap.dedent("""
    import os, subprocess, sys, time
    from datalake_assets.transform.spark_logs import jvm_notice_dropped

    jvm, written = sys.argv[1:]
    with jvm_notice_dropped():
        subprocess.Popen([sys.executable, "-c", jvm, written])
    print("ours", file=sys.stderr, flush=True)
    while not os.path.exists(written):
        time.sleep(0.01)
""")


def test_the_jvms_incubator_notice_is_dropped_and_every_other_line_kept(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, JVM, str(tmp_path / "written")],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stderr.decode().split("\n")
    assert lines == [
        "ours",
        "26/11/26 05:49:25 ERROR Executor: Exception in task 0.0",
        "\tat a.b(C.java:1)",
        "",
        "x" * 100000,
        "the end",
    ], lines[:4]


def test_the_quiet_log4j_configuration_is_added_unless_the_user_has_one():
    options = quiet_java_options("-Duser.timezone=UTC")
    assert options == f"-Duser.timezone=UTC -Dlog4j2.configurationFile={QUIET_LOG4J2.as_uri()}"
    assert QUIET_LOG4J2.is_file()
    own = "-Duser.timezone=UTC -Dlog4j2.configurationFile=/etc/spark/log4j2.properties"
    assert quiet_java_options(own) == own
