"""The native parse (``transform/native_parse.py``, DuckDB in the workers) against the Python
path (``spec/``, the reference): the same lines in, the same values, kinds, problems, keys,
identity entries, statistics and quarantine records out (``support/native_equivalence.py``
says how they are compared), on generated traffic, on hand-made hostile lines and on the
hostile corpus; and a whole sync writes the same lake either way."""

from __future__ import annotations

import gzip
import os
import random

import pytest

from datalake_assets.ingest.demo import generate_archive
from datalake_assets.lake.identities import lake_key
from datalake_assets.spec.identity import Identity, identity_hash
from datalake_assets.spec.layout import ArchiveHour
from datalake_assets.transform import native_parse
from datalake_assets.transform.job import SyncRequest, run_sync
from datalake_assets_tests.reliability.hostile_corpus import CASES, MAX_MESSAGE_BYTES
from datalake_assets_tests.support.native_equivalence import (
    differences,
    generated_line,
    run_stage_a_on,
)

KEY = b"k" * 32
IDENTITY = {"identity_key": KEY, "identity_traits": ("email",)}


def write(path: str, lines: list[bytes], compress: bool = True) -> str:
    body = b"".join(line + b"\n" for line in lines)
    with open(path, "wb") as f:
        f.write(gzip.compress(body) if compress else body)
    return path


def both(tmp_path, files: list[str], monkeypatch, **cfg) -> tuple[dict, dict, int]:
    py, _ = run_stage_a_on(str(tmp_path / "py"), files, False, monkeypatch, **dict(cfg))
    nat, left = run_stage_a_on(str(tmp_path / "nat"), files, True, monkeypatch, **dict(cfg))
    return py, nat, left


def demo_files(root: str, events: int, files: int = 2, seed: int = 7) -> list[str]:
    s = generate_archive(
        root,
        "src",
        [ArchiveHour.parse("2026-11-21T10")],
        events_per_hour=events,
        files_per_hour=files,
        seed=seed,
    )
    return sorted(s.files)


@pytest.mark.slow
def test_plain_traffic_takes_the_native_path_and_writes_what_the_python_path_writes(
    tmp_path, monkeypatch
):
    files = demo_files(str(tmp_path / "archive"), 6000)
    py, nat, left = both(tmp_path, files, monkeypatch, **IDENTITY)
    assert not differences(py, nat), differences(py, nat)
    assert py["lines_in"] == 6000 and py["identity"]
    # only the malformed lines (0.2 %) and the odd valid one take the Python path
    assert left < 6000 * 0.01, left


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_generated_hostile_traffic_is_written_the_same(tmp_path, monkeypatch, seed):
    """Types changing from line to line, colliding spellings, deep nesting, wide numbers,
    odd texts, keys given twice, NaN, trailing commas, invalid UTF-8, escapes, pretty
    printing: interleaved with plain lines, in one file and one chunk."""
    rnd = random.Random(seed)
    lines = [generated_line(rnd, i) for i in range(3000)]
    files = [
        write(str(tmp_path / "a.jsonl.gz"), lines),
        write(str(tmp_path / "b.jsonl"), lines[::-1], compress=False),
    ]
    suppressed = frozenset(
        {
            identity_hash(KEY, Identity("id", "anon-3")),
            identity_hash(KEY, Identity("trait:email", "a@b.com")),
        }
    )
    py, nat, left = both(tmp_path, files, monkeypatch, suppressed=suppressed, **IDENTITY)
    assert not differences(py, nat), differences(py, nat)
    assert py["suppressed"] and py["quarantine"] and py["lines_in"] > 5000
    assert left < len(files) * 3000 * 0.9  # hostile by design, yet a good share goes native


def test_escaped_strings_in_one_table_plain_strings_in_another(tmp_path, monkeypatch):
    """String columns are searched for escapes only in a table whose lines hold a
    backslash (``_escaped``): both tables are written as the Python path writes them."""
    plain = [
        b'{"type":"page","name":"Home","messageId":"p%d","anonymousId":"a%d",'
        b'"receivedAt":"2026-11-21T10:00:00Z","properties":{"path":"/x/%d"}}' % (i, i, i)
        for i in range(400)
    ]
    escaped = [
        b'{"type":"track","event":"Note","messageId":"t%d","anonymousId":"a%d",'
        b'"receivedAt":"2026-11-21T10:00:00Z","properties":{"text":"a\\nb\\\\c%d",'
        b'"plain":"x"}}' % (i, i, i)
        for i in range(400)
    ]
    files = [write(str(tmp_path / "a.jsonl.gz"), [x for pair in zip(plain, escaped) for x in pair])]
    monkeypatch.setattr(native_parse, "MIN_NATIVE_LINES", 100)
    py, nat, left = both(tmp_path, files, monkeypatch, **IDENTITY)
    assert not differences(py, nat), differences(py, nat)
    assert left == 0 and py["lines_in"] == 800


def test_small_chunks_and_a_shape_that_grows(tmp_path, monkeypatch):
    """A table's keys arrive late in the file (the shape grows from the lines that did not
    fit it) and chunks are small (``buffered_rows``)."""
    rnd = random.Random(9)
    early = [generated_line(rnd, i) for i in range(300)]
    late = [
        b'{"type":"track","event":"Order Completed","messageId":"late%d","anonymousId":"a",'
        b'"receivedAt":"2026-11-21T10:00:00Z","properties":{"new_%d":{"x":%d},"price":"%d"}}'
        % (i, i % 5, i, i)
        for i in range(300)
    ]
    files = [write(str(tmp_path / "a.jsonl.gz"), early + late)]
    py, nat, _ = both(tmp_path, files, monkeypatch, flush_rows=50, buffered_rows=120)
    assert not differences(py, nat), differences(py, nat)


