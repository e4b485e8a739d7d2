"""Pipes through the lake's storage: what the orchestrator writes the job reads, and the
message chunks the job writes the orchestrator reads, in order (both sides, no Spark)."""

from __future__ import annotations

import io
import json

from datalake_assets.orchestration.compute.pipes_channel import (
    StorageContextInjector,
    StorageMessageReader,
    default_pipes_root,
)
from datalake_assets.transform.pipes_storage import (
    StorageContextLoader,
    StorageMessageWriter,
)


def test_default_pipes_root_is_at_the_storage_root():
    assert default_pipes_root("abfss://lake@acct.dfs.core.windows.net/lake") == (
        "abfss://lake@acct.dfs.core.windows.net/_pipes"
    )
    assert default_pipes_root("s3://bucket/a/lake") == "s3://bucket/_pipes"
    assert default_pipes_root("/data/lake") == "/data/_pipes"
    assert default_pipes_root("/data/lake/") == "/data/_pipes"


def test_context_and_message_chunks_round_trip(tmp_path):
    folder = str(tmp_path / "_pipes" / "run-1")
    context = {"asset_keys": ["web_prod/tracks"], "run_id": "run-1", "extras": {"a": 1}}
    with StorageContextInjector(folder).inject_context(context) as params:
        with StorageContextLoader().load_context(params) as loaded:
            assert loaded == context
    assert (tmp_path / "_pipes" / "run-1" / "context.json").is_file()

    reader = StorageMessageReader(folder, interval=0)
    with reader.get_params() as params:
        assert reader.download_messages_chunk(1, params) is None  # nothing written yet
        channel = StorageMessageWriter(interval=0).make_channel(params)
        chunks = ['{"method": "opened"}', '{"method": "log"}\n{"method": "closed"}']
        for i, chunk in enumerate(chunks, start=1):
            channel.upload_messages_chunk(io.StringIO(chunk), i)
        assert [reader.download_messages_chunk(i, params) for i in (1, 2, 3)] == [*chunks, None]
    files = sorted(p.name for p in (tmp_path / "_pipes" / "run-1" / "messages").iterdir())
    assert files == ["1.json", "2.json"]  # no temporary file left: each chunk is atomic
    assert json.loads((tmp_path / "_pipes" / "run-1" / "messages" / "1.json").read_text())
