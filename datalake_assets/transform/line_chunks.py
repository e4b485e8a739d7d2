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

    def __init__(self, data: bytes | bytearray, ends: np.ndarray) -> None:
        self.data = data
        self.ends = ends

    def __len__(self) -> int:
        return len(self.ends) - 1

    def line(self, i: int) -> bytes:
        """Line ``i`` without its ``\\n``."""
        return bytes(self.data[self.ends[i]:self.ends[i + 1] - 1])


class ChunkReader:
    """Cuts decoded blocks into chunks of at most ``max_lines`` lines, a chunk as soon as
    ``max_bytes`` of text is held (``feed``), the lines left at the end (``rest``)."""

    def __init__(self, max_lines: int, max_bytes: int) -> None:
        self.max_lines = max_lines
        self.max_bytes = max_bytes
        # The text held, grown in place: a list of blocks joined at the cut held the chunk's
        # text twice for a moment (~128 MB more a worker at its peak).
        self.buf = bytearray()
        self.newlines: list[np.ndarray] = []  # per block: its newlines' offsets in ``buf``
        self.count = 0  # newlines held

    def feed(self, block: bytes) -> Iterator[Chunk]:
        if not block:
            return
        nl = np.flatnonzero(np.frombuffer(block, np.uint8) == _NEWLINE)
        if len(nl):
            self.newlines.append(nl + len(self.buf))
            self.count += len(nl)
        self.buf += block
        while self.count >= self.max_lines or (self.count and len(self.buf) >= self.max_bytes):
            yield self._cut(min(self.count, self.max_lines))

    def rest(self, complete: bool) -> Chunk | None:
        """The lines held at the end of the file; with ``complete`` False (the read failed)
        only whole lines: a last line without ``\\n`` may be cut short."""
        if complete and self.buf and not self.buf.endswith(b"\n"):
            self.feed_end()
        return self._cut(self.count) if self.count else None

    def feed_end(self) -> None:
        """A last line without ``\\n``: it is given one."""
        self.newlines.append(np.array([len(self.buf)], np.int64))
        self.buf += b"\n"
        self.count += 1

    def _cut(self, k: int) -> Chunk:
        """A chunk of the first ``k`` lines held (the buffer itself, handed over); the rest
        stays held, in a new buffer."""
        data = self.buf
        nl = self.newlines[0] if len(self.newlines) == 1 else np.concatenate(self.newlines)
        ends = np.empty(k + 1, np.int64)
        ends[0] = 0
        ends[1:] = nl[:k] + 1
        end = int(ends[-1])
        self.buf = data[end:]
        self.newlines = [nl[k:] - end] if k < len(nl) else []
        self.count = len(nl) - k
        return Chunk(data, ends)
