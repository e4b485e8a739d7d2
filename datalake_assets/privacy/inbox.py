"""The request inbox: files that a ticketing system drops under ``<lake>/_privacy/requests/``,
and the receipts left under ``<lake>/_privacy/state/inbox/`` once they are processed.

The Dagster sensor ``privacy_requests_sensor`` (``orchestration/erasure/privacy_jobs.py``) lists the
inbox with ``list_inbox`` and requests one run per file. The job reads the file and runs the
request. After a success it writes a receipt and deletes the file (``finish``), so no clear
identity is left in the lake.

* A request file is ``<name>.json`` (the shape ``privacy.forget_request.request_from_dict`` reads)
  or ``<name>.txt`` (one identity a line, ``kind=value``).
* A file must appear whole. Write it under a hidden name (first character ``.`` or ``_``, which
  the inbox ignores) and rename it, or PUT it on S3, where a PUT is atomic. A file modified in
  the last ``SETTLE_SECONDS`` is left for a later tick, in case a writer is still appending.
* Name files after the ticket, never after the person. The name appears in the run key, in the
  run's config and in the receipt.
* A receipt is ``<name>.json``: the request id, the run, the status and the counts, never an
  identity. A request that failed leaves its file in place, so it can be retried, and writes
  ``<name>.failed.json``, which says why. That message holds no identity either:
  ``spec.identity`` errors never contain values.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
import pyarrow.fs as pafs

from datalake_assets.lake import storage
from datalake_assets.spec import layout

REQUEST_SUFFIXES = (".json", ".txt")
SETTLE_SECONDS = 10
RECEIPTS_DIR = "inbox"


@dataclass(frozen=True)
class InboxFile:
    location: str
    name: str
    size: int
    mtime_ns: int

    @property
    def run_key(self) -> str:
        """One run per version of the file: a file written again is a new request."""
        return f"{self.name}:{self.size}:{self.mtime_ns}"


def is_request_name(name: str) -> bool:
    return (
        not name.startswith((".", "_"))
        and name.endswith(REQUEST_SUFFIXES)
        and "/" not in name
        and "\\" not in name
    )


def list_inbox(lake_root: str) -> list[InboxFile]:
    """The request files of the inbox, oldest first (subfolders are not looked into)."""
    inbox = layout.privacy_inbox_dir(lake_root)
    fs, path = storage.resolve(inbox)
    try:
        infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    except FileNotFoundError:
        return []
    out = []
    for info in infos:
        name = info.path.rsplit("/", 1)[-1]
        if info.type == pafs.FileType.File and is_request_name(name):
            out.append(
                InboxFile(
                    storage.to_location(inbox, info.path), name, info.size or 0, info.mtime_ns or 0
                )
            )
    return sorted(out, key=lambda f: (f.mtime_ns, f.name))


def settled(files: list[InboxFile], now: datetime) -> tuple[list[InboxFile], int]:
    """The files unchanged for ``SETTLE_SECONDS``, and how many are still settling."""
    limit = int(now.timestamp() * 1e9) - SETTLE_SECONDS * 1_000_000_000
    ready = [f for f in files if f.mtime_ns <= limit]
    return ready, len(files) - len(ready)


def inbox_location(lake_root: str, location: str) -> str:
    """``location`` if it names a request file directly in the lake's inbox; a ``ValueError``
    otherwise. This guards the job: it deletes the file it was given once the file is done."""
    inbox = layout.privacy_inbox_dir(lake_root).rstrip("/")
    folder, _, name = location.rpartition("/")
    if folder != inbox or not is_request_name(name):  # so no "..", no subfolder, no other lake
        raise ValueError(
            f"request_file must be a .json or .txt file directly in {inbox}/ "
            f"(got a path of {len(location)} characters elsewhere)"
        )
    return location


def receipt_location(lake_root: str, name: str, failed: bool = False) -> str:
    stem = name if not failed else name + ".failed"
    return layout.join(layout.privacy_state_dir(lake_root), RECEIPTS_DIR, f"{stem}.json")


def write_receipt(lake_root: str, name: str, body: dict[str, Any], failed: bool = False) -> str:
    location = receipt_location(lake_root, name, failed)
    storage.write_bytes_atomic(location, orjson.dumps(body, option=orjson.OPT_INDENT_2))
    return location


def finish(lake_root: str, location: str, body: dict[str, Any]) -> str:
    """A processed file: its receipt first (a crash in between leaves the file, and the retry
    writes the receipt again), then the file is deleted, then any failure receipt."""
    name = location.rsplit("/", 1)[-1]
    receipt = write_receipt(lake_root, name, body)
    storage.delete_file(location)
    storage.delete_file(receipt_location(lake_root, name, failed=True))
    return receipt
