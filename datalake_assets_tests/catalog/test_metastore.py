"""A Hive metastore in MySQL/MariaDB: its settings and Spark conf (no JVM), and two Spark
processes sharing one on a private MariaDB server, registering exactly what the embedded
Derby metastore registers."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import uuid

import pytest

from datalake_assets.catalog.catalog_interface import CatalogError
from datalake_assets.catalog.config import CatalogConfig, config_from_settings
from datalake_assets.catalog.hive import HiveCatalog
from datalake_assets.catalog.metastore import (
    PASSWORD_KEY,
    PASSWORD_REF,
    URL_KEY,
    explain,
    prepare_session,
)
from datalake_assets.settings.catalog_section import ENV_METASTORE_PASSWORD
from datalake_assets.settings.fields import SettingsError
from datalake_assets_tests.catalog import metastore_worker as worker
from datalake_assets_tests.support.mariadb import metastore_toml, run_datalake
from datalake_assets_tests.support.settings_files import load_lake_toml

SECRET = "s3cr3t-Pa55"  # stands for a password that must never be echoed
JDBC = "jdbc:mysql://db.example:3306/metastore"


def catalog_toml(**keys: str) -> str:
    body = "\n".join(f'{k} = "{v}"' for k, v in keys.items())
    return f'[catalog]\nbackend = "hive"\n{body}\n'


# ---------------------------------------------------------------------------- settings, conf


def test_settings_give_a_jdbc_metastore_conf_without_the_password(tmp_path):
    jar = tmp_path / "driver.jar"
    s = load_lake_toml(
        tmp_path,
        catalog_toml(
            metastore_jdbc_url=JDBC,
            metastore_user="hive",
            metastore_password_file="pw",
            metastore_jars="driver.jar",
        ),
    )
    cfg = config_from_settings(s.catalog)
    assert (cfg.metastore_password_file, cfg.metastore_jars) == (
        str(tmp_path / "pw"),
        str(jar),
    )  # relative to the settings file
    assert CatalogConfig.from_args(cfg.to_args()) == cfg  # survives spark-submit's argv
    conf = cfg.spark_conf()
    # the MariaDB driver gets useMysqlMetadata (else DataNucleus writes SQL MySQL rejects)
    assert conf[URL_KEY] == JDBC + "?useMysqlMetadata=true"
    assert conf["spark.hadoop.javax.jdo.option.ConnectionDriverName"] == "org.mariadb.jdbc.Driver"
    assert conf["spark.hadoop.javax.jdo.option.ConnectionUserName"] == "hive"
    assert conf[PASSWORD_KEY] == PASSWORD_REF == "${env.DATALAKE_METASTORE_PASSWORD}"
    assert conf["spark.hadoop.datanucleus.schema.autoCreateAll"] == "false"
    assert conf["spark.hadoop.hive.metastore.schema.verification"] == "true"
    assert conf["spark.driver.extraClassPath"] == str(jar)
    assert conf["spark.sql.warehouse.dir"] == f"{tmp_path}/metastore/warehouse"
    assert "derby" not in json.dumps(conf)
    # a URL that says useMysqlMetadata already keeps it; MySQL's own driver does not need it
    kept = CatalogConfig(
        metastore_dir="/m",
        metastore_user="u",
        metastore_jdbc_url=JDBC + "?useSSL=true&useMysqlMetadata=true",
    )
    assert kept.spark_conf()[URL_KEY] == JDBC + "?useSSL=true&useMysqlMetadata=true"
    mysql = CatalogConfig(
        metastore_dir="/m",
        metastore_user="u",
        metastore_jdbc_url=JDBC,
        metastore_jdbc_driver="com.mysql.cj.jdbc.Driver",
    )
    assert mysql.spark_conf()[URL_KEY] == JDBC
    # the shipped default jar is Debian's libmariadb-java
    assert (
        load_lake_toml(
            tmp_path, catalog_toml(metastore_jdbc_url=JDBC, metastore_user="u")
        ).catalog.metastore_jars
        == "/usr/share/java/mariadb-java-client.jar"
    )


@pytest.mark.parametrize(
    "keys, message",
    [
        ({"metastore_jdbc_url": f"{JDBC}?password={SECRET}"}, "credentials are not allowed"),
        ({"metastore_jdbc_url": f"jdbc:mysql://hive:{SECRET}@db:3306/m"}, "credentials are not"),
        ({"metastore_jdbc_url": f"{JDBC}?user=hive"}, "'user' is not allowed"),
        ({"metastore_jdbc_url": f"{JDBC}?useMysqlMetadata=false"}, "useMysqlMetadata must be true"),
        ({"metastore_jdbc_url": "jdbc:postgresql://db/m"}, "jdbc:mysql://host[:port]/database"),
        ({"metastore_jdbc_url": f"{JDBC}?a=b c"}, "key=value pairs"),
        (
            {
                "metastore_jdbc_url": "jdbc:mariadb://db/m",
                "metastore_jdbc_driver": "com.mysql.cj.jdbc.Driver",
            },
            "need metastore_jdbc_driver",
        ),
        (
            {
                "metastore_jdbc_url": JDBC,
                "metastore_user": "u",
                "hive_metastore_uri": "thrift://hms:9083",
            },
            "not both",
        ),
        ({"metastore_jdbc_url": JDBC, "metastore_user": ""}, "required with metastore_jdbc_url"),
        ({"metastore_jdbc_driver": "org.postgresql.Driver"}, "unknown JDBC driver"),
        ({"metastore_jars": "/a.jar:/b.jar"}, "invalid jar path"),
    ],
)
def test_bad_jdbc_settings_are_refused_without_echoing_secrets(tmp_path, keys, message):
    keys = {"metastore_user": "hive", **keys}
    with pytest.raises(SettingsError, match=message.replace("[", r"\[")) as err:
        load_lake_toml(tmp_path, catalog_toml(**keys))
    assert SECRET not in str(err.value)
    assert "catalog." in str(err.value)


def test_prepare_session_exports_the_password_and_checks_the_jar(tmp_path):
    jar = tmp_path / "driver.jar"
    jar.write_bytes(b"PK")
    cfg = CatalogConfig(
        metastore_dir=str(tmp_path),
        metastore_jdbc_url=JDBC,
        metastore_user="hive",
        metastore_jars=str(jar),
    )
    environ: dict[str, str] = {}
    with pytest.raises(CatalogError, match=ENV_METASTORE_PASSWORD) as err:
        prepare_session(cfg.spark_conf(), environ)
    assert err.value.code == "invalid_settings"
    prepare_session(cfg.spark_conf(), {ENV_METASTORE_PASSWORD: SECRET})  # from the environment
    # from a file (a mounted secret; a trailing newline is not part of it): wins over the env
    secret_file = tmp_path / "pw"
    secret_file.write_text(SECRET + "\n")
    with_file = dataclasses.replace(cfg, metastore_password_file=str(secret_file))
    environ = {ENV_METASTORE_PASSWORD: "stale"}
    prepare_session(with_file.spark_conf(), environ)
    assert environ[ENV_METASTORE_PASSWORD] == SECRET
    assert SECRET not in json.dumps(with_file.spark_conf()) + " ".join(with_file.to_args())
    secret_file.write_text(f"{SECRET}\nsecond line\n")
    with pytest.raises(CatalogError, match="one line") as err:
        prepare_session(with_file.spark_conf(), {})
    assert SECRET not in str(err.value)
    jar.unlink()
    with pytest.raises(CatalogError, match="libmariadb-java"):
        prepare_session(cfg.spark_conf(), {ENV_METASTORE_PASSWORD: SECRET})
    prepare_session(CatalogConfig(metastore_dir=str(tmp_path)).spark_conf(), {})  # Derby: no-op


def test_a_metastore_that_is_not_ready_is_explained():
    class JavaError:  # a Java exception's cause chain, as py4j shows it
        def __init__(self, text, cause=None):
            self.text, self.cause = text, cause

        def toString(self):  # noqa: N802 (Java's name)
            return self.text

        def getCause(self):  # noqa: N802
            return self.cause

    class Captured(Exception):
        _origin = JavaError(
            "HiveException: Unable to instantiate SessionHiveMetaStoreClient",
            JavaError("MetaException(message:Version information not found in metastore. )"),
        )

    error = HiveCatalog._error(Captured("Unable to instantiate"), "SHOW DATABASES", "")
    assert "datalake catalog init-metastore" in str(error) and error.code == "internal"
    assert explain(Exception("Access denied for user 'hive'@'10.0.0.1'")).startswith(
        "the metastore database refused"
    )
    assert explain(Exception("Table or view not found")) is None


# ------------------------------------------------------------------- two processes, MariaDB


@pytest.mark.slow
@pytest.mark.spark
def test_two_processes_share_one_metastore_and_register_like_derby(mariadb, spark, tmp_path):
    """Two Spark JVMs register tables (a column added in round 2), partitions and the shared
    sync_reports table in one MariaDB metastore at the same time, and read each other's tables
    by name. What each registered equals what the embedded Derby metastore registers."""
    db = f"ms_{uuid.uuid4().hex[:8]}"
    mariadb.create_database(db)
    password_file = tmp_path / "metastore-password"
    password_file.write_text(mariadb.password + "\n")
    names = ("w1", "w2")
    settings = {}
    for name in names:  # w1 reads the password from a file, w2 from the environment
        folder = tmp_path / name
        folder.mkdir()
        settings[name] = metastore_toml(
            mariadb, folder, db, password_file=str(password_file) if name == "w1" else ""
        )
    init = run_datalake(settings["w1"], "catalog", "init-metastore")
    assert init.returncode == 0, init.stderr[-3000:]
    lake = str(tmp_path / "lake")
    rows = {n: worker.write_lake(lake, n, n) for n in names}
    env = {k: v for k, v in os.environ.items() if k != ENV_METASTORE_PASSWORD}
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    procs = {}
    for name in names:
        plan = tmp_path / f"{name}.json"
        plan.write_text(
            json.dumps(
                {
                    "settings": settings[name],
                    "out": str(tmp_path / f"{name}.out.json"),
                    "name": name,
                    "peers": [p for p in names if p != name],
                    "barrier": str(barrier),
                    "database": "web",
                    "reports_database": "meta",
                    "lake": lake,
                    "rows": rows[name],
                }
            )
        )
        procs[name] = subprocess.Popen(
            [sys.executable, "-m", "datalake_assets_tests.catalog.metastore_worker", str(plan)],
            env=env | ({ENV_METASTORE_PASSWORD: mariadb.password} if name == "w2" else {}),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
    outputs = {n: p.communicate(timeout=900)[0] for n, p in procs.items()}
    results = {}
    for name, proc in procs.items():
        assert proc.returncode == 0, outputs[name][-4000:]
        results[name] = json.loads((tmp_path / f"{name}.out.json").read_text())
        assert results[name]["peers"] == {
            p: {f"{p}_{t}": rows[p] for t in worker.TABLES} for p in names if p != name
        }
    assert mariadb.password not in "".join(outputs.values())

    # the same registrations in the suite's embedded Derby metastore
    derby = HiveCatalog(spark)
    derby_db = f"web_{uuid.uuid4().hex[:8]}"
    for name in names:
        worker.register(
            derby,
            database=derby_db,
            prefix=name,
            lake=lake,
            source_dir=name,
            source_id=name,
            reports_database=f"meta_{uuid.uuid4().hex[:8]}",
        )
        assert results[name]["tables"] == worker.dump(spark, derby, derby_db, name)
    table = results["w1"]["tables"]["w1_orders"]
    assert table["rows"] == rows["w1"] and table["coupons"] == worker.ROWS_PER_HOUR
    assert [p[0] for p in table["partitions"]] == [["2026-11-21", "09"], ["2026-11-21", "10"]]
    assert table["columns"][-1] == ["coupon", "string"]
    # the metastore holds both processes' tables, and the shared sync_reports once
    tables = {r[0] for r in mariadb.sql("SELECT TBL_NAME FROM TBLS", db)}
    assert tables == {"sync_reports"} | {f"{n}_{t}" for n in names for t in worker.TABLES}
    partitions = mariadb.sql(
        "SELECT PART_NAME FROM PARTITIONS p JOIN TBLS t ON "
        "p.TBL_ID = t.TBL_ID WHERE t.TBL_NAME = 'sync_reports'",
        db,
    )
    assert sorted(r[0] for r in partitions) == [f"source_id={n}/day=2026-11-21" for n in names]
    assert not (tmp_path / "w1" / "metastore" / "metastore_db").exists()  # no Derby
