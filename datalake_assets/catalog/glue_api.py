"""The Glue API as the Glue backend (``glue.py``) calls it, and the Glue structures of our
tables (the Parquet storage descriptor, ``TableInfo`` of a Glue table).

Calls
-----
* Every list call is paginated (``NextToken``): ``GetTables``, ``GetPartitions``.
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

from collections.abc import Iterator, Sequence
from typing import Any

from datalake_assets.catalog.catalog_interface import (
    INSUFFICIENT_PERMISSIONS,
    INTERNAL,
    INVALID_SETTINGS,
    CatalogError,
    Column,
    TableInfo,
)

INPUT_FORMAT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat"
OUTPUT_FORMAT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"
SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"

_THROTTLING = {
    "ThrottlingException",
    "Throttling",
    "TooManyRequestsException",
    "RequestLimitExceeded",
    "SlowDown",
    "ProvisionedThroughputExceededException",
}
_TRANSIENT = {"InternalServiceException", "ServiceUnavailableException", "InternalFailure"}
DENIED = {
    "AccessDeniedException",
    "AccessDenied",
    "UnauthorizedOperation",
    "UnrecognizedClientException",
    "InvalidClientTokenId",
    "ExpiredTokenException",
    "InvalidSignatureException",
    "SignatureDoesNotMatch",
}


def is_retryable(code: str, message: str) -> bool:
    return code in _THROTTLING or code in _TRANSIENT or "rate exceeded" in message.lower()


class GlueApi:
    """Calls with retries, pagination and errors; the Glue structures of our tables. The base
    of ``GlueCatalog``, whose ``__init__`` sets what these methods use: ``client``,
    ``catalog_id``, ``max_attempts``, ``base_delay``, ``max_delay`` and ``sleep``."""

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
                if is_retryable(code, message) and attempt < self.max_attempts:
                    self._backoff(attempt)
                    continue
                if code in DENIED:
                    raise CatalogError(
                        f"{action} on {resource}: {code}: {message}", INSUFFICIENT_PERMISSIONS
                    ) from None
                if code in ("InvalidInputException", "ValidationException"):
                    raise CatalogError(
                        f"{action} on {resource}: {code}: {message}", INVALID_SETTINGS
                    ) from None
                raise CatalogError(
                    f"{action} on {resource}: {code or 'error'}: {message}", INTERNAL
                ) from None
            except NoCredentialsError:
                raise CatalogError(
                    f"{action} on {resource}: no AWS credentials found", INSUFFICIENT_PERMISSIONS
                ) from None
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

    def _get_raw_table(self, database: str, table: str) -> dict | None:
        from botocore.exceptions import ClientError

        try:
            return self._call(
                "get_table", f"table '{database}.{table}'", DatabaseName=database, Name=table
            )["Table"]
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

    @staticmethod
    def _storage_descriptor(
        columns: Sequence[Column], location: str, base: dict | None = None
    ) -> dict:
        sd = dict(base or {})
        sd.update(
            {
                "Columns": [{"Name": n, "Type": t} for n, t in columns],
                "Location": location,
                "InputFormat": sd.get("InputFormat") or INPUT_FORMAT,
                "OutputFormat": sd.get("OutputFormat") or OUTPUT_FORMAT,
                "SerdeInfo": sd.get("SerdeInfo")
                or {
                    "SerializationLibrary": SERDE,
                    "Parameters": {"serialization.format": "1"},
                },
                "Compressed": sd.get("Compressed", False),
                "StoredAsSubDirectories": sd.get("StoredAsSubDirectories", False),
            }
        )
        return sd
