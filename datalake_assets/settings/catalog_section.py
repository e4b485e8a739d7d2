"""``[catalog]``: where the tables are registered (``datalake_assets.catalog``)."""

import os
import re
from typing import Annotated

from pydantic import AfterValidator, ValidationInfo, model_validator

from datalake_assets.settings.fields import (
    AwsAccountId,
    AwsRegion,
    HttpUrl,
    LocalFile,
    LocalFolder,
    Match,
    OneOf,
    SettingsError,
    Str,
    base_of,
    file_defaults,
    settings_model,
)

CATALOG_BACKENDS = ("glue", "hive", "none")
DEFAULT_METASTORE_DIR = "metastore"
METASTORE_SERVER_MODES = ("auto", "off")  # relative like the roots: <home>/metastore by default
_THRIFT_RE = r"thrift://[A-Za-z0-9.\-]+:[0-9]{1,5}(?:,thrift://[A-Za-z0-9.\-]+:[0-9]{1,5})*"

# A Hive metastore in MySQL / MariaDB (catalog/metastore.py): Databricks' external metastore,
# and a local one that several Spark processes share (Derby allows one JVM at a time).
MARIADB_DRIVER = "org.mariadb.jdbc.Driver"
JDBC_DRIVERS = (MARIADB_DRIVER, "com.mysql.cj.jdbc.Driver", "com.mysql.jdbc.Driver")
# Debian's libmariadb-java; MariaDB Connector/J 2.x also accepts jdbc:mysql:// URLs
DEFAULT_METASTORE_JARS = "/usr/share/java/mariadb-java-client.jar"
ENV_METASTORE_PASSWORD = "DATALAKE_METASTORE_PASSWORD"
_JDBC_RE = re.compile(
    r"jdbc:(?P<scheme>mysql|mariadb)://(?P<host>[A-Za-z0-9.\-]+|\[[0-9A-Fa-f:.]+\])"
    r"(?::(?P<port>[0-9]{1,5}))?/(?P<database>[A-Za-z0-9_]{1,64})(?:\?(?P<query>[^#]*))?"
)
_PARAM_RE = re.compile(r"(?P<key>[A-Za-z][A-Za-z0-9_.]*)=(?P<value>[^\s&;'\"`\\]*)")
_SECRET_KEYS = ("password", "pwd", "user", "username")
_PASSWORD_HINT = (
    f"set metastore_user, and the password in ${ENV_METASTORE_PASSWORD} or a "
    "file named by metastore_password_file"
)


def jdbc_url_params(url: str) -> dict[str, str]:
    """The query parameters of a metastore JDBC URL (already validated)."""
    query = url.partition("?")[2]
    return dict(p.split("=", 1) for p in query.split("&")) if query else {}


def check_metastore_jdbc_url(url: str, driver: str) -> None:
    """A MySQL/MariaDB JDBC URL without credentials. Errors never repeat the URL: a password
    written into it must not reach a log."""
    if "@" in url.partition("?")[0] or re.search(r"(?i)[?&;](password|pwd)=", url):
        raise SettingsError(
            f"credentials are not allowed in the JDBC URL (value not shown); {_PASSWORD_HINT}"
        )
    m = _JDBC_RE.fullmatch(url)
    if not m:
        raise SettingsError(
            "invalid metastore JDBC URL (value not shown); allowed: "
            "jdbc:mysql://host[:port]/database[?key=value&...] or jdbc:mariadb://..."
        )
    for param in (m["query"] or "").split("&") if m["query"] else ():
        pm = _PARAM_RE.fullmatch(param)
        if not pm:
            raise SettingsError(
                "invalid JDBC URL parameter (value not shown); allowed: "
                "key=value pairs joined by '&', no spaces, quotes or ';'"
            )
        if pm["key"].lower() in _SECRET_KEYS:
            raise SettingsError(f"{pm['key']!r} is not allowed in the JDBC URL; {_PASSWORD_HINT}")
    params = {k.lower(): v.lower() for k, v in jdbc_url_params(url).items()}
    if driver == MARIADB_DRIVER and params.get("usemysqlmetadata", "true") != "true":
        # MariaDB's driver then names the server "MariaDB", which DataNucleus does not know:
        # it falls back to generic SQL (INITIALLY DEFERRED constraints) and the schema fails.
        raise SettingsError(
            "useMysqlMetadata must be true with the MariaDB driver (DataNucleus "
            "only knows MySQL); leave it out and it is added"
        )
    if driver != MARIADB_DRIVER and m["scheme"] == "mariadb":
        raise SettingsError(f"jdbc:mariadb:// URLs need metastore_jdbc_driver = {MARIADB_DRIVER!r}")


