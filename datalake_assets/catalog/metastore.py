"""A Hive metastore in MySQL / MariaDB: the Spark settings of a session that uses one, and
its password.

This is the metastore Databricks uses as an external metastore, and locally it is the one to
use when several Spark processes must reach the catalog at the same time (a sync and a
``pyspark`` shell, overlapping runs): Derby, the embedded default, lets one JVM at a time open
its folder. Spark's built-in Hive client (2.3) talks to the database directly through
DataNucleus; there is no metastore service to run.

``jdbc_spark_conf`` gives the session's settings (``config.hive_spark_conf`` adds them for a
``CatalogConfig`` with ``metastore_jdbc_url``):

* ``javax.jdo.option.Connection{URL,DriverName,UserName}``; with the MariaDB driver the URL
  gets ``useMysqlMetadata=true`` when it lacks it (otherwise the driver names the server
  "MariaDB", which DataNucleus does not know, and it falls back to SQL MySQL rejects);
* ``javax.jdo.option.ConnectionPassword`` = ``${env.DATALAKE_METASTORE_PASSWORD}``: a
  reference that Hadoop's ``Configuration`` resolves inside the JVM from its environment.
  The password itself is never a Spark setting, so it is on no command line (PySpark passes
  a session's settings to ``spark-submit`` as arguments, which ``ps`` shows), in no Dagster
  resource config and in no log. ``prepare_session`` puts it in the environment before the
  JVM starts (from the variable, or from ``metastore_password_file``);
* ``datanucleus.schema.autoCreateAll=false`` and ``hive.metastore.schema.verification=true``:
  the schema is created once, up front, by ``datalake catalog init-metastore``
  (``metastore_init.py``), never lazily by whichever process touches a table first (lazy
  creation by two JVMs at once deadlocks or fails on "table exists"). A database without it
  fails with ``Version information not found in metastore``, which ``explain`` turns into
  the command to run;
* the driver's jar on ``spark.driver.extraClassPath`` (DataNucleus loads the driver by name).

The database must be ``latin1``: Hive's schema has ``VARCHAR(767)`` keys and
``VARCHAR(32672)`` columns that exceed MySQL's limits in ``utf8mb4`` (``init-metastore``
checks it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping

from datalake_assets.catalog.catalog_interface import INVALID_SETTINGS, CatalogError
from datalake_assets.settings.catalog_section import (
    ENV_METASTORE_PASSWORD,
    MARIADB_DRIVER,
    check_metastore_jdbc_url,
    jdbc_url_params,
)
from datalake_assets.settings.fields import SettingsError

PASSWORD_REF = f"${{env.{ENV_METASTORE_PASSWORD}}}"  # resolved by Hadoop, inside the JVM
URL_KEY = "spark.hadoop.javax.jdo.option.ConnectionURL"
DRIVER_KEY = "spark.hadoop.javax.jdo.option.ConnectionDriverName"
USER_KEY = "spark.hadoop.javax.jdo.option.ConnectionUserName"
PASSWORD_KEY = "spark.hadoop.javax.jdo.option.ConnectionPassword"
# Not Spark's: where prepare_session reads the password from (a path, not a secret). Spark
# keeps unknown spark.* settings without complaint.
PASSWORD_FILE_KEY = "spark.datalake.metastore.passwordFile"
CLASSPATH_KEY = "spark.driver.extraClassPath"
INIT_COMMAND = "datalake catalog init-metastore"


def effective_jdbc_url(url: str, driver: str) -> str:
    """The URL as the session uses it: ``useMysqlMetadata=true`` added for MariaDB's driver."""
    try:
        check_metastore_jdbc_url(url, driver)
    except SettingsError as e:
        raise CatalogError(f"metastore_jdbc_url: {e.problem}", INVALID_SETTINGS) from None
    if driver != MARIADB_DRIVER or any(
        k.lower() == "usemysqlmetadata" for k in jdbc_url_params(url)
    ):
        return url
    return url + ("&" if "?" in url else "?") + "useMysqlMetadata=true"


def jdbc_spark_conf(
    url: str, driver: str, user: str, jars: str, password_file: str = ""
) -> dict[str, str]:
    """The Spark settings of a session whose Hive metastore is the database at ``url``
    (see the module doc). ``jars``: the driver's jar paths, comma-separated."""
    if not user:
        raise CatalogError("a JDBC metastore needs metastore_user", INVALID_SETTINGS)
    paths = [j for j in jars.split(",") if j]
    if not paths:
        raise CatalogError(
            "a JDBC metastore needs metastore_jars (the JDBC driver's jar)", INVALID_SETTINGS
        )
    conf = {
        URL_KEY: effective_jdbc_url(url, driver),
        DRIVER_KEY: driver,
        USER_KEY: user,
        PASSWORD_KEY: PASSWORD_REF,
        "spark.hadoop.datanucleus.schema.autoCreateAll": "false",
        "spark.hadoop.hive.metastore.schema.verification": "true",
        CLASSPATH_KEY: ":".join(paths),
    }
    if password_file:
        conf[PASSWORD_FILE_KEY] = password_file
    return conf


