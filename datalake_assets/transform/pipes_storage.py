"""Dagster Pipes through the lake's own storage, the job's side (``dagster_pipes`` only).

The Databricks backend (``orchestration/compute/databricks.py``) writes the Pipes context to a file
under the lake storage's ``_pipes/<run_id>/`` and reads the message chunks the job writes next
to it. Through ``lake.storage`` (pyarrow.fs) both sides reach the same files with the
credentials the sync already needs for its own I/O: no DBFS, no second storage to grant.

Params (made by ``orchestration/compute/pipes_channel.py``): context ``{"location": <file>}``,
messages ``{"location": <folder>}``, chunks ``<folder>/<index>.json`` as
``PipesBlobStoreMessageWriterChannel`` numbers them (1, 2, ...).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO

from dagster_pipes import (
    PipesBlobStoreMessageWriter,
    PipesBlobStoreMessageWriterChannel,
    PipesContextData,
    PipesContextLoader,
    PipesParams,
)

from datalake_assets.lake import storage
from datalake_assets.spec import layout

LOCATION_KEY = "location"


def _location(params: PipesParams, who: str) -> str:
    location = params.get(LOCATION_KEY)
    if not isinstance(location, str) or not location:
        raise ValueError(f"{who}: the Pipes params have no {LOCATION_KEY!r}: {params}")
    return location


class StorageContextLoader(PipesContextLoader):
    """Reads the context file the orchestrator wrote."""

    @contextmanager
    def load_context(self, params: PipesParams) -> Iterator[PipesContextData]:
        yield json.loads(storage.read_bytes(_location(params, "StorageContextLoader")))


class StorageMessageWriterChannel(PipesBlobStoreMessageWriterChannel):
    def __init__(self, folder: str, *, interval: float) -> None:
        super().__init__(interval=interval)
        self.folder = folder

    def upload_messages_chunk(self, payload: IO, index: int) -> None:
        # atomic: the reader polls for <index>.json and must never see half a chunk
        storage.write_bytes_atomic(
            layout.join(self.folder, f"{index}.json"), payload.read().encode("utf-8")
        )


class StorageMessageWriter(PipesBlobStoreMessageWriter):
    """Writes buffered message chunks to the folder the orchestrator reads."""

    def make_channel(self, params: PipesParams) -> StorageMessageWriterChannel:
        return StorageMessageWriterChannel(
            _location(params, "StorageMessageWriter"), interval=self.interval
        )
