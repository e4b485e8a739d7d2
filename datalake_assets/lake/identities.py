"""The lake's privacy state on storage: the identity hashes' key, the suppression list and the
identity index's format (``spec/identity.py`` says what an identity is; ``privacy/`` uses
these to erase and suppress; the sync writes the index and reads the suppression list).

**Key.** ``_privacy/key``: 32 random bytes, created once per lake (a create-if-absent: a hard
link locally, a conditional PUT on S3, so two first users cannot make two keys). Whoever can
read the lake's data can read the key; it exists so that the hashes in the index, the
suppression list and the audit table cannot be reversed *without* lake access (an unkeyed hash
of an email is reversed by hashing a list of emails).

**Suppression list.** ``_privacy/suppressed/<request id>.json``, ``{"hashes": [...]}``: one
file per request, so two requests never overwrite each other; the list is their union.

**Identity index.** Per source and received hour, ``_identities/<source>/hour=<YYYYMMDDHH>/
*.parquet`` with ``INDEX_SCHEMA``: a presence row per (identity hash, table) of the hour with
its row count (``table`` is ``QUARANTINE`` for quarantined lines that still name someone,
``SUPPRESSED`` for lines of a suppressed person that the sync stored nowhere but the raw
archive still holds; ``tracks`` is listed beside the track tables), and a link row per linked pair (``table`` =
``LINK``, each pair once: the smaller hash in ``identity``, the other in ``linked``; ``rows``:
the messages that link them). It is a superset of the hour (duplicates dropped by the sync may
be listed): a request reads the hours it names, never fewer. ``transform/identity_index.py``
writes it.
"""

from __future__ import annotations

import os
import secrets
import uuid

import orjson
import pyarrow as pa

from datalake_assets.lake import storage
from datalake_assets.lake.lease_store import AzureLeaseStore
from datalake_assets.spec import layout
from datalake_assets.spec.azure_uri import is_azure

KEY_BYTES = 32
LINK = "#link"
QUARANTINE = "#quarantine"
SUPPRESSED = "#suppressed"
INDEX_SCHEMA = pa.schema(
    [
        pa.field("identity", pa.string(), nullable=False),
        pa.field("table", pa.string(), nullable=False),
        pa.field("rows", pa.int64(), nullable=False),
        pa.field("linked", pa.string()),
    ]
)


def lake_key(lake_root: str) -> bytes:
    """The lake's identity-hash key, created on first use."""
    location = layout.privacy_key_path(lake_root)
    try:
        key = storage.read_bytes(location)
    except (FileNotFoundError, OSError):
        key = b""
    if len(key) == KEY_BYTES:
        return key
    _create_if_absent(location, secrets.token_bytes(KEY_BYTES))
    key = storage.read_bytes(location)
    if len(key) != KEY_BYTES:
        raise RuntimeError(
            f"{location}: the lake's privacy key is damaged ({len(key)} bytes, "
            f"expected {KEY_BYTES}); restore it from a backup: every identity "
            "hash in the lake depends on it"
        )
    return key


def _create_if_absent(location: str, data: bytes) -> None:
    if is_azure(location):  # If-None-Match: * through the Azure SDK (pyarrow has none)
        AzureLeaseStore(location).create(data)  # None: another process made it first
        return
    if storage.is_uri(location):
        scheme, rest = location.split("://", 1)
        if scheme not in layout.S3_SCHEMES:
            raise ValueError(f"{location}: the privacy key needs a local, s3:// or Azure lake")
        import boto3
        from botocore.exceptions import ClientError

        bucket, key = rest.split("/", 1)
        try:
            boto3.client("s3").put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
        except ClientError as e:  # 412: another process made it first; theirs counts
            if e.response.get("Error", {}).get("Code") not in ("PreconditionFailed", "412"):
                raise
        return
    directory = os.path.dirname(location)
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, f".tmp-{uuid.uuid4().hex}")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    try:
        os.link(tmp, location)  # fails if the key exists: the first one wins
    except FileExistsError:
        pass
    finally:
        os.unlink(tmp)


def read_suppressed(lake_root: str) -> frozenset[str]:
    """Every suppressed identity hash of the lake."""
    out: set[str] = set()
    for location, _ in storage.list_files(layout.suppression_dir(lake_root)):
        if location.endswith(".json") and not location.rsplit("/", 1)[-1].startswith((".", "_")):
            out.update(orjson.loads(storage.read_bytes(location))["hashes"])
    return frozenset(out)


def suppression_location(lake_root: str, request_id: str) -> str:
    return layout.join(layout.suppression_dir(lake_root), f"{request_id}.json")


def write_suppressed(lake_root: str, request_id: str, hashes: list[str]) -> str:
    """Add a request's hashes to the suppression list (replacing that request's file)."""
    location = suppression_location(lake_root, request_id)
    storage.write_bytes_atomic(location, orjson.dumps({"hashes": sorted(set(hashes))}))
    return location


def index_table(rows: list[tuple[str, str, int, str | None]]) -> pa.Table:
    """An index file's table from ``(identity, table, rows, linked)`` tuples."""
    columns = list(zip(*rows)) if rows else [[], [], [], []]
    return pa.table(
        [pa.array(c, f.type) for c, f in zip(columns, INDEX_SCHEMA)], schema=INDEX_SCHEMA
    )
