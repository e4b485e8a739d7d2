"""What every remote compute backend shares (EMR, EMR Serverless, Databricks): a submitted run
as ``RemoteRun``, waiting for it with timeouts and cancelling it, and turning how it ended (and
the job's last Pipes message) into the ``SyncReport`` or a clear failure.

A backend subclasses ``RemoteSparkCompute`` and brings: ``run_sync`` (package, Pipes, submit),
its ``RemoteRun`` (status, cancel) and ``_read`` (a report file from the lake's storage).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from dagster import Failure, MetadataValue
from pydantic import Field

from datalake_assets.lake.report import SourceReport, SyncReport
from datalake_assets.orchestration.compute.spark_compute import SparkCompute
from datalake_assets.spec import layout
from datalake_assets.transform.pipes_entry import MESSAGE_KIND
from datalake_assets.transform.sync_request import SyncError, SyncRequest

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RemoteStatus:
    state: str
    reason: str = ""  # state change reason, failure details or stateDetails
    log_location: str = ""
    raw: dict = field(default_factory=dict, compare=False, repr=False)


class RemoteRun:
    """A submitted step or job run: how to poll it and how to cancel it."""

    label: str
    running: frozenset[str]
    terminal: frozenset[str]
    success: str

    def status(self) -> RemoteStatus:  # pragma: no cover - interface
        raise NotImplementedError

    def cancel(self) -> str:  # pragma: no cover - interface
        """Request the cancellation; returns what the service answered."""
        raise NotImplementedError


class WithoutTypedEventStream:
    """The asset's context for ``open_pipes_session`` minus one side effect: the session switches
    the step to a "typed event stream", in which every declared output must be yielded. The sync
    asset yields its results from the lake's report (as with local Spark) and skips tables
    without rows this time (skippable specs), which that mode would turn into a failure."""

    def __init__(self, context: Any) -> None:
        self._context = context

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)

    def set_requires_typed_event_stream(self, *, error_message: str | None = None) -> None:
        pass


def sync_message(custom_messages: list[Any]) -> dict | None:
    """The job's last ``datalake_sync`` message (``pipes_entry``), if one arrived."""
    ours = [m for m in custom_messages if isinstance(m, dict) and m.get("kind") == MESSAGE_KIND]
    return ours[-1] if ours else None


class _Timeout(Exception):
    pass


