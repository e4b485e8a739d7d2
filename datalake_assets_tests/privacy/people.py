"""A small lake of a few people for the privacy tests: two sources (``web`` in the default
``day_hour`` layout, ``app`` in the coarse ``day`` layout), three hours over two days, synced
by the real sync; and readers of everything a person can be in.

The person to forget ("the target"): userId ``u-target``, anonymousId ``anon-t`` (linked by an
identify), ``anon-old`` (linked by an alias), email ``Target@Example.com``. Their messages'
ids start with ``t``; everyone else's with ``o``. The target is also in an undecodable line,
a line quarantined whole, a value quarantined from one of their rows, and a duplicate.
"""

from __future__ import annotations

import glob
import gzip
import os
import shutil
from collections import defaultdict

import orjson
import pyarrow.parquet as pq

from datalake_assets.spec import layout
from datalake_assets.transform.sync import run_sync
from datalake_assets.transform.sync_request import request_from_settings
from datalake_assets_tests.support.archive_builders import msg, write_hour
from datalake_assets_tests.support.lake_reader import LocalStore, read_lake
from datalake_assets_tests.support.oracle import Oracle, lines_of_file
from datalake_assets_tests.support.settings_files import load_lake_toml

H1, H2, H3 = "2026-11-21T10", "2026-11-21T11", "2026-11-22T09"
HOURS = (H1, H2, H3)
SOURCES = ("web", "app")
TARGET_VALUES = ("u-target", "anon-t", "anon-old", "target@example.com")
EMAIL = "Target@Example.com"


def web_lines() -> dict[str, list]:
    return {
        H1: [
            msg("t1", H1, userId="u-target", anonymousId="anon-t", properties={"total": 5}),
            msg(
                "t2",
                H1,
                type="identify",
                userId="u-target",
                anonymousId="anon-t",
                traits={"email": EMAIL, "plan": "pro"},
            ),
            msg("o1", H1, userId="u-1", anonymousId="anon-1", properties={"total": 7}),
            msg(
                "o2",
                H1,
                type="identify",
                userId="u-1",
                anonymousId="anon-1",
                traits={"email": "one@example.com"},
            ),
            msg("o3", H1, type="page", anonymousId="anon-2", name="Home"),
            {**msg("t-bad1", H1, userId="u-target"), "type": "nope"},  # quarantined whole
            b'{"type": "track", "userId": "u-target", "messageId": "t-cut',  # undecodable
            b'{"type": "track", "userId": "u-1", "messageId": "o-cut',
            b"",  # a blank line: carries nothing
        ],
        H2: [
            msg("t3", H2, type="page", anonymousId="anon-t", name="Pricing"),
            msg("t4", H2, type="alias", userId="u-target", previousId="anon-old", anonymousId=None),
            msg("t5", H2, event="Signed Up", anonymousId="anon-old"),
            msg(
                "o4",
                H2,
                event="Signed Up",
                userId="u-2",
                anonymousId="anon-2",
                context={"traits": {"email": "two@example.com"}},
            ),
            msg("o5", H2, userId="u-1", anonymousId="anon-1", properties={"total": 9}),
            # another user id, but the target's email (case and spaces differ)
            msg(
                "t6",
                H2,
                userId="u-shared",
                anonymousId="anon-s",
                context={"traits": {"email": " TARGET@example.com "}},
            ),
            msg("o6", H2, userId="u-shared", anonymousId="anon-s", properties={"total": 1}),
        ],
        H3: [
            msg("t7", H3, userId="u-target", properties={"total": 3}),
            msg("t7", H3, userId="u-target", properties={"total": 3}),  # a duplicate delivery
            msg("t8", H3, userId="u-target", sentAt="not a time"),  # a quarantined value
            msg("o7", H3, userId="u-1", properties={"total": 4}),
            msg("o8", H3, type="identify", userId="u-2", traits={"email": "two@example.com"}),
        ],
    }


def app_lines() -> dict[str, list]:
    return {
        H1: [
            msg("ta1", H1, userId="u-target", event="Opened"),
            msg("oa1", H1, userId="u-1", event="Opened"),
        ],
        H2: [
            msg(
                "ta2",
                H2,
                type="identify",
                userId="u-target",
                anonymousId="anon-t",
                traits={"plan": "free"},
            ),
            msg("oa2", H2, userId="u-2", event="Opened"),
        ],
        H3: [msg("oa3", H3, userId="u-2", event="Opened")],
    }


def settings_text(root: str) -> str:
    return f"""
        archive_root = "{root}/archive"
        lake_root = "{root}/lake"
        [catalog]
        backend = "none"
        [collector]
        spool_dir = "{root}/spool"
        [[sources]]
        id = "web"
        [[sources]]
        id = "app"
        date_layout = "day"
        """


def load(root: str, text: str | None = None):
    return load_lake_toml(root, text or settings_text(root))