@pytest.mark.slow
def test_a_table_the_native_reader_fails_on_takes_the_python_path_alone(tmp_path, monkeypatch):
    """The chunk is parsed a table at a time: when one table's transform fails, its lines
    take the Python path and the other tables stay native; nothing is lost or doubled."""
    files = demo_files(str(tmp_path / "archive"), 6000, files=1)
    real = native_parse.NativeParser._transform

    def failing(self, shape, code):
        if self.failing_code is None:
            self.failing_code = code  # the first table of each chunk
        if code == self.failing_code:
            raise native_parse.duckdb.InvalidInputException("simulated")
        return real(self, shape, code)

    py, _ = run_stage_a_on(str(tmp_path / "py"), files, False, monkeypatch, **IDENTITY)
    _, all_native = run_stage_a_on(str(tmp_path / "n0"), files, True, monkeypatch, **IDENTITY)
    monkeypatch.setattr(native_parse.NativeParser, "failing_code", None, raising=False)
    monkeypatch.setattr(native_parse.NativeParser, "_transform", failing)
    nat, left = run_stage_a_on(str(tmp_path / "nat"), files, True, monkeypatch, **IDENTITY)
    assert not differences(py, nat), differences(py, nat)
    assert all_native < left < 6000 / 2  # one table's lines more, not the chunk's


@pytest.mark.slow
@pytest.mark.parametrize("max_bytes", [32 * 1024, MAX_MESSAGE_BYTES])
def test_the_hostile_corpus_is_written_the_same(tmp_path, monkeypatch, max_bytes):
    """Every line of the hostile corpus (``reliability/hostile_corpus.py``), big lines (up to
    10 MB) in a file of their own, plain (not gzipped) files too."""
    by_file: dict[str, list[bytes]] = {}
    for case in CASES:
        for line in case.lines:
            by_file.setdefault(line.file, []).append(line.raw)
    files = [
        write(str(tmp_path / name), lines, compress=name.endswith(".gz"))
        for name, lines in sorted(by_file.items())
    ]
    py, nat, _ = both(tmp_path, files, monkeypatch, max_message_bytes=max_bytes, **IDENTITY)
    assert not differences(py, nat), differences(py, nat)
    assert py["quarantine"] and py["rows"]


def test_small_chunks_take_the_python_path(tmp_path, monkeypatch):
    """Below ``MIN_NATIVE_LINES`` a chunk is read by the reference rules alone (the native
    parse's fixed costs would make a small hour slower)."""
    files = demo_files(str(tmp_path / "archive"), 400)
    monkeypatch.setattr(native_parse, "MIN_NATIVE_LINES", 10_000)
    p = native_parse.NativeParser(32 * 1024, 16)
    chunk = native_parse.Chunk()
    from datalake_assets.lake import storage

    for raw in storage.iter_lines(files[0]):
        chunk.add(raw)
    assert len(chunk) > 0 and list(p.parse(chunk, None, "2026112110")) == []
    monkeypatch.setattr(native_parse, "MIN_NATIVE_LINES", 100)  # the same chunk, natively
    results = list(p.parse(chunk, None, "2026112110"))
    assert sum(len(r.handled) for r in results) > len(chunk) // 2
    p.close()


@pytest.mark.slow
def test_a_sync_writes_the_same_lake_either_way(tmp_path, monkeypatch):
    """The whole sync (the driver-local path, no Spark): tables, quarantine, indexes and the
    report, through the native parse and through the Python path."""
    from datalake_assets_tests.transform.test_local_path import (
        LOCAL,
        no_spark,
        parquet_state,
        report_state,
    )

    archive = str(tmp_path / "archive")
    generate_archive(
        archive,
        "src",
        [ArchiveHour.parse("2026-11-21T10")],
        events_per_hour=2000,
        files_per_hour=2,
        seed=5,
    )
    rnd = random.Random(4)
    hour_dir = os.path.dirname(demo_files(str(tmp_path / "x"), 10)[0]).replace(
        str(tmp_path / "x"), archive
    )
    write(
        os.path.join(hour_dir, "part-0900.jsonl.gz"), [generated_line(rnd, i) for i in range(1500)]
    )
    states = []
    for native in (False, True):
        lake = str(tmp_path / f"lake-{native}")
        os.makedirs(lake)
        if native:  # one identity key for both lakes
            import shutil

            from datalake_assets.spec import layout

            os.makedirs(os.path.dirname(layout.privacy_key_path(lake)))
            shutil.copy(
                layout.privacy_key_path(str(tmp_path / "lake-False")), layout.privacy_key_path(lake)
            )
        else:
            lake_key(lake)
        if not native:
            monkeypatch.setattr(native_parse, "parser_for", lambda *a: None)
        monkeypatch.setattr(native_parse, "MIN_NATIVE_LINES", 1)
        result = run_sync(
            no_spark, SyncRequest(lake, archive, "src", ("2026-11-21T10",), local_max_bytes=LOCAL)
        )
        monkeypatch.undo()
        native_parse._LOCAL.parsers = {}
        states.append((report_state(result, lake), parquet_state(lake)))
    # the same rows, values and report; only the Parquet files' bytes differ: rows come in
    # another order (a chunk's native rows, then the lines it left, instead of line order)
    assert without_bytes(states[0][0]) == without_bytes(states[1][0])
    assert repr(states[0][1]) == repr(states[1][1])  # repr: NaN equals NaN


def without_bytes(d: object) -> object:
    if isinstance(d, dict):
        return {k: without_bytes(v) for k, v in d.items() if k != "bytes"}
    if isinstance(d, list):
        return [without_bytes(v) for v in d]
    return d
