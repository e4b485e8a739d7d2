"""The partitions of a Hive table, through Spark SQL: listing, counting, and adding them in
batches (``ADD IF NOT EXISTS``; an existing partition whose location differs is moved).

The metastore keeps no per-partition schema that Spark would use (``hive.py`` says what Spark
reads after a widening), so a partition is its values and its location only.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from urllib.parse import unquote

from datalake_assets.catalog import ddl
from datalake_assets.catalog.catalog_interface import (
    PartitionSpec,
    check_identifier,
    check_partition,
    normalize_location,
    quote_location,
    table_not_registered,
)
from datalake_assets.catalog.ddl import qualified


class HivePartitions:
    """The partition methods of ``HiveCatalog`` (``hive.py``), which has what they use: its
    statements (``_sql``), its tables (``get_table``), and what it remembers of each table
    (``_keys``, ``_partitions``: its ``__init__`` says why)."""

    batch_size: int
    _keys: dict[tuple[str, str], list[str]]
    _partitions: dict[tuple[str, str], set[tuple[str, ...]]]

    def _partition_values(self, database: str, table: str) -> list[tuple[str, ...]]:
        rows = self._sql(
            f"SHOW PARTITIONS {qualified(database, table)}", f"table '{database}.{table}'"
        )
        out = []
        for r in rows:
            out.append(tuple(unquote(part.split("=", 1)[1]) for part in r[0].split("/")))
        return out

    def _partition_location(
        self, database: str, table: str, keys: Sequence[str], values: Sequence[str]
    ) -> str:
        spec = ddl.partition_clause(keys, values)
        for r in self._sql(
            f"DESCRIBE TABLE EXTENDED {qualified(database, table)} {spec}",
            f"table '{database}.{table}'",
        ):
            if r["col_name"] == "Location":
                return normalize_location(r["data_type"])  # the first one is the partition's
        return ""

    def list_partitions(
        self, database: str, table: str, only: Collection[tuple[str, ...]] | None = None
    ) -> list[PartitionSpec]:
        keys = self._partition_keys(database, table)
        if keys is None:
            return []
        return sorted(  # one DESCRIBE a partition (its location): only those asked for
            (
                PartitionSpec(v, self._partition_location(database, table, keys, v))
                for v in self._partition_values(database, table)
                if only is None or v in only
            ),
            key=lambda p: p.values,
        )

    def _partition_keys(self, database: str, table: str) -> list[str] | None:
        check_identifier(database, "database")
        check_identifier(table, "table")
        keys = self._keys.get((database, table))
        if keys is None:
            info = self.get_table(database, table)
            keys = None if info is None else info.partition_keys
        return keys

    def partition_count(self, database: str, table: str) -> int:
        known = self._partitions.get((database, table))
        if known is not None:
            return len(known)
        if self._partition_keys(database, table) is None:
            return 0
        return len(self._partition_values(database, table))

    def add_partitions(
        self,
        database: str,
        table: str,
        partitions: Sequence[PartitionSpec],
        relocate: bool = True,
    ) -> int:
        """``ADD IF NOT EXISTS`` in batches; existing partitions whose location differs are
        moved (``SET LOCATION``; each one's location costs a ``DESCRIBE``, about a quarter of a
        second through a served metastore: ``relocate=False`` skips them). The metastore keeps no per-partition schema that Spark would
        use, so ``PartitionSpec.columns`` is not needed here. Returns how many were new."""
        if not partitions:
            return 0
        keys = self._partition_keys(database, table)
        if keys is None:
            raise table_not_registered(database, table)
        wanted: dict[tuple[str, ...], PartitionSpec] = {}
        for spec in partitions:
            check_partition(spec, keys)
            wanted[spec.values] = spec
        known = self._partitions.get((database, table))
        have = known if known is not None else set(self._partition_values(database, table))
        new = [s for v, s in wanted.items() if v not in have]
        resource = f"table '{database}.{table}'"
        for statement in ddl.add_partitions_ddl(
            database, table, keys, new, batch_size=self.batch_size
        ):
            self._sql(statement, resource)
        name = qualified(database, table)
        for values, spec in wanted.items():
            if values not in have or not relocate:
                continue
            current = self._partition_location(database, table, keys, values)
            if current != normalize_location(spec.location):
                self._sql(
                    f"ALTER TABLE {name} {ddl.partition_clause(keys, values)}"
                    f" SET LOCATION {quote_location(spec.location)}",
                    resource,
                )
        self._partitions[(database, table)] = have | set(wanted)
        return len(new)
