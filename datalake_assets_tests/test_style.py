"""The code is formatted by ``ruff format`` and passes ``ruff check`` (pyproject.toml's
``[tool.ruff]``): the package, the tests and the benchmarks. Reviews then read design, not
whitespace; a contributor runs ``ruff format . && ruff check --fix .`` before committing."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TREES = ["datalake_assets", "datalake_assets_tests", "bench"]


def ruff() -> list[str]:
    beside = Path(sys.executable).with_name("ruff")  # the venv's, pinned by the [test] extra
    found = str(beside) if beside.exists() else shutil.which("ruff")
    if not found:
        pytest.fail("ruff is missing: it is a test dependency (pip install -e '.[test]')")
    return [found]


def test_the_code_is_formatted():
    run = subprocess.run(
        [*ruff(), "format", "--check", *TREES], cwd=ROOT, capture_output=True, text=True
    )
    assert run.returncode == 0, "run `ruff format .`:\n" + run.stdout + run.stderr


def test_the_code_passes_the_linter():
    run = subprocess.run(
        [*ruff(), "check", "--output-format", "concise", *TREES],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, "run `ruff check --fix .`:\n" + run.stdout + run.stderr
