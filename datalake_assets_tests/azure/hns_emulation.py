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
            raise OSError(f"RenameDestinationParentPathNotFound: the parent of {dest} does "
                          "not exist")
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


def hns_filesystem(root: str, after_rename: Callable[[str, str], None] | None = None
                   ) -> tuple[pafs.PyFileSystem, HnsRulesHandler]:
    handler = HnsRulesHandler(root, after_rename)
    return pafs.PyFileSystem(handler), handler


def install(monkeypatch_setattr: Callable, fs: pafs.FileSystem) -> None:
    """Make every ``abfss://`` (and ``az://``) location resolve to ``fs`` (the account is the
    folder; ``container/path`` inside it, as in pyarrow's ``AzureFileSystem``)."""
    from datalake_assets.lake import azure

    monkeypatch_setattr(azure, "filesystem", lambda uri: fs)


ROOT_ENV = "DATALAKE_TEST_HNS_ROOT"


def install_from_environment() -> None:
    """In a process (a sync, its Spark Python workers) started with ``ROOT_ENV``: the account
    is that folder (``hns_site/sitecustomize.py`` calls this at interpreter start)."""
    root = os.environ.get(ROOT_ENV)
    if root:
        fs, _ = hns_filesystem(root)
        install(setattr, fs)
