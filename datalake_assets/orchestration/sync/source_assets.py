"""Assets per source: the raw archive (external), the lake's tables, quarantine, sync report.

Asset keys name where the data lives: ``[<source slug>, <table>]``. One multi-asset per source
materializes its tables for a batch of hours with ONE Spark job (never one per table).

The tables of a source's graph come from the ``LakeState`` the code location was loaded with
(``lake_state.py``): the standard ones plus every event table the lake had then. The same state
reaches every run launched from that load, so a run always sees the graph its launcher saw.

What a selection means: any subset of a source's assets can be selected (one table, several,
all; one hour or a range), and the whole source-hour is synced anyway, because one pass over
the archive hour writes all of its tables. The selected assets get their materializations as
usual; every other table the sync rewrote is recorded as materialized too (a runtime
materialization with the same metadata), so the catalog never shows stale data as current.
"""

import ast
import functools
import hashlib
import warnings
from dataclasses import replace
from importlib import resources

from dagster import (
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
    AssetSpec,
    BackfillPolicy,
    Failure,
    HourlyPartitionsDefinition,
    MetadataValue,
    PreviewWarning,
    multi_asset,
)

from datalake_assets.orchestration.compute.spark_compute import SparkCompute
from datalake_assets.orchestration.sync.catalog_asset import catalog_key, catalog_specs
from datalake_assets.orchestration.sync.check_runs import register_catalog_alone, run_checks_alone
from datalake_assets.orchestration.sync.lake_state import SourceState, read_source_state
from datalake_assets.orchestration.sync.sync_checks import (
    CHECK_COMPLETENESS,
    CHECK_CONFORMANCE,
    CHECK_DUPLICATES,
    CHECK_TRACKING_PLAN,
    CHECK_TYPE_DRIFT,
    has_plan_check,
    plan_check_of,
)
from datalake_assets.orchestration.sync.sync_hours import SyncFailed, sync_hours
from datalake_assets.orchestration.sync.sync_metadata import table_name, table_uri
from datalake_assets.plans.plan_model import PlanError
from datalake_assets.plans.plan_policy import policy_of
from datalake_assets.settings import LakeSettings, SourceSettings
from datalake_assets.spec import layout
from datalake_assets.spec.naming import QUARANTINE, RAW_ARCHIVE, STANDARD_TABLES, SYNC_REPORTS
from datalake_assets.spec.table_formats import ICEBERG

# Per-hour check results need partitioned check specs, a preview feature of Dagster 1.13 that we
# chose on purpose (README): say so once here instead of warning on every load and run.
warnings.filterwarnings(
    "ignore", message=".*partitions_def on an AssetCheckSpec", category=PreviewWarning
)
warnings.filterwarnings("ignore", message=".*with_reconstruction_metadata", category=PreviewWarning)

# The modules whose rules decide what a sync writes: every pure rule (spec/: how messages are
# validated, routed, named, flattened, typed and laid out) and the two worker stages that
# apply them. Their code (comments and docstrings aside) is the sync's code_version, so
# changing a rule shows every hour synced before as stale in the UI. spec/ is globbed so a
# rule module added later counts without anyone remembering this list.
_RULE_STAGES = (
    "transform/stage_a.py",
    "transform/identity_tally.py",
    "transform/stage_b.py",
    "transform/stage_a_plan.py",
    # a tracking plan's rules: what a plan does to a message and to a column's type
    "plans/plan_gate.py",
    "plans/plan_verdict.py",
    "plans/plan_columns.py",
)


def _rule_modules() -> list[str]:
    spec = resources.files("datalake_assets").joinpath("spec")
    return sorted(f"spec/{p.name}" for p in spec.iterdir() if p.name.endswith(".py")) + list(
        _RULE_STAGES
    )


