"""Archive lines in chunks for the native parse (``native_parse.py``): the decoded bytes of a
file (``storage.iter_decoded``) cut into chunks of whole lines, found by a numpy search for
``\\n`` over each block, never a Python object per line (splitting into ``bytes`` lines and
joining them again cost ~10 % of stage A's CPU on the bench hour).

A chunk keeps each line's ``\\n`` (the texts handed to DuckDB are the buffer's own bytes; JSON
ignores the trailing whitespace); ``Chunk.line`` gives a line without it, as
``storage.iter_lines`` does. A last line without ``\\n`` is given one, so every line of a
chunk ends with it.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

_NEWLINE = 10


class Chunk:
    """Whole lines in one buffer: line ``i`` is ``data[ends[i]:ends[i + 1]]``, its ``\\n``
    included (the buffer may go on past the last end)."""

    __slots__ = ("data", "ends")

    def __init__(self, data: bytes, ends: np.ndarray) -> None:
        self.data = data
        self.ends = ends

    def __len__(self) -> int:
        return len(self.ends) - 1

    def line(self, i: int) -> bytes:
        """Line ``i`` without its ``\\n``."""
        return self.data[self.ends[i]:self.ends[i + 1] - 1]


class ChunkReader:
    """Cuts decoded blocks into chunks of at most ``max_lines`` lines, a chunk as soon as
    ``max_bytes`` of text is held (``feed``), the lines left at the end (``rest``)."""

    def __init__(self, max_lines: int, max_bytes: int) -> None:
        self.max_lines = max_lines
        self.max_bytes = max_bytes
        self.parts: list[bytes] = []
        self.newlines: list[np.ndarray] = []  # per part: its newlines' offsets in the held text
        self.size = 0
        self.count = 0  # newlines held

    def feed(self, block: bytes) -> Iterator[Chunk]:
        if not block:
            return
        nl = np.flatnonzero(np.frombuffer(block, np.uint8) == _NEWLINE)
        if len(nl):
            self.newlines.append(nl + self.size)
            self.count += len(nl)
        self.parts.append(block)
        self.size += len(block)
        while self.count >= self.max_lines or (self.count and self.size >= self.max_bytes):
            yield self._cut(min(self.count, self.max_lines))

    def rest(self, complete: bool) -> Chunk | None:
        """The lines held at the end of the file; with ``complete`` False (the read failed)
        only whole lines: a last line without ``\\n`` may be cut short."""
        if complete and self.parts and not self.parts[-1].endswith(b"\n"):
            self.feed_end()
        return self._cut(self.count) if self.count else None

    def feed_end(self) -> None:
        """A last line without ``\\n``: it is given one."""
        self.newlines.append(np.array([self.size], np.int64))
        self.parts.append(b"\n")
        self.size += 1
        self.count += 1

    def _cut(self, k: int) -> Chunk:
        """A chunk of the first ``k`` lines held; the rest stays held."""
        data = self.parts[0] if len(self.parts) == 1 else b"".join(self.parts)
        nl = self.newlines[0] if len(self.newlines) == 1 else np.concatenate(self.newlines)
        ends = np.empty(k + 1, np.int64)
        ends[0] = 0
        ends[1:] = nl[:k] + 1
        end = int(ends[-1])
        left = data[end:]
        self.parts = [left] if left else []
        self.newlines = [nl[k:] - end] if k < len(nl) else []
        self.size = len(left)
        self.count = len(nl) - k
        return Chunk(data, ends)
