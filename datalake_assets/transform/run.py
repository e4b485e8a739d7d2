"""``SyncRun``: what every phase of one sync knows (``sync.py``, ``outcome.py``)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from datalake_assets.catalog.catalog_interface import Catalog
from datalake_assets.lake.formats import SourceTables, TableFormat, table_format
from datalake_assets.lake.lock import SourceLock
from datalake_assets.lake.plan_store import read_stored
from datalake_assets.plans.plan_model import PlanError
from datalake_assets.plans.plan_policy import PlanPolicy
from datalake_assets.spec import layout
from datalake_assets.transform.sync_request import SyncError, SyncRequest


@dataclass
class SyncRun:
    """What every phase of one sync knows: the request, the session, its staging, timings.

    ``session`` is a Spark session, or a function that makes one: it is then called the first
    time ``spark`` is used (a batch synced in the driver with a catalog other than Hive never
    starts a JVM)."""

    session: Any
    req: SyncRequest
    held: SourceLock
    started: datetime = field(default_factory=lambda: datetime.now(UTC))
    t0: float = field(default_factory=time.monotonic)
    timings: dict[str, float] = field(default_factory=dict)
    catalog: Catalog | None = None
    identity_key: bytes = b""  # the lake's identity-hash key (identity_index.load_privacy)
    suppressed: frozenset[str] = frozenset()  # suppressed identity hashes, read once per run
    # the tables stage B wrote in place (``TableFormat.write_targets``), not into staging
    in_place: frozenset[str] = frozenset()
    _tables: TableFormat | None = None
    _plan: PlanPolicy | None = None

    @property
    def plan(self) -> PlanPolicy | None:
        """The source's tracking plan and modes (``plans/``), read from the lake once."""
        r = self.req
        if r.tracking_plan and self._plan is None:
            try:
                plan = read_stored(r.tracking_plan)
            except PlanError as e:
                raise SyncError(str(e), "plan_invalid") from None
            self._plan = PlanPolicy(
                plan,
                unplanned_events=r.unplanned_events,
                unplanned_properties=r.unplanned_properties,
                violations=r.violations,
            )
        return self._plan

    @property
    def tables(self) -> TableFormat:
        """The lake's table format (``lake/formats/``): commits the staged tables."""
        if self._tables is None:
            self._tables = table_format(self.req.table_format, self.req.lake_root)
        return self._tables

    @property
    def src(self) -> SourceTables:
        r = self.req
        return SourceTables(r.source_dir, r.database, r.table_prefix, r.date_layout)

    @property
    def spark(self):
        if callable(self.session):
            self.session = self.session()
        return self.session

    @property
    def staging(self) -> str:
        return layout.staging_dir(self.req.lake_root, self.req.source_dir, self.req.run_id)

    def describe_jobs(self, description: str | None) -> None:
        """The Spark UI's name of the next jobs."""
        self.spark.sparkContext.setJobDescription(description)
