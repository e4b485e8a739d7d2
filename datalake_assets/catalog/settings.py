"""``[catalog]``: where the tables are registered (``datalake_assets.catalog``)."""

from typing import Annotated

from pydantic import AfterValidator

from datalake_assets.settings_base import (
    LocalFolder, Match, OneOf, SettingsError, file_defaults, settings_model)

CATALOG_BACKENDS = ("glue", "hive", "none")  # = datalake_assets.catalog.config.BACKENDS
DEFAULT_METASTORE_DIR = "metastore"  # relative like the roots: <home>/metastore by default
ENDPOINT_RE = r"https?://[^\s'\"\\;`]+"
REGION_RE = r"[a-z]{2}(?:-[a-z]+)+-[0-9]{1,2}"
_THRIFT_RE = r"thrift://[A-Za-z0-9.\-]+:[0-9]{1,5}(?:,thrift://[A-Za-z0-9.\-]+:[0-9]{1,5})*"


def _derby_safe(folder: str) -> str:
    if any(c.isspace() or c == ";" for c in folder):
        raise SettingsError(f"invalid folder {folder!r}: spaces and ';' are not allowed "
                            "(Spark's Java options and Derby's JDBC URL cannot carry them)")
    return folder


@settings_model
class CatalogSettings:
    """Where the tables are registered (``datalake_assets.catalog``).

    ``backend``: ``"hive"`` (default: an embedded Derby metastore under ``metastore_dir``
    that Spark SQL queries; one JVM at a time, which the ``spark_local`` pool guarantees for
    syncs), ``"glue"`` (AWS Glue, for Athena) or ``"none"`` (files only).
    ``metastore_dir`` is resolved at load like the roots; ``""`` (direct construction only)
    means ``$DATALAKE_HOME/metastore`` when used."""

    _file_defaults = file_defaults(metastore_dir=DEFAULT_METASTORE_DIR)

    backend: OneOf(CATALOG_BACKENDS, "catalog backend") = "hive"
    # holds the sync_reports table
    reports_database: Match(r"[a-z0-9_]{1,255}", "database name",
                            "1-255 characters from [a-z0-9_] (Glue-safe)") = "segment_datalake_meta"
    # embedded Derby metastore and warehouse (local folder)
    metastore_dir: Annotated[
        LocalFolder(DEFAULT_METASTORE_DIR, "an embedded Derby metastore",
                    "; for a shared metastore set hive_metastore_uri"),
        AfterValidator(_derby_safe)] = ""
    # thrift://host:9083: a remote metastore instead of Derby
    hive_metastore_uri: Match(_THRIFT_RE, "hive metastore uri",
                              "thrift://host:port (comma-separated for several)", empty=True) = ""
    # "" -> AWS_REGION / ~/.aws/config
    glue_region: Match(REGION_RE, "glue region", "an AWS region such as 'us-east-1'",
                       empty=True) = ""
    # 12-digit account id of the Glue catalog; "" -> your account
    glue_catalog_id: Match(r"[0-9]{12}", "glue catalog id", "a 12-digit AWS account id",
                           empty=True) = ""
    # a VPC endpoint or a test server; "" -> AWS
    glue_endpoint_url: Match(ENDPOINT_RE, "glue endpoint url", "an http:// or https:// URL",
                             empty=True) = ""
