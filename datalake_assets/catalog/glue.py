"""AWS Glue Data Catalog backend (what Athena, Redshift Spectrum and EMR read), via boto3.

Tables are external Parquet tables, like Segment's: ``TableType=EXTERNAL_TABLE``,
``classification=parquet``, ``EXTERNAL=TRUE``, ``ParquetHiveSerDe`` with the
``MapredParquet{Input,Output}Format``, string-typed partition keys from the date layout, and
the table root as ``Location`` (``s3://`` kept as written).

Partition schemas (how ``HIVE_PARTITION_SCHEMA_MISMATCH`` is avoided)
--------------------------------------------------------------------
Every Glue partition has its own storage descriptor with a column list. **A partition's
columns carry the types its files were written with**: the table's columns at the time, in
the table's order, typed as the sync that wrote the hour wrote them (``PartitionSpec.columns``,
normalized by ``base.partition_columns``). Existing partitions are *not* rewritten when the
table later gains a column or widens a type. Why this is the right choice for Athena with
Parquet:

* Athena reads each partition with the partition's column types and casts them to the
  table's ("For partitioned tables in Parquet and ORC, a partition's column type can be
  different from another partition's column type, and Athena will CAST to the desired type,
  if possible", Athena user guide, *Change a column data type*). Athena engine v3 is Trino,
  whose Hive connector allows exactly our lattice between partition and table types:
  ``bigint -> double`` and ``bigint/double/boolean/timestamp -> varchar``. A partition that
  lacks a column that the table has reads it as NULL (Parquet columns are matched by name;
  and our columns are only appended, so even positional matching lines up).
* Copying the widened table schema into old partitions (what a crawler's "update all
  partitions" does) would make Athena read an INT64 Parquet column as ``double`` with no
  cast in between, which fails with ``HIVE_BAD_DATA ... type INT64 in parquet is incompatible
  with type double``. So partitions keep their own schema.
* ``HIVE_PARTITION_SCHEMA_MISMATCH`` is raised only when a partition type cannot be cast to
  the table type; our types only widen along the lattice, so that never happens.
* A replayed hour is rewritten with the current types, so ``add_partitions`` updates an
  existing partition whose columns (or location) differ (``BatchUpdatePartition``).

Limitation: in the coarse layouts (``day``, ``year_month_day``) one partition holds hours
written at different times; after a widening its files disagree and the partition can only
describe the latest. Use ``day_hour`` (the default) for sources whose types still move.

Calls
-----
* Every list call is paginated (``NextToken``): ``GetDatabases``, ``GetTables``,
  ``GetPartitions``.
* Throttling (``ThrottlingException``, ``TooManyRequestsException``, any "Rate exceeded") and
  transient failures are retried with exponential backoff (``max_attempts`` in total; the
  ``sleep`` function is injectable for tests); botocore's own retries are turned off so the
  two do not multiply.
* ``BatchCreatePartition`` takes at most 100 partitions a call; per-entry errors are checked:
  ``AlreadyExistsException`` is the idempotent case, any other raises.
* ``AccessDeniedException`` becomes ``CatalogError(code="insufficient_permissions")`` naming
  the action and resource: ``glue:CreateDatabase on database 'web'``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from datalake_assets.catalog.base import (
    INSUFFICIENT_PERMISSIONS,
    INTERNAL,
    INVALID_SETTINGS,
    Catalog,
    CatalogError,
    Column,
    PartitionSpec,
    TableInfo,
    check_columns,
    check_identifier,
    check_location,
    check_partition,
    check_partition_keys,
    merge_columns,
    partition_columns,
)

INPUT_FORMAT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat"
OUTPUT_FORMAT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"
SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"
TABLE_PARAMETERS = {
    "classification": "parquet",
    "EXTERNAL": "TRUE",
    "parquet.compression": "SNAPPY",
    "datalake.managed_by": "datalake-assets",
}
MAX_BATCH_CREATE = 100  # BatchCreatePartition
MAX_BATCH_UPDATE = 100  # BatchUpdatePartition
MAX_BATCH_GET = 1000  # BatchGetPartition

_THROTTLING = {
    "ThrottlingException", "Throttling", "TooManyRequestsException", "RequestLimitExceeded",
    "SlowDown", "ProvisionedThroughputExceededException",
}
_TRANSIENT = {"InternalServiceException", "ServiceUnavailableException", "InternalFailure"}
_DENIED = {
    "AccessDeniedException", "AccessDenied", "UnauthorizedOperation",
    "UnrecognizedClientException", "InvalidClientTokenId", "ExpiredTokenException",
    "InvalidSignatureException", "SignatureDoesNotMatch",
}


def _is_retryable(code: str, message: str) -> bool:
    return code in _THROTTLING or code in _TRANSIENT or "rate exceeded" in message.lower()


class GlueCatalog(Catalog):
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
            raise CatalogError(f"batch_size must be 1..{MAX_BATCH_CREATE}, got {batch_size}",
                               INVALID_SETTINGS)
        if client is None:
            import boto3
            from botocore.config import Config
            from botocore.exceptions import NoRegionError

            config = Config(retries={"total_max_attempts": 1, "mode": "standard"},
                            user_agent_extra="datalake-assets")
            try:
                client = boto3.client("glue", region_name=region, endpoint_url=endpoint_url,
                                      config=config)
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

    # ---------------------------------------------------------------------------- calls

    def _call(self, method: str, resource: str, **kwargs: Any) -> dict:
        """One API call with retries; AWS errors become ``CatalogError``.

        ``EntityNotFoundException`` and ``AlreadyExistsException`` are re-raised as botocore
        ``ClientError`` for the caller to handle (they are answers, not failures).
        """
        from botocore.exceptions import (
            BotoCoreError,
            ClientError,
            NoCredentialsError,
            ReadTimeoutError,
        )
        from botocore.exceptions import (
            ConnectionError as BotoConnectionError,
        )

        if self.catalog_id:
            kwargs.setdefault("CatalogId", self.catalog_id)
        action = "glue:" + self.client.meta.method_to_api_mapping.get(method, method)
        for attempt in range(1, self.max_attempts + 1):
            try:
                return getattr(self.client, method)(**kwargs)
            except ClientError as e:
                err = e.response.get("Error", {})
                code, message = err.get("Code", ""), err.get("Message", "") or str(e)
                if code in ("EntityNotFoundException", "AlreadyExistsException"):
                    raise
                if _is_retryable(code, message) and attempt < self.max_attempts:
                    self._backoff(attempt)
                    continue
                if code in _DENIED:
                    raise CatalogError(
                        f"{action} on {resource}: {code}: {message}", INSUFFICIENT_PERMISSIONS
                    ) from None
                if code in ("InvalidInputException", "ValidationException"):
                    raise CatalogError(f"{action} on {resource}: {code}: {message}",
                                       INVALID_SETTINGS) from None
                raise CatalogError(f"{action} on {resource}: {code or 'error'}: {message}",
                                   INTERNAL) from None
            except NoCredentialsError:
                raise CatalogError(f"{action} on {resource}: no AWS credentials found",
                                   INSUFFICIENT_PERMISSIONS) from None
            except (BotoConnectionError, ReadTimeoutError) as e:
                if attempt < self.max_attempts:
                    self._backoff(attempt)
                    continue
                raise CatalogError(f"{action} on {resource}: {e}", INTERNAL) from None
            except BotoCoreError as e:
                raise CatalogError(f"{action} on {resource}: {e}", INTERNAL) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _backoff(self, attempt: int) -> None:
        self.sleep(min(self.max_delay, self.base_delay * 2 ** (attempt - 1)))

    def _pages(self, method: str, resource: str, result_key: str, **kwargs: Any) -> Iterator[dict]:
        token = None
        while True:
            page = self._call(method, resource, **kwargs, **({"NextToken": token} if token else {}))
            yield from page.get(result_key, [])
            token = page.get("NextToken")
            if not token:
                return

    @staticmethod
    def _code(e: Exception) -> str:
        return getattr(e, "response", {}).get("Error", {}).get("Code", "")

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

    def list_databases(self) -> list[str]:
        pages = self._pages("get_databases", "the catalog", "DatabaseList")
        return sorted(d["Name"] for d in pages)

    # ---------------------------------------------------------------------------- tables

    def _get_raw_table(self, database: str, table: str) -> dict | None:
        from botocore.exceptions import ClientError

        try:
            return self._call("get_table", f"table '{database}.{table}'",
                              DatabaseName=database, Name=table)["Table"]
        except ClientError as e:
            if self._code(e) == "EntityNotFoundException":  # the table or its database
                return None
            raise

    @staticmethod
    def _info(database: str, raw: dict) -> TableInfo:
        sd = raw.get("StorageDescriptor", {})
        return TableInfo(
            database=database,
            name=raw["Name"],
            columns=[(c["Name"], c["Type"]) for c in sd.get("Columns", [])],
            partition_keys=[k["Name"] for k in raw.get("PartitionKeys", [])],
            location=sd.get("Location", ""),
            parameters=dict(raw.get("Parameters", {})),
            description=raw.get("Description", ""),
        )

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
            raws = list(self._pages("get_tables", f"tables of database {database!r}",
                                    "TableList", DatabaseName=database))
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

    @staticmethod
    def _storage_descriptor(columns: Sequence[Column], location: str,
                            base: dict | None = None) -> dict:
        sd = dict(base or {})
        sd.update({
            "Columns": [{"Name": n, "Type": t} for n, t in columns],
            "Location": location,
            "InputFormat": sd.get("InputFormat") or INPUT_FORMAT,
            "OutputFormat": sd.get("OutputFormat") or OUTPUT_FORMAT,
            "SerdeInfo": sd.get("SerdeInfo") or {
                "SerializationLibrary": SERDE, "Parameters": {"serialization.format": "1"},
            },
            "Compressed": sd.get("Compressed", False),
            "StoredAsSubDirectories": sd.get("StoredAsSubDirectories", False),
        })
        return sd

    def create_or_update_table(
        self,
        database: str,
        table: str,
        columns: Sequence[Column],
        partition_keys: Sequence[str],
        location: str,
        description: str = "",
    ) -> TableInfo:
        check_identifier(database, "database")
        check_identifier(table, "table")
        cols = check_columns(columns)
        keys = check_partition_keys(partition_keys, cols)
        check_location(location)
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
                return TableInfo(database, table, cols, keys, location,
                                 dict(TABLE_PARAMETERS), description[:2048])
            except ClientError as e:
                if self._code(e) != "AlreadyExistsException":
                    raise
                raw = self._get_raw_table(database, table)  # created concurrently: evolve it
                if raw is None:
                    raise CatalogError(f"{resource} exists and does not", INTERNAL) from None
        info = self._info(database, raw)
        if info.partition_keys != keys:
            raise CatalogError(
                f"{resource} is partitioned by ({', '.join(info.partition_keys)}) but the "
                f"source's date layout gives ({', '.join(keys)}): a source's date_layout cannot "
                "change under an existing table; use a new database or table_prefix",
                INVALID_SETTINGS,
            )
        merged = merge_columns(info.columns, cols, f"{database}.{table}")
        params = {**info.parameters, **TABLE_PARAMETERS}
        new_description = description[:2048] if description else info.description
        if (not merged.changed and info.location == location and params == info.parameters
                and new_description == info.description):
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

    # ------------------------------------------------------------------------ partitions

    def list_partitions(self, database: str, table: str) -> list[PartitionSpec]:
        check_identifier(database, "database")
        check_identifier(table, "table")
        from botocore.exceptions import ClientError

        try:
            raws = self._pages("get_partitions", f"partitions of table '{database}.{table}'",
                               "Partitions", DatabaseName=database, TableName=table)
            return sorted(
                (PartitionSpec(
                    tuple(p["Values"]), p.get("StorageDescriptor", {}).get("Location", ""),
                    tuple((c["Name"], c["Type"])
                          for c in p.get("StorageDescriptor", {}).get("Columns", [])),
                ) for p in raws),
                key=lambda p: p.values,
            )
        except ClientError as e:
            if self._code(e) == "EntityNotFoundException":
                return []
            raise

    def partition_count(self, database: str, table: str) -> int:
        check_identifier(database, "database")
        check_identifier(table, "table")
        from botocore.exceptions import ClientError

        try:
            return sum(1 for _ in self._pages(
                "get_partitions", f"partitions of table '{database}.{table}'", "Partitions",
                DatabaseName=database, TableName=table, ExcludeColumnSchema=True,
                MaxResults=1000,
            ))
        except ClientError as e:
            if self._code(e) == "EntityNotFoundException":
                return 0
            raise

    def add_partitions(self, database: str, table: str, partitions: Sequence[PartitionSpec]) -> int:
        """Create the partitions that do not exist; update the existing ones whose location or
        columns differ (a replayed hour). Returns how many were created."""
        check_identifier(database, "database")
        check_identifier(table, "table")
        if not partitions:
            return 0
        raw = self._get_raw_table(database, table)
        if raw is None:
            raise CatalogError(f"table '{database}.{table}' does not exist: register it with "
                               "create_or_update_table first", INTERNAL)
        info = self._info(database, raw)
        wanted: dict[tuple[str, ...], PartitionSpec] = {}
        for spec in partitions:
            check_partition(spec, info.partition_keys)
            partition_columns(info.columns, spec.columns, f"{database}.{table}")
            wanted[spec.values] = spec  # the last spec of a partition wins
        base_sd = raw.get("StorageDescriptor", {})

        qualified = f"{database}.{table}"

        def part_input(spec: PartitionSpec) -> dict:
            cols = partition_columns(info.columns, spec.columns, qualified)
            return {"Values": list(spec.values),
                    "StorageDescriptor": self._storage_descriptor(cols, spec.location, base_sd)}

        resource = f"partitions of table '{database}.{table}'"
        specs = list(wanted.values())
        existing: list[PartitionSpec] = []
        created = 0
        for start in range(0, len(specs), self.batch_size):
            batch = {s.values: s for s in specs[start:start + self.batch_size]}
            for attempt in range(1, self.max_attempts + 1):
                resp = self._call("batch_create_partition", resource, DatabaseName=database,
                                  TableName=table,
                                  PartitionInputList=[part_input(s) for s in batch.values()])
                retry: dict[tuple[str, ...], PartitionSpec] = {}
                failures = []
                already = 0
                for err in resp.get("Errors", []):
                    values = tuple(err.get("PartitionValues", []))
                    detail = err.get("ErrorDetail", {})
                    code = detail.get("ErrorCode", "")
                    message = detail.get("ErrorMessage", "")
                    if code == "AlreadyExistsException":
                        existing.append(batch[values])
                        already += 1
                    elif _is_retryable(code, message) and attempt < self.max_attempts:
                        retry[values] = batch[values]
                    else:
                        failures.append((values, code, message))
                if failures:
                    values, code, message = failures[0]
                    kind = INSUFFICIENT_PERMISSIONS if code in _DENIED else INTERNAL
                    raise CatalogError(
                        f"glue:BatchCreatePartition on {resource}: {len(failures)} partition(s) "
                        f"failed, first {list(values)}: {code}: {message}", kind)
                created += len(batch) - len(retry) - already
                if not retry:
                    break
                self._backoff(attempt)
                batch = retry
        if existing:
            self._update_changed(database, table, existing, part_input, info)
        return created

    def _update_changed(self, database: str, table: str, specs: list[PartitionSpec],
                        part_input: Callable[[PartitionSpec], dict], info: TableInfo) -> None:
        resource = f"partitions of table '{database}.{table}'"
        current: dict[tuple[str, ...], dict] = {}
        for start in range(0, len(specs), MAX_BATCH_GET):
            chunk = specs[start:start + MAX_BATCH_GET]
            resp = self._call("batch_get_partition", resource, DatabaseName=database,
                              TableName=table,
                              PartitionsToGet=[{"Values": list(s.values)} for s in chunk])
            for p in resp.get("Partitions", []):
                current[tuple(p["Values"])] = p.get("StorageDescriptor", {})
        changed = []
        for spec in specs:
            sd = current.get(spec.values, {})
            cols = partition_columns(info.columns, spec.columns, f"{database}.{table}")
            have = [(c["Name"], c["Type"]) for c in sd.get("Columns", [])]
            if sd.get("Location") != spec.location or have != cols:
                changed.append(spec)
        for start in range(0, len(changed), MAX_BATCH_UPDATE):
            chunk = changed[start:start + MAX_BATCH_UPDATE]
            resp = self._call(
                "batch_update_partition", resource, DatabaseName=database, TableName=table,
                Entries=[{"PartitionValueList": list(s.values), "PartitionInput": part_input(s)}
                         for s in chunk],
            )
            errors = resp.get("Errors", [])
            if errors:
                detail = errors[0].get("ErrorDetail", {})
                code = detail.get("ErrorCode", "")
                raise CatalogError(
                    f"glue:BatchUpdatePartition on {resource}: {len(errors)} partition(s) failed, "
                    f"first {errors[0].get('PartitionValueList')}: {code}: "
                    f"{detail.get('ErrorMessage', '')}",
                    INSUFFICIENT_PERMISSIONS if code in _DENIED else INTERNAL,
                )
