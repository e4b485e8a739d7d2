"""The EMR bootstrap action's script (infra/bootstrap/), with stand-ins for sudo, dnf and
Python."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

from datalake_assets_tests.infra.terraform import BOOTSTRAP


def _stub(path: Path, body: str) -> None:
    path.write_text("#!/usr/bin/env bash\n" + textwrap.dedent(body), encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


@pytest.fixture()
def bootstrap_sandbox(tmp_path) -> dict[str, Any]:
    """Stand-ins for dnf and python3.11 that log their arguments; the virtualenv's python is
    one too. sudo is `env`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.log"
    _stub(
        bin_dir / "fake-dnf",
        f"""\
        printf 'dnf' >> {log}; printf ' [%s]' "$@" >> {log}; echo >> {log}
        """,
    )
    _stub(
        bin_dir / "python3.11",
        f"""\
        printf 'python3.11' >> {log}; printf ' [%s]' "$@" >> {log}; echo >> {log}
        if [ "$1 $2" = "-m venv" ]; then
          mkdir -p "$3/bin"
          {{ echo '#!/usr/bin/env bash'
             echo 'printf "venv-python" >> {log}; printf " [%s]" "$@" >> {log}; echo >> {log}'
          }} > "$3/bin/python"
          chmod +x "$3/bin/python"
        fi
        """,
    )
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "DATALAKE_BOOTSTRAP_SUDO": "env",
        "DATALAKE_BOOTSTRAP_DNF": "fake-dnf",
    }
    return {"env": env, "log": log, "venv": tmp_path / "opt" / "python"}


def test_bootstrap_installs_python_and_the_packages_into_a_venv(bootstrap_sandbox):
    box = bootstrap_sandbox
    venv = str(box["venv"])
    result = subprocess.run(
        [
            "bash",
            str(BOOTSTRAP),
            "--python",
            "3.11",
            "--venv",
            venv,
            "--index-url",
            "https://pypi.example.test/simple",
            "--import",
            "pyarrow",
            "--import",
            "dagster_pipes",
            "--",
            "pyarrow>=16",
            "pandas>=2.2,<3",
            "pandera[pandas]>=0.20",
        ],
        env=box["env"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    calls = box["log"].read_text(encoding="utf-8").splitlines()
    pip_install = (
        "venv-python [-m] [pip] [install] [--no-cache-dir] [--retries] [10] "
        "[--timeout] [60] [--index-url] [https://pypi.example.test/simple]"
    )
    assert calls == [
        "dnf [install] [-y] [python3.11] [python3.11-pip]",
        f"python3.11 [-m] [venv] [{venv}]",
        f"{pip_install} [--upgrade] [pip]",
        f"{pip_install} [pyarrow>=16] [pandas>=2.2,<3] [pandera[pandas]>=0.20]",
        "venv-python [-m] [pip] [check]",
        "venv-python [-c] [import pyarrow]",
        "venv-python [-c] [import dagster_pipes]",
    ]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--python", "3.11", "--venv", "/opt/x", "--"], "no packages"),
        (["--python", "3.11; rm", "--venv", "/opt/x", "--", "pyarrow"], "--python must look like"),
        (["--python", "3.11", "--venv", "relative", "--", "pyarrow"], "absolute path"),
        (
            ["--python", "3.11", "--venv", "/opt/x", "--import", "os; rm -rf /", "--", "pyarrow"],
            "not a module name",
        ),
        (["--python", "3.11", "--venv", "/opt/x", "--bogus", "--", "pyarrow"], "unknown argument"),
    ],
)
def test_bootstrap_refuses_bad_arguments_before_installing_anything(
    bootstrap_sandbox, args, message
):
    result = subprocess.run(
        ["bash", str(BOOTSTRAP), *args],
        env=bootstrap_sandbox["env"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert not bootstrap_sandbox["log"].exists()


def test_terraform_passes_the_bootstrap_the_arguments_it_parses(module):
    """The argument list built in emr.tf uses the options the script understands, and the
    virtualenv it builds is the interpreter spark-env exports."""
    args = module["locals"]["bootstrap_args"]
    script = BOOTSTRAP.read_text(encoding="utf-8")
    for option in re.findall(r'"(--[a-z-]+)"', args):
        assert f"    {option})" in script, option
    assert '"--venv", local.emr_python_venv' in args
    assert module["locals"]["emr_python"] == "${local.emr_python_venv}/bin/python"
