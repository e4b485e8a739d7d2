"""Azure storage accounts: pyarrow's ``AzureFileSystem`` built explicitly from the environment,
and the blob client for the one thing pyarrow cannot do (the lock's conditional writes).

Which account: ``abfss://`` URIs name it; ``az://`` URIs take ``AZURE_STORAGE_ACCOUNT_NAME``.
Which credential (the first that is set; never from a URI, never logged):

1. ``AZURE_STORAGE_ACCOUNT_KEY``: the account's shared key;
2. ``AZURE_STORAGE_SAS_TOKEN``: a shared access signature;
3. ``AZURE_CLIENT_ID`` + ``AZURE_TENANT_ID`` + ``AZURE_CLIENT_SECRET``: a service principal;
4. none: Azure's default credential chain (managed identity, workload identity, ``az login``).

``DATALAKE_AZURE_BLOB_ENDPOINT`` (and ``DATALAKE_AZURE_DFS_ENDPOINT``, default: the blob one)
point at an emulator such as Azurite (``http://127.0.0.1:10000``), which serves the account
in the path. Unset, the public endpoints of the URI's cloud are used.

The lock (``lake/lock.py``) needs ``azure-storage-blob`` (and ``azure-identity`` for a service
principal or the default chain): the ``[azure]`` extra. Reading and writing the lake do not.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import pyarrow.fs as pafs

from datalake_assets.spec import azure_uri
from datalake_assets.spec.azure_uri import ACCOUNT_ENV, AzureUri

KEY_ENV = "AZURE_STORAGE_ACCOUNT_KEY"
SAS_ENV = "AZURE_STORAGE_SAS_TOKEN"
SP_ENVS = ("AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_CLIENT_SECRET")
BLOB_ENDPOINT_ENV = "DATALAKE_AZURE_BLOB_ENDPOINT"
DFS_ENDPOINT_ENV = "DATALAKE_AZURE_DFS_ENDPOINT"
_CLOUD_OF_DFS = {
    "dfs.core.windows.net": "core.windows.net",
    "dfs.core.chinacloudapi.cn": "core.chinacloudapi.cn",
    "dfs.core.usgovcloudapi.net": "core.usgovcloudapi.net",
}


class AzureConfigError(ValueError):
    """The environment does not say how to reach an Azure account (names variables only)."""


@dataclass(frozen=True)
class Endpoint:
    """How to reach one account: where, and with which kind of credential (no secret here)."""

    account: str
    blob_authority: str  # ".blob.core.windows.net" (public) or "host:port" (emulator)
    dfs_authority: str
    scheme: str  # "https" | "http" (an emulator on loopback)
    credential: str  # "key" | "sas" | "service_principal" | "default"

    @property
    def blob_account_url(self) -> str:
        """The blob service URL of the account, as the Azure SDK wants it."""
        if self.blob_authority.startswith("."):
            return f"{self.scheme}://{self.account}{self.blob_authority}"
        return f"{self.scheme}://{self.blob_authority}/{self.account}"


def _authority(url: str, var: str) -> tuple[str, str]:
    """``(scheme, host:port)`` of an endpoint variable's URL."""
    scheme, sep, rest = url.partition("://")
    host = rest.rstrip("/")
    if not sep or scheme not in ("http", "https") or not host or "/" in host or "@" in host:
        raise AzureConfigError(
            f"{var} must be http(s)://host[:port] (an emulator's endpoint, "
            f"the account is served in the path), got {url!r}"
        )
    return scheme, host


def credential_kind(env: Mapping[str, str]) -> str:
    """Which credential the environment provides (see the module docstring)."""
    if env.get(KEY_ENV) and env.get(SAS_ENV):
        raise AzureConfigError(f"set one of {KEY_ENV} and {SAS_ENV}, not both")
    if env.get(KEY_ENV):
        return "key"
    if env.get(SAS_ENV):
        return "sas"
    present = [v for v in SP_ENVS if env.get(v)]
    if len(present) == len(SP_ENVS):
        return "service_principal"
    if present and "AZURE_CLIENT_SECRET" in present:  # half a service principal: say so
        missing = ", ".join(v for v in SP_ENVS if v not in present)
        raise AzureConfigError(
            f"a service principal needs {', '.join(SP_ENVS)}; missing: {missing}"
        )
    return "default"  # AZURE_CLIENT_ID alone selects a user-assigned managed identity