def _jars(value: str, info: ValidationInfo) -> str:
    """Comma-separated local jar paths, resolved like the roots when loaded from a file."""
    base = base_of(info)
    out = []
    for jar in value.split(","):
        jar = jar.strip()
        if not jar or "://" in jar or any(c.isspace() or c in ":;" for c in jar):
            raise SettingsError(
                f"invalid jar path {jar!r}; allowed: local paths joined by ',' "
                "(no spaces, ':' or ';': they go on Spark's class path)"
            )
        out.append(
            os.path.normpath(os.path.join(base, os.path.expanduser(jar)))
            if base is not None
            else jar
        )
    return ",".join(out)


def _derby_safe(folder: str) -> str:
    if any(c.isspace() or c == ";" for c in folder):
        raise SettingsError(
            f"invalid folder {folder!r}: spaces and ';' are not allowed "
            "(Spark's Java options and Derby's JDBC URL cannot carry them)"
        )
    return folder


@settings_model
class CatalogSettings:
    """Where the tables are registered (``datalake_assets.catalog``).

    ``backend``: ``"hive"`` (default: an embedded Derby metastore under ``metastore_dir``
    that Spark SQL queries; one JVM at a time, which the ``spark_local`` pool guarantees for
    syncs), ``"glue"`` (AWS Glue, for Athena) or ``"none"`` (files only).
    ``metastore_dir`` is resolved at load like the roots; ``""`` (direct construction only)
    means ``$DATALAKE_HOME/metastore`` when used. With ``metastore_jdbc_url`` the metastore
    is a MySQL/MariaDB database instead of Derby (``metastore_dir`` then only holds the
    warehouse folder): several processes may use it at once. Its password is never a
    setting: ``$DATALAKE_METASTORE_PASSWORD`` or the file ``metastore_password_file``."""

    _file_defaults = file_defaults(metastore_dir=DEFAULT_METASTORE_DIR)

    backend: OneOf(CATALOG_BACKENDS, "catalog backend") = "hive"
    # holds the sync_reports table
    reports_database: Match(
        r"[a-z0-9_]{1,255}", "database name", "1-255 characters from [a-z0-9_] (Glue-safe)"
    ) = "segment_datalake_meta"
    # embedded Derby metastore and warehouse (local folder)
    metastore_dir: Annotated[
        LocalFolder(
            DEFAULT_METASTORE_DIR,
            "an embedded Derby metastore",
            "; for a shared metastore set metastore_jdbc_url or hive_metastore_uri",
        ),
        AfterValidator(_derby_safe),
    ] = ""
    # thrift://host:9083: a remote metastore instead of Derby
    hive_metastore_uri: Match(
        _THRIFT_RE,
        "hive metastore uri",
        "thrift://host:port (comma-separated for several)",
        empty=True,
    ) = ""
    # "" -> AWS_REGION / ~/.aws/config
    glue_region: AwsRegion("glue region") = ""
    # 12-digit account id of the Glue catalog; "" -> your account
    glue_catalog_id: AwsAccountId("glue catalog id") = ""
    # a VPC endpoint or a test server; "" -> AWS
    glue_endpoint_url: HttpUrl("glue endpoint url") = ""
    # jdbc:mysql://host:3306/metastore: a Hive metastore in MySQL/MariaDB instead of Derby
    metastore_jdbc_url: Str = ""
    metastore_jdbc_driver: OneOf(JDBC_DRIVERS, "JDBC driver") = MARIADB_DRIVER
    metastore_user: Match(
        r"[A-Za-z0-9_.\-]{1,80}",
        "metastore user",
        "1-80 characters from [A-Za-z0-9_.-]",
        empty=True,
    ) = ""
    # a file holding the password (a mounted secret); else $DATALAKE_METASTORE_PASSWORD
    metastore_password_file: LocalFile = ""
    # the JDBC driver's jar(s), comma-separated
    metastore_jars: Annotated[Str, AfterValidator(_jars)] = DEFAULT_METASTORE_JARS
    # "auto": while `datalake dev` runs, one Spark process of its own holds the embedded
    # metastore and every sync sends it its catalog statements (no JVM and Derby boot per run,
    # runs may overlap); "off": each process opens the metastore itself, one at a time
    metastore_server: OneOf(METASTORE_SERVER_MODES, "metastore server mode") = "auto"

    @model_validator(mode="after")
    def _jdbc_metastore(self) -> "CatalogSettings":
        if not self.metastore_jdbc_url:
            return self
        try:
            check_metastore_jdbc_url(self.metastore_jdbc_url, self.metastore_jdbc_driver)
        except SettingsError as e:
            raise SettingsError(e.problem, key="metastore_jdbc_url") from None
        if self.hive_metastore_uri:
            raise SettingsError(
                "set either metastore_jdbc_url (Spark talks to the metastore's "
                "database) or hive_metastore_uri (a thrift metastore service), "
                "not both",
                key="metastore_jdbc_url",
            )
        if not self.metastore_user:
            raise SettingsError("required with metastore_jdbc_url", key="metastore_user")
        return self
