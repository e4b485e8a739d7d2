"""Generated histories of one source (issue #32): an archive, then a random program of syncs,
replays, late files, Segment imports, erasures and killed syncs, each step held to the oracle.

``AnyOrderHistory`` is a Hypothesis state machine. Its archive (``generated_archive.Archive``)
holds a few messages over three days delivered several times, within an hour and across hours,
with different ``receivedAt``, values whose JSON kind changes, and lines of the hostile corpus.
Its rules are what happens to a lake in real life, in any order:

* ``sync``: a batch of hours (any subset: the sensor's batches, a run from the UI);
* ``replay``: a range of hours as one run (a backfill), hours without files included;
* ``add_late_file``: a file lands in an hour, synced or not;
* ``add_segment_file`` / ``import_day``: Segment's archive imported day by day, in any order;
* ``forget``: ``datalake forget`` of a person (erasure and suppression, no links);
* ``kill``: a sync ``SIGKILL``ed at a fault point (``lake/faults.py``), then re-run, or
  followed by a sync of an hour without files, or by the next step.

After each step the lake is read back as a reader would (``lake_reader.py``) and compared,
line by line, with the oracle's model of the same history (lost, extra, duplicated and
misplaced all zero), and the archive on disk with the test's own model of it (what the
importer and the erasure must have written). A step that cannot be compared (a commit cut by a
kill, before the next sync or erasure rolls it forward) is compared after that next step.

Every step is a plain method call with plain arguments, so the shrunk program Hypothesis
prints is a regression test once pasted (``test_any_order.py``).
"""

from __future__ import annotations

import glob
import os
import shutil
import tempfile
from dataclasses import dataclass
from datetime import timedelta

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

from datalake_assets.ingest.segment_import import SegmentImporter
from datalake_assets.privacy.forget import forget
from datalake_assets.privacy.forget_request import ForgetRequest
from datalake_assets.settings.formats_section import FormatConfig
from datalake_assets.spec.identity import identity
from datalake_assets.transform.sync import run_sync
from datalake_assets.transform.sync_request import SyncRequest
from datalake_assets_tests.support.fork_sync import ForkedSyncs
from datalake_assets_tests.support.generated_archive import (
    CALLS,
    DAYS,
    EMPTY_HOUR,
    HOSTILE,
    HOURS,
    PERSONS,
    Archive,
    ArchiveFile,
    ArchiveModel,
    Copy,
    Hostile,
    Message,
    SegmentFile,
    person_id,
)
from datalake_assets_tests.support.iceberg_reader import read_iceberg_lake, sql_catalog
from datalake_assets_tests.support.lake_reader import Comparison, LocalStore, compare, read_lake
from datalake_assets_tests.support.ledger import Recording
from datalake_assets_tests.support.oracle import Oracle
from datalake_assets_tests.support.settings_files import load_lake_toml

SRC = "anyorder"
SEGMENT_ID = "segSrc01"
LOCAL, SPARK = 1 << 40, 0  # local_max_bytes that force each path
# mid_commit twice: the point whose aftermath (a journal to roll forward) has most rules
KILL_POINTS = ("mid_commit", "parsed", "staged", "mid_commit", "committed", "registered")
THEN = ("nothing", "rerun", "an empty hour")  # after a kill: what the next sync is
COMMITTED = ("mid_commit", "committed", "registered")  # the batch is (or will be) in the lake
LOOKBACKS = (24, 0, 7 * 24, 24)  # hours: the 24 h edge (twice), within batches only, default

# ---------------------------------------------------------------------------- settings

