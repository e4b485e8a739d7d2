"""Settings files of tests: a ``lake.toml`` written in a folder, and loaded as ``datalake``
loads it (with no environment overrides)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path


def write_lake_toml(
    folder: Path | str,
    text: str,
    name: str = "lake.toml",
    table_format: str | None = "segment",
    models: bool = False,
) -> Path:
    """``text`` (dedented) as ``folder/name``; the path.

    A text without a ``[models]`` section gets ``enabled = false`` unless ``models``: a code
    location with models parses each source's dbt project for every new home (3-7 CPU-s) and
    imports dagster-dbt in each of its processes (2.7 s), which the tests of the lake, the sync
    and the orchestration do not need; the models' own tests write their ``[models]`` section
    (or pass ``models=True`` to have the product's default, models on).

    A text that names no ``table_format`` gets ``table_format``'s (``"segment"`` unless
    given): most tests were written against the Segment layout's folders (they read
    ``segment_type=`` paths, the Hive catalog's external tables), and the product's default
    became Iceberg after them. ``table_format=None`` leaves the key out: the default format,
    as a user without the key gets it (docs/contributing/testing.md says which tests
    run in which format)."""
    path = Path(folder) / name
    text = textwrap.dedent(text)
    if table_format and not re.search(r"^\s*table_format\s*=", text, re.M):
        text = f'table_format = "{table_format}"\n' + text
    if not models and not re.search(r"^\s*\[models\]", text, re.M):
        text = text.rstrip("\n") + "\n\n[models]\nenabled = false\n"
    path.write_text(text, encoding="utf-8")
    return path


def load_lake_toml(
    folder: Path | str,
    text: str,
    env: dict[str, str] | None = None,
    table_format: str | None = "segment",
    models: bool = False,
):
    """The settings of ``text`` written as ``folder/lake.toml`` (``write_lake_toml``); ``env``
    replaces the process environment (none by default)."""
    from datalake_assets.settings import load_settings

    path = write_lake_toml(folder, text, table_format=table_format, models=models)
    return load_settings(str(path), env={} if env is None else env)


def per_source_sensors(settings):
    """``settings`` with ``[automation] sensor_runs = "per_source"``: a sensor and a job per
    source (the tests of that mode; the batched default has its own, test_batch_sync.py)."""
    import dataclasses

    return dataclasses.replace(
        settings, automation=dataclasses.replace(settings.automation, sensor_runs="per_source")
    )
