"""The reliability ledger: a tiny pytest plugin that adds up what the reliability tests did.

Tests take the session-scoped ``ledger`` fixture and record their counts::

    def test_something(ledger):
        ...
        ledger.add(cases=1, faults=3, messages_in=120, accounted=120, lost=0)

At the end of the session, when anything was recorded, the terminal summary prints one line::

    reliability: cases tried N, faults injected N, messages in N, accounted for N, lost N

and, when ``DATALAKE_RELIABILITY_REPORT`` names a file, writes the same counts there as JSON.
Registered from ``conftest.py`` (``pytest_plugins``); it also registers the ``reliability``
marker, so ``pytest -m reliability`` runs the reliability suite under ``--strict-markers``.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass

import pytest

REPORT_ENV = "DATALAKE_RELIABILITY_REPORT"


@dataclass
class Ledger:
    cases_tried: int = 0
    faults_injected: int = 0
    messages_in: int = 0
    messages_accounted: int = 0
    lost: int = 0

    def add(self, cases: int = 0, faults: int = 0, messages_in: int = 0, accounted: int = 0,
            lost: int = 0) -> None:
        for n in (cases, faults, messages_in, accounted, lost):
            if n < 0:
                raise ValueError(f"ledger counts only go up: {n}")
        self.cases_tried += cases
        self.faults_injected += faults
        self.messages_in += messages_in
        self.messages_accounted += accounted
        self.lost += lost

    @property
    def recorded(self) -> bool:
        return any(asdict(self).values())

    def line(self) -> str:
        return (
            f"reliability: cases tried {self.cases_tried}, faults injected "
            f"{self.faults_injected}, messages in {self.messages_in}, accounted for "
            f"{self.messages_accounted}, lost {self.lost}"
        )


_LEDGER_KEY = pytest.StashKey[Ledger]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "reliability: hostile-input and fault-injection suite (records the ledger)"
    )
    config.stash[_LEDGER_KEY] = Ledger()


@pytest.fixture(scope="session")
def ledger(pytestconfig: pytest.Config) -> Ledger:
    """The session's reliability ledger: ``ledger.add(cases=, faults=, messages_in=,
    accounted=, lost=)``."""
    return pytestconfig.stash[_LEDGER_KEY]


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    led = config.stash.get(_LEDGER_KEY, None)
    if led is None or not led.recorded:
        return
    terminalreporter.section("reliability")
    terminalreporter.write_line(led.line())
    path = os.environ.get(REPORT_ENV)
    if path:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            json.dump({**asdict(led), "exit_status": int(exitstatus)}, f, indent=2)
            f.write("\n")
        terminalreporter.write_line(f"reliability report written to {path}")
