"""``az://container/path`` locations read through the Azure SDK (Azurite's account), never
through the sync's storage layer: the reader the oracle comparisons use (``lake_reader``)."""

from __future__ import annotations


class AzureStore:
    def __init__(self, azurite) -> None:
        self.service = azurite.service()

    @staticmethod
    def _split(location: str) -> tuple[str, str]:
        container, _, key = location.removeprefix("az://").partition("/")
        return container, key

    def list(self, prefix: str) -> list[str]:
        container, key = self._split(prefix)
        client = self.service.get_container_client(container)
        return sorted(
            f"az://{container}/{b.name}"
            for b in client.list_blobs(name_starts_with=key.rstrip("/") + "/")
        )

    def read(self, location: str) -> bytes:
        container, key = self._split(location)
        return self.service.get_blob_client(container, key).download_blob().readall()
