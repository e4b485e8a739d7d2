"""Which table format a lake holds, recorded in the lake itself: a lake is never switched
silently.

``<lake_root>/_table_format.json`` (``{"table_format": "iceberg", ...}``) is written by the first
sync that commits into the lake, in the format the settings named then. A later sync whose
settings name another format fails before it touches anything, with what to do: name the
lake's format again, or convert the lake (``datalake convert --to iceberg``, which rewrites the
record once every source is converted). A lake written before the record existed has its
format inferred from what it holds (``segment_type=`` folders: the Segment layout; Iceberg
table folders: Iceberg), then recorded.
"""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
import pyarrow.fs as pafs

from datalake_assets.lake import storage
from datalake_assets.lake.formats.format_interface import FormatError
from datalake_assets.spec import layout
from datalake_assets.spec.table_formats import ICEBERG, SEGMENT

RECORD = "_table_format.json"
WRONG_FORMAT = "invalid_settings"


def record_location(lake_root: str) -> str:
    return layout.join(lake_root, RECORD)


def recorded(lake_root: str) -> str | None:
    """The lake's format: its record, else what its folders hold, else ``None`` (no data)."""
    location = record_location(lake_root)
    if storage.exists(location):
        return orjson.loads(storage.read_bytes(location))["table_format"]
    return inferred(lake_root)


def inferred(lake_root: str) -> str | None:
    found = set()
    for source in _folders(layout.join(lake_root, "data")):
        if any(f.rsplit("/", 1)[-1].startswith("segment_type=") for f in _folders(source)):
            found.add(SEGMENT)
            break
    for source in _folders(layout.join(lake_root, "iceberg")):
        if _folders(source):
            found.add(ICEBERG)
            break
    if len(found) > 1:
        raise FormatError(
            f"the lake at {lake_root} holds both Segment-layout and Iceberg tables and records "
            f"no format ({RECORD}): finish its conversion (datalake convert --to iceberg)",
            WRONG_FORMAT,
        )
    return found.pop() if found else None


def _folders(location: str) -> list[str]:
    fs, path = storage.resolve(location)
    try:
        infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    except FileNotFoundError:
        return []
    return [
        storage.to_location(location, i.path) for i in infos if i.type == pafs.FileType.Directory
    ]


def check(lake_root: str, table_format: str) -> None:
    """Raise ``FormatError`` when the lake holds another format than ``table_format``."""
    holds = recorded(lake_root)
    if holds is None or holds == table_format:
        return
    if holds == SEGMENT:
        todo = (
            f'set table_format = "{SEGMENT}" (or DATALAKE_TABLE_FORMAT={SEGMENT}) to keep '
            "writing it as it is, or turn it into Iceberg tables without copying its data: "
            f"datalake convert --to {ICEBERG}"
        )
    else:
        todo = f'set table_format = "{holds}" (a lake is not converted back)'
    default = " (the default when the settings name none)" if table_format == ICEBERG else ""
    raise FormatError(
        f"the lake at {lake_root} holds {holds} tables, but the settings say table_format = "
        f'"{table_format}"{default}: {todo} (docs/concepts/table-formats.md)',
        WRONG_FORMAT,
    )


def record(lake_root: str, table_format: str, replace: bool = False) -> None:
    """Write the record (``replace``: even over another one: a finished conversion)."""
    location = record_location(lake_root)
    if not replace and storage.exists(location):
        return
    body = {"table_format": table_format, "recorded_at": datetime.now(UTC).isoformat()}
    storage.write_bytes_atomic(location, orjson.dumps(body, option=orjson.OPT_INDENT_2))
