"""A model build's rows into the lake: the model's table in the lake's own format, registered
where the lake's tables are.

The table format commits them (``TableFormat.publish_model``: the Segment layout swaps each
built day's folder; Iceberg commits the built days in one snapshot); on the Segment layout the
``[catalog]`` then registers the table and its day partitions (Hive, Glue), as it registers the
event tables, so ``SELECT * FROM <database>.<model>`` reads it on every engine. An Iceberg
lake's commit is its catalog's update: nothing more to register.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from datalake_assets.lake.formats import SourceTables, TableFormat, table_format
from datalake_assets.lake.formats.format_interface import CommittedTable, ModelRows
from datalake_assets.settings import LakeSettings, SourceSettings
from datalake_assets.settings.formats_section import FormatConfig
from datalake_assets.spec.layout import join
from datalake_assets.spec.types import BIGINT, BOOLEAN, DOUBLE, STRING, TIMESTAMP


class PublishError(RuntimeError):
    """A model's rows could not be put in the lake (the message says which and why)."""


def tables_of(source: SourceSettings) -> SourceTables:
    """Where the source's tables are, for the table format."""
    return SourceTables(
        source.lake_dir, source.database, source.effective_table_prefix, source.date_layout
    )


def lake_format(settings: LakeSettings) -> TableFormat:
    return table_format(FormatConfig.of_settings(settings), settings.lake_root)


def models_root(settings: LakeSettings, source: SourceSettings) -> str:
    """Where the source's models keep their tables (``<lake_root>/models/<slug>``)."""
    return join(settings.lake_root, "models", source.slug)


def model_location(settings: LakeSettings, source: SourceSettings, model: str) -> str:
    """``<lake_root>/models/<slug>/<model>``: a model's table, in either format."""
    return join(models_root(settings, source), model)


def catalog_type(field: pa.Field) -> str:
    """The catalog's type of a model column (the lake's own five)."""
    t = field.type
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_date(t):
        return STRING
    if pa.types.is_integer(t) or (pa.types.is_decimal(t) and t.scale == 0):
        return BIGINT
    if pa.types.is_floating(t) or pa.types.is_decimal(t):
        return DOUBLE
    if pa.types.is_boolean(t):
        return BOOLEAN
    if pa.types.is_timestamp(t):
        return TIMESTAMP
    raise PublishError(
        f"column {field.name!r} has type {t}, which the lake's tables do not hold (string, "
        "bigint, double, boolean, timestamp): cast it in the model"
    )


def lake_rows(rows: pa.Table) -> pa.Table:
    """The rows with the lake's types (``catalog_type``): what every engine reads alike."""
    fields, columns = [], []
    for f, col in zip(rows.schema, rows.columns, strict=True):
        typ = catalog_type(f)
        target = {
            STRING: pa.string(),
            BIGINT: pa.int64(),
            DOUBLE: pa.float64(),
            BOOLEAN: pa.bool_(),
            TIMESTAMP: pa.timestamp("us", tz="UTC"),
        }[typ]
        if pa.types.is_timestamp(f.type) and f.type.tz is None:
            col = col.cast(pa.timestamp("us")).cast(target)  # UTC wall time (DuckDB's session)
        elif col.type != target:
            col = col.cast(target)
        fields.append(pa.field(f.name, target))
        columns.append(col)
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


def publish(
    settings: LakeSettings,
    source: SourceSettings,
    fmt: TableFormat,
    out: ModelRows,
    run_id: str,
    spark: Any = None,
) -> CommittedTable:
    """Commit ``out`` in the lake's format, then register it in the ``[catalog]`` where the
    format's tables are registered there (``spark``: for a Hive catalog nobody serves)."""
    out = ModelRows(out.model, out.location, lake_rows(out.rows), out.day_column, out.days)
    committed = fmt.publish_model(tables_of(source), out, run_id)
    if fmt.registered_by_catalog and settings.catalog.backend != "none":
        register(settings, source, out, spark)
    return committed


def register(
    settings: LakeSettings, source: SourceSettings, out: ModelRows, spark: Any = None
) -> None:
    from datalake_assets.catalog.catalog_interface import PartitionSpec, normalize_location
    from datalake_assets.catalog.config import catalog_from_config, config_from_settings

    def session():
        if spark is not None:
            return spark
        from datalake_assets.transform.session import settings_spark_session

        return settings_spark_session(settings, quiet=True)

    catalog = catalog_from_config(config_from_settings(settings.catalog), session)
    columns = [(f.name, catalog_type(f)) for f in out.rows.schema if f.name != out.day_column]
    keys = [out.day_column] if out.day_column else []
    catalog.ensure_database(source.database)
    before = catalog.get_table(source.database, out.model)
    catalog.create_or_update_table(
        source.database,
        out.model,
        columns,
        keys,
        out.location,
        description=f"dbt model {out.model} of source {source.id}",
    )
    if out.day_column:
        days = sorted(set(out.rows.column(out.day_column).drop_null().to_pylist()))
        catalog.add_partitions(
            source.database,
            out.model,
            [PartitionSpec((d,), join(out.location, f"{out.day_column}={d}")) for d in days],
            # a day is registered at <table>/<day column>=<day>, only ever by this code: while
            # the table stays where it was, its registered days are where they should be
            relocate=before is None
            or normalize_location(before.location) != normalize_location(out.location),
        )
