"""Where things live: the raw archive, the lake's tables, reports and staging.

Pure functions on strings. Roots may be local paths (``/data/lake``) or URIs
(``s3://bucket/prefix``); paths are always joined with ``/`` and never with
``os.path``, so one setting switches a lake from a laptop to S3.

Raw archive (input), one folder per source and *received* hour (UTC)::

    <archive_root>/<source_id>/day=YYYY-MM-DD/hr=HH/<any name>.jsonl.gz   (or .jsonl / .json / .gz)

Lake (output), Segment's layout, hive-style so every engine reads the keys::

    <lake_root>/data/<source id or slug>/segment_type=<table>/<date partition>/part-*.parquet

with ``<date partition>`` one of the four Segment date layouts (see ``DATE_LAYOUTS``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

ARCHIVE_SUFFIXES = (".jsonl.gz", ".json.gz", ".ndjson.gz", ".gz", ".jsonl", ".json", ".ndjson")

# name -> partition keys, in path order. Values are produced by ``date_partition_values``.
DATE_LAYOUTS: dict[str, tuple[str, ...]] = {
    "day_hour": ("day", "hr"),  # day=2026-11-21/hr=09   (Segment's default)
    "year_month_day_hour": ("year", "month", "day", "hr"),  # year=2026/month=11/day=21/hr=09
    "year_month_day": ("year", "month", "day"),  # year=2026/month=11/day=21
    "day": ("day",),  # day=2026-11-21
}
DEFAULT_DATE_LAYOUT = "day_hour"
# URI schemes that name S3 (Hadoop spells it s3a/s3n): listed with boto3, read with pyarrow's S3.
S3_SCHEMES = ("s3", "s3a", "s3n")

_HOUR_KEY_RE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})-(\d{2}):00$")
_HOUR_COMPACT_RE = re.compile(r"^(\d{4})(\d{2})(\d{2})(\d{2})$")


def join(root: str, *parts: str) -> str:
    """Join a root (local path or URI) and relative parts with ``/``."""
    out = root.rstrip("/") if root not in ("/", "") else root
    for part in parts:
        part = part.strip("/")
        if not part:
            continue
        out = f"{out}/{part}" if out not in ("", "/") else f"{out}{part}"
    return out


@dataclass(frozen=True, order=True)
class ArchiveHour:
    """One received hour (UTC) of one source's raw archive."""

    start: datetime  # tz-aware UTC, minute = second = 0

    @staticmethod
    def parse(text: str | ArchiveHour) -> ArchiveHour:
        """The one parser of an hour's spellings: ``2026-11-21T09`` (``str()``), a Dagster
        hourly partition key (``2026-11-21-09:00``) or compact ``2026112109`` (file names,
        the id index, stage rows). An ``ArchiveHour`` is returned as it is."""
        if isinstance(text, ArchiveHour):
            return text
        m = _HOUR_KEY_RE.match(text) or _HOUR_COMPACT_RE.match(text)
        if m:
            y, mo, d, h = (int(g) for g in m.groups())
            try:
                return ArchiveHour(datetime(y, mo, d, h, tzinfo=UTC))
            except ValueError:
                pass
        else:
            try:
                return ArchiveHour(datetime.strptime(text, "%Y-%m-%dT%H").replace(tzinfo=UTC))
            except ValueError:
                pass
        raise ValueError(
            f"not an hour: {text!r} (expected 'YYYY-MM-DD-HH:00' or 'YYYY-MM-DDTHH')"
        ) from None

    @staticmethod
    def of(ts: datetime) -> ArchiveHour:
        ts = ts.astimezone(UTC) if ts.tzinfo else ts.replace(tzinfo=UTC)
        return ArchiveHour(ts.replace(minute=0, second=0, microsecond=0))

    @property
    def day(self) -> str:
        return self.start.strftime("%Y-%m-%d")

    @property
    def hr(self) -> str:
        return self.start.strftime("%H")

    @property
    def partition_key(self) -> str:
        """The Dagster hourly partition key."""
        return self.start.strftime("%Y-%m-%d-%H:00")

    @property
    def compact(self) -> str:
        """``YYYYMMDDHH``: used in file names so an hour's files are recognisable in any layout."""
        return self.start.strftime("%Y%m%d%H")

    def next(self) -> ArchiveHour:
        return ArchiveHour(self.start + timedelta(hours=1))

    def __str__(self) -> str:
        return self.start.strftime("%Y-%m-%dT%H")


