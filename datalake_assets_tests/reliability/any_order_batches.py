"""Generated histories with an open hour's batches (issue #55): ``AnyOrderHistory``'s steps
(syncs, replays, late files, Segment imports, erasures, killed syncs) and batches of any hours,
whole or killed at a fault point, in any order, on an Iceberg lake (the table format that takes
batches), each step held to the oracle.

A batch reads the files of its hours that no sync or batch read before and appends what it
finds; the oracle restates that as ``Oracle.batch`` (the dedup keeps a message where the lake
already holds it, in the batch's hours or in its lookback window, and nothing moves). The
hour's close is an ordinary ``sync`` step: after it, the hour is what a sync of its archive
gives, whatever batches ran before, were killed or ran twice.

One rule the oracle does not restate: a batch whose rows would widen a column runs as the sync
of its hours (docs/concepts/freshness.md; ``transform/test_open_hour.py`` tests the widening
itself), and the oracle knows no column types. So after each batch the history reads from the
lake which of the two committed: the table snapshots the run made carry ``datalake.batch-id``
(a batch) or not (its hours' sync), and a commit cut by a kill says the same in its journal's
steps; the oracle then models that one. A batch that committed no snapshot wrote no rows, so
it widened nothing: a batch.
"""

from __future__ import annotations

import glob
import json
import os

from hypothesis import strategies as st
from hypothesis.stateful import rule

from datalake_assets.transform.sync import run_sync
from datalake_assets_tests.reliability.any_order import (
    COMMITTED,
    KILL_POINTS,
    SRC,
    AnyOrderHistory,
    _hours,
    _no_spark,
    batches,
)
from datalake_assets_tests.support.generated_archive import EMPTY_HOUR
from datalake_assets_tests.support.iceberg_reader import sql_catalog, tables

RUN_ID = "datalake.run-id"  # the snapshot summary's keys (lake/formats/iceberg.py)
BATCH_ID = "datalake.batch-id"
# after a killed batch: the same batch again (it must converge), a sync of an hour without files
# (it finishes a cut commit and reads nothing), or nothing (the next step finishes it)
THEN = ("nothing", "rerun", "an empty hour")


class BatchedHistory(AnyOrderHistory):
    """``AnyOrderHistory`` with batches; the module doc."""

    @rule(hours=batches)
    def batch(self, hours: list[int]) -> None:
        self._batch(_hours(hours))
        self.check()

    @rule(hours=batches, point=st.sampled_from(KILL_POINTS), then=st.sampled_from(THEN))
    def kill_batch(self, hours: list[int], point: str, then: str) -> None:
        """A batch of ``hours`` killed at ``point``; ``then`` as in ``THEN``."""
        assert self.env.kills is not None, "kills need the fork helper (ForkedSyncs)"
        hours_ = _hours(hours)
        seen = self._run_ids()
        request = self._request(hours_, path="local", batch=True)
        outcome = self.env.kills.run(request.to_args(), point)
        if self.env.recording is not None:
            self.env.recording.fault()
        # as for a killed sync: a commit cut at mid_commit is rolled forward by the next run
        self.pending = outcome == "killed at mid_commit"
        if outcome == "exit 0" or (outcome == f"killed at {point}" and point in COMMITTED):
            self._model(hours_, seen)
        else:
            assert outcome == f"killed at {point}", outcome
        if then == "rerun":
            self._batch(hours_)
        elif then == "an empty hour":
            self._sync([EMPTY_HOUR])
        self.check()

    # ------------------------------------------------------------------------ helpers

    def _batch(self, hours: list[str]) -> None:
        seen = self._run_ids()
        session = self.env.session if self.env.path == "spark" else _no_spark
        run_sync(session, self._request(hours, batch=True))
        self.pending = False
        self._model(hours, seen)
        assert not glob.glob(f"{self.lake_root}/_commits/{SRC}/*.json"), "a journal was left"

    def _model(self, hours: list[str], seen: set[str]) -> None:
        """The oracle's step for a batch of ``hours`` that committed (or will, once its cut
        commit is rolled forward): a batch, or its hours' sync if it widened a column."""
        if self._committed_as_sync(seen):
            self.oracle.sync(hours)
        else:
            self.oracle.batch(hours)

    def _committed_as_sync(self, seen: set[str]) -> bool:
        """Whether the run that is not in ``seen`` (run ids before it) committed its tables
        as a sync: its snapshots, or its journal's table steps, without a batch id."""
        for location in self._journals():
            if _run_id(location) not in seen:
                steps = json.loads(open(location, "rb").read())["steps"]
                if any(not step.get("batch") for step in steps):
                    return True
        return any(
            summary[RUN_ID] not in seen and not summary[BATCH_ID] for summary in self._summaries()
        )

    def _run_ids(self) -> set[str]:
        """The runs the lake knows so far: its journals' and its table snapshots'."""
        return {_run_id(j) for j in self._journals()} | {s[RUN_ID] for s in self._summaries()}

    def _journals(self) -> list[str]:
        return glob.glob(f"{self.lake_root}/_commits/{SRC}/*.json")

    def _summaries(self) -> list:
        """The summaries of the source's table snapshots that a run made (the shared
        ``sync_reports`` table's appends carry no run id)."""
        if not os.path.exists(f"{self.lake_root}/_iceberg/catalog.db"):
            return []
        return [
            snap.summary
            for tbl in tables(sql_catalog(self.lake_root), SRC).values()
            for snap in tbl.snapshots()
            if snap.summary is not None and snap.summary[RUN_ID]
        ]


def _run_id(journal: str) -> str:
    return os.path.basename(journal).removesuffix(".json")
