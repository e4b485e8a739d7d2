"""File access for local paths and URIs (``s3://``, ``abfss://``, ``az://``) through ``pyarrow.fs``.

Every path the rest of the code handles is a *location*: a local absolute path or a URI.
Azure accounts get an explicitly built ``AzureFileSystem`` (``lake/azure.py``: account,
endpoint and credentials from the environment), never one parsed from a URI.

Files appear whole or not at all: locally by a rename, on S3 by one PUT; on Azure a pyarrow
output stream creates an empty blob when opened and commits blocks as it flushes, so a file is
written under a hidden ``.tmp-`` name and then *published*: renamed on an account with a
hierarchical namespace (``abfss://``), copied (Copy Blob: the copy appears whole) and the
hidden one deleted on a blob-only account (``az://``).
"""

from __future__ import annotations

import os
import tempfile
import uuid
import zlib
from collections.abc import Iterator
from functools import lru_cache

import pyarrow.fs as pafs

from datalake_assets.lake import azure
from datalake_assets.spec import azure_uri
from datalake_assets.spec.azure_uri import HNS_SCHEME, is_azure
from datalake_assets.spec.layout import S3_SCHEMES


def is_uri(location: str) -> bool:
    return "://" in location


def on_s3(location: str) -> bool:
    return location.split("://", 1)[0] in S3_SCHEMES if is_uri(location) else False


def renames_directories(location: str) -> bool:
    """Whether a directory of this location is renamed in one atomic step: local folders and
    Azure accounts with a hierarchical namespace (``abfss://``); not S3 or blob-only Azure."""
    return not is_uri(location) or azure_uri.scheme_of(location) == HNS_SCHEME


@lru_cache(maxsize=32)
def _fs_for(scheme_root: str) -> pafs.FileSystem:
    # allow_delayed_open: opening an output stream neither checks the bucket (a HEAD) nor
    # starts a multipart upload; a file smaller than a part is then one PUT on close, where
    # it was a HEAD and three requests (start, part, complete). An error (a missing bucket)
    # surfaces at the write or the close instead, inside the same ``with`` as before.
    # (S3's option only: GCS refuses an unknown one)
    fs, _ = pafs.FileSystem.from_uri(
        f"{scheme_root}?allow_delayed_open=true" if on_s3(scheme_root) else scheme_root
    )
    return fs


def resolve(location: str) -> tuple[pafs.FileSystem, str]:
    """``(filesystem, path inside it)`` for a location."""
    if not is_uri(location):
        return pafs.LocalFileSystem(), location
    if is_azure(location):
        uri = azure_uri.parse(location)
        return azure.filesystem(uri), uri.fs_path
    scheme, rest = location.split("://", 1)
    bucket = rest.split("/", 1)[0]
    fs = _fs_for(f"{scheme}://{bucket}")
    return fs, rest


def to_location(template: str, fs_path: str) -> str:
    """Turn a path inside ``template``'s filesystem back into a location."""
    if not is_uri(template):
        return fs_path
    if is_azure(template):  # the account (abfss://) is in the host, not in the fs path
        return azure_uri.parse(template).location_of(fs_path)
    return f"{template.split('://', 1)[0]}://{fs_path}"


def hidden_path(path: str, location: str) -> str:
    """Where to write ``path`` (a path of ``location``'s filesystem) before ``publish``: next
    to it under a ``.tmp-`` name; on blob-only Azure in a ``.tmp-`` folder of its own, which
    is deleted in one batch afterwards (pyarrow deletes a single blob under a lease, and its
    release of that lease after the delete can stall for seconds)."""
    folder, _, name = path.rpartition("/")
    if is_azure(location) and not renames_directories(location):
        return f"{folder}/{temporary_name(name)}/{name}"
    return f"{folder}/{temporary_name(name)}"


def publish(fs: pafs.FileSystem, hidden: str, path: str, location: str) -> None:
    """Make the complete hidden file ``hidden`` appear as ``path`` in one step (``location``:
    any location of the same filesystem, which says how)."""
    if is_azure(location) and not renames_directories(location):
        fs.copy_file(hidden, path)  # blob-only: no rename; Copy Blob appears whole
        discard_hidden(fs, hidden)
    else:
        rename(fs, hidden, path)  # local, HNS; on S3 pyarrow copies and deletes


