"""The Parquet files of one table-hour that one stage-B task writes (``stage_b.py``).

Readers pay per file (an open, a footer read, on S3 several requests), so a sync writes files
of the right size in the first place (issue #33): rows arrive as one Arrow table per work file
(a few thousand rows each), are buffered into row groups of about ``row_group_bytes`` of Arrow
data, and a file is closed and the next one started once the bytes written reach the target
(``[iceberg] target_file_mb``: compaction's size too, one setting of the lake, whatever its
table format). A file therefore ends between the target and the target plus one row group (and
its footer); only an hour's last file is smaller.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from datalake_assets.lake import storage
from datalake_assets.spec import layout

DEFAULT_TARGET_FILE_BYTES = 512 * 1024 * 1024
# Row groups of at most this much Arrow (uncompressed) data: engines read and skip a row group
# as a unit, and a sync's memory holds one per hour being written. Compressed, a row group is
# several times smaller, so the slack above the target is well under this.
MAX_ROW_GROUP_BYTES = 128 * 1024 * 1024


def row_group_bytes(target_bytes: int) -> int:
    """A quarter of the target, at most ``MAX_ROW_GROUP_BYTES``: a file holds several row
    groups, and the overshoot past the target (one row group) stays a fraction of it."""
    return max(1, min(target_bytes // 4, MAX_ROW_GROUP_BYTES))


@dataclass(frozen=True)
class WrittenFile:
    location: str
    rows: int
    bytes: int


class HourFiles:
    """``part-<hour>-<run>-<task>-<seq>.parquet`` files in ``directory``, seq 0, 1, 2, ..."""

    def __init__(
        self,
        directory: str,
        hour: layout.ArchiveHour,
        run_id: str,
        task: int,
        schema: pa.Schema,
        target_bytes: int = DEFAULT_TARGET_FILE_BYTES,
    ) -> None:
        self.directory = directory
        self.hour = hour
        self.run_id = run_id
        self.task = task
        self.schema = schema
        self.target_bytes = target_bytes
        self.group_bytes = row_group_bytes(target_bytes)
        self.written: list[WrittenFile] = []
        self._buffer: list[pa.Table] = []
        self._buffered = 0
        self._writer: pq.ParquetWriter | None = None
        self._sink: pa.NativeFile | None = None
        self._location = ""
        self._rows = 0

    def write(self, table: pa.Table) -> None:
        self._buffer.append(table)
        self._buffered += table.nbytes
        if self._buffered >= self.group_bytes:
            self._flush()

    def close(self) -> list[WrittenFile]:
        """Write what is buffered, close the open file; every file written, in order."""
        self._flush()
        self._finish_file()
        return self.written

    def _flush(self) -> None:
        if not self._buffer:
            return
        data = pa.concat_tables(self._buffer)
        self._buffer, self._buffered = [], 0
        n = data.num_rows
        # rows per group from the data's own width, so one group is about group_bytes
        per_group = max(1, int(self.group_bytes * n / max(data.nbytes, 1)))
        for start in range(0, n, per_group):
            part = data.slice(start, per_group)
            writer, sink = self._open()
            writer.write_table(part, row_group_size=part.num_rows)
            self._rows += part.num_rows
            # our own stream: its position is the bytes written so far (no HEAD on S3)
            if sink.tell() >= self.target_bytes:
                self._finish_file()

    def _open(self) -> tuple[pq.ParquetWriter, pa.NativeFile]:
        if self._writer is None or self._sink is None:
            name = layout.data_file_name(self.hour, self.run_id, self.task, len(self.written))
            self._location = layout.join(self.directory, name)
            fs, path = storage.resolve(self._location)
            if not self.written:
                storage.create_dir(self.directory)
            self._sink = fs.open_output_stream(path)
            self._writer = pq.ParquetWriter(self._sink, self.schema, compression="snappy")
            self._rows = 0
        return self._writer, self._sink

    def _finish_file(self) -> None:
        if self._writer is None or self._sink is None:
            return
        self._writer.close()
        size = self._sink.tell()
        self._sink.close()
        self.written.append(WrittenFile(self._location, self._rows, size))
        self._writer = self._sink = None
