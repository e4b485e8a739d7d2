"""``datalake catalog init-metastore``: a MySQL/MariaDB metastore's Hive schema, created once,
up front, before any session uses it.

Sessions never create the schema (``datanucleus.schema.autoCreateAll=false``, see
``metastore.py``): DataNucleus would otherwise create each table on the first use of its
class, and two JVMs doing that at once deadlock on MySQL's metadata locks or fail on a table
the other just created. Hive's ``schematool`` SQL scripts are not in PySpark's distribution;
what is, and works offline, is the metastore's own JDO mapping (``package.jdo`` in the
``hive-metastore`` jar) and DataNucleus' ``SchemaTool``, with the DataNucleus settings Hive's
``ObjectStore`` itself uses (read from a ``HiveConf``: the identifier factory decides column
names such as ``INTEGER_IDX``). So, in one JVM started for it (PySpark's gateway with the
driver's jar on its class path; the password passes over the local gateway, never a file or
command line), under the database's named lock ``GET_LOCK`` (two inits at once take turns):

1. refuse a database that is not ``latin1`` (with ``utf8mb4`` Hive's ``VARCHAR(767)`` keys
   and ``VARCHAR(32672)`` columns exceed MySQL's limits and the schema is half created);
2. unless the ``VERSION`` table holds a version: create every table of ``package.jdo``, then
   record the schema version of Spark's built-in Hive client (``hive.metastore.schema
   .verification`` is on in every session, so a database without it is refused);
3. create DataNucleus' id table (``SEQUENCE_TABLE``) with a row per class, which DataNucleus
   would otherwise add on first use (two first inserts at once collide);
4. open the metastore once, as a session would: Hive creates the ``default`` database and
   its roles (else the first sessions race to) and checks the schema version.

Every step is idempotent: running the command again reports the version and changes nothing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from datalake_assets.catalog.catalog_interface import INTERNAL, INVALID_SETTINGS, CatalogError
from datalake_assets.catalog.config import CatalogConfig
from datalake_assets.catalog.metastore import (
    CLASSPATH_KEY,
    DRIVER_KEY,
    PASSWORD_KEY,
    URL_KEY,
    USER_KEY,
    explain,
    metastore_password,
    prepare_session,
)

LOCK_NAME = "datalake_assets.init_metastore"
_MAPPING = "package.jdo"  # the metastore's JDO mapping, a resource of the hive-metastore jar
_SEQUENCE_DDL = (  # what DataNucleus creates itself (its default id table), latin1 like the rest
    "CREATE TABLE IF NOT EXISTS SEQUENCE_TABLE (SEQUENCE_NAME VARCHAR(255) CHARACTER SET "
    "latin1 COLLATE latin1_bin NOT NULL, NEXT_VAL BIGINT NOT NULL, PRIMARY KEY "
    "(SEQUENCE_NAME)) ENGINE=InnoDB DEFAULT CHARSET=latin1"
)


@dataclass(frozen=True)
class InitResult:
    database: str
    server: str  # the server's VERSION()
    schema_version: str  # Hive's, as recorded in the VERSION table
    created: bool  # False: the schema was there already
    tables: int  # tables in the database afterwards

    def summary(self) -> str:
        what = "created" if self.created else "already present"
        return (
            f"metastore schema {self.schema_version} {what} in database "
            f"{self.database!r} ({self.tables} tables; server {self.server})"
        )


def init_metastore(cfg: CatalogConfig, *, lock_timeout_s: int = 600) -> InitResult:
    """Create ``cfg``'s metastore schema if it is absent (see the module doc)."""
    conf = cfg.spark_conf()
    if conf.get(PASSWORD_KEY) is None:
        raise CatalogError(
            "init-metastore is for a Hive metastore in MySQL/MariaDB: set "
            "[catalog] backend = 'hive' and metastore_jdbc_url",
            INVALID_SETTINGS,
        )
    prepare_session(conf)  # the driver's jar exists, the password is readable
    password = metastore_password(conf)
    gateway = _launch_gateway(conf)
    try:
        return _Init(gateway, conf, password, lock_timeout_s).run()
    except CatalogError:
        raise
    except Exception as e:  # Py4JJavaError: the deepest cause says what went wrong
        raise CatalogError(f"init-metastore: {explain(e) or _deepest(e)}", INTERNAL) from None
    finally:
        _stop_gateway(gateway)


