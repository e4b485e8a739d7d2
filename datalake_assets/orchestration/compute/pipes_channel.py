"""Dagster Pipes through the lake's own storage, the orchestrator's side; the job's side is
``transform/pipes_storage.py`` (which says why).

One run's files live in one folder, ``<pipes root>/<run_id>/``: ``context.json`` and
``messages/<index>.json``. They are left in place (the folder of a finished run is what to read
when its logs are gone); a lifecycle rule on ``_pipes/`` expires them (``infra/azure``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

from dagster import PipesBlobStoreMessageReader, PipesContextInjector
from dagster_pipes import PipesContextData, PipesParams

from datalake_assets.lake import storage
from datalake_assets.spec import layout
from datalake_assets.transform.pipes_storage import LOCATION_KEY

PIPES_DIR = "_pipes"  # at the root of the lake's bucket / container (its lifecycle rule's prefix)


def default_pipes_root(lake_root: str) -> str:
    """``<scheme>://<bucket or container>/_pipes`` for a lake on object storage; next to the
    lake folder for a local lake (there is no bucket root to speak of)."""
    if storage.is_uri(lake_root):
        scheme, rest = lake_root.split("://", 1)
        return f"{scheme}://{rest.split('/', 1)[0]}/{PIPES_DIR}"
    parent = lake_root.rstrip("/").rsplit("/", 1)[0] or "/"
    return layout.join(parent, PIPES_DIR)


class StorageContextInjector(PipesContextInjector):
    """Writes the run's context to ``<folder>/context.json``."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    @contextmanager
    def inject_context(self, context_data: PipesContextData) -> Iterator[PipesParams]:
        location = layout.join(self.folder, "context.json")
        storage.write_bytes_atomic(location, json.dumps(context_data).encode("utf-8"))
        yield {LOCATION_KEY: location}

    def no_messages_debug_text(self) -> str:
        return (
            f"the Pipes context was written to {self.folder}/context.json; the job reads it "
            "with datalake_assets.transform.pipes_storage.StorageContextLoader"
        )


class StorageMessageReader(PipesBlobStoreMessageReader):
    """Reads the chunks ``<folder>/messages/<index>.json`` the job writes, in order."""

    def __init__(self, folder: str, *, interval: float = 10) -> None:
        super().__init__(interval=interval)
        self.folder = layout.join(folder, "messages")

    @contextmanager
    def get_params(self) -> Iterator[PipesParams]:
        yield {LOCATION_KEY: self.folder}

    def messages_are_readable(self, params: PipesParams) -> bool:
        return True  # a chunk not written yet reads as None; the folder needs no creating

    def download_messages_chunk(self, index: int, params: PipesParams) -> str | None:
        location = layout.join(params[LOCATION_KEY], f"{index}.json")
        try:
            return storage.read_bytes(location).decode("utf-8")
        except FileNotFoundError:  # not written yet
            return None

    def no_messages_debug_text(self) -> str:
        return (
            f"Pipes messages were expected under {self.folder}/ (written by "
            "datalake_assets.transform.pipes_storage.StorageMessageWriter)"
        )