def build_lake(spark, root: str):
    """The archive of both sources, synced; returns the settings."""
    settings = load(root)
    for source, lines in (("web", web_lines()), ("app", app_lines())):
        for hour, hour_lines in lines.items():
            cleaned = [
                {k: v for k, v in ln.items() if v is not None} if isinstance(ln, dict) else ln
                for ln in hour_lines
            ]
            write_hour(settings.archive_root, source, hour, cleaned)
        req = request_from_settings(settings, settings.source(source), HOURS, replay=False)
        run_sync(spark, req)
    return settings


def copy_lake(src_root: str, dst_root: str):
    for part in ("archive", "lake"):
        shutil.copytree(
            os.path.join(src_root, part), os.path.join(dst_root, part), copy_function=shutil.copy2
        )
    return load(dst_root)


def archive_lines(settings, source_id: str, hour: str) -> list[bytes]:
    d = layout.archive_hour_dir(settings.archive_root, source_id, layout.ArchiveHour.parse(hour))
    out = []
    for path in sorted(glob.glob(f"{d}/*")):
        if os.path.basename(path).startswith("."):
            continue
        data = open(path, "rb").read()
        data = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
        out += [ln for ln in data.split(b"\n") if ln.strip()]
    return out


def oracle_expected(settings, source_id: str):
    """The oracle's model of a clean sync of the source's archive as it is now. Lines are
    keyed by their bytes: the lake of a test is a copy, whose quarantine names the archive
    files of the lake it was copied from."""
    store = LocalStore()

    def hour_lines(hour: str):
        folder = layout.archive_hour_dir(
            settings.archive_root, source_id, layout.ArchiveHour.parse(hour)
        )
        return [
            ln
            for rank, loc in enumerate(sorted(store.list(folder)))
            if not os.path.basename(loc).startswith((".", "_"))
            for ln in lines_of_file(loc, rank, hour, store.read(loc), key_by_raw=True)
        ]

    return (
        Oracle(store, settings.archive_root, source_id, hour_lines=hour_lines)
        .sync(HOURS)
        .expected()
    )


def read_source(settings, source_id: str):
    return read_lake(LocalStore(), settings.lake_root, source_id)


def parquet_rows(lake_root: str) -> dict[str, list[dict]]:
    """Every row of every Parquet file of the lake (tables, quarantine, both indexes), by the
    file's folder relative to the lake (hour prefix of the name kept for coarse layouts)."""
    out: dict[str, list[dict]] = defaultdict(list)
    for path in sorted(glob.glob(f"{lake_root}/**/*.parquet", recursive=True)):
        rel = os.path.relpath(path, lake_root)
        if rel.startswith(("_staging", "privacy_requests", "sync_reports")):
            continue
        name = os.path.basename(path)
        # an Iceberg table's folders are hourly already, and its files are named by their
        # writer (a sync's carry the hour, pyiceberg's, an erasure's rewrite, do not)
        hour = "" if rel.startswith("iceberg/") else layout.hour_of_data_file(name)
        key = os.path.dirname(rel) + "/" + (hour or "")
        out[key] += pq.read_table(path).to_pylist()
    return out


def mentions_target(row) -> bool:
    text = (
        orjson.dumps(row, default=str).decode().casefold()
        if not isinstance(row, bytes)
        else row.decode("utf-8", "replace").casefold()
    )
    return any(v in text for v in TARGET_VALUES)


def is_target_row(row: dict, key: bytes | None = None, hashes=frozenset()) -> bool:
    """A row of the target: its message id is one of theirs, it names them, or (index rows)
    its identity hash is one of theirs."""
    mid = row.get("message_id") or ""
    return (
        mid.startswith("t")
        or mentions_target(row)
        or row.get("identity") in hashes
        or row.get("linked") in hashes
    )


def lake_snapshot(settings) -> dict:
    """Everything of both sources: Parquet rows by partition and archive lines by hour."""
    rows = parquet_rows(settings.lake_root)
    lines = {(s, h): archive_lines(settings, s, h) for s in SOURCES for h in HOURS}
    return {"rows": rows, "lines": lines}


def without_target(snapshot: dict, hashes=frozenset()) -> dict:
    rows = {
        k: sorted(
            orjson.dumps(r, default=str, option=orjson.OPT_SORT_KEYS)
            for r in v
            if not is_target_row(r, hashes=hashes)
        )
        for k, v in snapshot["rows"].items()
    }
    lines = {
        k: sorted(ln for ln in v if not mentions_target(ln) and not _target_id(ln))
        for k, v in snapshot["lines"].items()
    }
    return {"rows": {k: v for k, v in rows.items() if v}, "lines": lines}


def _target_id(raw: bytes) -> bool:
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return False
    return isinstance(obj, dict) and str(obj.get("messageId", "")).startswith("t")


def target_traces(snapshot: dict, hashes=frozenset()) -> list[str]:
    """Where the target still is (empty after an erasure with links)."""
    found = [
        f"{k}: {r}"
        for k, v in snapshot["rows"].items()
        for r in v
        if is_target_row(r, hashes=hashes)
    ]
    found += [
        f"{k}: {ln[:80]!r}"
        for k, v in snapshot["lines"].items()
        for ln in v
        if mentions_target(ln) or _target_id(ln)
    ]
    return found