def _launch_gateway(conf: dict[str, str]) -> Any:
    """A JVM of PySpark's, without a SparkContext, with the driver's jar on its class path."""
    from pyspark import SparkConf
    from pyspark.java_gateway import launch_gateway

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # as a local session (loopback)
    spark_conf = SparkConf(loadDefaults=False)
    spark_conf.set(CLASSPATH_KEY, conf[CLASSPATH_KEY])
    spark_conf.set("spark.driver.extraJavaOptions", "-Duser.timezone=UTC")
    gateway = launch_gateway(spark_conf)
    log4j = gateway.jvm.org.apache.logging.log4j
    # DataNucleus warns about every primary key name MySQL ignores: keep errors only
    log4j.core.config.Configurator.setRootLevel(log4j.Level.ERROR)
    return gateway


def _stop_gateway(gateway: Any) -> None:
    """The gateway's JVM exits when its stdin closes (PySpark's PythonGatewayServer)."""
    proc = getattr(gateway, "proc", None)
    try:
        gateway.shutdown()
    finally:
        if proc is not None:
            proc.stdin.close()
            proc.wait(timeout=60)


def _deepest(error: BaseException) -> str:
    java = getattr(error, "java_exception", None)
    message = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    for _ in range(20):
        if java is None:
            break
        message = str(java.toString())
        java = java.getCause()
    return message


