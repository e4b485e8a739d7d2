"""The lake's table formats (the ``table_format`` setting) and the catalogs an Iceberg lake
may use, named once: for the settings (``settings/formats_section.py``) and for the formats
themselves (``lake/formats/``), which cannot import each other."""

from datalake_assets.spec import azure_uri

SEGMENT = "segment"  # Segment Data Lakes' hive-style folders (lake/formats/segment.py)
ICEBERG = "iceberg"  # Apache Iceberg tables (lake/formats/iceberg.py)
TABLE_FORMATS = (SEGMENT, ICEBERG)
ICEBERG_CATALOGS = ("sql", "glue")


def default_table_format(lake_root: str) -> str:
    """The format of a lake whose settings name none: Iceberg (atomic commits on S3 too,
    compaction of small tables, snapshots), except on Azure storage, which keeps the Segment
    layout: pyiceberg's ADLS file IO is not proven against our Azure tests
    (docs/concepts/table-formats.md, the parity table)."""
    return SEGMENT if azure_uri.is_azure(lake_root) else ICEBERG


def default_iceberg_catalog(catalog_backend: str) -> str:
    """The Iceberg catalog when ``[iceberg] catalog`` is not set: Glue when ``[catalog]``
    registers the tables in Glue (Athena, EMR, Trino then find the Iceberg tables where they
    found the Segment layout's), else a SQL catalog."""
    return "glue" if catalog_backend == "glue" else "sql"
