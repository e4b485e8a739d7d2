"""The Iceberg catalog a lake's tables are registered in (``[iceberg] catalog``): AWS
Glue, or a SQL catalog (SQLite under a local lake by default, any SQLAlchemy URI otherwise),
and the file URIs pyiceberg's FileIO reads and writes."""

from __future__ import annotations

import os
from typing import Any

from datalake_assets.lake import storage
from datalake_assets.lake.formats.format_interface import FormatError
from datalake_assets.spec import layout

_CATALOG_NAME = "datalake"


def default_sql_uri(lake_root: str) -> str:
    if storage.is_uri(lake_root):
        raise FormatError(
            "the Iceberg SQL catalog's default (a SQLite file under the lake) needs a local "
            f"lake, and lake_root is {lake_root!r}: set [iceberg] uri to a SQLAlchemy URI "
            '(e.g. postgresql+psycopg2://...) or catalog = "glue"',
            "invalid_settings",
        )
    return f"sqlite:///{os.path.join(lake_root, '_iceberg', 'catalog.db')}"


def _uri(location: str) -> str:
    """A location as pyiceberg's FileIO wants it (``file://`` for a local path)."""
    return location if storage.is_uri(location) else "file://" + os.path.abspath(location)


def _location(uri: str) -> str:
    """pyiceberg's file URI as the lake's storage module names it."""
    return uri.removeprefix("file://")


def open_catalog(c: Any, lake_root: str):  # c: settings.formats_section.FormatConfig
    """The lake's Iceberg catalog, as its settings say: AWS Glue, or a SQL catalog (a SQLite
    file under a local lake by default); with the S3 endpoint and region for its FileIO."""
    fileio: dict[str, str] = {}
    if c.s3_endpoint_url:
        fileio["s3.endpoint"] = c.s3_endpoint_url
    if c.glue_region:
        fileio["s3.region"] = c.glue_region
    if c.catalog == "glue":
        from pyiceberg.catalog.glue import GlueCatalog

        props = {
            "glue.region": c.glue_region,
            "glue.endpoint": c.glue_endpoint_url,
            "glue.id": c.glue_catalog_id,
            **fileio,
        }
        return GlueCatalog(_CATALOG_NAME, **{k: v for k, v in props.items() if v})
    from pyiceberg.catalog.sql import SqlCatalog

    uri = c.uri or default_sql_uri(lake_root)
    if uri.startswith("sqlite:///"):
        os.makedirs(os.path.dirname(uri[len("sqlite:///") :]) or ".", exist_ok=True)
    return SqlCatalog(
        _CATALOG_NAME, uri=uri, warehouse=_uri(layout.join(lake_root, "iceberg")), **fileio
    )
