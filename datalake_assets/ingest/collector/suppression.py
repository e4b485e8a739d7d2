"""Suppression at the collector: messages of identities on the lake's suppression list
(``<lake>/_privacy/suppressed/*.json``, ``lake/identities.py``) are dropped before they are
spooled, and, by the roller, before a spool segment becomes an archive file.

The list is read when the collector starts, then its folder is listed every
``[privacy] suppression_reload_seconds``; the files are read again only when the listing
(names, sizes, modification times) changed, so an idle reload costs one listing. While the
list is empty nothing is hashed: the only cost per message is one attribute test. When it is
not, each distinct raw id or trait value is hashed once (``spec.identity.identity_hashes``,
with a bounded cache shared by the request threads).

If the list cannot be read (the lake unreachable from the collector's host, a permission
missing), the error is logged, the list in force is kept (empty at start) and the next reload
tries again: the collector keeps accepting, and the sync drops the messages of a suppressed
identity anyway (``transform/identity_tally.py``); only their raw archive copy is then left
to the erasure.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass

import orjson
import pyarrow.fs as pafs

from datalake_assets.lake import storage
from datalake_assets.lake.identities import lake_key, read_suppressed
from datalake_assets.settings import LakeSettings
from datalake_assets.spec.identity import identity_hashes
from datalake_assets.spec.layout import suppression_dir

log = logging.getLogger(__name__)

MAX_CACHED_VALUES = 100_000  # raw value -> hash entries kept (cleared when full)


@dataclass(frozen=True)
class _List:
    key: bytes
    hashes: frozenset[str]
    signature: tuple  # the listing it was read from


class Suppression:
    """The suppression list in force and its reloads (module docstring)."""

    def __init__(
        self, lake_root: str, traits: tuple[str, ...], reload_seconds: float = 10.0
    ) -> None:
        self.lake_root = lake_root
        self.traits = tuple(traits)
        self.reload_seconds = reload_seconds
        self._list = _List(b"", frozenset(), ())
        self._cache: dict[object, str] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.loads = 0  # times the files were read (the listing changed)
        self.errors = 0  # reloads that failed

    @classmethod
    def of(cls, settings: LakeSettings) -> Suppression:
        """The lake's list, with the settings' traits and reload interval."""
        return cls(
            settings.lake_root,
            settings.privacy.identity_traits,
            settings.privacy.suppression_reload_seconds,
        )

    @property
    def active(self) -> bool:
        """Whether any identity is suppressed (else nothing needs hashing)."""
        return bool(self._list.hashes)

    @property
    def size(self) -> int:
        return len(self._list.hashes)

    def stats(self) -> dict[str, int]:
        return {"suppression_list": self.size, "suppression_errors": self.errors}

    # ---------------------------------------------------------------------------- loading

    def _signature(self) -> tuple:
        directory = suppression_dir(self.lake_root)
        fs, path = storage.resolve(directory)
        infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
        return tuple(
            sorted((i.path, i.size, i.mtime_ns) for i in infos if i.type == pafs.FileType.File)
        )

    def reload(self) -> bool:
        """Read the list again if its folder's listing changed; whether it was read. Raises
        what storage raises (the caller logs it)."""
        signature = self._signature()
        if signature == self._list.signature:
            return False
        hashes = read_suppressed(self.lake_root)
        # The key is needed only to hash, that is only for a non-empty list (and reading it
        # would create it in a lake that has none yet).
        key = self._list.key or (lake_key(self.lake_root) if hashes else b"")
        self._list = _List(key, hashes, signature)  # one assignment: readers see old or new
        self.loads += 1
        log.info("suppression list loaded: %d identity hashes", len(hashes))
        return True

    def _reload_logged(self) -> None:
        try:
            self.reload()
        except Exception as e:  # noqa: BLE001 - keep the list in force, retry next time
            self.errors += 1
            log.error(
                "cannot read the suppression list under %s (%s); the list in force "
                "(%d hashes) is kept and read again in %s s",
                suppression_dir(self.lake_root),
                type(e).__name__,
                self.size,
                self.reload_seconds,
            )

    def start(self) -> None:
        """Read the list now, then again every ``reload_seconds`` in a background thread."""
        self._reload_logged()
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="suppression-reload", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _loop(self) -> None:
        while not self._stop.wait(self.reload_seconds):
            self._reload_logged()

    # ---------------------------------------------------------------------------- matching

    def matches(self, message: dict) -> bool:
        """Whether the message names a suppressed identity."""
        current = self._list
        if not current.hashes:
            return False
        cache = self._cache
        if len(cache) > MAX_CACHED_VALUES:
            self._cache = cache = {}
        return not current.hashes.isdisjoint(
            identity_hashes(message, self.traits, current.key, cache)
        )

    def matches_line(self, line: bytes) -> bool:
        """``matches`` of an archived JSON line; a line that is not an object names nobody."""
        if not self._list.hashes:
            return False
        try:
            message = orjson.loads(line)
        except orjson.JSONDecodeError:  # e.g. an integer wider than 64 bits: the exact parser
            try:
                message = json.loads(line)
            except (ValueError, RecursionError):
                return False
        return type(message) is dict and self.matches(message)
