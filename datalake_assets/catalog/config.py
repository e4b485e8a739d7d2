"""Which catalog a sync registers its tables in, as a value that survives ``spark-submit``.

The sync job runs under ``spark-submit`` with plain command-line arguments, so the catalog
configuration (``CatalogConfig``: the ``[catalog]`` settings model, frozen, plus two knobs of
the job) round-trips through argv::

    cfg = CatalogConfig(backend="glue", glue_region="eu-west-1")
    argv = cfg.to_args()     # ["--catalog-backend", "glue", "--catalog-glue-region", ...]
    assert CatalogConfig.from_args(argv) == cfg

    parser = argparse.ArgumentParser(); CatalogConfig.add_arguments(parser)
    cfg = CatalogConfig.from_args(parser.parse_args(argv))      # a Namespace works too

``catalog_from_config(cfg, spark)`` builds the backend (the Hive backend needs the session).

The Hive backend needs a session configured for it *before* the session starts:
``hive_spark_conf(metastore_dir, warehouse_dir, metastore_uri)`` returns those entries.

Derby, the embedded metastore, allows **one JVM at a time** on a metastore folder. Locally
that is fine because every sync's Spark session lives in the one process that runs it, and
syncs are serialized by the Dagster pool ``spark_local`` (limit 1). A second JVM on the same
folder at the same moment (a ``pyspark`` shell, ``datalake sync`` while a run is in progress)
fails to boot the metastore ("Another instance of Derby may have already booted the
database"). For concurrent access use a metastore in MySQL/MariaDB (``metastore_jdbc_url``,
``metastore.py``: the recommended local setup when runs overlap), a remote metastore
(``hive_metastore_uri``), or ``backend = "none"``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Mapping
from typing import Any

from pydantic import model_validator

from datalake_assets.catalog import metastore_server as served  # not the field of that name
from datalake_assets.catalog.catalog_interface import INVALID_SETTINGS, CatalogError, NoCatalog
from datalake_assets.catalog.glue import GlueCatalog
from datalake_assets.catalog.hive import HiveCatalog
from datalake_assets.catalog.metastore import jdbc_spark_conf, prepare_session
from datalake_assets.settings.catalog_section import (
    CATALOG_BACKENDS,
    DEFAULT_METASTORE_DIR,
    CatalogSettings,
)
from datalake_assets.settings.fields import Int, SettingsError, default_home, settings_model

GLUE_MAX_PARTITION_BATCH = 100  # Glue's BatchCreatePartition limit

_ARG_PREFIX = "--catalog-"


@settings_model
class CatalogConfig(CatalogSettings):
    """Where and how a sync registers its tables: the ``[catalog]`` settings (inherited, so
    validated once, by the settings' rules) with ``metastore_dir`` resolved
    (``config_from_settings``), and two knobs of the job's own. Empty strings mean "not set".
    An invalid value raises ``CatalogError`` (``invalid_settings``)."""

    partition_batch_size: Int(1) = GLUE_MAX_PARTITION_BATCH
    max_attempts: Int(1) = 5  # Glue throttling retries (total attempts)

    @model_validator(mode="after")
    def _glue_batch(self) -> CatalogConfig:
        if self.backend == "glue" and self.partition_batch_size > GLUE_MAX_PARTITION_BATCH:
            raise SettingsError(
                f"must be at most {GLUE_MAX_PARTITION_BATCH} for Glue (BatchCreatePartition's "
                f"limit), got {self.partition_batch_size}",
                key="partition_batch_size",
            )
        return self

    # ----------------------------------------------------------------------------- argv

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        """Add ``--catalog-*`` options (all optional) to a job's parser."""
        group = parser.add_argument_group("catalog")
        for f in dataclasses.fields(CatalogConfig):
            flag = _ARG_PREFIX + f.name.replace("_", "-")
            if f.name == "backend":
                group.add_argument(
                    flag, dest=f"catalog_{f.name}", choices=CATALOG_BACKENDS, default=f.default
                )
            elif isinstance(f.default, int):
                group.add_argument(flag, dest=f"catalog_{f.name}", type=int, default=f.default)
            else:
                group.add_argument(flag, dest=f"catalog_{f.name}", default=f.default)

    def to_args(self) -> list[str]:
        """Every field as ``--catalog-<field> <value>`` (fields left at "" are omitted)."""
        out: list[str] = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value == "":
                continue
            out += [_ARG_PREFIX + f.name.replace("_", "-"), str(value)]
        return out

    @classmethod
    def from_args(cls, args: argparse.Namespace | list[str] | tuple[str, ...]) -> CatalogConfig:
        """From a namespace parsed with ``add_arguments`` or from argv (other options in the
        argv are ignored, so a job's whole argv can be passed)."""
        if not isinstance(args, argparse.Namespace):
            parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
            cls.add_arguments(parser)
            args, _ = parser.parse_known_args(list(args))
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            key = f"catalog_{f.name}"
            if hasattr(args, key):
                values[f.name] = getattr(args, key)
        return cls(**values)

    # ------------------------------------------------------------------------------- spark

    @property
    def servable(self) -> bool:
        """An embedded Derby metastore that ``datalake dev`` may serve (metastore_server.py)."""
        return (
            self.backend == "hive"
            and not self.hive_metastore_uri
            and not self.metastore_jdbc_url
            and bool(self.metastore_dir)
            and self.metastore_server == "auto"
        )

    def served_session(self) -> Any | None:
        """A session to the server holding this metastore, or ``None`` (not served)."""
        return served.served_session(self.metastore_dir) if self.servable else None

    def session_conf(self) -> dict[str, str]:
        """The catalog's settings for a process's own Spark session: none when a server holds
        the metastore (the session must not open Derby), else ``spark_conf()``."""
        if self.servable and served.served_url(self.metastore_dir):
            return {}
        return self.spark_conf()

    def spark_conf(self) -> dict[str, str]:
        """The Spark settings this catalog needs (``{}`` unless the backend is Hive)."""
        if self.backend != "hive":
            return {}
        if not self.metastore_dir and not self.hive_metastore_uri:
            raise CatalogError(
                "the Hive catalog needs metastore_dir (embedded Derby, or the "
                "warehouse of metastore_jdbc_url) or hive_metastore_uri",
                "invalid_settings",
            )
        base = self.metastore_dir.rstrip("/")
        jdbc = (
            jdbc_spark_conf(
                self.metastore_jdbc_url,
                self.metastore_jdbc_driver,
                self.metastore_user,
                self.metastore_jars,
                self.metastore_password_file,
            )
            if self.metastore_jdbc_url
            else None
        )
        return hive_spark_conf(
            base, f"{base}/warehouse" if base else "", self.hive_metastore_uri or None, jdbc
        )


def _catalog_errors(init: Any) -> Any:
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:  # noqa: N807
        try:
            init(self, *args, **kwargs)
        except SettingsError as e:  # the job's own error, with its code
            key = e.key.replace("_", " ") + ": " if e.key else ""
            raise CatalogError(key + e.problem, INVALID_SETTINGS) from None

    return __init__


CatalogConfig.__init__ = _catalog_errors(CatalogConfig.__init__)  # type: ignore[method-assign]


def prepare_session_env(conf: Mapping[str, str]) -> None:
    """What a local session with ``conf`` needs before its JVM starts (a JDBC metastore's
    jar checked and password exported: ``metastore.prepare_session``); nothing otherwise."""
    prepare_session(conf)


def hive_spark_conf(
    metastore_dir: str,
    warehouse_dir: str,
    metastore_uri: str | None = None,
    jdbc: dict[str, str] | None = None,
) -> dict[str, str]:
    """Spark settings that make a session use a Hive metastore.

    * embedded (``metastore_uri`` None): a Derby database ``<metastore_dir>/metastore_db``
      (created on first use), with ``derby.system.home=<metastore_dir>`` so ``derby.log``
      goes there too: nothing lands in the current directory. One JVM at a time (see the
      module doc).
    * remote: ``spark.hadoop.hive.metastore.uris`` (a thrift URI, or several comma-separated).
    * MySQL/MariaDB (``jdbc``: ``metastore.jdbc_spark_conf``): those settings; the metastore
      folder only holds the warehouse.

    ``spark.driver.extraJavaOptions`` is set to ``-Duser.timezone=UTC`` plus the Derby home:
    these entries are meant to be applied after the job's own (which sets the time zone).
    ``hive.metastore.disallow.incompatible.col.type.changes=false`` lets an embedded metastore
    widen ``boolean`` to ``string`` in place (see ``hive.py``).
    """
    conf = {
        "spark.sql.catalogImplementation": "hive",
        "spark.hadoop.hive.metastore.disallow.incompatible.col.type.changes": "false",
    }
    if warehouse_dir:
        conf["spark.sql.warehouse.dir"] = warehouse_dir
    java_options = ["-Duser.timezone=UTC"]
    if metastore_uri:
        conf["spark.hadoop.hive.metastore.uris"] = metastore_uri
    elif jdbc:
        conf.update(jdbc)
    else:
        if not metastore_dir or "://" in metastore_dir:
            raise ValueError(f"an embedded metastore needs a local folder, got {metastore_dir!r}")
        home = metastore_dir.rstrip("/") or "/"
        if any(c.isspace() for c in home) or ";" in home:
            # extraJavaOptions is split on spaces, the JDBC URL on ';'
            raise ValueError(f"the metastore folder may not contain spaces or ';': {home!r}")
        conf["spark.hadoop.javax.jdo.option.ConnectionURL"] = (
            f"jdbc:derby:;databaseName={home}/metastore_db;create=true"
        )
        java_options.append(f"-Dderby.system.home={home}")
    conf["spark.driver.extraJavaOptions"] = " ".join(java_options)
    return conf


def catalog_from_config(cfg: CatalogConfig, spark: Any = None):
    """The backend for ``cfg``. The Hive backend needs a session with the metastore's
    settings: the served metastore's (``metastore_server.py``) when a server holds it, else
    ``spark``, a session created with ``cfg.spark_conf()`` / ``hive_spark_conf`` or a function
    that makes one (then called only when no server holds the metastore)."""
    if cfg.backend == "none":
        return NoCatalog()
    if cfg.backend == "glue":
        return GlueCatalog(
            region=cfg.glue_region or None,
            endpoint_url=cfg.glue_endpoint_url or None,
            catalog_id=cfg.glue_catalog_id or None,
            batch_size=cfg.partition_batch_size,
            max_attempts=cfg.max_attempts,
        )
    session = cfg.served_session()
    if session is None:
        session = spark() if callable(spark) else spark
    if session is None:
        raise CatalogError(
            "the Hive catalog needs a Spark session (catalog_from_config(cfg, spark))", "internal"
        )
    return HiveCatalog(session, batch_size=cfg.partition_batch_size)


def config_from_settings(settings: CatalogSettings, home: str | None = None) -> CatalogConfig:
    """The ``CatalogConfig`` a sync gets from the ``[catalog]`` settings (the one place): the
    same values, ``metastore_dir`` resolved (``""``: ``<home>/metastore``)."""
    values = {f.name: getattr(settings, f.name) for f in dataclasses.fields(settings)}
    values["metastore_dir"] = settings.metastore_dir or os.path.join(
        home or default_home(), DEFAULT_METASTORE_DIR
    )
    return CatalogConfig(**values)
