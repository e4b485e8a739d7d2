"""Names of tables and columns: snake_case, safe for Glue, Athena, Hive and paths.

Rules (tested in ``test_naming.py``; the README repeats them):

1. Unicode is folded to ASCII (NFKD, accents dropped: ``Café`` -> ``cafe``); characters with
   no ASCII form are dropped.
2. camelCase and PascalCase are split: ``firstName`` -> ``first_name``, ``FirstName`` ->
   ``first_name``, ``HTMLParser`` -> ``html_parser``, ``userID`` -> ``user_id``.
3. Lower case; every run of characters outside ``[a-z0-9]`` (spaces, dots, dashes, slashes,
   quotes, ``%``...) becomes one ``_``; leading and trailing ``_`` are removed. So
   ``'; DROP TABLE x; --`` -> ``drop_table_x`` and ``../../etc/passwd`` -> ``etc_passwd``:
   nothing can escape a path or inject SQL, because only ``[a-z0-9_]`` survives.
4. A nested value's column is its path's parts, each named by rules 1-3, joined with ``_``
   (``context.library.name`` -> ``context_library_name``).
5. A key whose name is empty after rules 1-3 (``""``, ``"%"``, ``"🎉"``) cannot be a column:
   its value goes to quarantine with reason ``unusable_key`` (never silently merged).
6. Names longer than the limit (columns 250, tables 242 with any prefix: the folder
   ``segment_type=<table>`` must fit a file name's 255 bytes) are cut and given a
   hash suffix of the full name, so two long names stay distinct:
   ``<first 241 chars>_<8 hex of sha1>``.
7. A top-level column that would equal a partition key (``day``, ``hr``, ``year``, ``month``,
   ``segment_type``, ``source_id``) is renamed ``<name>_field``.
8. Collisions: two keys of one event that map to the same column (``firstName`` and
   ``first_name``) keep one value; the winner is the key already written in canonical
   snake_case, else the first in sorted order of the raw key path. The losers' values go to
   quarantine with reason ``column_name_collision`` (see ``flatten.py``).

Tables: ``identify`` -> ``identifies``, ``page`` -> ``pages``, ``screen`` -> ``screens``,
``group`` -> ``groups``, ``alias`` -> ``aliases``; every ``track`` goes to ``tracks`` (its
columns without ``properties_*``) *and* to a table named after its event by the rules above.
An event whose name is a reserved table name (``tracks``, ``pages``, ... ``quarantine``, ``violations``) gets
the prefix ``track_``; an event whose name is empty after the rules is quarantined
(``unusable_event_name``). Table names may start with a digit (Glue and Athena allow it).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from functools import lru_cache

MAX_COLUMN_NAME = 250
# 255 bytes is a file name's limit, and a table's folder is ``segment_type=<name>``.
MAX_TABLE_NAME = 255 - len("segment_type=")  # 242

TYPE_TABLES: dict[str, str] = {
    "identify": "identifies",
    "page": "pages",
    "screen": "screens",
    "group": "groups",
    "alias": "aliases",
    "track": "tracks",
}
MESSAGE_TYPES = frozenset(TYPE_TABLES)
TRACKS_TABLE = "tracks"
# The tables every source has, whatever its traffic: one per message type (``tracks`` too).
# Any other table is a track event's own table, whose rows are also in ``tracks``.
STANDARD_TABLES = frozenset(TYPE_TABLES.values())
# Names that stand beside a source's tables where a table's name goes (a table format's
# locations, a request's rows removed, the asset keys ``[<slug>, <name>]``): no event table
# may take them.
QUARANTINE = "quarantine"  # the lines and values the sync could not store
SYNC_REPORTS = "sync_reports"  # the syncs' reports
RAW_ARCHIVE = "raw_archive"  # the archive's received hours (an asset, not a table)
CATALOG = "catalog"  # the tables' registration in the catalog (an asset, not a table)
OPEN_HOUR = "open_hour"  # the open hour's batches (an asset, not a table)
# A source's tables whose rows are not messages: a tracking plan's violations (one row per
# violation, ``plans/plan_gate.py``). They are synced, committed, registered and erased like
# the message tables, but hold no message of their own: never in ``tracks``, the
# reconciliation's rows, the id index or the duplicates.
VIOLATIONS = "violations"
SIDE_TABLES = frozenset({VIOLATIONS})
RESERVED_TABLES = frozenset(
    STANDARD_TABLES | SIDE_TABLES | {QUARANTINE, SYNC_REPORTS, RAW_ARCHIVE, CATALOG, OPEN_HOUR}
)
PARTITION_KEYS = frozenset({"segment_type", "year", "month", "day", "hr", "source_id"})

_CAMEL_ACRONYM = re.compile(r"([A-Z]+)([A-Z][a-z])")
_CAMEL_LOWER_UPPER = re.compile(r"([a-z0-9])([A-Z])")
_NOT_NAME = re.compile(r"[^a-z0-9]+")
_VALID_NAME = re.compile(r"^[a-z0-9_]+$")


@lru_cache(maxsize=1 << 16)
def snake(name: str) -> str:
    """One key or event name to ``[a-z0-9_]`` (rules 1-3). May return ``""``."""
    if not name.isascii():
        name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    name = _CAMEL_ACRONYM.sub(r"\1_\2", name)
    name = _CAMEL_LOWER_UPPER.sub(r"\1_\2", name)
    return _NOT_NAME.sub("_", name.lower()).strip("_")


def limit(name: str, max_len: int) -> str:
    """Rule 6: cut to ``max_len`` keeping names distinct with a hash of the full name."""
    if len(name) <= max_len:
        return name
    digest = hashlib.sha1(name.encode("utf-8")).hexdigest()[:8]
    return f"{name[: max_len - 9].rstrip('_')}_{digest}"


def holds_messages(table: str) -> bool:
    """Whether a table's rows are messages (a side table's are not: ``SIDE_TABLES``)."""
    return table not in SIDE_TABLES


def is_event_table(table: str) -> bool:
    """Whether a table is a track event's own table (its rows are in ``tracks`` too)."""
    return table not in STANDARD_TABLES and table not in SIDE_TABLES


def column_name(path: tuple[str, ...]) -> str | None:
    """Rules 4-7 for a key path; ``None`` when a part has no usable characters."""
    parts = [snake(p) for p in path]
    if not all(parts):
        return None
    name = "_".join(parts)
    if len(path) == 1 and name in PARTITION_KEYS:
        name = f"{name}_field"
    return limit(name, MAX_COLUMN_NAME)


def is_canonical(path: tuple[str, ...]) -> bool:
    """Whether every part of the raw path is already written the way rule 1-3 writes it."""
    return all(p == snake(p) for p in path)


@lru_cache(maxsize=1 << 14)
def event_table_name(event: str) -> str | None:
    """The table of a ``track`` event; ``None`` if the name has no usable characters."""
    name = snake(event)
    if not name:
        return None
    if name in RESERVED_TABLES:
        name = f"track_{name}"
    return limit(name, MAX_TABLE_NAME)


def catalog_table_name(table: str, prefix: str = "") -> str:
    """The table's name in a catalog database, with the source's optional table prefix."""
    prefix = snake(prefix) if prefix else ""
    return limit(f"{prefix}_{table}" if prefix else table, MAX_TABLE_NAME)


def is_valid_name(name: str) -> bool:
    return bool(_VALID_NAME.match(name))
