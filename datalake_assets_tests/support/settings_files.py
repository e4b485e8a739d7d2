"""Settings files of tests: a ``lake.toml`` written in a folder, and loaded as ``datalake``
loads it (with no environment overrides)."""

from __future__ import annotations

import textwrap
from pathlib import Path


def write_lake_toml(folder: Path | str, text: str, name: str = "lake.toml") -> Path:
    """``text`` (dedented) as ``folder/name``; the path."""
    path = Path(folder) / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def load_lake_toml(folder: Path | str, text: str, env: dict[str, str] | None = None):
    """The settings of ``text`` written as ``folder/lake.toml``; ``env`` replaces the process
    environment (none by default)."""
    from datalake_assets.settings import load_settings

    return load_settings(str(write_lake_toml(folder, text)), env={} if env is None else env)


def per_source_sensors(settings):
    """``settings`` with ``[automation] sensor_runs = "per_source"``: a sensor and a job per
    source (the tests of that mode; the batched default has its own, test_batch_sync.py)."""
    import dataclasses

    return dataclasses.replace(
        settings, automation=dataclasses.replace(settings.automation, sensor_runs="per_source")
    )
