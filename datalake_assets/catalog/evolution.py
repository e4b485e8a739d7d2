"""How a registered table may change, in every backend: its columns only grow
(``merge_columns``: appended, or widened along ``spec/types.py``'s lattice, never narrowed or
dropped), its partition keys never change (``evolve_table``), and each partition is
registered with the types its files were written with (``partition_columns``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from datalake_assets.catalog.catalog_interface import (
    INTERNAL,
    INVALID_SETTINGS,
    CatalogError,
    Column,
    TableInfo,
)
from datalake_assets.spec.types import TYPES, widen


@dataclass(frozen=True)
class ColumnMerge:
    columns: list[Column]  # the table's columns after the change
    added: list[Column]  # appended at the end, in the caller's order
    widened: list[tuple[str, str, str]]  # (name, from, to)

    @property
    def changed(self) -> bool:
        return bool(self.added or self.widened)


def merge_columns(
    existing: Sequence[Column], requested: Sequence[Column], table: str = ""
) -> ColumnMerge:
    """The table's columns after registering ``requested`` over ``existing``.

    Existing columns keep their position; a type changes only to the least upper bound of the
    old and the requested type (so it widens or stays, never narrows); unknown columns are
    appended in the requested order; no column is ever dropped.
    """
    types = dict(existing)
    widened: list[tuple[str, str, str]] = []
    added: list[Column] = []
    for name, new in requested:
        old = types.get(name)
        if old is None:
            added.append((name, new))
            types[name] = new
            continue
        if old == new:
            continue
        if old not in TYPES:
            where = f" of table {table!r}" if table else ""
            raise CatalogError(
                f"column {name!r}{where} has type {old!r} in the catalog, which this project "
                f"does not manage (allowed: {', '.join(TYPES)}); fix or drop the table by hand",
                INVALID_SETTINGS,
            )
        wider = widen(old, new)
        if wider != old:
            widened.append((name, old, wider))
            types[name] = wider
    columns = [(n, types[n]) for n, _ in existing] + added
    return ColumnMerge(columns, added, widened)


def partition_columns(
    table_columns: Sequence[Column], file_columns: Sequence[Column] | None, table: str = ""
) -> list[Column]:
    """The column list a partition is registered with: the table's columns, in the table's
    order, each with the type the partition's files were written with (``file_columns``) or,
    for a column the files do not have, the table's type (it reads as NULL either way).

    Same names in the same positions as the table, so engines that match partition columns by
    position and those that match by name agree; every type is the table's or one that widens
    to it (Athena casts it). ``None``: the table's columns as they are.
    """
    if file_columns is None:
        return list(table_columns)
    files = dict(file_columns)
    table_types = dict(table_columns)
    missing = [n for n in files if n not in table_types]
    if missing:
        raise CatalogError(
            f"partition columns {missing} are not columns of table {table!r}: register the "
            "table's columns (create_or_update_table) before its partitions",
            INTERNAL,
        )
    out = []
    for name, ttype in table_columns:
        ftype = files.get(name, ttype)
        if ftype != ttype and widen(ftype, ttype) != ttype:
            raise CatalogError(
                f"column {name!r} of a partition of {table!r} is {ftype!r}, which does not widen "
                f"to the table's {ttype!r}",
                INTERNAL,
            )
        out.append((name, ftype))
    return out


def evolve_table(
    database: str, table: str, info: TableInfo, columns: Sequence[Column], partition_keys: list[str]
) -> ColumnMerge:
    """The columns of the registered table ``info`` after registering ``columns`` over it
    (``merge_columns``); other ``partition_keys`` are refused: a table keeps its own."""
    if info.partition_keys != partition_keys:
        raise CatalogError(
            f"table '{database}.{table}' is partitioned by ({', '.join(info.partition_keys)}) "
            f"but the source's date layout gives ({', '.join(partition_keys)}): a source's "
            "date_layout cannot change under an existing table; use a new database or "
            "table_prefix",
            INVALID_SETTINGS,
        )
    return merge_columns(info.columns, columns, f"{database}.{table}")
