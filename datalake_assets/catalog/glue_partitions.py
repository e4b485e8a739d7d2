"""The partitions of a Glue table: listing, counting, and adding them in batches (an existing
partition whose columns or location differ is updated).

Partition schemas (how ``HIVE_PARTITION_SCHEMA_MISMATCH`` is avoided)
--------------------------------------------------------------------
Every Glue partition has its own storage descriptor with a column list. **A partition's
columns carry the types its files were written with**: the table's columns at the time, in
the table's order, typed as the sync that wrote the hour wrote them (``PartitionSpec.columns``,
normalized by ``evolution.partition_columns``). Existing partitions are *not* rewritten when the
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
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from datalake_assets.catalog.catalog_interface import (
    INSUFFICIENT_PERMISSIONS,
    INTERNAL,
    CatalogError,
    PartitionSpec,
    TableInfo,
    check_identifier,
    check_partition,
    table_not_registered,
)
from datalake_assets.catalog.evolution import partition_columns
from datalake_assets.catalog.glue_api import DENIED, GlueApi, is_retryable

MAX_BATCH_UPDATE = 100  # BatchUpdatePartition
MAX_BATCH_GET = 1000  # BatchGetPartition


class GluePartitions(GlueApi):
    """The partition methods of ``GlueCatalog`` (its ``batch_size`` is the create batch)."""

    def list_partitions(
        self, database: str, table: str, only: Collection[tuple[str, ...]] | None = None
    ) -> list[PartitionSpec]:
        check_identifier(database, "database")
        check_identifier(table, "table")
        from botocore.exceptions import ClientError

        try:
            if only is not None:  # BatchGetPartition: the asked ones only, 1,000 a call
                asked = sorted(only)
                raws = [
                    p
                    for i in range(0, len(asked), 1000)
                    for p in self._call(
                        "batch_get_partition",
                        f"partitions of table '{database}.{table}'",
                        DatabaseName=database,
                        TableName=table,
                        PartitionsToGet=[{"Values": list(v)} for v in asked[i : i + 1000]],
                    ).get("Partitions", [])
                ]
            else:
                raws = self._pages(
                    "get_partitions",
                    f"partitions of table '{database}.{table}'",
                    "Partitions",
                    DatabaseName=database,
                    TableName=table,
                )
            return sorted(
                (
                    PartitionSpec(
                        tuple(p["Values"]),
                        p.get("StorageDescriptor", {}).get("Location", ""),
                        tuple(
                            (c["Name"], c["Type"])
                            for c in p.get("StorageDescriptor", {}).get("Columns", [])
                        ),
                    )
                    for p in raws
                    if only is None or tuple(p["Values"]) in only
                ),
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
            return sum(
                1
                for _ in self._pages(
                    "get_partitions",
                    f"partitions of table '{database}.{table}'",
                    "Partitions",
                    DatabaseName=database,
                    TableName=table,
                    ExcludeColumnSchema=True,
                    MaxResults=1000,
                )
            )
        except ClientError as e:
            if self._code(e) == "EntityNotFoundException":
                return 0
            raise

    def add_partitions(
        self,
        database: str,
        table: str,
        partitions: Sequence[PartitionSpec],
        relocate: bool = True,
    ) -> int:
        """Create the partitions that do not exist; update the existing ones whose location or
        columns differ (a replayed hour). Returns how many were created. ``relocate`` is not
        needed here: the existing partitions' locations come in batches of a thousand
        (``BatchGetPartition``), not a request each."""
        check_identifier(database, "database")
        check_identifier(table, "table")
        if not partitions:
            return 0
        raw = self._get_raw_table(database, table)
        if raw is None:
            raise table_not_registered(database, table)
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
            return {
                "Values": list(spec.values),
                "StorageDescriptor": self._storage_descriptor(cols, spec.location, base_sd),
            }

        resource = f"partitions of table '{database}.{table}'"
        specs = list(wanted.values())
        existing: list[PartitionSpec] = []
        created = 0
        for start in range(0, len(specs), self.batch_size):
            batch = {s.values: s for s in specs[start : start + self.batch_size]}
            for attempt in range(1, self.max_attempts + 1):
                resp = self._call(
                    "batch_create_partition",
                    resource,
                    DatabaseName=database,
                    TableName=table,
                    PartitionInputList=[part_input(s) for s in batch.values()],
                )
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
                    elif is_retryable(code, message) and attempt < self.max_attempts:
                        retry[values] = batch[values]
                    else:
                        failures.append((values, code, message))
                if failures:
                    values, code, message = failures[0]
                    kind = INSUFFICIENT_PERMISSIONS if code in DENIED else INTERNAL
                    raise CatalogError(
                        f"glue:BatchCreatePartition on {resource}: {len(failures)} partition(s) "
                        f"failed, first {list(values)}: {code}: {message}",
                        kind,
                    )
                created += len(batch) - len(retry) - already
                if not retry:
                    break
                self._backoff(attempt)
                batch = retry
        if existing:
            self._update_changed(database, table, existing, part_input, info)
        return created

    def _update_changed(
        self,
        database: str,
        table: str,
        specs: list[PartitionSpec],
        part_input: Callable[[PartitionSpec], dict],
        info: TableInfo,
    ) -> None:
        resource = f"partitions of table '{database}.{table}'"
        current: dict[tuple[str, ...], dict] = {}
        for start in range(0, len(specs), MAX_BATCH_GET):
            chunk = specs[start : start + MAX_BATCH_GET]
            resp = self._call(
                "batch_get_partition",
                resource,
                DatabaseName=database,
                TableName=table,
                PartitionsToGet=[{"Values": list(s.values)} for s in chunk],
            )
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
            chunk = changed[start : start + MAX_BATCH_UPDATE]
            resp = self._call(
                "batch_update_partition",
                resource,
                DatabaseName=database,
                TableName=table,
                Entries=[
                    {"PartitionValueList": list(s.values), "PartitionInput": part_input(s)}
                    for s in chunk
                ],
            )
            errors = resp.get("Errors", [])
            if errors:
                detail = errors[0].get("ErrorDetail", {})
                code = detail.get("ErrorCode", "")
                raise CatalogError(
                    f"glue:BatchUpdatePartition on {resource}: {len(errors)} partition(s) failed, "
                    f"first {errors[0].get('PartitionValueList')}: {code}: "
                    f"{detail.get('ErrorMessage', '')}",
                    INSUFFICIENT_PERMISSIONS if code in DENIED else INTERNAL,
                )
