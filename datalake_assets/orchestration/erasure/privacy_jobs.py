"""Privacy requests in Dagster (``docs/guides/forget-a-person.md``): a job to forget a person, a sensor for
request files, and the nightly compaction of the identity summaries.

* Job ``forget_person``, one op ``forget``. Launched from the UI's launchpad with a request
  in its config, the shape of ``privacy.forget_request.request_from_dict`` (identities as
  ``kind=value`` text), or by the sensor with ``request_file``, the location of a file in the
  inbox. It runs ``privacy.forget.forget`` and logs counts only, never an identity. The run
  fails when the proof finds rows of the request's identities still in the lake. **Dagster
  stores every run's config** in its run storage, so identities typed into the launchpad stay
  there, in clear. The inbox keeps no clear value once a request succeeded: prefer it.
* Sensor ``privacy_requests_sensor`` lists ``<lake>/_privacy/requests/`` (``privacy/inbox.py``)
  and requests one run per request file. The run key is the file's name, size and modification
  time, so a file written again is a new request. The run config holds the file's location,
  never its content. After a success the job writes a receipt under
  ``_privacy/state/inbox/`` and deletes the file. A failed run leaves the file, and re-executing
  the run retries it.
* Job ``compact_identity_summaries`` and its schedule, nightly at 03:30 UTC: brings every
  source's identity summaries up to date (``privacy/summary.py``). It is a job, not part of a
  sensor tick, because the first compaction of an old lake reads every per-hour index file.
  That can take longer than a tick's 60 s, and a job has its own process and logs. Between two
  compactions a lookup reads the hours synced since from their per-hour files: a day is 24
  small files.
"""

from datetime import UTC
from typing import Any

from dagster import (
    Config,
    Definitions,
    Failure,
    MetadataValue,
    OpExecutionContext,
    RunRequest,
    ScheduleDefinition,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    in_process_executor,
    job,
    op,
    sensor,
)
from pydantic import Field

from datalake_assets.models.erasure import reach_models
from datalake_assets.orchestration.automation.sensor_toolkit import (
    Clock,
    schedule_status,
    sensor_status,
    utc_now,
)
from datalake_assets.privacy import inbox, summary
from datalake_assets.privacy.forget import forget
from datalake_assets.privacy.forget_request import load_request_file, request_from_dict
from datalake_assets.settings import LakeSettings
from datalake_assets.spec import layout
from datalake_assets.transform.session import settings_catalog

FORGET_JOB = "forget_person"
FORGET_OP = "forget"
SENSOR_NAME = "privacy_requests_sensor"
COMPACT_JOB = "compact_identity_summaries"
COMPACT_SCHEDULE = "compact_identity_summaries_nightly"
COMPACT_CRON = "30 3 * * *"  # UTC, after the night's syncs; any quiet hour will do
TRIGGER_TAG = "datalake/trigger"
PRIVACY_PRIORITY = "1"  # like the hourly syncs: before queued backfills


class ForgetConfig(Config):
    """A request (``request_from_dict``'s shape) or the location of a request file."""

    request_id: str | None = Field(default=None, description="default: a new id")
    identities: list[str] = Field(
        default_factory=list,
        description=(
            "kind=value, e.g. user_id=u123, anonymous_id=a-9, email=a@b.com, trait:phone=+1555…"
        ),
    )
    follow_links: bool | None = Field(
        default=None,
        description=(
            "also forget identities linked through identify and alias calls ([privacy] link_depth "
            "steps); default: the request format's"
        ),
    )
    sources: list[str] | None = Field(default=None, description="source ids; default: all")
    erase: bool | None = Field(default=None, description="remove the rows (default: yes)")
    suppress: bool | None = Field(default=None, description="drop future events (default: yes)")
    request_file: str | None = Field(
        default=None,
        description=(
            "set by privacy_requests_sensor: a .json or .txt file in <lake>/_privacy/requests/"
        ),
    )


