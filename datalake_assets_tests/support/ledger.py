"""The reliability ledger: a pytest plugin that adds up what the reliability tests found.

A reliability test takes the ``reliability`` fixture, says what the lake must hold (the
oracle's ``Expected``) and how to read the lake, and counts the faults it injects::

    def test_something(reliability):
        expected = Oracle(store, archive, src).sync(HOURS).expected()
        reliability.expect(expected, lambda: read_lake(store, lake_root, src))
        reliability.fault()          # one per kill, failed request, hostile case ...
        ...
        assert reliability.compare().ok

The fixture's teardown is the ``finally``: it records every test that took it, passed or
failed, and compares the lake with the oracle itself when the test stopped before doing so
(a lake that cannot be read then counts every expected line as lost). ``lost`` is never
passed in: it is ``messages in - accounted for``, from what the reader found. At the end::

    reliability: tests recorded 14 (all passed), cases tried 136, faults injected 160,
      messages in 37956, accounted for 37956, lost 0, extra 0, duplicated 0, misplaced 0

(one line). With ``DATALAKE_RELIABILITY_REPORT`` naming a file, the same figures go there as
JSON. Registered from ``conftest.py``; it also registers the ``reliability`` marker.

Under pytest-xdist each worker keeps its own ledger; it hands it to the controller when it
finishes (``workeroutput``), and the controller adds them up before it prints the one line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import pytest

from datalake_assets_tests.support.lake_reader import Comparison, Lake, compare
from datalake_assets_tests.support.oracle import Expected

REPORT_ENV = "DATALAKE_RELIABILITY_REPORT"


@dataclass
class Recording:
    """One test's entry."""

    nodeid: str
    cases: int = 0
    faults: int = 0
    pending: list[tuple[Expected | Callable[[], Expected], Callable[[], Lake]]] = field(
        default_factory=list
    )
    comparisons: list[Comparison] = field(default_factory=list)

    def fault(self, n: int = 1) -> None:
        if n < 0:
            raise ValueError(f"faults only go up: {n}")
        self.faults += n

    def expect(self, expected: Expected | Callable[[], Expected], read: Callable[[], Lake]) -> None:
        """The lake that ``read`` returns must hold ``expected``; compared by ``compare()``,
        or at teardown if the test never got there. ``expected`` may be a function, for an
        archive that is still being written: it is called at comparison time."""
        self.pending.append((expected, read))

    def compare(self) -> Comparison:
        """Read and compare every pending expectation now; their sum."""
        while self.pending:
            expected, read = self.pending.pop(0)
            if callable(expected):
                expected = expected()
            try:
                self.comparisons.append(compare(expected, read()))
            except Exception as e:  # noqa: BLE001 - an unreadable lake holds nothing
                c = compare(expected, Lake())
                c.lost.insert(0, f"(the lake could not be read: {type(e).__name__}: {e})")
                self.comparisons.append(c)
        return self.total()

    def total(self) -> Comparison:
        t = Comparison()
        for c in self.comparisons:
            t.lines += c.lines
            t.accounted += c.accounted
            t.lost += c.lost
            t.extra += c.extra
            t.duplicated += c.duplicated
            t.misplaced += c.misplaced
        return t


@dataclass
class Ledger:
    tests: int = 0
    failed: list[str] = field(default_factory=list)
    cases_tried: int = 0
    faults_injected: int = 0
    messages_in: int = 0
    messages_accounted: int = 0
    extra: int = 0
    duplicated: int = 0
    misplaced: int = 0

    @property
    def lost(self) -> int:
        return self.messages_in - self.messages_accounted

    def add(self, rec: Recording) -> None:
        t = rec.total()
        self.tests += 1
        self.cases_tried += rec.cases
        self.faults_injected += rec.faults
        self.messages_in += t.lines
        self.messages_accounted += t.accounted
        self.extra += len(t.extra)
        self.duplicated += t.duplicated
        self.misplaced += len(t.misplaced)

    def merge(self, other: dict) -> None:
        """Add a worker's ledger (``asdict`` of one, as pytest-xdist carries it)."""
        self.tests += other["tests"]
        self.failed += other["failed"]
        self.cases_tried += other["cases_tried"]
        self.faults_injected += other["faults_injected"]
        self.messages_in += other["messages_in"]
        self.messages_accounted += other["messages_accounted"]
        self.extra += other["extra"]
        self.duplicated += other["duplicated"]
        self.misplaced += other["misplaced"]

    def line(self) -> str:
        status = "all passed" if not self.failed else f"{len(self.failed)} failed"
        return (
            f"reliability: tests recorded {self.tests} ({status}), cases tried "
            f"{self.cases_tried}, faults injected {self.faults_injected}, messages in "
            f"{self.messages_in}, accounted for {self.messages_accounted}, lost {self.lost}, "
            f"extra {self.extra}, duplicated {self.duplicated}, misplaced {self.misplaced}"
        )


_LEDGER_KEY = pytest.StashKey[Ledger]()
_RECORDED_KEY = pytest.StashKey[set]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "reliability: hostile-input and fault-injection suite (records the ledger)"
    )
    config.stash[_LEDGER_KEY] = Ledger()
    config.stash[_RECORDED_KEY] = set()


@pytest.fixture(scope="session")
def ledger(pytestconfig: pytest.Config) -> Ledger:
    return pytestconfig.stash[_LEDGER_KEY]


@pytest.fixture()
def reliability(request: pytest.FixtureRequest, ledger: Ledger):
    """This test's ``Recording``; added to the ledger at teardown, whatever happened."""
    rec = Recording(request.node.nodeid)
    request.config.stash[_RECORDED_KEY].add(rec.nodeid)
    try:
        yield rec
    finally:
        try:
            rec.compare()
        finally:
            ledger.add(rec)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    outcome = yield
    report = outcome.get_result()
    if "reliability" not in getattr(item, "fixturenames", ()):
        return
    led = item.config.stash[_LEDGER_KEY]
    # Setup, call or teardown: a test that failed anywhere did not pass. (A strict xfail that
    # fails as expected is reported as skipped, not failed.)
    if report.failed and item.nodeid not in led.failed:
        led.failed.append(item.nodeid)
    # A test whose setup failed before its ``reliability`` fixture ran (a module fixture
    # broke) never recorded: it still counts, as a failed test with nothing accounted for.
    if (
        report.when == "teardown"
        and item.nodeid in led.failed
        and item.nodeid not in item.config.stash[_RECORDED_KEY]
    ):
        led.tests += 1


_WORKER_OUTPUT = "reliability_ledger"


def pytest_sessionfinish(session: pytest.Session) -> None:
    """On an xdist worker: hand this worker's ledger to the controller."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput[_WORKER_OUTPUT] = asdict(session.config.stash[_LEDGER_KEY])


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """On the xdist controller: add up the ledger of a worker that finished."""
    output = getattr(node, "workeroutput", None) or {}
    if _WORKER_OUTPUT in output:
        node.config.stash[_LEDGER_KEY].merge(output[_WORKER_OUTPUT])


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):  # an xdist worker: the controller reports the sum
        return
    led = config.stash.get(_LEDGER_KEY, None)
    if led is None or not led.tests:
        return
    terminalreporter.section("reliability")
    terminalreporter.write_line(led.line())
    for nodeid in led.failed:
        terminalreporter.write_line(f"  failed: {nodeid}")
    path = os.environ.get(REPORT_ENV)
    if path:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(
                {**asdict(led), "lost": led.lost, "exit_status": int(exitstatus)}, f, indent=2
            )
            f.write("\n")
        terminalreporter.write_line(f"reliability report written to {path}")