def hour_range(first: ArchiveHour, last: ArchiveHour) -> list[ArchiveHour]:
    """Inclusive range of hours."""
    if last < first:
        raise ValueError(f"hour range is reversed: {first} > {last}")
    out, h = [], first
    while h <= last:
        out.append(h)
        h = h.next()
    return out


def archive_hour_dir(archive_root: str, source_id: str, hour: ArchiveHour) -> str:
    return join(archive_root, source_id, f"day={hour.day}", f"hr={hour.hr}")


def is_archive_file(name: str) -> bool:
    base = name.rsplit("/", 1)[-1]
    if base.startswith((".", "_")):  # temporary / in-progress files are invisible
        return False
    return base.endswith(ARCHIVE_SUFFIXES)


def date_partition_values(layout: str, hour: ArchiveHour) -> list[tuple[str, str]]:
    """The (key, value) pairs of the lake partition holding ``hour`` in ``layout``."""
    if layout not in DATE_LAYOUTS:
        raise ValueError(f"unknown date layout {layout!r}; choose one of {sorted(DATE_LAYOUTS)}")
    values = {
        "year": hour.start.strftime("%Y"),
        "month": hour.start.strftime("%m"),
        "hr": hour.hr,
    }
    # Layouts with a separate year/month use the day of month; the others the full date.
    values["day"] = hour.start.strftime("%d") if "year" in DATE_LAYOUTS[layout] else hour.day
    return [(k, values[k]) for k in DATE_LAYOUTS[layout]]


def date_partition_path(layout: str, hour: ArchiveHour) -> str:
    return "/".join(f"{k}={v}" for k, v in date_partition_values(layout, hour))


def segment_type_dir(data_root: str, table: str) -> str:
    """A table's folder under a data root (the lake's ``data/<source>``, or a staging's)."""
    return join(data_root, f"segment_type={table}")


def table_root(lake_root: str, source_dir: str, table: str) -> str:
    return segment_type_dir(join(lake_root, "data", source_dir), table)


def table_partition_dir(
    lake_root: str, source_dir: str, table: str, layout: str, hour: ArchiveHour
) -> str:
    return join(table_root(lake_root, source_dir, table), date_partition_path(layout, hour))


def quarantine_root(lake_root: str, source_dir: str) -> str:
    """The source's quarantine: ``<lake>/quarantine/<source>/day=/hr=/*.parquet``."""
    return join(lake_root, "quarantine", source_dir)


def hour_partition_path(hour: ArchiveHour) -> str:
    """``day=YYYY-MM-DD/hr=HH``: the quarantine's partitions (whatever the tables' layout)."""
    return f"day={hour.day}/hr={hour.hr}"


def quarantine_dir(lake_root: str, source_dir: str, hour: ArchiveHour) -> str:
    return join(quarantine_root(lake_root, source_dir), hour_partition_path(hour))


def report_path(lake_root: str, source_id: str, run_id: str, day: str) -> str:
    return join(
        lake_root, "reports", f"day={day}", f"source={source_id}", f"run_id={run_id}", "report.json"
    )


def reports_table_root(lake_root: str) -> str:
    """The ``sync_reports`` table of every source: ``<lake>/sync_reports/source_id=/day=/``."""
    return join(lake_root, "sync_reports")


def reports_table_partition_dir(lake_root: str, source_id: str, day: str) -> str:
    return join(reports_table_root(lake_root), f"source_id={source_id}", f"day={day}")


def schema_record_path(lake_root: str, source_dir: str) -> str:
    return join(lake_root, "_schemas", source_dir, "tables.json")


def staging_root(lake_root: str, source_dir: str) -> str:
    """Where a source's syncs stage their output: a run's under ``<run_id>/`` (left-overs of
    a crashed run are deleted by the next sync, which holds the source's lock)."""
    return join(lake_root, "_staging", source_dir)


def staging_dir(lake_root: str, source_dir: str, run_id: str) -> str:
    """A run's staging area. It mirrors the lake per source, so a commit swaps each staged
    partition directory into place (``staged_*`` below):

    * ``work/<table>/``: stage A's work files (deleted before the commit);
    * ``data/segment_type=<table>/<date partition>/``: the tables;
    * ``quarantine/day=/hr=/``: the quarantine;
    * ``_index/hour=<YYYYMMDDHH>/``: the id index;
    * ``_identities/hour=<YYYYMMDDHH>/``: the identity index."""
    return join(staging_root(lake_root, source_dir), run_id)


def staged_work_root(staging: str) -> str:
    return join(staging, "work")