def request_dict(config: ForgetConfig) -> dict[str, Any]:
    """The launchpad's config as ``request_from_dict`` takes it: keys left unset are absent,
    so the request format's defaults apply."""
    out: dict[str, Any] = {"identities": list(config.identities)}
    for key in ("request_id", "follow_links", "sources", "erase", "suppress"):
        value = getattr(config, key)
        if value is not None:
            out[key] = list(value) if isinstance(value, list) else value
    return out


def result_counts(result: Any) -> dict[str, Any]:
    """A ``ForgetResult``'s counts: what the run logs and records (no identity, no hash)."""
    removed = dict(result.rows_removed)
    return {
        "request_id": result.request_id,
        "status": result.status,
        "identities": len(result.identity_hashes),
        "hours_rewritten": result.hours_rewritten,
        "files_rewritten": result.files_rewritten,
        "rows_removed": sum(removed.values()),
        "rows_removed_by_table": removed,
        "archive_lines_removed": result.archive_lines_removed,
        "spool_lines_removed": result.spool_lines_removed,
        "rows_remaining": result.rows_remaining,
        "started_at": str(result.started_at),
        "completed_at": str(result.completed_at),
    }


def build_forget_job(settings: LakeSettings):
    """``forget_person``: one request, from the launchpad or from a request file."""
    lake = settings.lake_root

    @op(
        name=FORGET_OP,
        description="Erases and/or suppresses the identities of one request "
        "(privacy.forget), then proves none of their rows remain.",
    )
    def forget_op(context: OpExecutionContext, config: ForgetConfig) -> None:
        location = None
        if config.request_file:
            if config.identities:
                raise Failure("give either identities or request_file, not both")
            try:
                location = inbox.inbox_location(lake, config.request_file)
            except ValueError as e:
                raise Failure(str(e)) from None
        elif not config.identities:
            raise Failure("no identities: give at least one kind=value, e.g. user_id=u123")
        name = location.rsplit("/", 1)[-1] if location else None
        try:
            request = (
                load_request_file(location) if location else request_from_dict(request_dict(config))
            )
            context.log.info(
                f"request {request.request_id}: {'file ' + name if name else 'from the run config'}"
            )
            # the audit row's catalog: a Hive one needs this run's own Spark session
            result = forget(settings, request, catalog=settings_catalog(settings))
        except Exception as e:
            if name:
                inbox.write_receipt(
                    lake,
                    name,
                    {
                        "file": name,
                        "run_id": context.run_id,
                        "error": f"{type(e).__name__}: {e}"[:2000],
                    },
                    failed=True,
                )
            raise
        counts = result_counts(result)
        # the models (sessions, users, ...) rebuilt without the person, and their proof
        models = reach_models(settings, result)
        if models is not None:
            counts.update(models)
            counts["rows_remaining"] += models["models_rows_remaining"]
            if models["models_errors"]:
                raise Failure(
                    "the lake is erased but the models were not rebuilt: "
                    + "; ".join(models["models_errors"])[:4000]
                )
        context.log.info(
            f"request {counts['request_id']}: {counts['status']}; {counts['identities']} "
            f"identities, {counts['hours_rewritten']} hours and {counts['files_rewritten']} "
            f"files rewritten, {counts['rows_removed']} rows removed "
            f"({counts['rows_removed_by_table']}), {counts['archive_lines_removed']} archive "
            f"and {counts['spool_lines_removed']} spool lines removed; proof: "
            f"{counts['rows_remaining']} rows remaining"
        )
        context.add_output_metadata(
            {k: MetadataValue.json(v) if isinstance(v, dict) else v for k, v in counts.items()}
        )
        if counts["rows_remaining"]:
            if name:
                inbox.write_receipt(
                    lake, name, {"file": name, "run_id": context.run_id, **counts}, failed=True
                )
            raise Failure(
                f"request {counts['request_id']} is not complete: the proof found "
                f"{counts['rows_remaining']} rows of its identities still in the lake. Run it "
                "again (re-execute this run): a request converges on a re-run. If rows still "
                "remain, see docs/guides/forget-a-person.md.",
                metadata={"rows_remaining": counts["rows_remaining"]},
            )
        if location:
            receipt = inbox.finish(
                lake, location, {"file": name, "run_id": context.run_id, **counts}
            )
            context.log.info(f"request file {name} deleted; receipt {receipt}")

    @job(
        name=FORGET_JOB,
        executor_def=in_process_executor,  # one step: no extra process
        tags={"datalake/kind": "privacy"},
        description="Forgets a person: erases their rows everywhere in the lake and/or "
        "suppresses their future events (docs/guides/forget-a-person.md). The run config is "
        "kept by Dagster: prefer dropping a request file under "
        "<lake>/_privacy/requests/.",
    )
    def forget_person() -> None:
        forget_op()

    return forget_person


