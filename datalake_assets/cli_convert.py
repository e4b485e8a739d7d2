"""``datalake convert --to iceberg``: a Segment-layout lake's tables registered as Iceberg tables
where their files are (``lake/formats/iceberg_convert.py``; docs/guides/iceberg.md)."""

from __future__ import annotations

import argparse

from datalake_assets.cli_parser import UsageError
from datalake_assets.settings import LakeSettings


def cmd_convert(settings: LakeSettings, args: argparse.Namespace) -> int:
    """Each source converted under its lock, one commit a table: a line per table (hours
    registered, files, rows) and one per source."""
    from datalake_assets.lake.formats import FormatError, SourceTables, format_record
    from datalake_assets.lake.formats.iceberg_convert import convert_source, report_lines
    from datalake_assets.settings.formats_section import FormatConfig
    from datalake_assets.spec.table_formats import ICEBERG

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
    if {s.id for s in sources} == {s.id for s in settings.sources}:
        # every source is Iceberg now: the lake's record says so, and syncs that still name
        # the Segment layout are refused from here on (format_record.py)
        format_record.record(settings.lake_root, ICEBERG, replace=True)
        print(
            f'the lake is Iceberg now: set table_format = "{ICEBERG}" in the settings (or '
            f"DATALAKE_TABLE_FORMAT={ICEBERG}); then datalake compact right-sizes its files"
        )
    else:
        print(
            "the lake stays recorded as the Segment layout until every source is converted "
            "(datalake convert --to iceberg without --source converts the others)"
        )
    return 0
