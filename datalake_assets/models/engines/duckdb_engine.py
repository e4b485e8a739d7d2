"""``[models] engine = "duckdb"`` (the default): the models on DuckDB, embedded, no JVM.

One build (``run``):

1. a fresh DuckDB database file for the build, ``<build_dir>/<slug>/runs/<run>-*/lake.duckdb``,
   holding a view over the current version of each of the source's tables and of each model
   already in the lake (``duckdb_lake.py``), in either table format;
2. dbt-duckdb builds the models in that file (a daily model's table holds exactly the days it
   builds: ``models/project``'s config; dbt's tests run there, before anything is published);
3. each model dbt built is published into the lake (``models/publish.py``): in the lake's own
   format through ``lake/formats``, the built days replaced in one step, registered where
   the lake's tables are;
4. the file is deleted.

Several builds run side by side (daily models, whole tables, an erasure): each has its own
file, so no DuckDB lock is shared; two builds of the same model's days publish one after the
other (the last one's rows win, as with any replay).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
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

DB_ENV = "DATALAKE_MODELS_DB"  # the build's database file, set in dbt's environment
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
            # the build's own file (run); dbt parse never opens it
            "path": f"{{{{ env_var('{DB_ENV}', '{DB_NAME}.duckdb') }}}}",
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
        runs = os.path.join(build_dir(settings.models), source.slug, "runs")
        os.makedirs(runs, exist_ok=True)
        folder = tempfile.mkdtemp(prefix=_safe(run_id) + "-", dir=runs)
        path = os.path.join(folder, f"{DB_NAME}.duckdb")
        fmt = lake_format(settings)
        src = tables_of(source)
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
                env={DB_ENV: path},
                settings=settings,
                source=source,
                path=path,
                extension_dir=ext,
                run_id=run_id,
            )
        finally:
            shutil.rmtree(folder, ignore_errors=True)


def _safe(run_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", run_id)[:40] or "run"


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
