"""A filesystem with the rename rules of an ADLS Gen2 account with hierarchical namespace,
on a local folder: what the ``abfss://`` commit protocol is tested against (Azurite has no
``dfs`` endpoint, so no hierarchical namespace).

The rules of a rename (the Data Lake API's Path Create with a rename source, as pyarrow's
``AzureFileSystem.move`` calls it on such accounts):

- it is one atomic step, for a file or a whole directory;
- onto a **non-empty directory** it fails (``PathAlreadyExists``); onto an empty directory or
  an existing file of the same kind it replaces it;
- the destination's parent must exist (``RenameDestinationParentPathNotFound``);
- there is no exchange of two directories (``renameat2``): the protocol must not rely on one.

Writing a file creates its parent directories, as a blob write does on such an account.
Every rename is recorded in ``renames`` and passed to ``after_rename`` (a test snapshots what a
reader would see at that moment).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from collections.abc import Callable

import pyarrow.fs as pafs


class HnsRulesHandler(pafs.FileSystemHandler):
    def __init__(self, root: str, after_rename: Callable[[str, str], None] | None = None):
        os.makedirs(root, exist_ok=True)
        self.root = root
        self.fs = pafs.SubTreeFileSystem(root, pafs.LocalFileSystem())
        self.renames: list[tuple[str, str]] = []
        self.copies: list[tuple[str, str]] = []
        self.after_rename = after_rename

    # -------------------------------------------------------------------- the rename rules

    def move(self, src: str, dest: str) -> None:
        src_info, dest_info = self.fs.get_file_info([src, dest])
        if src_info.type == pafs.FileType.NotFound:
            raise FileNotFoundError(f"PathNotFound: {src}")
        parent = dest.rstrip("/").rpartition("/")[0]
        if parent and self.fs.get_file_info(parent).type != pafs.FileType.Directory:
            raise OSError(
                f"RenameDestinationParentPathNotFound: the parent of {dest} does not exist"
            )
        if dest_info.type == pafs.FileType.Directory:
            if src_info.type != pafs.FileType.Directory:
                raise IsADirectoryError(f"{dest} is a directory")
            if self.fs.get_file_info(pafs.FileSelector(dest)):
                raise OSError(f"PathAlreadyExists: {dest} is a non-empty directory")
        self.fs.move(src, dest)  # rename(2): atomic, replaces an empty dir or a file
        self.renames.append((src, dest))
        if self.after_rename is not None:
            self.after_rename(src, dest)

    def open_output_stream(self, path: str, metadata):
        self.fs.create_dir(path.rpartition("/")[0], recursive=True)
        return self.fs.open_output_stream(path, compression=None, metadata=metadata)

    # ------------------------------------------------------------------- plain delegation

    def get_type_name(self) -> str:
        return "hns-emulation"

    def equals(self, other) -> bool:
        return isinstance(other, HnsRulesHandler) and other.root == self.root

    def normalize_path(self, path: str) -> str:
        return path

    def get_file_info(self, paths):
        return self.fs.get_file_info(paths)

    def get_file_info_selector(self, selector):
        return self.fs.get_file_info(selector)

    def create_dir(self, path: str, recursive: bool) -> None:
        self.fs.create_dir(path, recursive=recursive)

    def delete_dir(self, path: str) -> None:
        self.fs.delete_dir(path)

    def delete_dir_contents(self, path: str, missing_dir_ok: bool = False) -> None:
        self.fs.delete_dir_contents(path, missing_dir_ok=missing_dir_ok)

    def delete_root_dir_contents(self) -> None:
        self.fs.delete_dir_contents("", accept_root_dir=True)

    def delete_file(self, path: str) -> None:
        self.fs.delete_file(path)

    def copy_file(self, src: str, dest: str) -> None:  # server-side, like Copy Blob
        self.fs.create_dir(dest.rpartition("/")[0], recursive=True)
        self.fs.copy_file(src, dest)
        self.copies.append((src, dest))

    def open_input_stream(self, path: str):
        return self.fs.open_input_stream(path, compression=None)

    def open_input_file(self, path: str):
        return self.fs.open_input_file(path)

    def open_append_stream(self, path: str, metadata):
        raise NotImplementedError("append: not used by the lake")


def hns_filesystem(
    root: str, after_rename: Callable[[str, str], None] | None = None
) -> tuple[pafs.PyFileSystem, HnsRulesHandler]:
    handler = HnsRulesHandler(root, after_rename)
    return pafs.PyFileSystem(handler), handler


class EmulatedLeaseStore:
    """The lock's lease blob (``lake/lease_store.py``) as a file of the emulated account, its
    conditional writes made atomic by an ``flock`` (the emulation has no blob endpoint)."""

    root = ""  # the account's folder (set by ``install``)

    def __init__(self, location: str) -> None:
        from datalake_assets.spec import azure_uri

        self.path = os.path.join(self.root, azure_uri.parse(location).fs_path)

    def _mutex(self) -> int:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        fd = os.open(self.path + ".mutex", os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        return fd

    def _etag(self) -> str | None:
        try:
            with open(self.path, "rb") as f:
                return hashlib.sha256(f.read()).hexdigest()[:16]
        except FileNotFoundError:
            return None

    def _write(self, body: bytes) -> str:
        with open(self.path, "wb") as f:
            f.write(body)
        return hashlib.sha256(body).hexdigest()[:16]

    def create(self, body: bytes) -> str | None:
        fd = self._mutex()
        try:
            return None if self._etag() is not None else self._write(body)
        finally:
            os.close(fd)

    def replace(self, body: bytes, etag: str) -> str | None:
        fd = self._mutex()
        try:
            return self._write(body) if self._etag() == etag else None
        finally:
            os.close(fd)

    def read(self) -> tuple[dict, str] | None:
        fd = self._mutex()
        try:
            with open(self.path, "rb") as f:
                body = f.read()
            return json.loads(body or b"{}"), hashlib.sha256(body).hexdigest()[:16]
        except FileNotFoundError:
            return None
        finally:
            os.close(fd)

    def etag(self) -> str | None:
        return self._etag()

    def delete(self, etag: str) -> None:
        fd = self._mutex()
        try:
            if self._etag() == etag:
                os.unlink(self.path)
        finally:
            os.close(fd)


def install(monkeypatch_setattr: Callable, fs: pafs.FileSystem, root: str = "") -> None:
    """Make every ``abfss://`` (and ``az://``) location resolve to ``fs`` (the account is the
    folder; ``container/path`` inside it, as in pyarrow's ``AzureFileSystem``); with the
    folder ``root``, the conditional writes live there too (never an Azure endpoint): the
    lock's lease and the lake's privacy key, created once."""
    from datalake_assets.lake import azure, identities, lock

    monkeypatch_setattr(azure, "filesystem", lambda uri: fs)
    if root:
        store = type("RootedLeaseStore", (EmulatedLeaseStore,), {"root": root})
        monkeypatch_setattr(lock, "AzureLeaseStore", store)
        monkeypatch_setattr(identities, "AzureLeaseStore", store)


ROOT_ENV = "DATALAKE_TEST_HNS_ROOT"
# Set wherever the emulation is: a path it does not cover would reach a closed loopback port
# with a dummy key (failing at once), never a public endpoint or the instance metadata service.
LOOPBACK_GUARD = {
    "DATALAKE_AZURE_BLOB_ENDPOINT": "http://127.0.0.1:9",
    "AZURE_STORAGE_ACCOUNT_KEY": "bm90LWEta2V5",
}


def install_from_environment() -> None:
    """In a process (a sync, its Spark Python workers) started with ``ROOT_ENV``: the account
    is that folder (``hns_site/sitecustomize.py`` calls this at interpreter start)."""
    root = os.environ.get(ROOT_ENV)
    if root:
        fs, _ = hns_filesystem(root)
        install(setattr, fs, root)
