"""AWS Glue Data Catalog backend (what Athena, Redshift Spectrum and EMR read), via boto3.

Tables are external Parquet tables, like Segment's: ``TableType=EXTERNAL_TABLE``,
``classification=parquet``, ``EXTERNAL=TRUE``, ``ParquetHiveSerDe`` with the
``MapredParquet{Input,Output}Format``, string-typed partition keys from the date layout, and
the table root as ``Location`` (``s3://`` kept as written).

How partitions carry their own column types, so Athena never meets
``HIVE_PARTITION_SCHEMA_MISMATCH``: ``glue_partitions.py``. Retries, pagination and errors of
the calls: ``glue_api.py``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from datalake_assets.catalog.catalog_interface import (
    INTERNAL,
    INVALID_SETTINGS,
    Catalog,
    CatalogError,
    Column,
    TableInfo,
    check_identifier,
    check_table,
)
from datalake_assets.catalog.evolution import evolve_table
from datalake_assets.catalog.glue_partitions import GluePartitions

TABLE_PARAMETERS = {
    "classification": "parquet",
    "EXTERNAL": "TRUE",
    "parquet.compression": "SNAPPY",
    "datalake.managed_by": "datalake-assets",
}
MAX_BATCH_CREATE = 100  # BatchCreatePartition


class GlueCatalog(GluePartitions, Catalog):
    backend = "glue"

    def __init__(
        self,
        *,
        region: str | None = None,
        endpoint_url: str | None = None,
        catalog_id: str | None = None,
        client: Any = None,
        batch_size: int = MAX_BATCH_CREATE,
        max_attempts: int = 5,
        base_delay: float = 0.25,
        max_delay: float = 8.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not 1 <= batch_size <= MAX_BATCH_CREATE:
            raise CatalogError(
                f"batch_size must be 1..{MAX_BATCH_CREATE}, got {batch_size}", INVALID_SETTINGS
            )
        if client is None:
            import boto3
            from botocore.config import Config
            from botocore.exceptions import NoRegionError

            config = Config(
                retries={"total_max_attempts": 1, "mode": "standard"},
                user_agent_extra="datalake-assets",
            )
            try:
                client = boto3.client(
                    "glue", region_name=region, endpoint_url=endpoint_url, config=config
                )
            except NoRegionError:
                raise CatalogError(
                    "no AWS region for Glue: set [catalog] glue_region or AWS_REGION",
                    INVALID_SETTINGS,
                ) from None
        self.client = client
        self.catalog_id = catalog_id
        self.batch_size = batch_size
        self.max_attempts = max(1, max_attempts)
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.sleep = sleep

    # ------------------------------------------------------------------------- databases

    def ensure_database(self, name: str, description: str = "") -> None:
        check_identifier(name, "database")
        from botocore.exceptions import ClientError

        resource = f"database {name!r}"
        try:
            self._call("get_database", resource, Name=name)
            return
        except ClientError as e:
            if self._code(e) != "EntityNotFoundException":
                raise
        db_input: dict[str, Any] = {"Name": name}
        if description:
            db_input["Description"] = description[:2048]
        try:
            self._call("create_database", resource, DatabaseInput=db_input)
        except ClientError as e:
            if self._code(e) != "AlreadyExistsException":  # created concurrently: fine
                raise

    # ---------------------------------------------------------------------------- tables

    def get_table(self, database: str, table: str) -> TableInfo | None:
        check_identifier(database, "database")
        check_identifier(table, "table")
        raw = self._get_raw_table(database, table)
        return None if raw is None else self._info(database, raw)

    def get_tables(self, database: str, names: Iterable[str] | None = None) -> dict[str, TableInfo]:
        """One paginated ``GetTables`` instead of a ``GetTable`` per table."""
        check_identifier(database, "database")
        from botocore.exceptions import ClientError

        wanted = None if names is None else set(names)
        try:
            raws = list(
                self._pages(
                    "get_tables",
                    f"tables of database {database!r}",
                    "TableList",
                    DatabaseName=database,
                )
            )
        except ClientError as e:
            if self._code(e) == "EntityNotFoundException":
                return {}
            raise
        return {
            r["Name"]: self._info(database, r)
            for r in raws
            if wanted is None or r["Name"] in wanted
        }

    def list_tables(self, database: str) -> list[str]:
        return sorted(self.get_tables(database))

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
        from botocore.exceptions import ClientError

        resource = f"table '{database}.{table}'"
        raw = self._get_raw_table(database, table)
        if raw is None:
            table_input = {
                "Name": table,
                "Description": description[:2048],
                "TableType": "EXTERNAL_TABLE",
                "Parameters": dict(TABLE_PARAMETERS),
                "PartitionKeys": [{"Name": k, "Type": "string"} for k in keys],
                "StorageDescriptor": self._storage_descriptor(cols, location),
            }
            try:
                self._call("create_table", resource, DatabaseName=database, TableInput=table_input)
                return TableInfo(
                    database,
                    table,
                    cols,
                    keys,
                    location,
                    dict(TABLE_PARAMETERS),
                    description[:2048],
                )
            except ClientError as e:
                if self._code(e) != "AlreadyExistsException":
                    raise
                raw = self._get_raw_table(database, table)  # created concurrently: evolve it
                if raw is None:
                    raise CatalogError(f"{resource} exists and does not", INTERNAL) from None
        info = self._info(database, raw)
        merged = evolve_table(database, table, info, cols, keys)
        params = {**info.parameters, **TABLE_PARAMETERS}
        new_description = description[:2048] if description else info.description
        if (
            not merged.changed
            and info.location == location
            and params == info.parameters
            and new_description == info.description
        ):
            return info
        table_input = {
            "Name": table,
            "Description": new_description,
            "TableType": raw.get("TableType", "EXTERNAL_TABLE"),
            "Parameters": params,
            "PartitionKeys": raw.get("PartitionKeys", []),
            "StorageDescriptor": self._storage_descriptor(
                merged.columns, location, raw.get("StorageDescriptor")
            ),
        }
        for optional in ("Owner", "Retention"):
            if optional in raw:
                table_input[optional] = raw[optional]
        self._call("update_table", resource, DatabaseName=database, TableInput=table_input)
        return TableInfo(database, table, merged.columns, keys, location, params, new_description)
