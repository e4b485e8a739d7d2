"""Hive metastore backend through Spark SQL: the embedded catalog of a local lake.

The session must have been created with ``hive_spark_conf(...)`` (``config.py``): an embedded
Derby metastore in a folder of ours (one JVM at a time), or a remote thrift metastore.

Statements (every identifier validated against ``[a-z0-9_]`` and backtick-quoted, every
location validated and single-quoted; see ``catalog_interface.py``)::

    CREATE DATABASE IF NOT EXISTS `db`
    CREATE EXTERNAL TABLE IF NOT EXISTS `db`.`t` (`a` bigint, ...) COMMENT '...'
        PARTITIONED BY (`day` string, `hr` string) STORED AS PARQUET LOCATION '...'
    ALTER TABLE `db`.`t` ADD COLUMNS (`b` string)
    ALTER TABLE `db`.`t` ADD IF NOT EXISTS PARTITION (`day`='...', `hr`='...') LOCATION '...' ...

Widening a column's type (what Spark 4.3 allows, measured)
---------------------------------------------------------
* ``ALTER TABLE ... CHANGE COLUMN a a double`` and ``ALTER COLUMN ... TYPE`` are refused by
  Spark for Hive tables (``NOT_SUPPORTED_CHANGE_COLUMN``); ``REPLACE COLUMNS`` is refused too
  (``UNSUPPORTED_FEATURE.TABLE_OPERATION``).
* The metastore itself accepts a new data schema with widened types through Spark's session
  catalog (``alterTableDataSchema``, the call ``ADD COLUMNS`` uses): one atomic metastore
  update that keeps every partition and its location. The embedded metastore refuses
  ``boolean -> string`` unless ``hive.metastore.disallow.incompatible.col.type.changes`` is
  false, which ``hive_spark_conf`` sets. This is the first choice (``widen_in_place``).
* If that is refused (a remote metastore with the check on) or unreachable (no JVM gateway,
  e.g. Spark Connect), the definition is **replaced**: a new external table with the widened
  columns is created under a temporary name at the same location, the old table's partitions
  are added to it, the old table is dropped (external: its files stay) and the new one is
  renamed into place. A crash between the drop and the rename leaves the complete new table
  under the temporary name; the next ``get_table`` / ``create_or_update_table`` renames it.

What Spark can then read: Spark's Parquet reader uses the table's type for every file and
can widen INT32 to INT64/DOUBLE but **not INT64 to DOUBLE, nor anything to STRING**
(``FAILED_READ_FILE.PARQUET_COLUMN_DATA_TYPE_MISMATCH``), and it ignores partition-level
schemas. So after a widening, Spark SQL reads the widened column in hours written since then,
and fails on that column (only) in hours written before, until they are re-synced. Other
columns and ``count(*)`` are unaffected. Athena/Trino do not have this problem (see
``glue.py``). The Hive SerDe reader (``spark.sql.hive.convertMetastoreParquet=false``) would
cast per partition, but cannot read our INT64 (microsecond) timestamps.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from datalake_assets.catalog import ddl
from datalake_assets.catalog.catalog_interface import (
    CONCURRENT_CALLS,
    INSUFFICIENT_PERMISSIONS,
    INTERNAL,
    INVALID_SETTINGS,
    Catalog,
    CatalogError,
    Column,
    TableInfo,
    check_identifier,
    check_table,
    normalize_location,
    quote_identifier,
    quote_location,
)
from datalake_assets.catalog.ddl import qualified
from datalake_assets.catalog.evolution import evolve_table
from datalake_assets.catalog.hive_partitions import HivePartitions
from datalake_assets.catalog.metastore import explain

_SPARK_TYPES = {
    "bigint": "LongType",
    "double": "DoubleType",
    "boolean": "BooleanType",
    "timestamp": "TimestampType",
    "string": "StringType",
}


def swap_table_name(table: str) -> str:
    """Temporary name of a table whose definition is being replaced (still ``[a-z0-9_]``)."""
    return f"_dl_swap_{hashlib.sha1(table.encode()).hexdigest()[:16]}"


class HiveCatalog(HivePartitions, Catalog):
    backend = "hive"

    def __init__(self, spark: Any, *, batch_size: int = 100, widen_in_place: bool = True) -> None:
        if batch_size < 1:
            raise CatalogError(f"batch_size must be >= 1, got {batch_size}", INVALID_SETTINGS)
        self.spark = spark
        self.batch_size = batch_size
        # partition keys of the tables seen: they never change under a table (a layout change
        # is refused), so add_partitions / partition_count need no DESCRIBE of their own
        self._keys: dict[tuple[str, str], list[str]] = {}
        # Every partition of a table it created (none then) or listed, plus those it added
        # since: SHOW PARTITIONS costs 0.1-0.2 s a table even when empty and grows with it. A
        # catalog object lives for one sync, which holds the source's lock: nobody else
        # changes its tables.
        self._partitions: dict[tuple[str, str], set[tuple[str, ...]]] = {}
        # For the same reason, the tables it described or defined, those it found absent, and
        # whether each database exists: a sync asks for each table three or four times
        # (typing, registration, its update), and every answer is a metastore round trip
        # (10-100 ms in-process, ~50 ms more through the served metastore's server).
        self._tables: dict[tuple[str, str], TableInfo] = {}
        self._absent: set[tuple[str, str]] = set()
        self._databases: dict[str, bool] = {}
        self.widen_in_place = widen_in_place
        conf = spark.conf.get("spark.sql.catalogImplementation", "in-memory")
        if conf != "hive":
            raise CatalogError(
                "the Spark session has no Hive support (spark.sql.catalogImplementation="
                f"{conf!r}); create it with hive_spark_conf(...)",
                INVALID_SETTINGS,
            )

    # ------------------------------------------------------------------------------ sql

    def _sql(self, statement: str, resource: str = "") -> list:
        try:
            df = self.spark.sql(statement)  # a command (CREATE, ALTER, DROP) runs right here
            # only SHOW / DESCRIBE have rows to fetch: a second round trip over Spark Connect
            return df.collect() if statement.startswith(("SHOW", "DESCRIBE")) else []
        except Exception as e:  # AnalysisException, Py4JJavaError, ... -> CatalogError
            raise self._error(e, statement, resource) from None

    @staticmethod
    def _error(e: Exception, statement: str, resource: str) -> CatalogError:
        text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        verb = " ".join(statement.split()[:3])
        where = f" on {resource}" if resource else ""
        lower = str(e).lower()
        # a metastore database that is not ready says why only deep in the Java causes
        meaning = explain(e)
        if meaning:
            text = f"{meaning} ({text})"
            lower += meaning.lower()
        if "permission denied" in lower or "access denied" in lower or "refused the user" in lower:
            return CatalogError(f"hive:{verb}{where}: {text}", INSUFFICIENT_PERMISSIONS)
        return CatalogError(f"hive:{verb}{where}: {text}", INTERNAL)

    def _database_exists(self, database: str) -> bool:
        check_identifier(database, "database")
        if self._databases.get(database):
            return True
        try:
            exists = self._databases[database] = bool(self.spark.catalog.databaseExists(database))
        except Exception as e:
            raise self._error(e, "SHOW DATABASES", f"database {database!r}") from None
        return exists

    def _table_exists(self, database: str, table: str) -> bool:
        try:
            return bool(self.spark.catalog.tableExists(qualified(database, table)))
        except Exception as e:
            raise self._error(e, "SHOW TABLES", f"table '{database}.{table}'") from None

    # ------------------------------------------------------------------------- databases

    def ensure_database(self, name: str, description: str = "") -> None:
        if not self._databases.get(name):
            self._sql(ddl.create_database_ddl(name, description), f"database {name!r}")
            self._databases[name] = True

    # ---------------------------------------------------------------------------- tables

    def list_tables(self, database: str) -> list[str]:
        if not self._database_exists(database):
            return []
        rows = self._sql(f"SHOW TABLES IN {quote_identifier(database, 'database')}")
        return sorted(
            r["tableName"]
            for r in rows
            if not r["isTemporary"] and not r["tableName"].startswith("_dl_swap_")
        )

    def get_table(self, database: str, table: str) -> TableInfo | None:
        check_identifier(database, "database")
        check_identifier(table, "table")
        known = self._tables.get((database, table))
        if known is not None or (database, table) in self._absent:
            return known
        if not self._table_exists(database, table):  # also False when the database is missing
            if not (self._database_exists(database) and self._heal_swap(database, table)):
                self._absent.add((database, table))
                return None
        return self._describe(database, table)

    def get_tables(self, database: str, names=None) -> dict[str, TableInfo]:
        """One ``SHOW TABLES`` instead of an existence check per table (a metastore round trip
        each: the sync asks for every table of the batch before typing)."""
        check_identifier(database, "database")
        if not self._database_exists(database):
            self._absent.update((database, n) for n in names or ())
            return {}
        rows = self._sql(f"SHOW TABLES IN {quote_identifier(database, 'database')}")
        present = {r["tableName"] for r in rows if not r["isTemporary"]}
        wanted = (
            sorted(n for n in present if not n.startswith("_dl_swap_"))
            if names is None
            else list(names)
        )
        out, described = {}, []
        for name in wanted:
            check_identifier(name, "table")
            if (database, name) in self._tables:
                out[name] = self._tables[(database, name)]
            elif name in present or (
                swap_table_name(name) in present and self._heal_swap(database, name)
            ):
                described.append(name)
            else:
                self._absent.add((database, name))
        with ThreadPoolExecutor(CONCURRENT_CALLS, thread_name_prefix="catalog-describe") as pool:
            out.update(zip(described, pool.map(lambda n: self._describe(database, n), described)))
        return out

    def warm_up(self, database: str) -> None:
        """Open the metastore (Derby boots, the Hive client connects: seconds) while the
        sync's first stage runs; errors are left to the calls that need the answer."""
        try:
            self._database_exists(database)
        except Exception:  # noqa: BLE001 - reported by the next real call
            pass

    def _describe(self, database: str, table: str) -> TableInfo:
        """One ``DESCRIBE TABLE EXTENDED``: columns, partition keys, location, comment and
        properties (``spark.catalog.listColumns`` plus ``SHOW TBLPROPERTIES`` cost 5x more)."""
        rows = self._sql(
            f"DESCRIBE TABLE EXTENDED {qualified(database, table)}", f"table '{database}.{table}'"
        )
        info = self._tables[(database, table)] = ddl.table_info_of_description(
            database, table, [(r["col_name"], r["data_type"]) for r in rows]
        )
        self._keys[(database, table)] = list(info.partition_keys)
        return info

    def create_or_update_table(
        self,
        database: str,
        table: str,
        columns: Sequence[Column],
        partition_keys: Sequence[str],
        location: str,
        description: str = "",
    ) -> TableInfo:
        cols, keys = check_table(database, table, columns, partition_keys, location)
        resource = f"table '{database}.{table}'"
        info = self.get_table(database, table)
        if info is None:
            self._sql(
                ddl.create_table_ddl(database, table, cols, keys, location, description), resource
            )
            self._keys[(database, table)] = keys
            self._partitions[(database, table)] = set()
            self._absent.discard((database, table))
            info = self._tables[(database, table)] = TableInfo(
                database,
                table,
                cols,
                keys,
                normalize_location(location),
                dict(ddl.TABLE_PROPERTIES),
                description,
            )
            return info
        merged = evolve_table(database, table, info, cols, keys)
        name = qualified(database, table)
        if merged.widened:
            in_place = self.widen_in_place and self._alter_data_schema(
                database, table, merged.columns
            )
            if not in_place:
                self._replace_definition(
                    database,
                    table,
                    merged.columns,
                    keys,
                    info.location,
                    description or info.description,
                )
                self._partitions.pop((database, table), None)  # copied: listed again if asked
        elif merged.added:
            added = ", ".join(f"{quote_identifier(n, 'column')} {t}" for n, t in merged.added)
            self._sql(f"ALTER TABLE {name} ADD COLUMNS ({added})", resource)
        if normalize_location(location) != info.location:
            self._sql(f"ALTER TABLE {name} SET LOCATION {quote_location(location)}", resource)
        if merged.changed or normalize_location(location) != info.location:
            return self._describe(database, table)
        return info

    def _alter_data_schema(self, database: str, table: str, columns: list[Column]) -> bool:
        """Replace the data schema in one metastore update; ``False`` if that is refused."""
        try:
            import pyspark.sql.types as T
            from pyspark.sql.types import StructField, StructType

            schema = StructType([StructField(n, getattr(T, _SPARK_TYPES[t])()) for n, t in columns])
            jss = self.spark._jsparkSession
            jvm = self.spark._jvm
            ident = jvm.org.apache.spark.sql.catalyst.TableIdentifier.apply(
                table, jvm.scala.Option.apply(database)
            )
            jss.sessionState().catalog().alterTableDataSchema(
                ident, jss.parseDataType(schema.json())
            )
        except Exception:  # refused by the metastore, or no JVM gateway: replace instead
            return False
        self.spark.catalog.refreshTable(qualified(database, table))
        return True

    def _replace_definition(
        self,
        database: str,
        table: str,
        columns: list[Column],
        keys: list[str],
        location: str,
        description: str,
    ) -> None:
        """Create-new, copy partitions, drop-old, rename (see the module doc)."""
        resource = f"table '{database}.{table}'"
        tmp = swap_table_name(table)
        partitions = self.list_partitions(database, table)
        self._sql(f"DROP TABLE IF EXISTS {qualified(database, tmp)}", resource)
        self._sql(
            ddl.create_table_ddl(
                database, tmp, columns, keys, location, description, if_not_exists=False
            ),
            resource,
        )
        for statement in ddl.add_partitions_ddl(
            database, tmp, keys, partitions, batch_size=self.batch_size
        ):
            self._sql(statement, resource)
        self._sql(f"DROP TABLE {qualified(database, table)}", resource)
        self._sql(
            f"ALTER TABLE {qualified(database, tmp)} RENAME TO {qualified(database, table)}",
            resource,
        )
        self._keys.pop((database, tmp), None)

    def _heal_swap(self, database: str, table: str) -> bool:
        """A replacement interrupted after the drop: rename the complete new table into place."""
        tmp = swap_table_name(table)
        if not self._table_exists(database, tmp):
            return False
        self._sql(
            f"ALTER TABLE {qualified(database, tmp)} RENAME TO {qualified(database, table)}",
            f"table '{database}.{table}'",
        )
        return True