def build_compact_job(settings: LakeSettings):
    """``compact_identity_summaries``: every source's summaries brought up to date."""

    @op(
        name="compact",
        description="Compacts each source's per-hour identity index into "
        "monthly summaries (privacy/summary.py).",
    )
    def compact_op(context: OpExecutionContext) -> None:
        totals: dict[str, Any] = {}
        for source in settings.sources:
            stats = summary.compact(settings.lake_root, source.lake_dir)
            context.log.info(
                f"{source.id}: {stats.months_written} months written, {stats.months_unchanged} "
                f"unchanged, {stats.months_removed} removed; {stats.hours_read} of "
                f"{stats.hours} hours read ({stats.bytes_read} bytes), {stats.hours_vanished} "
                f"re-synced meanwhile; {stats.seconds} s"
            )
            totals[source.id] = stats.to_dict()
        context.add_output_metadata({"sources": MetadataValue.json(totals)})

    @job(
        name=COMPACT_JOB,
        executor_def=in_process_executor,
        tags={"datalake/kind": "privacy"},
        description="Compacts the identity index into monthly summaries, so a privacy "
        "request reads a few KB per month instead of every hour's index.",
    )
    def compact_identity_summaries() -> None:
        compact_op()

    return compact_identity_summaries


def build_requests_sensor(
    settings: LakeSettings, forget_job: Any, *, clock: Clock = utc_now
) -> SensorDefinition:
    """The inbox sensor: one run of ``forget_job`` per settled request file."""
    auto = settings.automation
    folder = layout.privacy_inbox_dir(settings.lake_root)

    @sensor(
        name=SENSOR_NAME,
        job=forget_job,
        minimum_interval_seconds=auto.interval_seconds,
        default_status=sensor_status(auto),
        description=f"Requests a run of {FORGET_JOB} for each request file (.json, .txt) "
        f"dropped under {folder}/.",
    )
    def privacy_requests_sensor(context: SensorEvaluationContext) -> SensorResult:
        now = clock()
        now = now.astimezone(UTC) if now.tzinfo else now.replace(tzinfo=UTC)
        ready, settling = inbox.settled(inbox.list_inbox(settings.lake_root), now)
        requests = [
            RunRequest(
                run_key=f.run_key,
                run_config={"ops": {FORGET_OP: {"config": {"request_file": f.location}}}},
                tags={
                    TRIGGER_TAG: "privacy_inbox",
                    "dagster/priority": PRIVACY_PRIORITY,
                    "datalake/request_file": f.name,
                },
            )
            for f in ready
        ]
        if requests:
            return SensorResult(run_requests=requests)
        why = f"no request files in {folder}/"
        if settling:
            why = (
                f"{settling} request files changed in the last {inbox.SETTLE_SECONDS} s: "
                "requested once they settle"
            )
        return SensorResult(skip_reason=why)

    return privacy_requests_sensor


def build_privacy_definitions(settings: LakeSettings, *, clock: Clock = utc_now) -> Definitions:
    """The privacy jobs, the inbox sensor and the compaction schedule."""
    forget_job = build_forget_job(settings)
    compact_job = build_compact_job(settings)
    schedule = ScheduleDefinition(
        name=COMPACT_SCHEDULE,
        job=compact_job,
        cron_schedule=COMPACT_CRON,
        execution_timezone="UTC",
        default_status=schedule_status(settings.automation),
        description="Nightly: identity summaries up to date (privacy/summary.py).",
    )
    return Definitions(
        jobs=[forget_job, compact_job],
        sensors=[build_requests_sensor(settings, forget_job, clock=clock)],
        schedules=[schedule],
    )
