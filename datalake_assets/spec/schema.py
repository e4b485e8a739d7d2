"""A table's schema after a sync: existing columns keep their order (types may only widen),
new columns are appended at the end in name order, as Segment did."""

from __future__ import annotations

from dataclasses import dataclass, field

from datalake_assets.spec.types import (
    BIGINT,
    BOOLEAN,
    CASTABLE,
    DOUBLE,
    FIXED_TYPES,
    K_BIGNUM,
    K_BOOL,
    K_BOOLSTR,
    K_FLOAT,
    K_FLOATSTR,
    K_INT,
    K_INTSTR,
    K_NONFINITE,
    K_STR,
    K_TS,
    STRING,
    TIMESTAMP,
    decide_type,
    is_widening,
)

# Kinds pyarrow converts to a column type as they are; any other kind needs a per-value cast.

NATIVE_KINDS: dict[str, frozenset[int]] = {
    BIGINT: frozenset({K_INT}),
    DOUBLE: frozenset({K_INT, K_FLOAT, K_NONFINITE}),
    BOOLEAN: frozenset({K_BOOL}),
    STRING: frozenset({K_STR, K_INTSTR, K_FLOATSTR, K_BOOLSTR, K_TS, K_BIGNUM}),
    TIMESTAMP: frozenset(),  # text is always parsed
}


@dataclass
class TableChange:
    table: str
    columns: list[tuple[str, str]]  # full schema after the sync, in order
    new_columns: list[tuple[str, str]] = field(default_factory=list)
    widened: list[tuple[str, str, str]] = field(default_factory=list)  # (column, from, to)
    cast_columns: set[str] = field(default_factory=set)  # need a per-value cast in stage B
    expected_misfits: dict[str, int] = field(default_factory=dict)
    is_new: bool = False


def plan_table(
    table: str,
    existing: list[tuple[str, str]] | None,
    counts: dict[str, list[int]],
    planned: dict[str, str] | None = None,
) -> TableChange:
    """Decide the table's columns and types for this batch (see ``types.decide_type``).
    ``planned``: the types a tracking plan gives columns (``plans/plan_columns.py``): they
    hold as the fixed columns' do, and an older, narrower column widens to them."""
    planned = planned or {}
    old = dict(existing or [])
    columns = list(existing or [])
    change = TableChange(table, columns, is_new=existing is None)
    index = {c: i for i, (c, _) in enumerate(columns)}
    for column in sorted(counts):
        kinds = counts[column]
        fixed = FIXED_TYPES.get(column) or planned.get(column)
        was = old.get(column, fixed)
        if fixed is not None and (
            was == fixed or (column in planned and is_widening(was, fixed))  # type: ignore[arg-type]
        ):
            # Fixed and planned columns never change type for what the data says: values
            # that do not fit are quarantined.
            typ = fixed
            misfits = sum(n for k, n in enumerate(kinds) if fixed not in CASTABLE[k])
        else:
            typ, misfits = decide_type(old.get(column), kinds)
        if column in old:
            if is_widening(old[column], typ):
                change.widened.append((column, old[column], typ))
                columns[index[column]] = (column, typ)
        else:
            change.new_columns.append((column, typ))
        if misfits:
            change.expected_misfits[column] = misfits
        if any(n and k not in NATIVE_KINDS[typ] for k, n in enumerate(kinds)):
            change.cast_columns.add(column)
    columns.extend(change.new_columns)
    return change
