"""A DuckDB database that reads the lake as it is now: one view per table, for one dbt build.

Before a build, the DuckDB engine writes a database file holding a view
``<database>.<table>`` for every event table of the source that has data (the names of the
dbt sources, ``models/workspace.py``) and one ``<database>.<model>`` for every model table
already in the lake (a model reading another one that this build does not rebuild reads the
lake's). Each view reads exactly the table's current version (``TableFormat.current_version``):

* the Segment layout: the table folder's Parquet files (``read_parquet`` with hive partitions
  kept as text, so ``day``/``hr`` stay ``'2026-10-31'``/``'07'`` as in every engine; columns
  matched by name, so files written before a column appeared or widened read as one table);
* Iceberg: ``iceberg_scan`` of the table's current metadata file, taken once when the
  database is made: a build sees the snapshot committed before it started, never a file of
  a commit in progress and never a replaced file (a glob of the folder would count both).

DuckDB's extensions (iceberg, avro; httpfs for a lake on S3) come from their Python packages,
installed into the build folder's extension directory, never downloaded: dbt's own connection
autoloads them from there when a view needs one.
"""

from __future__ import annotations

import os

import duckdb

from datalake_assets.lake.formats.format_interface import SourceTables, TableFormat, TableVersion
from datalake_assets.lake.formats.iceberg_read import _extension

EXTENSIONS = (
    ("duckdb_extension_avro", "avro"),
    ("duckdb_extension_iceberg", "iceberg"),
    ("duckdb_extension_httpfs", "httpfs"),
)


def connect(path: str, extension_dir: str, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(
        path,
        read_only=read_only,
        config={
            "extension_directory": extension_dir,
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": True,
        },
    )
    con.execute("SET TimeZone = 'UTC'")  # after connecting: it needs icu, loaded by then
    return con


def install_extensions(extension_dir: str) -> None:
    """Install the packaged extensions into ``extension_dir`` (once: a later call finds them)."""
    os.makedirs(extension_dir, exist_ok=True)
    con = connect(":memory:", extension_dir)
    try:
        installed = {
            name
            for (name,) in con.execute(
                "SELECT extension_name FROM duckdb_extensions() WHERE installed"
            ).fetchall()
        }
        for module, name in EXTENSIONS:
            if name not in installed:
                con.install_extension(_extension(module, name))
    finally:
        con.close()


def scan_sql(version: TableVersion) -> str:
    """The ``FROM`` clause reading ``version``."""
    location = version.location.replace("'", "''")
    if version.kind == "iceberg":
        return f"iceberg_scan('{location}')"
    pattern = layout_glob(location)
    return (
        f"read_parquet('{pattern}', hive_partitioning = true, hive_types_autocast = false, "
        "union_by_name = true)"
    )


def layout_glob(folder: str) -> str:
    """Every ``*.parquet`` file under ``folder`` at any depth (``_``/``.``-prefixed files,
    markers and hidden uploads, are not Parquet names)."""
    return folder.rstrip("/") + "/**/*.parquet"


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# an S3 secret's keys -> the environment variables they are read from (those boto3 reads)
S3_SECRET_ENV = (
    ("key_id", "AWS_ACCESS_KEY_ID"),
    ("secret", "AWS_SECRET_ACCESS_KEY"),
    ("session_token", "AWS_SESSION_TOKEN"),
    ("region", "AWS_REGION"),
)


def s3_secret(env: dict[str, str]) -> dict[str, str]:
    """A lake on S3: DuckDB's httpfs secret from the process's environment (an endpoint URL
    for an S3-compatible store). Never written to a file: dbt's profile names the variables."""
    out = {"type": "s3"}
    for key, var in S3_SECRET_ENV:
        if env.get(var):
            out[key] = env[var]
    endpoint = env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
    if endpoint:
        out["endpoint"] = endpoint.split("://", 1)[-1].rstrip("/")
        out["url_style"] = "path"
        out["use_ssl"] = "false" if endpoint.startswith("http://") else "true"
    return out


def create_secret(con: duckdb.DuckDBPyConnection, secret: dict[str, str]) -> None:
    """A temporary secret (this connection only), its values bound as parameters."""
    keys = [k for k in secret if k != "type"]
    options = ", ".join(f"{k.upper()} ${i + 1}" for i, k in enumerate(keys))
    try:
        con.execute(
            f"CREATE OR REPLACE SECRET lake_s3 (TYPE s3, {options})", [secret[k] for k in keys]
        )
    except duckdb.Error:  # a DuckDB that binds no parameters here: literal values
        literal = ", ".join(f"{k.upper()} '{secret[k]}'" for k in keys)
        con.execute(f"CREATE OR REPLACE SECRET lake_s3 (TYPE s3, {literal})")


def create_views(
    con: duckdb.DuckDBPyConnection,
    fmt: TableFormat,
    src: SourceTables,
    tables: dict[str, str],
    models: dict[str, str],
) -> list[str]:
    """A view per table with data: ``tables`` (dbt source table -> its catalog name) and
    ``models`` (model -> its folder in the lake); returns the views' names."""
    con.execute(f"CREATE SCHEMA IF NOT EXISTS {quote(src.database)}")
    made = []
    for table, name in sorted(tables.items()):
        version = fmt.current_version(src, table)
        if version is not None:
            made.append(_view(con, src.database, name, version))
    for model, folder in sorted(models.items()):
        version = fmt.current_version(src, model, folder)
        if version is not None:
            made.append(_view(con, src.database, model, version))
    return made


def _view(con: duckdb.DuckDBPyConnection, schema: str, name: str, version: TableVersion) -> str:
    con.execute(
        f"CREATE OR REPLACE VIEW {quote(schema)}.{quote(name)} AS SELECT * FROM {scan_sql(version)}"
    )
    return f"{schema}.{name}"