def endpoint(uri: AzureUri, env: Mapping[str, str] | None = None) -> Endpoint:
    """Where and how to reach the account of ``uri``, from the environment."""
    env = os.environ if env is None else env
    account = uri.account or env.get(ACCOUNT_ENV, "")
    if not account:
        raise AzureConfigError(
            f"{uri.root}: az:// roots take their storage account from "
            f"{ACCOUNT_ENV}, which is not set"
        )
    cloud = _CLOUD_OF_DFS.get(uri.dfs_suffix, "core.windows.net")
    scheme, blob, dfs = "https", f".blob.{cloud}", f".dfs.{cloud}"
    if env.get(BLOB_ENDPOINT_ENV):
        scheme, blob = _authority(env[BLOB_ENDPOINT_ENV], BLOB_ENDPOINT_ENV)
        dfs = blob
    if env.get(DFS_ENDPOINT_ENV):
        dfs_scheme, dfs = _authority(env[DFS_ENDPOINT_ENV], DFS_ENDPOINT_ENV)
        if dfs_scheme != scheme:
            raise AzureConfigError(
                f"{BLOB_ENDPOINT_ENV} and {DFS_ENDPOINT_ENV} must use the same scheme"
            )
    return Endpoint(account, blob, dfs, scheme, credential_kind(env))


def filesystem(uri: AzureUri) -> pafs.FileSystem:
    """pyarrow's filesystem of the account of ``uri`` (cached per account and environment)."""
    ep = endpoint(uri)
    secrets = tuple(os.environ.get(v, "") for v in (KEY_ENV, SAS_ENV, *SP_ENVS))
    return _filesystem(ep, secrets)


@lru_cache(maxsize=16)
def _filesystem(ep: Endpoint, secrets: tuple[str, ...]) -> pafs.FileSystem:
    key, sas, client_id, tenant_id, client_secret = secrets
    kw: dict[str, Any] = {
        "blob_storage_authority": ep.blob_authority,
        "dfs_storage_authority": ep.dfs_authority,
        "blob_storage_scheme": ep.scheme,
        "dfs_storage_scheme": ep.scheme,
    }
    if ep.credential == "key":
        kw["account_key"] = key
    elif ep.credential == "sas":
        kw["sas_token"] = sas.lstrip("?")
    elif ep.credential == "service_principal":
        kw.update(client_id=client_id, tenant_id=tenant_id, client_secret=client_secret)
    return pafs.AzureFileSystem(ep.account, **kw)


def clear_caches() -> None:
    """Forget the filesystems built so far (tests that change the environment)."""
    _filesystem.cache_clear()
    azure_uri.parse.cache_clear()


# ------------------------------------------------------------------------ blob SDK (the lock)


def blob_client(location: str) -> Any:
    """The Azure SDK's ``BlobClient`` of one blob (``azure-storage-blob``, the ``[azure]``
    extra): for conditional writes (``If-None-Match: *``, ``If-Match``), which pyarrow lacks."""
    try:
        from azure.storage.blob import BlobClient
    except ImportError as e:
        raise RuntimeError(
            "the lock of an Azure lake needs azure-storage-blob: pip install "
            "'datalake-assets[azure]'"
        ) from e
    uri = azure_uri.parse(location)
    ep = endpoint(uri)
    return BlobClient(ep.blob_account_url, uri.container, uri.path, credential=_sdk_credential(ep))


def _sdk_credential(ep: Endpoint) -> Any:
    if ep.credential == "key":
        return {"account_name": ep.account, "account_key": os.environ[KEY_ENV]}
    if ep.credential == "sas":
        return os.environ[SAS_ENV].lstrip("?")
    try:
        from azure import identity
    except ImportError as e:
        raise RuntimeError(
            "a service principal or Azure's default credential needs "
            "azure-identity: pip install 'datalake-assets[azure]'"
        ) from e
    if ep.credential == "service_principal":
        return identity.ClientSecretCredential(
            os.environ["AZURE_TENANT_ID"],
            os.environ["AZURE_CLIENT_ID"],
            os.environ["AZURE_CLIENT_SECRET"],
        )
    return identity.DefaultAzureCredential()