PROFILE_ENV = "DATALAKE_HYPOTHESIS_PROFILE"
EXAMPLES_ENV = "DATALAKE_HYPOTHESIS_EXAMPLES"
_COMMON = {
    "suppress_health_check": [
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ],
    "print_blob": True,
}
# "ci" (the default): fixed programs (derandomize), so every run tries the same histories,
# each bounded by a deadline, and a failure is printed as found, not shrunk (shrinking a
# history takes minutes; the printed blob replays it under @reproduce_failure). "long":
# random programs, many more and longer, shrunk, remembered in .hypothesis/
# (DATALAKE_HYPOTHESIS_PROFILE=long).
_CI = {
    "derandomize": True,
    "database": None,
    "phases": [Phase.explicit, Phase.reuse, Phase.generate, Phase.target],
}
PROFILES = {
    ("ci", "local"): settings(
        max_examples=30, stateful_step_count=12, deadline=timedelta(seconds=60), **_CI, **_COMMON
    ),
    ("ci", "spark"): settings(
        max_examples=6, stateful_step_count=8, deadline=timedelta(seconds=180), **_CI, **_COMMON
    ),
    # the local path into Iceberg tables, with the open hour's batches: the same rules and
    # the batches', fewer programs (each commit is a catalog transaction a table; the Segment
    # layout's histories cover the sync's logic)
    ("ci", "iceberg"): settings(
        max_examples=8, stateful_step_count=12, deadline=timedelta(seconds=90), **_CI, **_COMMON
    ),
    ("long", "iceberg"): settings(
        max_examples=300, stateful_step_count=30, deadline=None, **_COMMON
    ),
    ("long", "local"): settings(
        max_examples=1000, stateful_step_count=30, deadline=None, **_COMMON
    ),
    ("long", "spark"): settings(max_examples=100, stateful_step_count=20, deadline=None, **_COMMON),
}


def history_settings(path: str) -> settings:
    """The profile's settings for ``path``; ``DATALAKE_HYPOTHESIS_EXAMPLES=<n>`` changes the
    number of programs (a hunt of a given length)."""
    profile = os.environ.get(PROFILE_ENV, "ci")
    if (profile, path) not in PROFILES:
        raise ValueError(f"{PROFILE_ENV}={profile!r}: allowed ci, long")
    chosen = PROFILES[(profile, path)]
    examples = os.environ.get(EXAMPLES_ENV)
    return settings(chosen, max_examples=int(examples)) if examples else chosen


# -------------------------------------------------------------------------- strategies

MAX_MESSAGES = 8
VALUES = (None, 1, 7, 2.5, True, "text", "42", "2026-11-21T10:00:00Z", {"a": 1}, [1, "x"])
minutes = st.sampled_from((0, 1, 30, 59))  # few minutes: ties on receivedAt are common
hour_index = st.integers(0, len(HOURS) - 1)
# a batch: any subset of the hours, and len(HOURS) stands for the hour without files
batches = st.lists(st.integers(0, len(HOURS)), min_size=1, max_size=4, unique=True)
hostile = st.sampled_from(sorted(HOSTILE)).map(lambda k: Hostile(*k))


def copy_in(hours: st.SearchStrategy[int]) -> st.SearchStrategy[Copy]:
    return st.builds(Copy, message=st.integers(0, MAX_MESSAGES - 1), received=hours, minute=minutes)


@st.composite
def archive_files(draw) -> ArchiveFile:
    """A file of an hour: mostly copies received in that hour, some received in another
    (late or skewed), some hostile lines."""
    hour = draw(hour_index)
    lines = draw(
        st.lists(
            st.one_of(copy_in(st.just(hour)), copy_in(st.just(hour)), copy_in(hour_index), hostile),
            min_size=1,
            max_size=6,
        )
    )
    name = draw(
        st.sampled_from(
            (
                "part-0000.jsonl.gz",
                "part-0001.jsonl.gz",
                "part-0100.jsonl.gz",
                "late.jsonl.gz",
                "a-plain.jsonl",
            )
        )
    )
    return ArchiveFile(hour, name, tuple(lines))


@st.composite
def segment_files(draw) -> SegmentFile:
    """A file of Segment's day folder: copies received that day, or at the day's edges."""
    day = draw(st.integers(0, len(DAYS) - 1))
    own = [i for i, h in enumerate(HOURS) if h.startswith(DAYS[day])]
    lines = draw(
        st.lists(copy_in(st.one_of(st.sampled_from(own), hour_index)), min_size=1, max_size=5)
    )
    return SegmentFile(
        day, draw(st.sampled_from(("0000.gz", "0001.gz", "1763.x.gz"))), tuple(lines)
    )


archives = st.builds(
    Archive,
    messages=st.lists(
        st.builds(
            Message,
            call=st.sampled_from(CALLS),
            person=st.integers(-1, PERSONS - 1),
            value=st.sampled_from(VALUES),
        ),
        min_size=2,
        max_size=MAX_MESSAGES,
    ).map(tuple),
    files=st.lists(archive_files(), min_size=2, max_size=8).map(tuple),
)


