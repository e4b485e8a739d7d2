"""Settings of the lake's table format: the top-level ``table_format`` key and ``[iceberg]``
(``datalake_assets.lake.formats``), and ``FormatConfig``, both as one value the formats take
and a sync carries through its argv."""

import argparse
import dataclasses
from typing import Any

from datalake_assets.settings.fields import (
    AwsAccountId,
    AwsRegion,
    HttpUrl,
    Int,
    OneOf,
    Str,
    settings_model,
)
from datalake_assets.spec.table_formats import (
    ICEBERG_CATALOGS,
    SEGMENT,
    TABLE_FORMATS,
    default_iceberg_catalog,
)

_ARG_PREFIX = "--table-format-"


@settings_model
class IcebergSettings:
    """``[iceberg]``: the Iceberg catalog and maintenance, when ``table_format = "iceberg"``.

    ``catalog``: ``"sql"`` (a SQL catalog; ``uri`` "" is a SQLite file under a local lake,
    ``<lake_root>/_iceberg/catalog.db``) or ``"glue"`` (AWS Glue: Athena, EMR, Trino read the
    tables; the ``glue_*`` keys "" fall back to ``[catalog]``'s); not set: Glue when
    ``[catalog] backend = "glue"``, else SQL. ``retention_hours``: snapshots
    older than this are expired and unreferenced files older than this deleted by the
    maintenance job (``datalake maintain``). ``compact_after_hours`` and ``target_file_mb``:
    compaction (``datalake compact``, docs/guides/compaction.md) rewrites the hours older than the
    former into files of about the latter."""

    # "": spec.table_formats.default_iceberg_catalog of [catalog] backend (FormatConfig.of_settings)
    catalog: OneOf(ICEBERG_CATALOGS, "Iceberg catalog") = ""
    # a SQLAlchemy URI of the SQL catalog's database; "" -> SQLite under a local lake
    uri: Str = ""
    glue_region: AwsRegion("glue region") = ""
    glue_endpoint_url: HttpUrl("glue endpoint url") = ""
    glue_catalog_id: AwsAccountId("glue catalog id") = ""
    # the tables' files on S3 through a VPC endpoint or a test server; "" -> AWS
    s3_endpoint_url: HttpUrl("s3 endpoint url") = ""
    retention_hours: Int(1, 24 * 365) = 168
    # hours younger than this are left to late syncs and replays; 0: every finished hour.
    # 2: an archive hour's files are in within minutes of its end and the sensor syncs it then;
    # a later replay of a compacted hour rewrites its coarse file, cheap for the small tables
    # compaction merges (a big table's right-sized hour files are never rewritten)
    compact_after_hours: Int(0, 24 * 365) = 2
    # the size compaction writes files at; Segment's guide targets 256 MB to 1 GB
    target_file_mb: Int(256, 1024) = 512


@settings_model
class FormatConfig(IcebergSettings):
    """Which table format a lake uses and how to reach its catalog: ``table_format`` and the
    ``[iceberg]`` settings (inherited, so validated once, by the settings' rules), with
    ``[catalog]``'s Glue keys where ``[iceberg]`` leaves them empty (``of_settings``). What
    ``lake.formats.table_format`` takes; a sync started elsewhere (spark-submit on EMR, Pipes)
    gets it through its argv (``to_args``, ``add_arguments``, ``from_args``)."""

    # a request built without settings (tests, old argv) means the Segment layout; the settings'
    # default is resolved by LakeSettings and always named here by of_settings
    format: OneOf(TABLE_FORMATS, "table format") = SEGMENT
    # always a catalog here: of_settings resolves [iceberg]'s "" (follow [catalog])
    catalog: OneOf(ICEBERG_CATALOGS, "Iceberg catalog") = "sql"

    @classmethod
    def of_settings(cls, settings: Any) -> "FormatConfig":
        """From loaded settings (a ``LakeSettings``)."""
        ice, cat = settings.iceberg, settings.catalog
        values = {f.name: getattr(ice, f.name) for f in dataclasses.fields(IcebergSettings)}
        for key in ("glue_region", "glue_endpoint_url", "glue_catalog_id"):
            values[key] = values[key] or getattr(cat, key)
        values["catalog"] = values["catalog"] or default_iceberg_catalog(cat.backend)
        return cls(**values, format=settings.table_format)

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        group = parser.add_argument_group("table format")
        for f in dataclasses.fields(FormatConfig):
            group.add_argument(
                _ARG_PREFIX + f.name.replace("_", "-"),
                dest=f"format_{f.name}",
                type=type(f.default),
                default=f.default,
            )

    def to_args(self) -> list[str]:
        out: list[str] = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value != "" and value != f.default:
                out += [_ARG_PREFIX + f.name.replace("_", "-"), str(value)]
        return out

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> "FormatConfig":
        return cls(
            **{
                f.name: getattr(args, f"format_{f.name}")
                for f in dataclasses.fields(cls)
                if hasattr(args, f"format_{f.name}")
            }
        )
