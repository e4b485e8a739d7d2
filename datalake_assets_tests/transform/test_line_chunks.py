"""The chunks of lines stage A hands to the native parse (``line_chunks.py``): the same lines
as ``storage.iter_lines`` gives, whatever the block boundaries, the chunk limits, a last line
without ``\\n`` or a read that fails."""

from __future__ import annotations

import gzip
import random

import pytest

from datalake_assets.lake import storage
from datalake_assets.transform.line_chunks import ChunkReader


def _lines_of(chunks) -> list[bytes]:
    out = []
    for c in chunks:
        assert all(c.data[e - 1:e] == b"\n" for e in c.ends[1:])  # every line ends with \n
        out.extend(c.line(i) for i in range(len(c)))
    return out


def _read(blocks, max_lines: int, max_bytes: int, complete: bool = True):
    reader = ChunkReader(max_lines, max_bytes)
    chunks = [c for b in blocks for c in reader.feed(b)]
    rest = reader.rest(complete)
    return chunks + ([rest] if rest is not None else [])


@pytest.mark.parametrize("seed", range(6))
def test_any_cut_gives_the_lines_iter_lines_gives(tmp_path, seed):
    rnd = random.Random(seed)
    lines = [rnd.choice([b"", b"\r", b'{"a":1}\r', b"x" * rnd.randrange(1, 300),
                         '{"é":"ü"}'.encode()]) for _ in range(rnd.randrange(1, 400))]
    text = b"\n".join(lines) + rnd.choice([b"", b"\n"])
    path = tmp_path / "f.jsonl.gz"
    path.write_bytes(gzip.compress(text))
    want = list(storage.iter_lines(str(path)))
    cuts = sorted(rnd.sample(range(1, len(text)), min(20, len(text) - 1))) if len(text) > 1 else []
    blocks = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
    max_lines, max_bytes = rnd.randrange(1, 50), rnd.randrange(1, 2000)
    chunks = _read(blocks, max_lines, max_bytes)
    assert _lines_of(chunks) == want
    assert all(0 < len(c) <= max_lines for c in chunks)
    assert _lines_of(_read(storage.iter_decoded(str(path)), 7, 1 << 20)) == want


def test_a_chunk_is_cut_once_it_holds_max_bytes():
    blocks = [b"a" * 99 + b"\n"] * 10
    chunks = _read(blocks, 1000, 250)
    assert [len(c) for c in chunks] == [3, 3, 3, 1]


def test_a_failed_read_keeps_only_whole_lines():
    chunks = _read([b"one\ntwo\nthr"], 100, 1 << 20, complete=False)
    assert _lines_of(chunks) == [b"one", b"two"]
    assert _lines_of(_read([b"one\ntwo\nthr"], 100, 1 << 20)) == [b"one", b"two", b"thr"]
    assert _read([b"partial"], 100, 1 << 20, complete=False) == []
