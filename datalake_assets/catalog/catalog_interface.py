"""The catalog interface: databases, external Parquet tables, their columns and partitions.

A catalog *describes* the lake's files to query engines (Athena, Spark SQL, Trino, ...); it
never moves data. Every backend implements ``Catalog``:

* ``GlueCatalog`` (``glue.py``): AWS Glue Data Catalog, what Athena reads. Production.
* ``HiveCatalog`` (``hive.py``): a Hive metastore through a Spark session: embedded Derby
  locally (``dagster dev``, tests), or a remote thrift metastore.
* ``NoCatalog`` (here): registers nothing, for users who only want the files.

Rules every backend follows (the caller decides types; the catalog only applies them):

* Names are validated before any statement is built: databases, tables, columns and partition
  keys must be ``[a-z0-9_]`` (1-255 characters), partition values ``[A-Za-z0-9_.-]``, and
  locations may not contain quotes, backslashes, ``;``, backticks or control characters. So
  no name coming from event data or settings can inject DDL (``InvalidNameError``).
* A table's columns only ever grow: new columns are appended at the end, a column's type only
  widens along the lattice of ``spec/types.py`` (``bigint -> double -> string``, ``boolean``
  / ``timestamp -> string``), never narrows, and is never dropped (``evolution.py``).
* Partition keys are ``string`` typed and come from the source's date layout
  (``day, hr`` / ``year, month, day, hr`` / ``year, month, day`` / ``day``). A table keeps
  its partition keys: a layout change is refused with ``invalid_settings``.
* ``add_partitions`` is idempotent and returns how many partitions were new. Re-adding an
  existing partition updates it when its location or file schema changed (a replay).

Errors are ``CatalogError(message, code)`` with ``code`` one of Segment's categories:
``insufficient_permissions`` (the message names the action and the resource, e.g.
``glue:CreateDatabase on database 'web'``), ``invalid_settings`` or ``internal``.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field

from datalake_assets.spec.types import TYPES

Column = tuple[str, str]  # (name, hive type): bigint, double, boolean, timestamp or string
# Types of our own tables' columns that event data never gets (the ``privacy_requests`` audit
# table's list of hashes). They never widen: a column keeps such a type or the change fails.
LIST_OF_STRING = "array<string>"
FIXED_COLUMN_TYPES = (LIST_OF_STRING,)

INSUFFICIENT_PERMISSIONS = "insufficient_permissions"
INVALID_SETTINGS = "invalid_settings"
INTERNAL = "internal"
ERROR_CODES = (INSUFFICIENT_PERMISSIONS, INVALID_SETTINGS, INTERNAL)

MAX_NAME = 255
# Independent catalog calls made at once (one table's registration, one DESCRIBE): each is a
# round trip of ~50-100 ms (the served metastore, Glue). Clients are thread-safe: boto3's
# Glue client; a Spark session, local or Connect, takes statements from several threads.
CONCURRENT_CALLS = 4

_IDENT_RE = re.compile(r"[a-z0-9_]{1,255}")
_VALUE_RE = re.compile(r"[A-Za-z0-9_.\-]{1,255}")
_LOCATION_FORBIDDEN = re.compile(r"['\\;`\x00-\x1f\x7f]")


class CatalogError(RuntimeError):
    """A catalog operation that failed; ``code`` is one of ``ERROR_CODES``."""

    def __init__(self, message: str, code: str = INTERNAL) -> None:
        if code not in ERROR_CODES:
            raise ValueError(f"unknown catalog error code {code!r}; one of {ERROR_CODES}")
        super().__init__(message)
        self.message = message
        self.code = code


class InvalidNameError(CatalogError):
    """A name or location that cannot be used safely in a catalog statement."""

    def __init__(self, message: str) -> None:
        super().__init__(message, INVALID_SETTINGS)


def table_not_registered(database: str, table: str) -> CatalogError:
    """The error of adding partitions to a table that does not exist."""
    return CatalogError(
        f"table '{database}.{table}' does not exist: register it with create_or_update_table first",
        INTERNAL,
    )


@dataclass(frozen=True)
class TableInfo:
    """A table as the catalog describes it. ``location`` is the table root as given when the
    table was registered (local paths without ``file:``; URIs as written)."""

    database: str
    name: str
    columns: list[Column]
    partition_keys: list[str]  # all typed string
    location: str
    parameters: dict[str, str] = field(default_factory=dict)
    description: str = ""


@dataclass(frozen=True)
class PartitionSpec:
    """One partition: its key values (in the table's partition key order) and its folder.

    ``columns``: the schema its files were written with (see ``glue.py`` for why partitions
    keep their own schema). ``None``: the table's current columns.
    """

    values: tuple[str, ...]
    location: str
    columns: tuple[Column, ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", tuple(self.values))
        if self.columns is not None:
            object.__setattr__(self, "columns", tuple(tuple(c) for c in self.columns))


# ------------------------------------------------------------------------------- validation


def check_identifier(name: object, what: str = "identifier") -> str:
    """A database, table, column or partition key name: ``[a-z0-9_]``, 1-255 characters."""
    if not isinstance(name, str) or not _IDENT_RE.fullmatch(name):
        raise InvalidNameError(
            f"invalid {what} name {name!r}: only 1-{MAX_NAME} characters from [a-z0-9_] are "
            "allowed (no quotes, ';', backticks, path separators, spaces or non-ASCII)"
        )
    return name


def check_partition_value(value: object, key: str = "") -> str:
    """A partition value (``2026-11-21``, ``09``, a source id): ``[A-Za-z0-9_.-]``."""
    if (
        not isinstance(value, str)
        or not _VALUE_RE.fullmatch(value)
        or not any(c.isalnum() for c in value)
    ):
        where = f" of partition key {key!r}" if key else ""
        raise InvalidNameError(
            f"invalid partition value {value!r}{where}: only 1-{MAX_NAME} characters from "
            "[A-Za-z0-9_.-] with at least one letter or digit are allowed"
        )
    return value


def check_location(location: object) -> str:
    """A table or partition location: a local absolute path or a URI, safe to single-quote."""
    if not isinstance(location, str) or not location.strip():
        raise InvalidNameError(f"invalid location {location!r}: must be a non-empty string")
    bad = _LOCATION_FORBIDDEN.search(location)
    if bad:
        raise InvalidNameError(
            f"invalid location {location!r}: character {bad.group()!r} is not allowed "
            "(quotes, backslashes, ';', backticks and control characters are refused)"
        )
    if location != location.strip():
        raise InvalidNameError(f"invalid location {location!r}: leading or trailing spaces")
    return location


def check_columns(columns: Iterable[Sequence[str]], what: str = "column") -> list[Column]:
    """Validated ``[(name, type)]``: unique names, types from ``spec.types.TYPES`` (or
    ``FIXED_COLUMN_TYPES``)."""
    out: list[Column] = []
    seen: set[str] = set()
    for col in columns:
        if len(col) != 2:
            raise CatalogError(f"a {what} must be (name, type), got {col!r}", INTERNAL)
        name, typ = col
        check_identifier(name, what)
        if typ not in TYPES and typ not in FIXED_COLUMN_TYPES:
            raise CatalogError(
                f"{what} {name!r} has type {typ!r}; allowed: "
                f"{', '.join(TYPES + FIXED_COLUMN_TYPES)}",
                INTERNAL,
            )
        if name in seen:
            raise CatalogError(f"duplicate {what} {name!r}", INTERNAL)
        seen.add(name)
        out.append((name, typ))
    return out


def check_partition_keys(keys: Iterable[str], columns: Iterable[Column]) -> list[str]:
    keys = [check_identifier(k, "partition key") for k in keys]
    if len(set(keys)) != len(keys):
        raise CatalogError(f"duplicate partition keys {keys}", INTERNAL)
    clash = sorted(set(keys) & {n for n, _ in columns})
    if clash:
        raise CatalogError(f"partition keys {clash} are also data columns", INTERNAL)
    return keys


def check_table(
    database: str,
    table: str,
    columns: Iterable[Sequence[str]],
    partition_keys: Iterable[str],
    location: str,
) -> tuple[list[Column], list[str]]:
    """The arguments of ``Catalog.create_or_update_table``, validated: ``(columns, partition
    keys)``."""
    check_identifier(database, "database")
    check_identifier(table, "table")
    cols = check_columns(columns)
    keys = check_partition_keys(partition_keys, cols)
    check_location(location)
    return cols, keys


def check_partition(spec: PartitionSpec, keys: Sequence[str]) -> PartitionSpec:
    if len(spec.values) != len(keys):
        raise CatalogError(
            f"partition {list(spec.values)} does not match the partition keys {list(keys)}",
            INTERNAL,
        )
    for key, value in zip(keys, spec.values):
        check_partition_value(value, key)
    check_location(spec.location)
    if spec.columns is not None:
        check_columns(spec.columns)
    return spec


def quote_identifier(name: str, what: str = "identifier") -> str:
    """Backtick-quoted, after validation (Hive, Spark SQL and Athena DDL)."""
    return f"`{check_identifier(name, what)}`"


def quote_location(location: str) -> str:
    """Single-quoted, after validation: nothing inside needs escaping."""
    return f"'{check_location(location)}'"


def quote_text(text: str) -> str:
    """A single-quoted SQL string for free text (comments): characters that would need
    escaping are replaced, so the literal is the same in every dialect."""
    clean = re.sub(r"['\\;`\x00-\x1f\x7f]", " ", text)
    return f"'{clean}'"


def normalize_location(location: str) -> str:
    """``file:/x``, ``file:///x`` -> ``/x``; no trailing ``/`` (Spark reports local paths so)."""
    if location.startswith("file:"):
        rest = location[len("file:") :]
        location = "/" + rest.lstrip("/")
    return location.rstrip("/") or "/"


# ------------------------------------------------------------------------------ interface


class Catalog(ABC):
    """One catalog backend. Implementations validate every name they are given."""

    backend: str = ""

    @abstractmethod
    def ensure_database(self, name: str, description: str = "") -> None:
        """Create the database if it does not exist."""

    @abstractmethod
    def get_table(self, database: str, table: str) -> TableInfo | None:
        """The table, or ``None`` if it (or its database) does not exist."""

    def get_tables(self, database: str, names: Iterable[str] | None = None) -> dict[str, TableInfo]:
        """Several tables at once (backends may do it in fewer calls); missing ones are left out."""
        wanted = self.list_tables(database) if names is None else list(names)
        out = {}
        for name in wanted:
            info = self.get_table(database, name)
            if info is not None:
                out[name] = info
        return out

    @abstractmethod
    def create_or_update_table(
        self,
        database: str,
        table: str,
        columns: Sequence[Column],
        partition_keys: Sequence[str],
        location: str,
        description: str = "",
    ) -> TableInfo:
        """Create the external Parquet table, or evolve it: see ``evolution.py``. Returns the
        table as registered afterwards."""

    @abstractmethod
    def add_partitions(
        self,
        database: str,
        table: str,
        partitions: Sequence[PartitionSpec],
        relocate: bool = True,
    ) -> int:
        """Register partitions (idempotent); returns how many did not exist before. An existing
        partition whose location differs is moved to the given one; ``relocate=False`` leaves
        existing partitions where they are, for a caller that knows they cannot have moved (a
        backend that must ask for each partition's location, Hive, then asks nothing)."""

    @abstractmethod
    def list_partitions(
        self, database: str, table: str, only: Collection[tuple[str, ...]] | None = None
    ) -> list[PartitionSpec]:
        """Every partition (``only``: those of these values) with its location and (where the
        backend keeps it) its columns."""

    @abstractmethod
    def list_tables(self, database: str) -> list[str]:
        """Table names of a database (sorted); empty if the database does not exist."""

    def partition_count(self, database: str, table: str) -> int:
        return len(self.list_partitions(database, table))

    def warm_up(self, database: str) -> None:  # noqa: B027 - an optional hook, not abstract
        """Open the connection ahead of the first real call (in a thread, while the sync
        parses); nothing by default."""


class NoCatalog(Catalog):
    """``backend = "none"``: registers nothing. For users who only want the Parquet files
    (DuckDB, Spark or anything else reads them by path)."""

    backend = "none"

    def ensure_database(self, name: str, description: str = "") -> None:
        check_identifier(name, "database")

    def get_table(self, database: str, table: str) -> TableInfo | None:
        return None

    def create_or_update_table(
        self, database, table, columns, partition_keys, location, description=""
    ):
        cols, keys = check_table(database, table, columns, partition_keys, location)
        return TableInfo(database, table, cols, keys, location, {}, description)

    def add_partitions(self, database, table, partitions, relocate=True) -> int:
        return 0

    def list_partitions(self, database, table, only=None) -> list[PartitionSpec]:
        return []

    def list_tables(self, database: str) -> list[str]:
        return []

    def partition_count(self, database: str, table: str) -> int:
        return 0
