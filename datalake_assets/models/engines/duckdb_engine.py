"""``[models] engine = "duckdb"`` (the default): the models on DuckDB, embedded, no JVM.

One build (``run``):

1. a fresh DuckDB database file for the build, ``<build_dir>/<slug>/lake.duckdb``, holding a
   view over the current version of each of the source's tables and of each model already in
   the lake (``duckdb_lake.py``), in either table format;
2. dbt-duckdb builds the models in that file (a daily model's table holds exactly the days it
   builds: ``models/project``'s config; dbt's tests run there, before anything is published);
3. each model dbt built is published into the lake (``models/publish.py``): in the lake's own
   format through ``lake/formats``, the built days replaced in one step, registered where
   the lake's tables are;
4. the file is deleted.

The builds of a source take turns (a lock on ``<build_dir>/<slug>/.build.lock`` held from
the views to the publish; Dagster's ``spark_local`` pool already runs one at a time): the
database's path is then the same for every build, so the profile dbt renders is too, and
dbt reuses the project's saved parse instead of parsing it again (a profile that changed,
as a path per build did, makes dbt parse everything: about 2 s a build). Builds of
different sources run side by side, each with its own file.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass

from datalake_assets.lake import records, storage
from datalake_assets.lake.formats.format_interface import CommittedTable, ModelRows
from datalake_assets.models.engines import duckdb_lake
from datalake_assets.models.engines.engine_interface import (
    BuiltModel,
    EngineRun,
    ModelEngine,
)
from datalake_assets.models.publish import (
    lake_format,
    model_location,
    publish,
    tables_of,
)
from datalake_assets.settings import LakeSettings, SourceSettings
from datalake_assets.settings.models_section import build_dir
from datalake_assets.spec.naming import catalog_table_name

log = logging.getLogger(__name__)

DB_NAME = "lake"  # the database's name in dbt's relations: the file's stem, every build


def extension_dir(settings: LakeSettings) -> str:
    return os.path.join(build_dir(settings.models), "duckdb_extensions")


class DuckDBEngine(ModelEngine):
    name = "duckdb"

    def why_not(self, settings: LakeSettings) -> str | None:
        root = settings.lake_root
        if storage.is_uri(root) and not storage.on_s3(root):
            return (
                f"the DuckDB engine reads a lake on the local disk or S3, not {root}: set "
                '[models] engine = "spark" with a profiles.yml for your Spark '
                "(docs/guides/models.md)"
            )
        return None

    def profile(self, settings: LakeSettings, source: SourceSettings) -> dict:
        out = {
            "type": "duckdb",
            # the builds' file (run), the same path every build; dbt parse never opens it
            "path": build_database(settings, source),
            "schema": source.database,
            # the daily models and tests are independent queries: a few at once
            "threads": 4,
            "config_options": {
                "extension_directory": extension_dir(settings),
                "autoinstall_known_extensions": False,
                "autoload_known_extensions": True,
            },
            "settings": {
                "TimeZone": "UTC",
                "memory_limit": f"{settings.models.duckdb_memory_gb}GB",
                "preserve_insertion_order": False,
            },
        }
        if storage.on_s3(settings.lake_root):
            # the variables' names, never their values: dbt reads them when it connects
            named = dict(duckdb_lake.S3_SECRET_ENV)
            out["secrets"] = [
                {
                    k: f"{{{{ env_var('{named[k]}') }}}}" if k in named else v
                    for k, v in duckdb_lake.s3_secret(dict(os.environ)).items()
                }
            ]
        return out

    @contextlib.contextmanager
    def run(self, settings, source, project, run_id) -> Iterator[EngineRun]:
        ext = extension_dir(settings)
        duckdb_lake.install_extensions(ext)
        path = build_database(settings, source)
        fmt = lake_format(settings)
        src = tables_of(source)
        with _builds_take_turns(path, source.id):
            _remove_database(path)  # a build killed before its end leaves its file
            try:
                con = duckdb_lake.connect(path, ext)
                try:
                    if storage.on_s3(settings.lake_root):
                        duckdb_lake.create_secret(con, duckdb_lake.s3_secret(dict(os.environ)))
                    duckdb_lake.create_views(
                        con,
                        fmt,
                        src,
                        {
                            t: catalog_table_name(t, src.table_prefix)
                            for t in records.source_tables(settings.lake_root, source.lake_dir)
                        },
                        {m: model_location(settings, source, m) for m in project.model_names()},
                    )
                finally:
                    con.close()
                yield DuckDBRun(
                    env={},
                    settings=settings,
                    source=source,
                    path=path,
                    extension_dir=ext,
                    run_id=run_id,
                )
            finally:
                _remove_database(path)


def build_database(settings: LakeSettings, source: SourceSettings) -> str:
    """The DuckDB file of the source's builds (one at a time: ``_builds_take_turns``)."""
    return os.path.join(build_dir(settings.models), source.slug, f"{DB_NAME}.duckdb")


@contextlib.contextmanager
def _builds_take_turns(path: str, source_id: str) -> Iterator[None]:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(os.path.join(os.path.dirname(path), ".build.lock"), "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.info("another build of source %s's models is running: waiting for it", source_id)
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _remove_database(path: str) -> None:
    for name in (path, path + ".wal"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(name)


@dataclass
class DuckDBRun(EngineRun):
    settings: LakeSettings | None = None
    source: SourceSettings | None = None
    path: str = ""
    extension_dir: str = ""
    run_id: str = ""

    def publish(self, built: list[BuiltModel]) -> list[CommittedTable]:
        """Each built model's rows, read from the build's file, into the lake."""
        assert self.settings is not None and self.source is not None
        if not built:
            return []
        fmt = lake_format(self.settings)
        con = duckdb_lake.connect(self.path, self.extension_dir, read_only=True)
        done = []
        try:
            if storage.on_s3(self.settings.lake_root):
                duckdb_lake.create_secret(con, duckdb_lake.s3_secret(dict(os.environ)))
            for b in built:
                relation = f"{duckdb_lake.quote(b.schema)}.{duckdb_lake.quote(b.identifier)}"
                rows = con.execute(f"SELECT * FROM {relation}").fetch_arrow_table()
                out = ModelRows(
                    b.name,
                    model_location(self.settings, self.source, b.name),
                    rows,
                    b.day_column,
                    b.days,
                )
                done.append(publish(self.settings, self.source, fmt, out, self.run_id))
        finally:
            con.close()
        return done
