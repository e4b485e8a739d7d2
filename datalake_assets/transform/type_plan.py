"""The sync's phase 2, *plan types*: stage A's per-column kind counts against the lake's schema
record and the catalog become each table's columns and types (``spec/schema.py`` decides a
column's type; this reads what the lake and the catalog already hold)."""

from __future__ import annotations

from datalake_assets.catalog.catalog_interface import CatalogError
from datalake_assets.catalog.register import read_schemas
from datalake_assets.plans.plan_columns import planned_columns
from datalake_assets.spec.schema import TableChange, plan_table
from datalake_assets.spec.types import N_KINDS, TYPES, is_widening, widen
from datalake_assets.transform.run import SyncRun
from datalake_assets.transform.stage_a_stats import StageAStats
from datalake_assets.transform.sync_request import SyncError


def plan_types(
    run: SyncRun, existing: dict[str, list[tuple[str, str]]], stats: StageAStats
) -> dict[str, TableChange]:
    """Each table's columns and types. The catalog may know a column wider than the lake's
    record (widened by another writer or by hand): the sync never writes a type narrower
    than the catalog's. Nor than the table's own schema, where the format keeps one
    (Iceberg): a run killed after its commit and before the record is written (the record
    comes after the commit) leaves tables wider than the record, and a file written to the
    record's narrower type would not fit the table. ``existing`` is updated with both."""
    for table, cols in _catalog_schemas(run, stats.counts).items():
        existing[table] = _widest(existing.get(table, []), cols)
    for table in stats.counts:
        if cols := run.tables.columns(run.src, table):
            existing[table] = _widest(existing.get(table, []), cols)
    plan = run.plan.plan if run.plan is not None else None
    out = {}
    for table, cols in stats.counts.items():
        planned = planned_columns(plan, table) if plan is not None else {}
        if planned:
            _refuse_narrowing(table, existing.get(table), planned)
            # the planned columns from the table's first sync, with or without values
            cols = {**{c: [0] * N_KINDS for c in planned}, **cols}
        out[table] = plan_table(table, existing.get(table), cols, planned)
    return out


def _refuse_narrowing(
    table: str, existing: list[tuple[str, str]] | None, planned: dict[str, str]
) -> None:
    """A plan that types a column narrower than the lake holds it: nothing is synced."""
    for column, typ in existing or []:
        want = planned.get(column)
        if want is not None and want != typ and not is_widening(typ, want):
            raise SyncError(
                f"the tracking plan types {table}.{column} as {want}, but the lake's column is "
                f"{typ} and a column never narrows: plan it as {typ}, or plan the property "
                "under a new name; nothing committed",
                "plan_narrows",
            )


def _catalog_schemas(run: SyncRun, tables) -> dict[str, list[tuple[str, str]]]:
    try:
        return read_schemas(run.catalog, run.req.database, run.req.table_prefix, list(tables))
    except CatalogError as e:  # read before anything is written
        raise SyncError(f"catalog: {e}; nothing committed", e.code) from e


def _widest(record: list[tuple[str, str]], catalog: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The record's columns in order, each at the wider of its two types, then the catalog's
    other columns."""
    theirs = {n: t for n, t in catalog if t in TYPES}
    out = [(n, widen(t, theirs[n]) if n in theirs else t) for n, t in record]
    known = {n for n, _ in record}
    return out + [(n, t) for n, t in catalog if n not in known and t in TYPES]
