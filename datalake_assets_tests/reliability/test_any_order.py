"""Any order, any batching (issue #32): generated histories of a source held to the oracle after
every step, on the driver-local path and on the Spark path (``any_order.py`` says what a
history is). Then the shrunk programs the generator found, kept as plain regression tests.

CI runs the "ci" profile: a fixed set of programs (derandomized), each under a deadline. For
a longer hunt on your machine (about an hour)::

    DATALAKE_HYPOTHESIS_PROFILE=long .venv/bin/python -m pytest \\
        datalake_assets_tests/reliability/test_any_order.py -k generated
"""

from __future__ import annotations

import pytest
from hypothesis.stateful import run_state_machine_as_test

from datalake_assets.transform import dedup
from datalake_assets_tests.reliability.any_order import (
    AnyOrderHistory,
    HistoryEnv,
    history_settings,
)
from datalake_assets_tests.reliability.any_order_batches import BatchedHistory
from datalake_assets_tests.support.fork_sync import ForkedSyncs
from datalake_assets_tests.support.generated_archive import (
    Archive,
    ArchiveFile,
    Copy,
    Hostile,
    Message,
    person_id,
)

pytestmark = [pytest.mark.reliability]


@pytest.fixture(scope="module")
def kills():
    with ForkedSyncs() as helper:
        yield helper


def run_histories(env: HistoryEnv, machine: type[AnyOrderHistory] = AnyOrderHistory) -> None:
    run_state_machine_as_test(lambda: machine(env), settings=history_settings(env.profile))


@pytest.mark.slow
def test_generated_histories_on_the_local_path(kills, reliability):
    run_histories(HistoryEnv("local", None, kills, reliability))


@pytest.mark.slow
def test_generated_histories_into_iceberg_tables_with_open_hour_batches(kills, reliability):
    """The same rules with ``table_format = "iceberg"``: stage B's files written in place,
    commits of footers, kills between the two, erasures through the staged path; the lake
    read back through the Iceberg catalog. And the open hour's batches among them, whole or
    killed, of any hours in any order (``any_order_batches.py``)."""
    env = HistoryEnv("local", None, kills, reliability, table_format="iceberg")
    run_histories(env, BatchedHistory)


@pytest.mark.slow
@pytest.mark.spark
def test_generated_histories_on_the_spark_path(spark, kills, reliability, monkeypatch):
    # Every batch through Spark jobs, its dedup as the Spark window and its output check in
    # Spark too (the thresholds under which the driver does them: a cluster's big batches).
    monkeypatch.setattr(dedup, "DRIVER_MAX_KEYS", 0)
    monkeypatch.setattr(dedup, "_DRIVER_CHECK_MAX_ROWS", 0)
    run_histories(HistoryEnv("spark", spark, kills, reliability))


# ------------------------------------------------------------- programs the generator found
# Each is the program Hypothesis printed, shrunk further by hand where its own shrinking ran
# out of time; ``state`` is the machine, every step compares the lake with the oracle.


@pytest.fixture()
def histories(reliability):
    """``histories(archive, lookback=24)``: a history on the local path, recorded in the
    ledger and torn down at the end of the test, whatever happened."""
    made: list[AnyOrderHistory] = []

    def start(archive: Archive, lookback: int = 24) -> AnyOrderHistory:
        state = AnyOrderHistory(HistoryEnv("local", recording=reliability))
        made.append(state)
        state.start(archive=archive, lookback=lookback)
        return state

    yield start
    for state in made:
        state.teardown()


ORDER = "Order Completed"


def test_an_erasure_finds_a_late_file_in_an_hour_already_synced(histories):
    """Found: the erasure looked for the person in the hours the identity index names, and
    scanned the archive of hours without an index. A late file that landed in an hour after
    its sync was in neither: the person's line stayed in the raw archive, and the proof said
    nothing remained. Fixed in ``privacy/hours.py`` (``unindexed_hours``: an archive file
    written after the hour's index gets the hour scanned)."""
    state = histories(
        Archive(
            messages=(Message(ORDER, -1), Message(ORDER, 0)),
            files=(ArchiveFile(0, "part-0000.jsonl.gz", (Copy(0, 0),)),),
        )
    )
    state.sync(hours=[0])
    state.add_late_file(file=ArchiveFile(0, "part-0001.jsonl.gz", (Copy(1, 0),)))
    state.forget(person=0)  # the late file held only their line: deleted
    state.sync(hours=[0])


