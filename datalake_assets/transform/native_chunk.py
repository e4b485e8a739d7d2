"""The lines of a chunk for the native parse (``native_parse.py``): their bytes in one buffer
(``Chunk``: no object per line), read as one Arrow string array, and the byte scans made over
each line's range of that buffer (its key count, whether it holds a backslash)."""

from __future__ import annotations

from bisect import bisect_right
from itertools import pairwise

import numpy as np
import pyarrow as pa


class Chunk:
    """Lines gathered for the native parser, their bytes in one buffer (no object per line)."""

    __slots__ = ("data", "ends")

    def __init__(self) -> None:
        self.data = bytearray()
        self.ends = [0]

    def add(self, raw: bytes) -> None:
        self.data += raw
        self.ends.append(len(self.data))

    def __len__(self) -> int:
        return len(self.ends) - 1

    def line(self, i: int) -> bytes:
        return bytes(self.data[self.ends[i] : self.ends[i + 1]])


def _texts(chunk: Chunk) -> pa.Array:
    """The lines as one string array over the chunk's buffer; a line that is not UTF-8 as
    ``""`` (routed to the Python path)."""
    n = len(chunk)
    if len(chunk.data) >= 2**31:
        raise ValueError("a chunk of 2 GiB or more: the Python path reads it")
    offsets = pa.py_buffer(np.array(chunk.ends, np.int32))
    texts = pa.StringArray.from_buffers(n, offsets, pa.py_buffer(chunk.data))
    try:
        texts.validate(full=True)
        return texts
    except pa.ArrowInvalid:
        pass
    fixed = []
    for i in range(n):
        try:
            fixed.append(chunk.line(i).decode("utf-8"))
        except UnicodeDecodeError:
            fixed.append("")
    return pa.array(fixed, pa.string())


def _key_counts(chunk: Chunk) -> np.ndarray:
    """``KEY_COUNT_RE``'s count in each line, for minified lines (``_ROUTE_RE`` routes away
    a line with space around a key's colon): ``":`` not followed by ``n`` (null) or ``{}``.
    ``bytes.count`` over each line's range of the chunk's buffer: a C search. Numpy byte tests
    over the whole buffer were not reliably faster (0.24-0.48 against 0.30 s for 100k bench
    lines, session 16) and hold arrays the size of the text."""
    data, ends = chunk.data, chunk.ends
    count = data.count
    return np.fromiter(
        (
            count(b'":', a, b) - count(b'":n', a, b) - count(b'":{}', a, b)
            for a, b in pairwise(ends)
        ),
        np.int64,
        len(chunk),
    )


def _escaped(chunk: Chunk) -> np.ndarray:
    """Whether each line holds a backslash (a table without any: its string columns are not
    searched for escapes, a tenth of ``flatten_texts``' time on the bench hour). One C search
    per line that holds one (a byte test over the whole text would hold an array its size)."""
    data, ends = chunk.data, chunk.ends
    out = np.zeros(len(chunk), bool)
    end = ends[-1]
    at = data.find(b"\\", 0, end)
    while at >= 0:
        line = bisect_right(ends, at) - 1
        out[line] = True
        at = data.find(b"\\", ends[line + 1], end)
    return out