@functools.cache  # the same for every source and load of this process
def rules_code_version() -> str:
    h = hashlib.sha256()
    package = resources.files("datalake_assets")
    for name in _rule_modules():
        tree = ast.parse(package.joinpath(name).read_text(encoding="utf-8"))
        for node in ast.walk(tree):  # docstrings are not rules
            body = getattr(node, "body", None)
            if (
                isinstance(body, list)
                and body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                body[0] = ast.Pass()
        h.update(name.encode() + b"\0" + ast.dump(tree).encode() + b"\0")
    return h.hexdigest()[:12]


def _check_specs(
    slug: str, tables: list[str], partitions, plan_check: str | None = None
) -> list[AssetCheckSpec]:
    specs = [
        AssetCheckSpec(
            CHECK_COMPLETENESS,
            asset=AssetKey([slug, SYNC_REPORTS]),
            blocking=True,
            partitions_def=partitions,
            description="lines_in = rows written + duplicates + lines quarantined + lines of "
            "suppressed identities, for the hour",
        )
    ]
    for t in tables:
        key = AssetKey([slug, t])
        specs += [
            AssetCheckSpec(
                CHECK_DUPLICATES,
                asset=key,
                blocking=True,
                partitions_def=partitions,
                description="No messageId appears twice in what the sync wrote",
            ),
            AssetCheckSpec(
                CHECK_TYPE_DRIFT,
                asset=key,
                partitions_def=partitions,
                description="Warns when a column widened or values were quarantined "
                "for not fitting their column's type",
            ),
            AssetCheckSpec(
                CHECK_CONFORMANCE,
                asset=key,
                partitions_def=partitions,
                description="pandera rules of the fixed columns (ids, type, event, "
                "received_at) hold on every written row",
            ),
        ]
        if has_plan_check(plan_check, t):
            specs.append(
                AssetCheckSpec(
                    CHECK_TRACKING_PLAN,
                    asset=key,
                    blocking=plan_check == "block",
                    partitions_def=partitions,
                    description="The hour's messages keep to the source's tracking plan "
                    "(violations by type in the metadata; rows in the violations table)",
                )
            )
    return specs


def plan_code_version(source: SourceSettings) -> str:
    """The tracking plan's part of the sync's code version: its hash, so a changed plan shows
    the hours synced under the older one as stale ("" without a plan; a plan that cannot be
    read shows as such here and fails the sync with its reason)."""
    if not source.tracking_plan:
        return ""
    try:
        policy = policy_of(source)
    except PlanError:
        return "-plan-unreadable"
    return f"-plan-{policy.plan.hash[:12]}" if policy else ""


def source_partitions(source: SourceSettings) -> HourlyPartitionsDefinition:
    return HourlyPartitionsDefinition(start_date=source.start, timezone="UTC")


def build_source_assets(
    settings: LakeSettings, source: SourceSettings, state: SourceState | None = None
) -> list:
    """The raw archive and the sync multi-asset of ``source``, whose tables and partition start
    are those of ``state`` (default: read from the lake now; the code location passes the
    state it was loaded with)."""
    if state is None:
        state = read_source_state(settings, source)
    source = replace(source, start=state.start)
    partitions = source_partitions(source)
    slug = source.slug
    owners = list(source.owners)
    raw_key = AssetKey([slug, RAW_ARCHIVE])
    raw = AssetSpec(
        key=raw_key,
        partitions_def=partitions,
        group_name=slug,
        kinds={"json"},
        owners=owners,
        description=(
            f"Raw Segment messages of source {source.id}, gzipped JSON lines by received hour, "
            f"under {layout.join(settings.archive_root, source.id)}/day=YYYY-MM-DD/hr=HH/. "
            "Recorded by the archive sensor when an hour's files appear or change."
        ),
        metadata={"dagster/uri": MetadataValue.path(layout.join(settings.archive_root, source.id))},
    )
    tables = list(state.tables)
    # the table format's kind and words (a Dagster kind shows as a tag and an icon)
    iceberg = settings.table_format == ICEBERG
    storage_kind, stored_as = ("iceberg", "an Iceberg table") if iceberg else ("parquet", "Parquet")
    table_specs = [
        AssetSpec(
            key=AssetKey([slug, t]),
            deps=[raw_key],
            partitions_def=partitions,
            group_name=slug,
            kinds={storage_kind, "spark"},
            owners=owners,
            skippable=True,  # an hour may have no event of this type
            description=(
                f"Lake table {t} of source {source.id}: typed {stored_as}, one partition "
                "per received hour."
                + ("" if t in STANDARD_TABLES else " Created by the sync that first saw it.")
            ),
            metadata={
                "dagster/table_name": table_name(source, t),
                "dagster/uri": MetadataValue.path(table_uri(settings, source, t)),
            },
        )
        for t in tables
    ]
    side_specs = [
        AssetSpec(
            key=AssetKey([slug, QUARANTINE]),
            deps=[raw_key],
            partitions_def=partitions,
            group_name=slug,
            kinds={storage_kind},
            owners=owners,
            description="Lines and values that could not be written as they are, with reasons.",
            metadata={"dagster/uri": MetadataValue.path(table_uri(settings, source, QUARANTINE))},
        ),
        AssetSpec(
            key=AssetKey([slug, SYNC_REPORTS]),
            deps=[raw_key],
            partitions_def=partitions,
            group_name=slug,
            kinds={"json"},
            owners=owners,
            description="The sync's reconciliation: lines_in = rows + duplicates + quarantined "
            "+ suppressed.",
        ),
    ]
    catalog_spec, catalog_checks = catalog_specs(
        settings,
        source,
        tables,
        partitions,
        deps=[AssetKey([slug, t]) for t in [*tables, QUARANTINE]],
    )

    @multi_asset(
        name=f"{slug}_lake_sync",
        specs=table_specs + side_specs + catalog_spec,
        partitions_def=partitions,
        backfill_policy=BackfillPolicy.multi_run(settings.automation.backfill_hours_per_run),
        check_specs=_check_specs(slug, tables, partitions, plan_check_of(source)) + catalog_checks,
        can_subset=True,  # any selection syncs the whole source-hour (module docstring)
        code_version=rules_code_version() + plan_code_version(source),
        pool="spark_local",
    )
    def lake_sync(context: AssetExecutionContext, compute: SparkCompute):
        if not context.selected_asset_keys:  # the checks alone: nothing to sync
            yield from run_checks_alone(context, settings, source, compute)
            return
        if context.selected_asset_keys == {catalog_key(slug)}:  # the catalog alone
            yield from register_catalog_alone(context, settings, source, compute)
            return
        try:
            yield from sync_hours(
                context,
                settings,
                source,
                tables,
                list(context.partition_keys),
                compute,
                replay=len(context.partition_keys) > 1 or "dagster/backfill" in context.run.tags,
                selected=context.selected_asset_keys,
                add_metadata=context.add_asset_metadata,
            )
        except SyncFailed as e:  # recorded: fail the step with the sync's own error
            if e.committed:  # the catalog's hours fail their check; say why in the run
                raise Failure(description=str(e.cause)) from None
            raise e.cause from None

    return [raw, lake_sync]