def discard_hidden(fs: pafs.FileSystem, hidden: str) -> None:
    """Remove a hidden file (and its own ``.tmp-`` folder, see ``hidden_path``), quietly."""
    folder = hidden.rpartition("/")[0]
    try:
        if folder.rpartition("/")[2].startswith(".tmp-"):
            fs.delete_dir(folder)
        else:
            fs.delete_file(hidden)
    except OSError:
        pass


def rename(fs: pafs.FileSystem, src: str, dst: str) -> None:
    """``fs.move``, with what to do when an ``abfss://`` root names a blob-only account."""
    try:
        fs.move(src, dst)
    except NotImplementedError as e:  # pyarrow: no hierarchical namespace on this account
        raise RuntimeError(
            f"cannot rename {src}: abfss:// roots need a storage account with a hierarchical "
            "namespace; for a blob-only account write the root as az://<container>/<path>"
        ) from e


def list_files(directory: str, recursive: bool = False) -> list[tuple[str, int]]:
    """``[(location, size)]`` of the files in a directory; empty if it does not exist."""
    fs, path = resolve(directory)
    try:
        infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True, recursive=recursive))
    except FileNotFoundError:
        return []
    return sorted(
        (to_location(directory, i.path), i.size or 0) for i in infos if i.type == pafs.FileType.File
    )


def exists(location: str) -> bool:
    fs, path = resolve(location)
    return fs.get_file_info(path).type != pafs.FileType.NotFound


def read_bytes(location: str) -> bytes:
    """The file's exact bytes (never gunzipped by name), in one read."""
    fs, path = resolve(location)
    with fs.open_input_stream(path, compression=None) as f:
        return f.read()


def write_bytes_atomic(location: str, data: bytes) -> None:
    """Readers see the old content or the new, never a part (rename locally; S3 PUT is atomic;
    Azure: a hidden file, published)."""
    fs, path = resolve(location)
    if is_azure(location):
        hidden = hidden_path(path, location)
        try:
            with fs.open_output_stream(hidden, compression=None) as f:
                f.write(data)
            publish(fs, hidden, path, location)
        except BaseException:
            discard_hidden(fs, hidden)
            raise
        return
    if is_uri(location):
        # compression=None: the exact bytes (pyarrow would gzip a ``*.gz`` name again)
        with fs.open_output_stream(path, compression=None) as f:
            f.write(data)
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = os.path.join(os.path.dirname(path), f".tmp-{uuid.uuid4().hex}")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def create_dir(location: str) -> None:
    """A directory (and its parents) before files are written into it; nothing if it exists.
    Nothing on S3 either: it has no directories, and pyarrow would PUT an empty marker object
    for every level of the path (five or six requests per file written, for nothing)."""
    if on_s3(location):
        return
    fs, path = resolve(location)
    fs.create_dir(path, recursive=True)


def delete_dir(location: str) -> None:
    fs, path = resolve(location)
    try:
        fs.delete_dir(path)
    except FileNotFoundError:
        pass


_GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 1 << 16  # small reads: a corrupt gzip loses at most one chunk before the damage


class ShortRead(OSError):
    """A file yielded fewer (or more) bytes than its listed size: truncated or replaced."""


