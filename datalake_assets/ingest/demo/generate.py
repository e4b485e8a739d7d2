"""``generate_archive``: the entry point (``datalake demo``, tests, benchmarks). Checks the
arguments, opens the archive root (a local path or a URI), builds the catalogue and the users
of the source once, and writes each hour."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor

from datalake_assets.ingest.demo.catalogue import _build_catalogue
from datalake_assets.ingest.demo.hour_writer import _write_hour
from datalake_assets.ingest.demo.timestamps import _tables
from datalake_assets.ingest.demo.traffic_mix import TYPE_WEIGHTS, GenerateSummary
from datalake_assets.ingest.demo.users import _USERS_MAX, _USERS_MIN, _build_users
from datalake_assets.lake import storage
from datalake_assets.spec.azure_uri import is_azure
from datalake_assets.spec.layout import ArchiveHour


def _check_args(
    hours: list, events_per_hour: int, files_per_hour: int, rates: dict[str, float]
) -> None:
    if events_per_hour < 1:
        raise ValueError(f"events_per_hour must be >= 1, got {events_per_hour}")
    if files_per_hour < 1:
        raise ValueError(f"files_per_hour must be >= 1, got {files_per_hour}")
    for name, r in rates.items():
        if not 0.0 <= r <= 1.0:
            raise ValueError(f"{name} must be within [0, 1], got {r}")
    for h in hours:
        if not isinstance(h, ArchiveHour):
            raise TypeError(f"hours must be ArchiveHour values, got {type(h).__name__}")
    if len(set(hours)) != len(hours):
        raise ValueError("hours lists the same hour twice")


def generate_archive(
    archive_root: str,
    source_id: str,
    hours: list[ArchiveHour],
    *,
    events_per_hour: int = 2000,
    files_per_hour: int = 2,
    seed: int = 7,
    malformed_rate: float = 0.002,
    duplicate_rate: float = 0.01,
    late_rate: float = 0.02,
    compress: bool = True,
) -> GenerateSummary:
    """Write ``events_per_hour`` lines (exactly) for each of ``hours`` to
    ``<archive_root>/<source_id>/day=YYYY-MM-DD/hr=HH/part-NNNN.jsonl[.gz]`` and count them.

    The files of an hour are consecutive slices of its received time, ``part-0000`` first; an
    hour of fewer lines than ``files_per_hour`` gets one file per line. Writing an hour again
    replaces its files of the same names (files beyond the new ``files_per_hour`` stay).
    """
    hours = list(hours)
    _check_args(
        hours,
        events_per_hour,
        files_per_hour,
        {
            "malformed_rate": malformed_rate,
            "duplicate_rate": duplicate_rate,
            "late_rate": late_rate,
        },
    )
    if is_azure(archive_root):  # built from the environment, never from the URI
        fs, base = storage.resolve(archive_root)
    elif "://" in archive_root:
        from pyarrow import fs as pafs

        fs, base = pafs.FileSystem.from_uri(archive_root)
    else:
        fs, base = None, archive_root

    _tables()
    pool_rng = random.Random(f"datalake-demo|users|{seed}|{source_id}")
    cat = _build_catalogue(pool_rng)
    users = _build_users(pool_rng, cat, min(_USERS_MAX, max(_USERS_MIN, events_per_hour // 100)))
    summary = GenerateSummary(
        hours=[],
        files=[],
        lines=0,
        valid_messages=0,
        duplicate_lines=0,
        malformed_lines=0,
        by_type={t: 0 for t in TYPE_WEIGHTS},
        by_event={},
        bytes_uncompressed=0,
        malformed_by_reason={},
    )
    ext = ".jsonl.gz" if compress else ".jsonl"
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="demo-writer") as pool:
        for hour in hours:
            _write_hour(
                fs,
                base,
                archive_root,
                source_id,
                hour,
                ext,
                compress,
                pool,
                cat,
                users,
                summary,
                events_per_hour,
                files_per_hour,
                seed,
                malformed_rate,
                duplicate_rate,
                late_rate,
            )
            summary.hours.append(str(hour))
    summary.by_type = {t: n for t, n in summary.by_type.items() if n}
    summary.by_event = dict(sorted(summary.by_event.items()))
    summary.malformed_by_reason = dict(sorted(summary.malformed_by_reason.items()))
    return summary
