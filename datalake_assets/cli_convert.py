"""``datalake convert --to iceberg``: a Segment-layout lake's tables registered as Iceberg tables
where their files are (``lake/formats/iceberg_convert.py``; docs/guides/iceberg.md)."""

from __future__ import annotations

import argparse

from datalake_assets.cli_parser import UsageError
from datalake_assets.settings import LakeSettings


def cmd_convert(settings: LakeSettings, args: argparse.Namespace) -> int:
    """Each source converted under its lock, one commit a table: a line per table (hours
    registered, files, rows) and one per source."""
    from datalake_assets.lake.formats import FormatError, SourceTables
    from datalake_assets.lake.formats.iceberg_convert import convert_source, report_lines
    from datalake_assets.settings.formats_section import FormatConfig

    if args.to != "iceberg":
        raise UsageError(f"--to: only iceberg, not {args.to!r}")
    config = FormatConfig.of_settings(settings)
    sources = [settings.source(s) for s in args.source] or list(settings.sources)
    for s in sources:
        src = SourceTables(s.lake_dir, s.database, s.effective_table_prefix, s.date_layout)
        try:
            report = convert_source(
                settings.lake_root, config, src, "datalake-convert", rewrite=args.rewrite
            )
        except FormatError as e:
            raise UsageError(f"{s.id}: {e}") from None
        for line in report_lines(s.id, report):
            print(line, flush=True)
    return 0