def iter_lines(
    location: str, expected_size: int | None = None, buffer_size: int | None = None
) -> Iterator[bytes]:
    """The lines of a (possibly gzipped, possibly multi-member) file, without line ends.

    Streams in 64 KiB chunks, so memory stays bounded whatever the file size. A final line
    without ``\\n`` is still a line. Compression is recognised by content, not by name.
    With ``expected_size`` (the size the file was listed with), a read that ends at another
    size raises ``ShortRead`` after the last line instead of passing for a complete file.
    ``buffer_size``: read ahead this many bytes at a time (on S3 each read of the underlying
    stream is one ranged GET: 64 KiB reads of a 500 MB object are ~7,600 requests); URIs
    default to 8 MiB.
    """
    fs, path = resolve(location)
    if buffer_size is None and is_uri(location):
        buffer_size = 8 << 20
    # compression=None: the raw bytes (pyarrow would otherwise gunzip ``*.gz`` by name).
    with fs.open_input_stream(path, compression=None, buffer_size=buffer_size) as f:
        first = f.read(_CHUNK)
        got = [len(first)]
        gz = first[:2] == _GZIP_MAGIC

        def chunks() -> Iterator[bytes]:
            data = first
            if not gz:
                while data:
                    yield data
                    data = f.read(_CHUNK)
                    got[0] += len(data)
                return
            # A read's output is passed on only once the next read decoded cleanly (or its
            # member ended, CRC checked): damage decodes to junk before zlib notices, and that
            # junk must never pass for lines. A stream that stops before its end is an error.
            d = zlib.decompressobj(wbits=31)
            pending: list[bytes] = []
            while data:
                out = d.decompress(data)
                while d.eof and d.unused_data:  # concatenated gzip members
                    yield from pending
                    pending = []
                    if out:
                        yield out
                    rest = d.unused_data
                    d = zlib.decompressobj(wbits=31)
                    out = d.decompress(rest)
                yield from pending
                pending = [out] if out else []
                if d.eof:
                    yield from pending
                    pending = []
                data = f.read(_CHUNK)
                got[0] += len(data)
            if not d.eof:
                raise EOFError("the gzip stream ends before its end (truncated)")
            yield from pending

        carry = b""
        for chunk in chunks():
            if carry:
                chunk = carry + chunk
            lines = chunk.split(b"\n")
            carry = lines.pop()
            yield from lines
        if carry:
            yield carry
        if expected_size is not None and got[0] != expected_size:
            raise ShortRead(
                f"read {got[0]} bytes of {location}, listed with {expected_size}: the file was "
                "truncated or replaced while the sync read it; nothing is committed, re-run"
            )


def delete_file(location: str) -> bool:
    """Remove one file; ``False`` if it was not there."""
    fs, path = resolve(location)
    try:
        fs.delete_file(path)
    except FileNotFoundError:
        return False
    return True


def temporary_name(name: str) -> str:
    """A hidden (``.``-prefixed, so invisible to the sync and the sensors), unique name."""
    return f".tmp-{uuid.uuid4().hex[:12]}-{name}"


class StagedFile:
    """A file that appears under ``location`` complete or not at all.

    Local: written as ``.tmp-<random>-<name>`` in the target folder, renamed by ``commit``.
    URIs (S3, Azure): spooled to a local temporary file (memory stays bounded whatever the
    size), uploaded by ``commit`` as ``.tmp-<random>-<name>`` next to the target, then moved
    (S3: copy + delete) or published (Azure, see the module docstring). ``abort`` removes
    every trace. A crash may leave a ``.tmp-`` file behind: hidden from the sync and the
    sensors."""

    def __init__(self, location: str, spool_dir: str | None = None):
        self.location = location
        self._uri = is_uri(location)
        if self._uri:
            fd, self._tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".spool", dir=spool_dir)
            self._f = os.fdopen(fd, "wb")
        else:
            folder = os.path.dirname(location)
            os.makedirs(folder, exist_ok=True)
            self._tmp = os.path.join(folder, temporary_name(os.path.basename(location)))
            self._f = open(self._tmp, "wb")  # noqa: SIM115 (closed by commit/abort)
        self.size = 0

    def write(self, data: bytes) -> None:
        self._f.write(data)
        self.size += len(data)

    def commit(self) -> None:
        try:
            if not self._uri:
                self._f.flush()
                os.fsync(self._f.fileno())
                self._f.close()
                os.replace(self._tmp, self.location)
                return
            self._f.close()
            fs, path = resolve(self.location)
            hidden = hidden_path(path, self.location)
            try:
                # compression=None: pyarrow would gzip a ".gz" name once more
                with (
                    open(self._tmp, "rb") as src,
                    fs.open_output_stream(hidden, compression=None) as out,
                ):
                    while chunk := src.read(1 << 20):
                        out.write(chunk)
                publish(fs, hidden, path, self.location)
            except BaseException:
                discard_hidden(fs, hidden)
                raise
        finally:
            self._discard()

    def abort(self) -> None:
        self._discard()

    def _discard(self) -> None:
        if not self._f.closed:
            self._f.close()
        try:
            os.unlink(self._tmp)
        except FileNotFoundError:
            pass
