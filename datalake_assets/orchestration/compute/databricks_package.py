"""The sync job's package on Databricks: the same content-addressed zip as on EMR
(``emr_package.build_package``) and the Databricks entry script, uploaded to
``<package_dir>/<sha256>/`` through the workspace's REST API.

``package_dir`` says which store and which API:

- ``/Volumes/<catalog>/<schema>/<volume>/...``: a Unity Catalog volume, the Files API
  (``PUT``/``HEAD /api/2.0/fs/files<path>``);
- ``/Workspace/...``: workspace files (``/api/2.0/workspace/get-status``, ``mkdirs``,
  ``import``), the default, present in every workspace with or without Unity Catalog;
- ``dbfs:/...``: DBFS (``/api/2.0/dbfs/get-status``, ``mkdirs``, ``create``/``add-block``/
  ``close``), for workspaces that still use it.

The cluster reads all three as files (``/Volumes`` and ``/Workspace`` are mounted on its
nodes, ``dbfs:/`` is a Hadoop filesystem): the task's ``python_file`` and ``--package`` name
them as they are. A file already there with the same size is not uploaded again: its folder
is named by the hash of both files, so the same size means the same upload finished.
"""

from __future__ import annotations

import base64
import hashlib
import io
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from datalake_assets.orchestration.compute.emr_package import (
    ENTRY_FILE,
    PACKAGE_FILE,
    build_package,
)
from datalake_assets.spec import layout
from datalake_assets.transform.pipes_entry import DATABRICKS_ENTRY_SCRIPT

DEFAULT_PACKAGE_DIR = "/Workspace/Shared/datalake/jobs"
PACKAGE_DIR_KINDS = ("/Volumes/", "/Workspace/", "dbfs:/")
_DBFS_BLOCK = 1024 * 1024  # the largest add-block (base64 of at most 1 MB)


def package_dir_kind(package_dir: str) -> str:
    """``"volume"``, ``"workspace"`` or ``"dbfs"``; ``ValueError`` for anything else."""
    for prefix, kind in zip(PACKAGE_DIR_KINDS, ("volume", "workspace", "dbfs"), strict=True):
        if package_dir.startswith(prefix):
            return kind
    raise ValueError(
        f"not a Databricks package folder: {package_dir!r} (expected "
        f"{', '.join(p + '...' for p in PACKAGE_DIR_KINDS)})"
    )


@lru_cache(maxsize=1)
def databricks_package() -> tuple[bytes, bytes, str]:
    """``(zip, entry script, sha256 of both)``."""
    body, entry = build_package(), DATABRICKS_ENTRY_SCRIPT.encode("utf-8")
    return body, entry, hashlib.sha256(body + b"\0" + entry).hexdigest()


@dataclass(frozen=True)
class DatabricksPackage:
    sha256: str
    zip_path: str  # as the cluster reads it: /Volumes/..., /Workspace/... or dbfs:/...
    entry_path: str
    uploaded: tuple[str, ...]  # the files this call uploaded (empty: all were there)


def stage_databricks_package(
    client: Any, package_dir: str, package: tuple[bytes, bytes, str] | None = None
) -> DatabricksPackage:
    """Upload the zip and the entry script to ``<package_dir>/<sha256>/`` unless there.
    ``client`` is a ``databricks.sdk.WorkspaceClient``."""
    body, entry, digest = package or databricks_package()
    store = _STORES[package_dir_kind(package_dir)](client)
    folder = layout.join(package_dir, digest)
    uploaded = []
    for name, data in ((PACKAGE_FILE, body), (ENTRY_FILE, entry)):
        path = layout.join(folder, name)
        if store.size(path) != len(data):
            store.put(folder, path, data)
            uploaded.append(name)
    return DatabricksPackage(
        sha256=digest,
        zip_path=layout.join(folder, PACKAGE_FILE),
        entry_path=layout.join(folder, ENTRY_FILE),
        uploaded=tuple(uploaded),
    )


def _not_found(e: Exception) -> bool:
    from databricks.sdk.errors import NotFound

    return isinstance(e, NotFound)


class _Volume:
    def __init__(self, client: Any) -> None:
        self.files = client.files

    def size(self, path: str) -> int | None:
        try:
            return self.files.get_metadata(path).content_length
        except Exception as e:
            if _not_found(e):
                return None
            raise

    def put(self, folder: str, path: str, data: bytes) -> None:
        self.files.upload(path, io.BytesIO(data), overwrite=True)  # creates the folders


class _Workspace:
    def __init__(self, client: Any) -> None:
        self.workspace = client.workspace

    @staticmethod
    def api_path(path: str) -> str:
        """The Workspace API's own form of a path: ``/Shared/...`` for ``/Workspace/Shared/...``
        (the cluster's mount point is not part of it)."""
        return path.removeprefix("/Workspace")

    def size(self, path: str) -> int | None:
        try:
            return self.workspace.get_status(self.api_path(path)).size
        except Exception as e:
            if _not_found(e):
                return None
            raise

    def put(self, folder: str, path: str, data: bytes) -> None:
        from databricks.sdk.service.workspace import ImportFormat

        self.workspace.mkdirs(self.api_path(folder))
        # AUTO: a .py without the "# Databricks notebook source" header stays a file
        self.workspace.import_(
            self.api_path(path),
            content=base64.b64encode(data).decode("ascii"),
            format=ImportFormat.AUTO,
            overwrite=True,
        )


class _Dbfs:
    def __init__(self, client: Any) -> None:
        from databricks.sdk.service.files import DbfsAPI

        # The generated API (as dagster-databricks uses it), not the client's DbfsExt, whose
        # helpers route /Volumes paths to the Files API and take local paths.
        self.dbfs = DbfsAPI(client.api_client)

    @staticmethod
    def api_path(path: str) -> str:
        """The DBFS API's form: ``/x`` for ``dbfs:/x``."""
        return path.removeprefix("dbfs:")

    def size(self, path: str) -> int | None:
        try:
            return self.dbfs.get_status(self.api_path(path)).file_size
        except Exception as e:
            if _not_found(e):
                return None
            raise

    def put(self, folder: str, path: str, data: bytes) -> None:
        # create/add-block/close: dbfs/put takes at most 1 MB inline
        api = self.dbfs
        api.mkdirs(self.api_path(folder))
        handle = api.create(self.api_path(path), overwrite=True).handle
        for i in range(0, len(data), _DBFS_BLOCK):
            api.add_block(handle, base64.b64encode(data[i : i + _DBFS_BLOCK]).decode("ascii"))
        api.close(handle)


_STORES = {"volume": _Volume, "workspace": _Workspace, "dbfs": _Dbfs}