class RemoteSparkCompute(SparkCompute):
    """Waiting, cancelling and reading the result, the same for every remote backend."""

    submit_timeout_s: float = Field(default=3600, description="max seconds before the job runs")
    run_timeout_s: float = Field(default=4 * 3600, description="max seconds the job may run")
    poll_interval_s: float = Field(default=15.0, description="seconds between status polls")
    pipes_interval_s: float = Field(
        default=10.0, description="seconds between reads (and remote uploads) of Pipes messages"
    )
    conf: dict[str, str] = Field(default_factory=dict, description="spark.* settings of the job")

    def _remote_request(self, request: SyncRequest) -> SyncRequest:
        """The request as the cluster runs it: resolved (its ``run_id`` fixed, so the report's
        path is known before submitting); an embedded metastore is refused."""
        req = request.resolved()
        catalog = req.catalog
        if catalog.backend == "hive" and not catalog.hive_metastore_uri:
            raise Failure(
                description=(
                    "the catalog is an embedded Derby metastore (backend 'hive' without "
                    "hive_metastore_uri), which only exists on this machine: use a catalog the "
                    "cluster reaches ('glue', 'none', or a remote Hive metastore)"
                )
            )
        return req

    def _read(self, location: str) -> bytes | None:  # pragma: no cover - interface
        """The file's bytes, or ``None`` when it does not exist."""
        raise NotImplementedError

    # ------------------------------------------------------------------------------ wait

    def _wait(self, run: RemoteRun, logger: Any) -> RemoteStatus:
        """Poll until a terminal state; a timeout or an interruption cancels the run."""
        start = time.monotonic()
        running_since: float | None = None
        last: RemoteStatus | None = None
        try:
            while True:
                status = run.status()
                if last is None or status.state != last.state:
                    logger.info(f"{run.label}: {status.state}")
                last = status
                if status.state in run.terminal:
                    return status
                now = time.monotonic()
                if running_since is None and status.state in run.running:
                    running_since = now
                if running_since is None and now - start > self.submit_timeout_s:
                    raise _Timeout(
                        f"did not start within submit_timeout_s="
                        f"{self.submit_timeout_s} (still {status.state})"
                    )
                if running_since is not None and now - running_since > self.run_timeout_s:
                    raise _Timeout(
                        f"ran longer than run_timeout_s={self.run_timeout_s} (still {status.state})"
                    )
                time.sleep(self.poll_interval_s)
        except _Timeout as e:
            cancelled = self._cancel(run, logger)
            where = last.log_location if last else ""
            raise Failure(
                description=f"{run.label} timed out: {e}; {cancelled}. Logs: {where}",
                metadata={
                    "state": last.state if last else "",
                    "cancel": cancelled,
                    "logs": MetadataValue.path(where),
                },
            ) from None
        except BaseException:  # the Dagster run was terminated (or polling broke): stop it
            logger.warning(f"interrupted while waiting: cancelling {run.label}")
            self._cancel(run, logger)
            raise

    def _cancel(self, run: RemoteRun, logger: Any) -> str:
        try:
            outcome = run.cancel()
        except Exception as e:  # noqa: BLE001 - reported; never hides why we cancelled
            outcome = f"cancel failed: {type(e).__name__}: {e}"
        logger.warning(f"{run.label}: {outcome}")
        return outcome

    # ---------------------------------------------------------------------------- result

    def _result(
        self,
        req: SyncRequest,
        run: RemoteRun,
        final: RemoteStatus,
        message: dict | None,
        submitted_at: datetime,
    ) -> SyncReport:
        where = f"{run.label} ended {final.state}" + (f": {final.reason}" if final.reason else "")
        where += f"; logs: {final.log_location}"
        metadata = {
            "state": final.state,
            "reason": final.reason,
            "logs": MetadataValue.path(final.log_location),
        }
        if final.state != run.success:
            if message and message.get("status") == "failed":
                raise SyncError(
                    f"{message.get('error')} ({where})", message.get("error_code") or "internal"
                )
            raise Failure(description=where, metadata=metadata)
        path = (
            message.get("report_path") if message and message.get("status") == "finished" else None
        )
        candidates = [path] if path else report_candidates(req, submitted_at)
        for location in candidates:
            body = self._read(location)
            if body is not None:
                result = SyncReport.parse(body)
                warning = ((message or {}).get("source") or {}).get("warning")
                if warning and not result.source.warning:
                    result.source.warning = warning  # added after the report was written
                return result
        if req.batch:
            # An open hour's batch that found no new file records nothing, no report either
            # (sync.py: one runs every few minutes), and a job without Pipes (the open hour's
            # loop is no Dagster run) tells nothing else: a batch job that succeeded without
            # a report found nothing new. Its report is the empty one a local batch returns
            # (the loop prints no line for it), else every quiet interval on a cluster was a
            # failure "no sync report was found".
            return quiet_batch_report(req, message)
        raise Failure(
            description=f"{where}, but no sync report was found at {' or '.join(candidates)}",
            metadata=metadata,
        )


def quiet_batch_report(req: SyncRequest, message: dict | None) -> SyncReport:
    """The report of a batch job that found no new file and so wrote none: the job's source
    row if a Pipes message brought it, else the empty report ``sync.py`` returns locally."""
    source = (message or {}).get("source")
    if source:
        return SyncReport({}, SourceReport.from_dict(source))
    return SyncReport(
        {},
        SourceReport(
            run_id=req.run_id,
            source_id=req.source_id,
            database=req.database,
            finish_time=datetime.now(UTC).isoformat(),
            warning="no_archive_files",
        ),
    )


def report_candidates(req: SyncRequest, submitted_at: datetime) -> list[str]:
    """The report's possible paths (its ``day=`` is the finish day): submit day to today."""
    day, last = submitted_at.date(), datetime.now(UTC).date()
    out = []
    while day <= last:
        out.append(layout.report_path(req.lake_root, req.source_id, req.run_id, day.isoformat()))
        day += timedelta(days=1)
    return out
