"""Azure storage URIs as roots spell them: pure string rules, no I/O.

Two schemes, one per kind of storage account, because the commit protocol differs:

- ``abfss://<container>@<account>.dfs.core.windows.net/<path>``: an ADLS Gen2 account with a
  **hierarchical namespace** (HNS). Directories are real and a rename is one atomic step, so a
  commit swaps a partition directory by renames (``lake/commit.py``).
- ``az://<container>/<path>``: a **blob-only** account (flat namespace). There is no rename: a
  commit copies and deletes, like on S3. The account is named by ``AZURE_STORAGE_ACCOUNT_NAME``.

Credentials never go into a URI (no ``user:key@``, no SAS query string): they come from the
environment (``lake/azure.py``). Sovereign clouds: ``<account>.dfs.core.chinacloudapi.cn`` and
``<account>.dfs.core.usgovcloudapi.net`` are accepted too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

HNS_SCHEME = "abfss"
BLOB_SCHEME = "az"
AZURE_SCHEMES = (HNS_SCHEME, BLOB_SCHEME)
ACCOUNT_ENV = "AZURE_STORAGE_ACCOUNT_NAME"  # the account of az:// roots

# Other spellings of Azure storage, refused with what to write instead (Hadoop's plain-HTTP
# abfs and the legacy wasb drivers are not what pyarrow's filesystem speaks).
OTHER_AZURE_SCHEMES = {
    "abfs": "use abfss:// (TLS): abfss://<container>@<account>.dfs.core.windows.net/<path>",
    "wasb": "use az://<container>/<path> (blob-only account) or abfss:// (hierarchical namespace)",
    "wasbs": "use az://<container>/<path> (blob-only account) or abfss:// (hierarchical namespace)",
    "adl": "ADLS Gen1 is retired; use abfss://<container>@<account>.dfs.core.windows.net/<path>",
}
HNS_FORM = "abfss://<container>@<account>.dfs.core.windows.net/<path>"
BLOB_FORM = "az://<container>/<path>"

# Azure's naming rules: containers 3-63 of [a-z0-9-], starting and ending with a letter or
# digit, no "--"; accounts 3-24 of [a-z0-9].
_CONTAINER = r"[a-z0-9](?:[a-z0-9]|-(?=[a-z0-9])){2,62}"
_ACCOUNT = r"[a-z0-9]{3,24}"
_DFS_SUFFIXES = ("dfs.core.windows.net", "dfs.core.chinacloudapi.cn", "dfs.core.usgovcloudapi.net")
_HNS_HOST_RE = re.compile(rf"({_CONTAINER})@({_ACCOUNT})\.(dfs\.core\.[a-z.]+)")
_CONTAINER_RE = re.compile(_CONTAINER)
_BAD_PATH_CHARS = re.compile(r"[\s?#\\]")


@dataclass(frozen=True)
class AzureUri:
    scheme: str  # "abfss" | "az"
    container: str
    account: str  # "" for az://: the environment names it
    dfs_suffix: str  # "dfs.core.windows.net" (or a sovereign cloud's); "" for az://
    path: str  # inside the container, no leading or trailing '/'

    @property
    def hns(self) -> bool:
        """Whether the account has a hierarchical namespace (renames are atomic)."""
        return self.scheme == HNS_SCHEME

    @property
    def fs_path(self) -> str:
        """The path in pyarrow's ``AzureFileSystem`` of the account: ``container/path``."""
        return f"{self.container}/{self.path}" if self.path else self.container

    @property
    def root(self) -> str:
        """``scheme://host`` as written, without the path."""
        if self.hns:
            return f"{self.scheme}://{self.container}@{self.account}.{self.dfs_suffix}"
        return f"{self.scheme}://{self.container}"

    def location_of(self, fs_path: str) -> str:
        """The URI of a path of the same filesystem (``container/...``), same spelling."""
        container, _, path = fs_path.partition("/")
        if container != self.container:
            raise ValueError(f"{fs_path!r} is not in container {self.container!r}")
        return f"{self.root}/{path}" if path else self.root


def scheme_of(location: str) -> str:
    """The URI scheme, lower-cased; ``""`` for a local path."""
    return location.split("://", 1)[0].lower() if "://" in location else ""


def is_azure(location: str) -> bool:
    return scheme_of(location) in AZURE_SCHEMES


@lru_cache(maxsize=512)
def parse(uri: str) -> AzureUri:
    """An ``abfss://`` or ``az://`` URI, checked; ``ValueError`` says what is wrong."""
    scheme = scheme_of(uri)
    if scheme in OTHER_AZURE_SCHEMES:
        raise ValueError(f"{scheme}:// is not supported: {OTHER_AZURE_SCHEMES[scheme]}")
    if scheme not in AZURE_SCHEMES:
        raise ValueError(f"not an Azure storage URI: {uri!r}")
    rest = uri.split("://", 1)[1]
    host, _, path = rest.partition("/")
    if "?" in rest or "#" in rest:
        raise ValueError(
            "no query string or fragment: a SAS token is a credential and comes "
            "from the environment (AZURE_STORAGE_SAS_TOKEN), never from a URI"
        )
    if path.endswith("/") or "//" in path or _BAD_PATH_CHARS.search(path):
        raise ValueError(f"invalid path {path!r}: no empty segments, spaces or backslashes")
    if any(p in (".", "..") for p in path.split("/")):
        raise ValueError(f"invalid path {path!r}: no '.' or '..' segments")
    if scheme == HNS_SCHEME:
        if host.count("@") == 1 and ":" in host.split("@")[0]:
            raise ValueError(
                "credentials never go into the URI: write "
                f"{HNS_FORM} and set the key in the environment"
            )
        m = _HNS_HOST_RE.fullmatch(host)
        if not m:
            raise ValueError(
                f"expected {HNS_FORM} (container: 3-63 of a-z, 0-9 and '-'; "
                f"account: 3-24 of a-z and 0-9), got host {host!r}"
            )
        if m.group(3) not in _DFS_SUFFIXES:
            raise ValueError(
                f"the host must end in .{_DFS_SUFFIXES[0]} (or a sovereign "
                f"cloud's .dfs.core host), got {host!r}; {HNS_FORM}"
            )
        return AzureUri(scheme, m.group(1), m.group(2), m.group(3), path)
    if "@" in host or not _CONTAINER_RE.fullmatch(host):
        raise ValueError(
            f"expected {BLOB_FORM} (container: 3-63 of a-z, 0-9 and '-'; the "
            f"account comes from {ACCOUNT_ENV}), got {host!r}"
        )
    return AzureUri(scheme, host, "", "", path)
