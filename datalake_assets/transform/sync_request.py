"""What a sync is asked to do: ``SyncRequest``, from the settings or from the job's argv.

``request_from_settings`` is the one place a request is made from the lake's settings (the
Dagster assets, ``datalake sync``, ``datalake import --sync``); ``SyncRequest.to_args`` and
``parse_args`` carry it to a job started elsewhere (``python -m``, ``spark-submit`` on EMR).
"""

from __future__ import annotations

import argparse
import uuid
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from datalake_assets.catalog.config import CatalogConfig, config_from_settings
from datalake_assets.lake.plan_store import store_plan
from datalake_assets.plans.plan_model import PlanError
from datalake_assets.plans.plan_policy import (
    KEEP,
    UNPLANNED_EVENT_MODES,
    UNPLANNED_PROPERTY_MODES,
    VIOLATION_MODES,
    policy_of,
)
from datalake_assets.settings import LakeSettings, SourceSettings
from datalake_assets.settings.formats_section import FormatConfig
from datalake_assets.settings.transform_section import SyncSettings
from datalake_assets.spec import layout
from datalake_assets.spec.identity import DEFAULT_IDENTITY_TRAITS
from datalake_assets.transform.hour_files import DEFAULT_TARGET_FILE_BYTES

CATALOG_ONLY = ("register", "check")  # SyncRequest.catalog_only
_SYNC = SyncSettings()  # the [sync] defaults: a request's (and the job's argv's) too
_DESCRIPTION = (
    "The sync: one Spark job per source and batch of archive hours (never one per table)."
)


class SyncError(RuntimeError):
    """A sync that failed; ``code`` is one of Segment's categories."""

    def __init__(self, message: str, code: str = "internal") -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class SyncRequest:
    lake_root: str
    archive_root: str
    source_id: str
    hours: tuple[str, ...]  # "YYYY-MM-DDTHH" (UTC)
    source_dir: str = ""  # lake folder of the source (id or slug); default: source_id
    database: str = ""
    date_layout: str = layout.DEFAULT_DATE_LAYOUT
    run_id: str = ""
    max_message_bytes: int = _SYNC.max_message_bytes
    max_depth: int = _SYNC.max_depth
    replay: bool = False
    table_prefix: str = ""  # catalog table names: <prefix><table>
    # messageId unique across this window (id index)
    dedup_lookback_hours: int = _SYNC.dedup_lookback_days * 24
    lock_wait_seconds: float = 600.0  # wait this long for another sync of the source to end
    catalog: CatalogConfig = field(default_factory=lambda: CatalogConfig(backend="none"))
    # traits that identify a person in the identity index and the suppression ([privacy])
    identity_traits: tuple[str, ...] = DEFAULT_IDENTITY_TRAITS
    # a batch of fewer archive bytes (compressed) runs in the driver, without Spark jobs
    # (transform/local_path.py); 0: always Spark
    local_max_bytes: int = _SYNC.local_max_bytes
    # a table-hour's Parquet files are cut at this size: [iceberg] target_file_mb, the one
    # file size of the lake (compaction's too), whatever the table format
    target_file_bytes: int = DEFAULT_TARGET_FILE_BYTES
    # "register": register the hours from the lake's files, then check the catalog;
    # "check": check only. No archive is read, no data written (transform/catalog_phase.py)
    catalog_only: str = ""
    # the lake's table format (lake/formats/): what committing the staged hours means
    table_format: FormatConfig = field(default_factory=FormatConfig)
    # an open hour's batch: append the hours' archive files no run took in yet, instead of
    # replacing the hours (transform/open_hour.py)
    batch: bool = False
    # the source's tracking plan as the lake keeps it (plans/plan_policy.store_plan); "": none
    tracking_plan: str = ""
    unplanned_events: str = "keep"  # keep | quarantine
    unplanned_properties: str = "keep"  # keep | omit
    violations: str = "keep"  # keep | omit | quarantine

    def resolved(self) -> SyncRequest:
        run_id = (
            self.run_id or datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:8]
        )
        return replace(
            self,
            source_dir=self.source_dir or self.source_id,
            database=self.database or self.source_id,
            run_id=run_id,
            hours=tuple(str(layout.ArchiveHour.parse(h)) for h in self.hours),
        )

    def to_args(self) -> list[str]:
        args = [
            "--lake-root",
            self.lake_root,
            "--archive-root",
            self.archive_root,
            "--source-id",
            self.source_id,
            "--source-dir",
            self.source_dir or self.source_id,
            "--database",
            self.database or self.source_id,
            "--date-layout",
            self.date_layout,
            "--max-message-bytes",
            str(self.max_message_bytes),
            "--max-depth",
            str(self.max_depth),
            "--dedup-lookback-hours",
            str(self.dedup_lookback_hours),
            "--lock-wait-seconds",
            str(self.lock_wait_seconds),
            # trait names are [A-Za-z0-9_]: a comma list is unambiguous ("" for none)
            "--identity-traits",
            ",".join(self.identity_traits),
            "--local-max-bytes",
            str(self.local_max_bytes),
            "--target-file-bytes",
            str(self.target_file_bytes),
            *self.catalog.to_args(),
            *self.table_format.to_args(),
        ]
        if self.table_prefix:
            args += ["--table-prefix", self.table_prefix]
        if self.run_id:
            args += ["--run-id", self.run_id]
        if self.replay:
            args.append("--replay")
        if self.catalog_only:
            args += ["--catalog-only", self.catalog_only]
        if self.batch:
            args.append("--batch")
        if self.tracking_plan:
            args += [
                "--tracking-plan",
                self.tracking_plan,
                "--unplanned-events",
                self.unplanned_events,
                "--unplanned-properties",
                self.unplanned_properties,
                "--violations",
                self.violations,
            ]
        return args + ["--hours", *self.hours]


