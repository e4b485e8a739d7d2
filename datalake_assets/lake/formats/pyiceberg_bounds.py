"""Parquet bounds pyiceberg 0.12 cannot read: a timestamp after the year 9999.

The lake's timestamps are microseconds since the epoch, and a sync accepts any the rules allow
(a year-10000 timestamp is valid, ``spec/``). pyarrow hands a Parquet footer's timestamp bound
to pyiceberg as a Python ``datetime``, which ends at 9999-12-31, so pyiceberg's
``data_file_statistics_from_parquet_metadata`` raises ``OverflowError`` for a file holding one:
in the sync's commit (the footers of stage B's files), and in every write pyiceberg makes
itself (the quarantine, an erasure, compaction, a widening's rewrite). The hostile-input corpus
crashed an Iceberg sync so. For such a file only, its timestamp columns get counts without
bounds (Iceberg's ``counts`` metrics mode): a reader cannot skip that file by those columns'
values, and reads every row right.

Installed once, by ``install()``: pyiceberg's own writes look the function up in its module.
"""

from __future__ import annotations

import dataclasses
from typing import Any

_installed = False


def install() -> None:
    global _installed
    if _installed:
        return
    from pyiceberg.io import pyarrow as pyiceberg_arrow
    from pyiceberg.types import TimestampType, TimestamptzType

    original = pyiceberg_arrow.data_file_statistics_from_parquet_metadata
    counts = pyiceberg_arrow.MetricsMode(pyiceberg_arrow.MetricModeTypes.COUNTS)

    def statistics(parquet_metadata: Any, stats_columns: dict, parquet_column_mapping: dict):
        try:
            return original(parquet_metadata, stats_columns, parquet_column_mapping)
        except OverflowError:  # a timestamp bound beyond datetime's range
            plan = {
                field_id: (
                    dataclasses.replace(c, mode=counts)
                    if isinstance(c.iceberg_type, TimestampType | TimestamptzType)
                    else c
                )
                for field_id, c in stats_columns.items()
            }
            return original(parquet_metadata, plan, parquet_column_mapping)

    pyiceberg_arrow.data_file_statistics_from_parquet_metadata = statistics
    _installed = True