def test_a_second_erasure_finds_lines_suppressed_since_the_first(histories):
    """Found: after an erasure, a late file brings a line of the person into an hour that
    other people's messages keep indexed; the sync suppresses it (right), and a second
    request for the person completes with the line still in the raw archive."""
    state = histories(
        Archive(
            messages=(Message(ORDER, 0), Message(ORDER, 0), Message(ORDER, -1)),
            files=(ArchiveFile(0, "part-0000.jsonl.gz", (Copy(0, 0), Copy(2, 0))),),
        )
    )
    state.sync(hours=[0])
    state.forget(person=0)
    state.add_late_file(file=ArchiveFile(0, "part-0001.jsonl.gz", (Copy(1, 0),)))
    state.sync(hours=[0])  # the late line is suppressed: in no table, no quarantine
    state.erase(person_id(0))  # the same person again: the late line must go


def test_without_lookback_a_later_batch_keeps_its_own_copy(histories):
    """The oracle's bug, not the sync's: with ``dedup_lookback_hours = 0`` the oracle still
    treated the hours between a batch's first and last as its window."""
    state = histories(
        Archive(
            messages=(Message(ORDER, -1),),
            files=(
                ArchiveFile(0, "part-0000.jsonl.gz", (Copy(0, 0),)),
                ArchiveFile(2, "part-0000.jsonl.gz", (Copy(0, 2),)),
                ArchiveFile(4, "part-0000.jsonl.gz", (Copy(0, 4),)),
            ),
        ),
        lookback=0,
    )
    state.sync(hours=[2])  # kept in 22T10
    state.sync(hours=[0, 4])  # kept in 21T10 as well (no window), 23T10's copy a duplicate


def test_a_duplicate_follows_its_message_when_the_kept_hour_is_synced_again(histories):
    """The oracle's bug, not the sync's: a duplicate kept pointing at the hour its message
    was in when the duplicate's hour was synced, after a re-sync of that hour moved it."""
    state = histories(
        Archive(
            messages=(Message(ORDER, -1),),
            files=(
                ArchiveFile(1, "part-0000.jsonl.gz", (Copy(0, 1, 30),)),
                ArchiveFile(2, "part-0000.jsonl.gz", (Copy(0, 2),)),
            ),
        )
    )
    state.sync(hours=[1, 2])  # kept in 21T11, 22T10's copy a duplicate of it
    state.add_late_file(file=ArchiveFile(0, "late.jsonl.gz", (Copy(0, 0),)))
    state.sync(hours=[0, 1])  # received earlier in 21T10: it moves there
    state.sync(hours=[3])  # another hour: 22T10's copy is still a duplicate, now of 21T10


def test_an_hour_of_blank_lines_is_synced_and_its_window_counts(histories):
    """The oracle's bug, not the sync's (found by the histories with batches): an hour whose
    only file holds blank lines gives no line, and the oracle left it out of the batch, so its
    lookback window ended an hour early; the sync counts every hour with files."""
    state = histories(
        Archive(
            messages=(Message("page", -1),),
            files=(
                ArchiveFile(0, "part-0000.jsonl.gz", (Copy(0, 0),)),
                ArchiveFile(5, "part-0000.jsonl.gz", (Copy(0, 5),)),
                ArchiveFile(3, "part-0000.jsonl.gz", (Hostile("blank_lines", 2),)),
            ),
        )
    )
    state.sync(hours=[5])  # kept in 23T11
    state.sync(hours=[0, 3])  # 22T11 + 24 h reaches 23T11: 21T10's copy is a duplicate


