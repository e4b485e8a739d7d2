"""Settings of the lake's table format: the top-level ``table_format`` key and ``[iceberg]``
(``datalake_assets.lake.formats``)."""

from datalake_assets.settings.catalog_section import ENDPOINT_RE as _ENDPOINT_RE
from datalake_assets.settings.catalog_section import REGION_RE as _REGION_RE
from datalake_assets.settings.fields import Int, Match, OneOf, Str, settings_model

TABLE_FORMATS = ("segment", "iceberg")  # = lake.formats.base.FORMATS
ICEBERG_CATALOGS = ("sql", "glue")  # = lake.formats.base.ICEBERG_CATALOGS


@settings_model
class IcebergSettings:
    """``[iceberg]``: the Iceberg catalog and maintenance, when ``table_format = "iceberg"``.

    ``catalog``: ``"sql"`` (a SQL catalog; ``uri`` "" is a SQLite file under a local lake,
    ``<lake_root>/_iceberg/catalog.db``) or ``"glue"`` (AWS Glue: Athena, EMR, Trino read the
    tables; the ``glue_*`` keys "" fall back to ``[catalog]``'s). ``retention_hours``: snapshots
    older than this are expired and unreferenced files older than this deleted by the
    maintenance job (``datalake maintain``). ``compact_after_hours`` and ``target_file_mb``:
    compaction (``datalake compact``, docs/compaction.md) rewrites the hours older than the
    former into files of about the latter."""

    catalog: OneOf(ICEBERG_CATALOGS, "Iceberg catalog") = "sql"
    # a SQLAlchemy URI of the SQL catalog's database; "" -> SQLite under a local lake
    uri: Str = ""
    glue_region: Match(
        _REGION_RE, "glue region", "an AWS region such as 'us-east-1'", empty=True
    ) = ""
    glue_endpoint_url: Match(
        _ENDPOINT_RE, "glue endpoint url", "an http:// or https:// URL", empty=True
    ) = ""
    glue_catalog_id: Match(
        r"[0-9]{12}", "glue catalog id", "a 12-digit AWS account id", empty=True
    ) = ""
    # the tables' files on S3 through a VPC endpoint or a test server; "" -> AWS
    s3_endpoint_url: Match(
        _ENDPOINT_RE, "s3 endpoint url", "an http:// or https:// URL", empty=True
    ) = ""
    retention_hours: Int(1, 24 * 365) = 168
    # hours younger than this are left to late syncs and replays; 0: every finished hour
    compact_after_hours: Int(0, 24 * 365) = 48
    # the size compaction writes files at; Segment's guide targets 256 MB to 1 GB
    target_file_mb: Int(256, 1024) = 512
