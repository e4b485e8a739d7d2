"""The per-hour identity index on storage, listed and read with every byte counted.

A privacy request is judged by what it reads (the issue's target is bytes against a full
scan), so its reads go through ``Reads``: a counting file object under pyarrow's Parquet
reader, which sees every byte taken from local disk or S3. Listings are counted apart.

Listing: ``list_index_hours`` lists ``<lake>/_identities/<source>/`` once, recursively (on S3
about one LIST request per 1,000 hours), and keeps the ``hour=<YYYYMMDDHH>/*.parquet`` files
with their size and modification time (``FileKey``), which is how the summary tells whether an
hour changed since it was compacted (``privacy/summary.py``). Hidden files (``.tmp-`` files of
a commit in progress, ``_COMMITTED_BY`` markers) are not part of an hour.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from datalake_assets.lake import storage
from datalake_assets.spec import layout

# A file this small (a per-hour index file: ~12 KB for 400 identities) is read whole, in one
# read (one GET on S3): a lookup of it needs most of its bytes anyway.
WHOLE_FILE_BYTES = 64 << 10
TAIL_BYTES = 8 << 10  # a larger file's first read: its end, holding the footer or most of it

FileKey = tuple[str, int, int]  # (name, size, mtime in ns): one version of an index file
HourFiles = dict[str, tuple[FileKey, ...]]  # compact hour -> its files, sorted


@dataclass
class Reads:
    """What a lookup or compaction read: bytes, files opened, summary row groups."""

    bytes: int = 0
    files: int = 0
    row_groups: int = 0


class CountingFile:
    """A file object over a pyarrow input file that counts every byte read through it (in
    ``reads.bytes``): pyarrow's Parquet reader reads ranges through it."""

    def __init__(self, raw: pa.NativeFile, reads: Reads):
        self._raw = raw
        self._reads = reads

    def read(self, n: int | None = -1) -> bytes:
        data = self._raw.read(None if n is None or n < 0 else n)
        self._reads.bytes += len(data)
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._raw.seek(offset, whence)

    def tell(self) -> int:
        return self._raw.tell()

    def size(self) -> int:
        return self._raw.size()

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def writable(self) -> bool:
        return False

    @property
    def closed(self) -> bool:
        return self._raw.closed

    def close(self) -> None:
        self._raw.close()


def open_parquet(location: str, reads: Reads) -> pq.ParquetFile:
    """The file's reader, having read its footer only (a file of at most ``WHOLE_FILE_BYTES``:
    all of it, in one read). The footer is read by hand because pyarrow's own open reads the
    last 64 KiB of every file, several times a month's summary footer."""
    fs, path = storage.resolve(location)
    raw = fs.open_input_file(path)
    counted = CountingFile(raw, reads)
    size = raw.size()
    start = 0 if size <= WHOLE_FILE_BYTES else size - TAIL_BYTES
    counted.seek(start)
    tail = counted.read(size - start)
    reads.files += 1
    if size < 12 or tail[-4:] != b"PAR1":
        raw.close()
        raise ValueError(f"{location}: not a Parquet file ({size} bytes)")
    if start == 0:  # the whole file is in memory: read it from there
        raw.close()
        return pq.ParquetFile(pa.BufferReader(tail))
    footer_len = int.from_bytes(tail[-8:-4], "little")
    if footer_len + 8 > size - 4:
        raw.close()
        raise ValueError(f"{location}: damaged Parquet footer ({footer_len} bytes of {size})")
    if footer_len + 8 > len(tail):
        counted.seek(size - 8 - footer_len)
        tail = counted.read(footer_len + 8 - len(tail)) + tail
    footer = tail[len(tail) - 8 - footer_len :]
    metadata = pq.read_metadata(pa.BufferReader(b"PAR1" + footer))
    return pq.ParquetFile(pa.PythonFile(counted, mode="r"), metadata=metadata, pre_buffer=False)


def _hour_files(infos: Iterable[pafs.FileInfo]) -> HourFiles:
    """Group ``.../hour=<YYYYMMDDHH>/<name>.parquet`` files by hour. String slicing, not a
    regex: a year is 8,760 entries a lookup, and this loop was half of a lookup's time."""
    found: dict[str, list[FileKey]] = {}
    for info in infos:
        if not info.is_file:
            continue
        path = info.path
        cut = path.rfind("/")
        name = path[cut + 1 :]
        if name[:1] in (".", "_") or not name.endswith(".parquet"):
            continue  # hidden: a commit's ``.tmp-`` file, a ``_COMMITTED_BY`` marker
        folder = path[path.rfind("/", 0, cut) + 1 : cut]
        if len(folder) != 15 or not folder.startswith("hour=") or not folder[5:].isdigit():
            continue
        found.setdefault(folder[5:], []).append((name, info.size or 0, info.mtime_ns or 0))
    return {h: tuple(sorted(files)) for h, files in found.items()}


def _infos(directory: str, recursive: bool) -> list[pafs.FileInfo]:
    fs, path = storage.resolve(directory)
    try:
        return fs.get_file_info(pafs.FileSelector(path, allow_not_found=True, recursive=recursive))
    except FileNotFoundError:
        return []


def hour_dir(lake_root: str, source_dir: str, hour: str) -> str:
    return layout.join(layout.identity_index_root(lake_root, source_dir), f"hour={hour}")


def list_index_hours(lake_root: str, source_dir: str) -> tuple[HourFiles, int]:
    """Every hour of the source's per-hour identity index with its files, and how many
    entries the listing returned."""
    infos = _infos(layout.identity_index_root(lake_root, source_dir), recursive=True)
    return _hour_files(infos), len(infos)


def list_hour(lake_root: str, source_dir: str, hour: str) -> tuple[FileKey, ...]:
    """The files of one hour of the index, listed now."""
    infos = _infos(hour_dir(lake_root, source_dir, hour), recursive=False)
    return _hour_files(infos).get(hour, ())