def staged_data_root(staging: str) -> str:
    return join(staging, "data")


def staged_quarantine_root(staging: str) -> str:
    return join(staging, "quarantine")


def staged_index_root(staging: str) -> str:
    return join(staging, "_index")


def index_root(lake_root: str, source_dir: str) -> str:
    """The message-id index of a source: ``<lake>/_index/<source>/hour=<YYYYMMDDHH>/*.parquet``,
    one ``message_id`` column per hour (every message the lake holds for that hour)."""
    return join(lake_root, "_index", source_dir)


def index_partition_path(hour: ArchiveHour) -> str:
    return f"hour={hour.compact}"


def hour_of_index_file(location: str) -> str | None:
    """The compact hour of an id-index file (``.../hour=<YYYYMMDDHH>/<name>.parquet``)."""
    m = re.search(r"/hour=(\d{10})/[^/]+\.parquet$", location)
    return m.group(1) if m else None


def hour_files_name(hour: ArchiveHour, run_id: str) -> str:
    """The ledger of the archive files a run took in for ``hour``, kept in the hour's id-index
    folder (``transform/open_hour.py``). Named like the hour's data files
    (``part-<YYYYMMDDHH>-<run>-``) so that a commit's swap treats it as one of the hour's
    files: replaced with the hour, carried over by an open hour's batch."""
    return f"part-{hour.compact}-{run_id}-archive-files.json"


def is_hour_files(location: str) -> bool:
    return location.endswith("-archive-files.json")


def commit_journal_dir(lake_root: str, source_dir: str) -> str:
    return join(lake_root, "_commits", source_dir)


def data_file_name(hour: ArchiveHour, run_id: str, task: int, seq: int) -> str:
    """``part-<YYYYMMDDHH>-<run>-<task>-<seq>.parquet``: the hour prefix lets coarse layouts
    (``day``, ``year_month_day``) replace one hour's files inside a day partition."""
    return f"part-{hour.compact}-{run_id}-{task:05d}-{seq:03d}.parquet"


def hour_of_data_file(name: str) -> str | None:
    m = re.match(r"^part-(\d{10})-", name.rsplit("/", 1)[-1])
    return m.group(1) if m else None


# ------------------------------------------------------------------------------ privacy
# (``spec/identity.py`` says what an identity is; ``privacy/`` erases and suppresses.)


def identity_index_root(lake_root: str, source_dir: str) -> str:
    """The identity index of a source: ``<lake>/_identities/<source>/hour=<YYYYMMDDHH>/
    *.parquet``, written by the sync and committed with the hour like the id index: for each
    identity hash of the hour, the tables holding it and how many rows, and the links
    (``lake/identities.py`` has the schema)."""
    return join(lake_root, "_identities", source_dir)


IDENTITY_SUMMARY_DIR = "_summary"


def identity_summary_root(lake_root: str, source_dir: str) -> str:
    """The identity index compacted per month (``privacy/summary.py``): derived from the
    per-hour files, never swapped by a sync, rebuilt after an erasure."""
    return join(identity_index_root(lake_root, source_dir), IDENTITY_SUMMARY_DIR)


def is_identity_summary(location: str) -> bool:
    return f"/{IDENTITY_SUMMARY_DIR}/" in location


def staged_identity_root(staging: str) -> str:
    """A run's staged identity index: ``<staging>/_identities/hour=<YYYYMMDDHH>/``."""
    return join(staging, "_identities")


def privacy_root(lake_root: str) -> str:
    """The lake's privacy state: ``_privacy/key`` (the identity hashes' key),
    ``_privacy/suppressed/<request id>.json`` (suppressed identity hashes, one file per
    request), ``_privacy/requests/`` (the inbox the request sensor reads) and
    ``_privacy/state/<request id>.json`` (a request's progress, so a re-run converges)."""
    return join(lake_root, "_privacy")


def privacy_key_path(lake_root: str) -> str:
    return join(privacy_root(lake_root), "key")


def suppression_dir(lake_root: str) -> str:
    return join(privacy_root(lake_root), "suppressed")


def privacy_inbox_dir(lake_root: str) -> str:
    return join(privacy_root(lake_root), "requests")


def privacy_state_dir(lake_root: str) -> str:
    return join(privacy_root(lake_root), "state")


def privacy_requests_table_root(lake_root: str) -> str:
    """The ``privacy_requests`` audit table: ``<lake>/privacy_requests/day=YYYY-MM-DD/``."""
    return join(lake_root, "privacy_requests")
