"""The conditional writes a lease object needs, on S3 (boto3) and on Azure blobs (the Azure
SDK): create only if absent (``If-None-Match: *``), replace or delete only if unchanged
(``If-Match`` on the ETag). ``lake/lock.py`` builds the lease on top of these five calls.

Every call answers ``None`` when the condition failed or the object is gone (another holder
won, or it was released); any other error is raised (the heartbeat treats it as transient).
"""

from __future__ import annotations

import json
from typing import Any, Protocol


class LeaseStore(Protocol):
    def create(self, body: bytes) -> str | None: ...  # ETag, None: it exists
    def replace(self, body: bytes, etag: str) -> str | None: ...  # None: changed or gone
    def read(self) -> tuple[dict, str] | None: ...  # (holder, ETag), None: gone
    def etag(self) -> str | None: ...  # None: gone
    def delete(self, etag: str) -> None: ...  # only if still ``etag``; best effort


class S3LeaseStore:
    """``s3://bucket/key``: ``put_object`` with ``IfNoneMatch`` / ``IfMatch``."""

    def __init__(self, location: str) -> None:
        import boto3

        _, rest = location.split("://", 1)
        self.bucket, self.key = rest.split("/", 1)
        self.s3 = boto3.client("s3")

    @staticmethod
    def _code(e: Exception) -> str:
        return e.response["Error"]["Code"]  # type: ignore[attr-defined]

    def create(self, body: bytes) -> str | None:
        from botocore.exceptions import ClientError

        try:
            return self.s3.put_object(Bucket=self.bucket, Key=self.key, Body=body, IfNoneMatch="*")[
                "ETag"
            ]
        except ClientError as e:
            if self._code(e) in ("PreconditionFailed", "ConditionalRequestConflict"):
                return None
            raise

    def replace(self, body: bytes, etag: str) -> str | None:
        from botocore.exceptions import ClientError

        try:
            return self.s3.put_object(Bucket=self.bucket, Key=self.key, Body=body, IfMatch=etag)[
                "ETag"
            ]
        except ClientError as e:
            if self._code(e) in ("PreconditionFailed", "NoSuchKey", "ConditionalRequestConflict"):
                return None
            raise

    def read(self) -> tuple[dict, str] | None:
        from botocore.exceptions import ClientError

        try:
            got = self.s3.get_object(Bucket=self.bucket, Key=self.key)
        except ClientError as e:
            if self._code(e) in ("NoSuchKey", "404"):
                return None
            raise
        return json.loads(got["Body"].read() or b"{}"), got["ETag"]

    def etag(self) -> str | None:
        from botocore.exceptions import ClientError

        try:
            return self.s3.head_object(Bucket=self.bucket, Key=self.key)["ETag"]
        except ClientError as e:
            if self._code(e) in ("404", "NoSuchKey", "NotFound"):
                return None
            raise

    def delete(self, etag: str) -> None:
        from botocore.exceptions import ClientError

        try:  # delete only our own lease (another holder's ETag differs)
            if self.etag() == etag:
                self.s3.delete_object(Bucket=self.bucket, Key=self.key)
        except ClientError:
            pass  # it expires by itself


class AzureLeaseStore:
    """``abfss://`` / ``az://``: ``upload_blob`` with ``overwrite=False`` (``If-None-Match:
    *``) or with the ETag and ``IfNotModified`` (``If-Match``); a conditional delete too.
    Works on blob-only accounts and on accounts with a hierarchical namespace alike."""

    def __init__(self, location: str) -> None:
        from datalake_assets.lake import azure

        self.blob = azure.blob_client(location)

    def create(self, body: bytes) -> str | None:
        from azure.core.exceptions import ResourceExistsError

        try:
            return self.blob.upload_blob(body, overwrite=False)["etag"]
        except ResourceExistsError:
            return None

    def replace(self, body: bytes, etag: str) -> str | None:
        from azure.core import MatchConditions
        from azure.core.exceptions import ResourceModifiedError, ResourceNotFoundError

        try:
            return self.blob.upload_blob(
                body, overwrite=True, etag=etag, match_condition=MatchConditions.IfNotModified
            )["etag"]
        except (ResourceModifiedError, ResourceNotFoundError):
            return None

    def read(self) -> tuple[dict, str] | None:
        from azure.core.exceptions import ResourceNotFoundError

        try:
            got: Any = self.blob.download_blob()
            body = got.readall()
        except ResourceNotFoundError:
            return None
        return json.loads(body or b"{}"), got.properties.etag

    def etag(self) -> str | None:
        from azure.core.exceptions import ResourceNotFoundError

        try:
            return self.blob.get_blob_properties().etag
        except ResourceNotFoundError:
            return None

    def delete(self, etag: str) -> None:
        from azure.core import MatchConditions
        from azure.core.exceptions import AzureError

        try:  # one request: deleted only while it is still ours
            self.blob.delete_blob(etag=etag, match_condition=MatchConditions.IfNotModified)
        except AzureError:
            pass  # changed (not ours any more) or unreachable: it expires by itself