# ------------------------------------------------------------------------------ machine


@dataclass
class HistoryEnv:
    """What every history of a test run shares: the sync's path (``local``: in the driver;
    ``spark``: Spark jobs on ``session``), the helper that kills syncs, the ledger entry."""

    path: str = "local"
    session: object = None
    kills: ForkedSyncs | None = None
    recording: Recording | None = None
    table_format: str = "segment"  # or "iceberg": the lake's tables, read back as Iceberg's

    @property
    def profile(self) -> str:
        """The settings' key (``PROFILES``): the path, or ``iceberg``."""
        return "iceberg" if self.table_format == "iceberg" else self.path


def _no_spark():
    raise AssertionError("the driver-local path started a Spark session")


class AnyOrderHistory(RuleBasedStateMachine):
    """One history in a fresh folder (archive, lake, Segment's archive); the module doc."""

    def __init__(self, env: HistoryEnv | None = None) -> None:
        super().__init__()
        self.env = env or HistoryEnv()
        self.root = tempfile.mkdtemp(prefix="any-order-")
        self.archive_root, self.lake_root = f"{self.root}/archive", f"{self.root}/lake"
        self.pending = False  # a commit cut by a kill, until a sync or erasure rolls it on
        self.requests = 0
        self.last: Comparison | None = None

    @initialize(archive=archives, lookback=st.sampled_from(LOOKBACKS))
    def start(self, archive: Archive, lookback: int) -> None:
        self.lookback = lookback
        self.model = ArchiveModel(
            archive, self.archive_root, SRC, f"{self.root}/segment", SEGMENT_ID
        )
        self.oracle = Oracle(
            LocalStore(),
            self.archive_root,
            SRC,
            lookback_hours=lookback,
            hour_lines=self.model.hour_lines,
            hour_files=self.model.hour_files,
        )
        self.settings = load_lake_toml(
            self.root,
            f"""
            archive_root = "{self.archive_root}"
            lake_root = "{self.lake_root}"
            table_format = "{self.env.table_format}"
            [catalog]
            backend = "none"
            [collector]
            spool_dir = "{self.root}/spool"
            [[sources]]
            id = "{SRC}"
            """,
        )
        if self.env.recording is not None:
            self.env.recording.fault(
                sum(isinstance(ln, Hostile) for f in archive.files for ln in f.lines)
            )
        self.check()

    # -------------------------------------------------------------------------- rules

    @rule(hours=batches)
    def sync(self, hours: list[int]) -> None:
        self._sync(_hours(hours))
        self.check()

    @rule(first=hour_index, last=hour_index)
    def replay(self, first: int, last: int) -> None:
        lo, hi = sorted((first, last))
        self._sync(_hour_range(HOURS[lo], HOURS[hi]), replay=True)
        self.check()

    @rule(file=archive_files())
    def add_late_file(self, file: ArchiveFile) -> None:
        self.model.add_file(file)
        self._hostile(file.lines)
        self.check()

    @rule(which=st.integers(0, len(HOURS) - 1), file=archive_files())
    def add_late_file_to_a_synced_hour(self, which: int, file: ArchiveFile) -> None:
        """A late file in the ``which``-th hour synced so far (in hour order): the file's
        own ``hour`` is replaced by it."""
        synced = sorted({HOURS.index(h) for h in self.oracle.hours if h in HOURS})
        if synced:
            file = ArchiveFile(synced[which % len(synced)], file.name, file.lines)
        self.add_late_file(file)

    @rule(file=segment_files())
    def add_segment_file(self, file: SegmentFile) -> None:
        self.model.add_segment_file(file)

    @rule(day=st.integers(0, len(DAYS) - 1))
    def import_day(self, day: int) -> None:
        importer = SegmentImporter(
            f"{self.root}/segment", SEGMENT_ID, self.archive_root, SRC, spool_dir=self.root
        )
        report = importer.import_day(DAYS[day])
        assert not report.failures, report.failures
        self.model.import_day(day)
        self.check()

    @rule(person=st.integers(0, PERSONS - 1))
    def forget(self, person: int) -> None:
        """Any person, again too: a second request must also find the lines of theirs that a
        sync suppressed since the first (``test_any_order.py`` keeps the program that found
        it)."""
        self.erase(person_id(person))

    def erase(self, who: str) -> None:
        """``datalake forget --user-id <who>`` (erase and suppress), held to the models."""
        self.requests += 1
        result = forget(
            self.settings, ForgetRequest(f"r{self.requests}", (identity("user_id", who),))
        )
        assert result.status == "completed", result.to_dict()
        self.pending = False
        self.model.forget({who})
        self.oracle.forget({who})
        self.check()

    @rule(hours=batches, point=st.sampled_from(KILL_POINTS), then=st.sampled_from(THEN))
    def kill(self, hours: list[int], point: str, then: str) -> None:
        """A sync of ``hours`` killed at ``point``; ``then`` the same hours re-run, or a
        sync of an hour without files (which must still finish a cut commit), or nothing
        (the next step's sync or erasure finishes it)."""
        assert self.env.kills is not None, "kills need the fork helper (ForkedSyncs)"
        batch = _hours(hours)
        outcome = self.env.kills.run(self._request(batch, path="local").to_args(), point)
        if self.env.recording is not None:
            self.env.recording.fault()
        # A run rolls a cut commit forward before it lists the archive: whatever it became,
        # an earlier cut commit is whole now.
        self.pending = outcome == "killed at mid_commit"
        if outcome == "exit 0" or (outcome == f"killed at {point}" and point in COMMITTED):
            self.oracle.sync(batch)
        else:
            assert outcome == f"killed at {point}", outcome
        if then != "nothing":
            self._sync(batch if then == "rerun" else [EMPTY_HOUR])
        self.check()

    # ------------------------------------------------------------------------ helpers

    def _request(
        self, hours: list[str], replay: bool = False, path: str | None = None, batch: bool = False
    ) -> SyncRequest:
        return SyncRequest(
            self.lake_root,
            self.archive_root,
            SRC,
            tuple(hours),
            replay=replay,
            batch=batch,
            dedup_lookback_hours=self.lookback,
            local_max_bytes=LOCAL if (path or self.env.path) == "local" else SPARK,
            table_format=FormatConfig(format=self.env.table_format),
        )

    def _sync(self, hours: list[str], replay: bool = False) -> None:
        session = self.env.session if self.env.path == "spark" else _no_spark
        run_sync(session, self._request(hours, replay))
        self.pending = False
        self.oracle.sync(hours)
        assert not glob.glob(f"{self.lake_root}/_commits/{SRC}/*.json"), "a journal was left"

    def _hostile(self, lines) -> None:
        if self.env.recording is not None:
            self.env.recording.fault(sum(isinstance(ln, Hostile) for ln in lines))

    def check(self) -> None:
        """The lake against the oracle, the archive against its model."""
        diffs = self.model.differences()
        assert not diffs, "the archive is not what was written:\n" + "\n".join(diffs)
        if self.pending:
            return
        if self.env.table_format == "iceberg" and os.path.exists(
            f"{self.lake_root}/_iceberg/catalog.db"  # created by the first commit
        ):
            lake = read_iceberg_lake(
                LocalStore(), sql_catalog(self.lake_root), self.lake_root, SRC, SRC
            )
        else:
            lake = read_lake(LocalStore(), self.lake_root, SRC)
        self.last = compare(self.oracle.expected(), lake)
        assert self.last.ok, str(self.last)

    def teardown(self) -> None:
        if self.last is not None and self.env.recording is not None:
            self.env.recording.cases += 1
            self.env.recording.comparisons.append(self.last)
        shutil.rmtree(self.root, ignore_errors=True)


def _hours(indexes: list[int]) -> list[str]:
    return [HOURS[i] if i < len(HOURS) else EMPTY_HOUR for i in indexes]


def _hour_range(first: str, last: str) -> list[str]:
    from datetime import datetime

    t, end = (datetime.strptime(h, "%Y-%m-%dT%H") for h in (first, last))
    out = []
    while t <= end:
        out.append(t.strftime("%Y-%m-%dT%H"))
        t += timedelta(hours=1)
    return out