def read_password_file(path: str) -> str:
    """The password in ``path`` (one line; a trailing newline is not part of it). Errors name
    the file, never its content."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise CatalogError(
            f"metastore_password_file {path}: cannot read: {e.strerror or type(e).__name__}",
            INVALID_SETTINGS,
        ) from None
    except UnicodeDecodeError:
        raise CatalogError(
            f"metastore_password_file {path}: not UTF-8 text", INVALID_SETTINGS
        ) from None
    password = text.rstrip("\r\n")
    if not password or "\n" in password:
        raise CatalogError(
            f"metastore_password_file {path}: must hold the password on one line", INVALID_SETTINGS
        )
    return password


def prepare_session(
    conf: Mapping[str, str], environ: MutableMapping[str, str] | None = None
) -> None:
    """Before a session with ``conf`` starts its JVM: the driver's jars exist, and the
    password is in the environment the JVM inherits (read from ``metastore_password_file``
    when one is set, which then wins over the variable). Nothing to do for other catalogs."""
    if conf.get(PASSWORD_KEY) != PASSWORD_REF:
        return
    environ = os.environ if environ is None else environ
    missing = [j for j in conf.get(CLASSPATH_KEY, "").split(":") if j and not os.path.isfile(j)]
    if missing:
        raise CatalogError(
            f"the metastore's JDBC driver jar is missing: {', '.join(missing)} (metastore_jars; "
            "Debian/Ubuntu: apt-get install libmariadb-java)",
            INVALID_SETTINGS,
        )
    if conf.get(PASSWORD_FILE_KEY):
        environ[ENV_METASTORE_PASSWORD] = read_password_file(conf[PASSWORD_FILE_KEY])
    elif not environ.get(ENV_METASTORE_PASSWORD):
        raise CatalogError(
            f"the metastore's password is missing: set ${ENV_METASTORE_PASSWORD} or [catalog] "
            "metastore_password_file",
            INVALID_SETTINGS,
        )


def metastore_password(conf: Mapping[str, str], environ: Mapping[str, str] | None = None) -> str:
    """The password ``prepare_session`` exports (for a JDBC connection of our own)."""
    environ = os.environ if environ is None else environ
    if conf.get(PASSWORD_FILE_KEY):
        return read_password_file(conf[PASSWORD_FILE_KEY])
    password = environ.get(ENV_METASTORE_PASSWORD, "")
    if not password:
        raise CatalogError(
            f"the metastore's password is missing: set ${ENV_METASTORE_PASSWORD} or [catalog] "
            "metastore_password_file",
            INVALID_SETTINGS,
        )
    return password


# What a metastore that is not ready says (anywhere in the Java exception's causes), and
# what to do about it.
_NOT_READY = (
    (
        "Version information not found in metastore",
        f"the metastore database has no Hive schema yet: run `{INIT_COMMAND}` once (it is never "
        "created on first use: two processes doing so at once deadlock)",
    ),
    ("Required table missing", f"the metastore database lacks Hive tables: run `{INIT_COMMAND}`"),
    (
        "Hive metastore database is not initialized",  # what Hive says without verification
        f"the metastore database has no Hive schema yet: run `{INIT_COMMAND}` once",
    ),
    (
        "Hive Schema version",
        "the metastore database holds another Hive version's schema than Spark's built-in Hive "
        "client expects",
    ),
    (
        "Access denied for user",
        "the metastore database refused the user or password "
        f"(metastore_user, ${ENV_METASTORE_PASSWORD} / metastore_password_file)",
    ),
    ("Could not connect to address", "the metastore database is unreachable (metastore_jdbc_url)"),
    ("Communications link failure", "the metastore database is unreachable (metastore_jdbc_url)"),
    ("Socket fail to connect", "the metastore database is unreachable (metastore_jdbc_url)"),
)


def explain(error: BaseException) -> str | None:
    """What a metastore failure means for the user, from the whole Java cause chain (PySpark
    shows only the outermost message: "Unable to instantiate SessionHiveMetaStoreClient")."""
    texts = [str(error)]
    java = getattr(error, "java_exception", None) or getattr(error, "_origin", None)
    for _ in range(20):  # the cause chain, bounded
        if java is None:
            break
        try:
            texts.append(str(java.toString()))
            java = java.getCause()
        except Exception:  # no gateway any more: what we have is all we get
            break
    text = "\n".join(texts)
    for marker, meaning in _NOT_READY:
        if marker in text:
            return meaning
    return None