def test_a_line_nested_5000_deep_in_a_history(histories):
    """Found on the working tree of stage A's native parse before it was committed (a
    RecursionError on this corpus line failed the whole sync, and the kill of a sync
    holding it exited instead of dying at its point)."""
    state = histories(
        Archive(
            messages=(Message(ORDER, 0),),
            files=(
                ArchiveFile(0, "part-0000.jsonl.gz", (Hostile("nesting_5000_deep"),)),
                ArchiveFile(1, "part-0000.jsonl.gz", (Copy(0, 1),)),
            ),
        )
    )
    state.sync(hours=[0])
    state.sync(hours=[1, 0])


def test_a_sync_after_one_killed_past_its_commit_writes_the_tables_types(kills, reliability):
    """Found by the histories with batches (a program of syncs only): a sync killed after its
    commit, before the lake's schema record is written, left an Iceberg table with a string
    column the record did not know; the next sync typed the column from the record and its
    values (timestamps) and wrote a file the table's commit refused, and every later sync of
    such values failed the same way. Fixed in ``transform/type_plan.py``: the types are
    planned from the table's own schema too (``TableFormat.columns``)."""
    state = AnyOrderHistory(HistoryEnv("local", None, kills, reliability, table_format="iceberg"))
    try:
        state.start(
            archive=Archive(
                messages=(
                    Message("Signed Up", 2, "text"),
                    Message("Signed Up", 1, "2026-11-21T10:00:00Z"),
                ),
                files=(
                    ArchiveFile(1, "part-0000.jsonl.gz", (Copy(0, 1),)),
                    ArchiveFile(5, "part-0000.jsonl.gz", (Copy(1, 5),)),
                ),
            ),
            lookback=24,
        )
        state.kill(hours=[1], point="committed", then="nothing")  # the table: string
        state.sync(hours=[5])  # a timestamp's text: written as the table's string
    finally:
        state.teardown()


def test_an_iceberg_timestamp_column_widens_to_string(reliability):
    """Found by the histories with batches (a program of syncs only): a column typed timestamp
    by one sync, then outvoted by booleans in another, widens to string; the Iceberg table's
    rewrite of its kept rows could not cast stored timestamps (``spec/columnar.cast_array``
    took JSON kinds only) and the sync failed. Fixed: a stored timestamp becomes its ISO-8601
    text in UTC."""
    state = AnyOrderHistory(HistoryEnv("local", None, None, reliability, table_format="iceberg"))
    try:
        state.start(
            archive=Archive(
                messages=(
                    Message("page", 0, "2026-11-21T10:00:00Z"),
                    Message("page", -1, True),
                    Message("page", 1, True),
                ),
                files=(
                    ArchiveFile(2, "part-0000.jsonl.gz", (Copy(0, 2),)),
                    ArchiveFile(0, "part-0000.jsonl.gz", (Copy(1, 0), Copy(2, 0))),
                ),
            ),
            lookback=24,
        )
        state.sync(hours=[2])  # properties_value: timestamp
        state.sync(hours=[0])  # two booleans, no timestamp: string, hour 2's row rewritten
    finally:
        state.teardown()


def test_an_erasure_after_a_batch_rolled_forward_erases_its_rows(kills, reliability):
    """Found by the histories with batches: a batch killed mid-commit and rolled forward by
    the next run of the source (a batch that found nothing new) left the lake's schema record
    without the tables it created (the record was written after the commit, by the run that
    was killed); ``datalake forget`` staged those tables without columns, reported the person
    erased and proved nothing remained, and their rows stayed. Fixed in ``lake/commit.py``:
    the record is part of the commit's journal, written before the journal goes."""
    state = BatchedHistory(HistoryEnv("local", None, kills, reliability, table_format="iceberg"))
    try:
        state.start(
            archive=Archive(
                messages=(Message("page", 2), Message(ORDER, 2), Message("identify", -1)),
                files=(ArchiveFile(5, "part-0000.jsonl.gz", (Copy(0, 5), Copy(1, 5), Copy(2, 5))),),
            ),
            lookback=24,
        )
        state.kill_batch(hours=[5], point="mid_commit", then="rerun")
        state.forget(person=2)  # their page and order: gone from every table
    finally:
        state.teardown()