def parse_args(argv: list[str]) -> SyncRequest:
    p = argparse.ArgumentParser(prog="datalake-sync", description=_DESCRIPTION)
    p.add_argument("--lake-root", required=True)
    p.add_argument("--archive-root", required=True)
    p.add_argument("--source-id", required=True)
    p.add_argument("--source-dir", default="")
    p.add_argument("--database", default="")
    p.add_argument(
        "--date-layout", default=layout.DEFAULT_DATE_LAYOUT, choices=sorted(layout.DATE_LAYOUTS)
    )
    p.add_argument("--run-id", default="")
    p.add_argument("--max-message-bytes", type=int, default=_SYNC.max_message_bytes)
    p.add_argument("--max-depth", type=int, default=_SYNC.max_depth)
    p.add_argument("--replay", action="store_true")
    p.add_argument(
        "--catalog-only",
        choices=CATALOG_ONLY,
        default="",
        help="register the hours from the lake's files and check the catalog "
        "(register), or check it (check); nothing else",
    )
    p.add_argument(
        "--batch",
        action="store_true",
        help="append the hours' archive files no run took in yet (an open hour's batch) "
        "instead of replacing the hours",
    )
    p.add_argument("--table-prefix", default="")
    p.add_argument("--dedup-lookback-hours", type=int, default=_SYNC.dedup_lookback_days * 24)
    p.add_argument("--lock-wait-seconds", type=float, default=600.0)
    p.add_argument(
        "--identity-traits",
        default=",".join(DEFAULT_IDENTITY_TRAITS),
        help="comma-separated trait names that identify a person ([privacy])",
    )
    p.add_argument(
        "--local-max-bytes",
        type=int,
        default=_SYNC.local_max_bytes,
        help="archive bytes under which the sync runs without Spark jobs (0: never)",
    )
    p.add_argument(
        "--target-file-bytes",
        type=int,
        default=DEFAULT_TARGET_FILE_BYTES,
        help="a table-hour's Parquet files are cut at this size",
    )
    p.add_argument("--hours", nargs="+", required=True, help="UTC hours, YYYY-MM-DDTHH")
    p.add_argument("--tracking-plan", default="", help="the stored tracking plan's location")
    p.add_argument("--unplanned-events", default=KEEP, choices=UNPLANNED_EVENT_MODES)
    p.add_argument("--unplanned-properties", default=KEEP, choices=UNPLANNED_PROPERTY_MODES)
    p.add_argument("--violations", default=KEEP, choices=VIOLATION_MODES)
    CatalogConfig.add_arguments(p)
    FormatConfig.add_arguments(p)
    a = p.parse_args(argv)
    return SyncRequest(
        lake_root=a.lake_root,
        archive_root=a.archive_root,
        source_id=a.source_id,
        source_dir=a.source_dir,
        database=a.database,
        date_layout=a.date_layout,
        run_id=a.run_id,
        max_message_bytes=a.max_message_bytes,
        max_depth=a.max_depth,
        replay=a.replay,
        hours=tuple(a.hours),
        table_prefix=a.table_prefix,
        dedup_lookback_hours=a.dedup_lookback_hours,
        catalog=CatalogConfig.from_args(a),
        lock_wait_seconds=a.lock_wait_seconds,
        identity_traits=tuple(t for t in a.identity_traits.split(",") if t),
        local_max_bytes=a.local_max_bytes,
        catalog_only=a.catalog_only,
        target_file_bytes=a.target_file_bytes,
        table_format=FormatConfig.from_args(a),
        batch=a.batch,
        tracking_plan=a.tracking_plan,
        unplanned_events=a.unplanned_events,
        unplanned_properties=a.unplanned_properties,
        violations=a.violations,
    )


def request_from_settings(
    settings: LakeSettings,
    source: SourceSettings,
    hours,
    *,
    replay: bool,
    run_id: str = "",
    catalog_only: str = "",
    batch: bool = False,
) -> SyncRequest:
    """The sync of ``source``'s ``hours`` (any ``ArchiveHour`` spelling) as the settings say."""
    fmt = FormatConfig.of_settings(settings)
    try:
        policy = policy_of(source)
        # the plan as the lake keeps it: what the job reads, wherever it runs
        plan_at = store_plan(settings.lake_root, source.lake_dir, policy.plan) if policy else ""
    except PlanError as e:
        raise SyncError(f"tracking plan of source {source.id}: {e}", "plan_invalid") from None
    return SyncRequest(
        lake_root=settings.lake_root,
        archive_root=settings.archive_root,
        source_id=source.id,
        source_dir=source.lake_dir,
        database=source.database,
        date_layout=source.date_layout,
        hours=tuple(str(layout.ArchiveHour.parse(h)) for h in hours),
        run_id=run_id,
        max_message_bytes=settings.sync.max_message_bytes,
        max_depth=settings.sync.max_depth,
        replay=replay,
        table_prefix=source.effective_table_prefix,
        catalog=config_from_settings(settings.catalog),
        dedup_lookback_hours=settings.sync.dedup_lookback_days * 24,
        identity_traits=settings.privacy.identity_traits,
        local_max_bytes=settings.sync.local_max_bytes,
        target_file_bytes=fmt.target_file_mb * 1024 * 1024,
        catalog_only=catalog_only,
        table_format=fmt,
        batch=batch,
        tracking_plan=plan_at,
        unplanned_events=source.unplanned_events,
        unplanned_properties=source.unplanned_properties,
        violations=source.violations,
    )