class _Init:
    def __init__(
        self, gateway: Any, conf: dict[str, str], password: str, lock_timeout_s: int
    ) -> None:
        self.gw, self.jvm = gateway, gateway.jvm
        self.conf, self.password, self.lock_timeout_s = conf, password, lock_timeout_s
        props = self.jvm.java.util.Properties()
        props.setProperty("user", conf[USER_KEY])
        props.setProperty("password", password)
        try:
            self.conn = self.jvm.java.sql.DriverManager.getConnection(conf[URL_KEY], props)
        except Exception as e:
            raise CatalogError(
                f"init-metastore: cannot connect: {explain(e) or _deepest(e)}", INVALID_SETTINGS
            ) from None

    # ------------------------------------------------------------------------------ SQL

    def query(self, sql: str, *params: Any) -> list[tuple]:
        with_params = self.conn.prepareStatement(sql)
        try:
            for i, p in enumerate(params, 1):
                with_params.setObject(i, p)
            rs = with_params.executeQuery()
            n = rs.getMetaData().getColumnCount()
            rows = []
            while rs.next():
                rows.append(tuple(rs.getObject(i) for i in range(1, n + 1)))
            return rows
        finally:
            with_params.close()

    def execute(self, sql: str, *params: Any) -> int:
        statement = self.conn.prepareStatement(sql)
        try:
            for i, p in enumerate(params, 1):
                statement.setObject(i, p)
            return int(statement.executeUpdate())
        finally:
            statement.close()

    def table_count(self) -> int:
        return int(
            self.query(
                "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()"
            )[0][0]
        )

    def recorded_version(self) -> str | None:
        found = self.query(
            "SELECT COUNT(*) FROM information_schema.TABLES WHERE "
            "TABLE_SCHEMA = DATABASE() AND UPPER(TABLE_NAME) = 'VERSION'"
        )
        if not int(found[0][0]):
            return None
        rows = self.query("SELECT SCHEMA_VERSION FROM VERSION ORDER BY VER_ID")
        return str(rows[0][0]) if rows else None

    # ---------------------------------------------------------------------------- steps

    def run(self) -> InitResult:
        try:
            database, server, charset = self.query(
                "SELECT DATABASE(), VERSION(), @@character_set_database"
            )[0]
            if charset != "latin1":
                raise CatalogError(
                    f"database {database!r} has character set {charset}; the Hive metastore "
                    "needs latin1 (in utf8mb4 its VARCHAR(767) keys and VARCHAR(32672) columns "
                    "exceed MySQL's limits and the schema would be half created): "
                    f"ALTER DATABASE `{database}` CHARACTER SET latin1 COLLATE latin1_bin, "
                    "or create it so",
                    INVALID_SETTINGS,
                )
            got = self.query("SELECT GET_LOCK(?, ?)", LOCK_NAME, self.lock_timeout_s)[0][0]
            if got != 1:
                raise CatalogError(
                    f"another init-metastore has held the lock {LOCK_NAME!r} "
                    f"for {self.lock_timeout_s} s",
                    INTERNAL,
                )
            try:
                return self.locked(str(database), str(server))
            finally:
                self.query("SELECT RELEASE_LOCK(?)", LOCK_NAME)
        finally:
            self.conn.close()

    def locked(self, database: str, server: str) -> InitResult:
        expected = str(
            self.jvm.org.apache.hadoop.hive.metastore.MetaStoreSchemaInfo.getHiveSchemaVersion()
        )
        recorded = self.recorded_version()
        if recorded is not None and recorded != expected:
            raise CatalogError(
                f"database {database!r} holds Hive metastore schema {recorded}, Spark's "
                f"built-in Hive client needs {expected}: use another database (or upgrade it "
                "with Hive's schematool)",
                INVALID_SETTINGS,
            )
        datastore_classes = self.create_tables(create=recorded is None)
        self.execute(_SEQUENCE_DDL)
        for name in datastore_classes:
            self.execute(
                "INSERT IGNORE INTO SEQUENCE_TABLE (SEQUENCE_NAME, NEXT_VAL) VALUES (?, 1)", name
            )
        if recorded is None:
            self.execute(
                "INSERT INTO VERSION (VER_ID, SCHEMA_VERSION, VERSION_COMMENT) VALUES (1, ?, ?)",
                expected,
                "datalake catalog init-metastore",
            )
        self.open_once()
        return InitResult(database, server, expected, recorded is None, self.table_count())

    def hive_conf(self) -> Any:
        """A ``HiveConf`` as a session's metastore client gets it (verification on)."""
        hc = self.jvm.org.apache.hadoop.hive.conf.HiveConf()
        for key in (URL_KEY, DRIVER_KEY, USER_KEY):
            hc.set(key.removeprefix("spark.hadoop."), self.conf[key])
        hc.set(PASSWORD_KEY.removeprefix("spark.hadoop."), self.password)  # JVM memory only
        hc.set("datanucleus.schema.autoCreateAll", "false")
        hc.set("hive.metastore.schema.verification", "true")
        if self.conf.get("spark.sql.warehouse.dir"):
            hc.set("hive.metastore.warehouse.dir", self.conf["spark.sql.warehouse.dir"])
        return hc

    def create_tables(self, create: bool) -> list[str]:
        """Every table of the metastore's JDO mapping (when ``create``); returns the classes
        whose ids DataNucleus draws from ``SEQUENCE_TABLE`` (datastore identity)."""
        props = self.jvm.java.util.HashMap()
        # what ObjectStore passes to DataNucleus: every "datanucleus"/"jdo" key of a HiveConf
        for k, v in dict(self.hive_conf().getValByRegex(".*(datanucleus|jdo).*")).items():
            props.put(k, v)
        props.put("datanucleus.schema.autoCreateAll", "true")
        schema = self.jvm.org.datanucleus.store.schema
        context = schema.SchemaTool.getNucleusContextForMode(
            getattr(schema, "SchemaTool$Mode").CREATE, "JDO", props, None, None, False
        )
        try:
            files = self.gw.new_array(self.jvm.String, 1)
            files[0] = _MAPPING
            names = self.jvm.java.util.TreeSet()
            datastore: list[str] = []
            for file in context.getMetaDataManager().loadFiles(
                files, context.getClassLoaderResolver(None)
            ):
                for i in range(file.getNoOfPackages()):
                    package = file.getPackage(i)
                    for j in range(package.getNoOfClasses()):
                        cls = package.getClass(j)
                        names.add(cls.getFullClassName())
                        # JDO's default identity is the datastore's (MType declares none)
                        kind = cls.getIdentityType()
                        if not cls.isEmbeddedOnly() and (
                            kind is None or str(kind.toString()) == "DATASTORE"
                        ):
                            datastore.append(str(cls.getFullClassName()))
            if create:
                schema.SchemaTool().createSchemaForClasses(context.getStoreManager(), names)
        finally:
            context.close()
        return datastore

    def open_once(self) -> None:
        client = self.jvm.org.apache.hadoop.hive.metastore.HiveMetaStoreClient(self.hive_conf())
        try:
            client.getAllDatabases()
        finally:
            client.close()
