"""Environment overrides of the lake settings (``load_settings`` loads the file, then applies
these): ``DATALAKE_*`` variables, each replacing one setting. An empty variable counts as
unset."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

from datalake_assets.settings.fields import SettingsError, resolve_root
from datalake_assets.settings.ingest_section import ENV_WRITE_KEYS, sources_with_env_keys
from datalake_assets.spec.table_formats import TABLE_FORMATS

ENV_SETTINGS = "DATALAKE_SETTINGS"
ENV_ARCHIVE_ROOT = "DATALAKE_ARCHIVE_ROOT"
ENV_LAKE_ROOT = "DATALAKE_LAKE_ROOT"
ENV_SPARK_MASTER = "DATALAKE_SPARK_MASTER"
ENV_SPARK_DRIVER_MEMORY = "DATALAKE_SPARK_DRIVER_MEMORY"
ENV_MAX_MESSAGE_BYTES = "DATALAKE_MAX_MESSAGE_BYTES"
ENV_CATALOG_BACKEND = "DATALAKE_CATALOG_BACKEND"
ENV_COMPUTE_BACKEND = "DATALAKE_COMPUTE_BACKEND"
ENV_WEBSERVER_URL = "DATALAKE_WEBSERVER_URL"
ENV_TABLE_FORMAT = "DATALAKE_TABLE_FORMAT"
ENV_MODELS_ENGINE = "DATALAKE_MODELS_ENGINE"
# a Slack webhook URL holds its secret token: it can stay out of the settings file
ENV_ALERTS_WEBHOOK_URL = "DATALAKE_ALERTS_WEBHOOK_URL"


# variable -> the setting it replaces ([section] key), and how its text is read
_ENV_OVERRIDES = (
    (ENV_SPARK_MASTER, "spark", "master", str),
    (ENV_SPARK_DRIVER_MEMORY, "spark", "driver_memory", str),
    (ENV_MAX_MESSAGE_BYTES, "sync", "max_message_bytes", lambda v: int(v.strip())),
    (ENV_CATALOG_BACKEND, "catalog", "backend", str.strip),
    (ENV_WEBSERVER_URL, "automation", "webserver_url", str.strip),
    (ENV_COMPUTE_BACKEND, "compute", "backend", str.strip),
    (ENV_ALERTS_WEBHOOK_URL, "alerts", "webhook_url", str.strip),
    (ENV_MODELS_ENGINE, "models", "engine", str.strip),
)


def apply_env(settings: Any, env: Mapping[str, str]) -> Any:
    def failed(problem: str, name: str) -> SettingsError:
        return SettingsError(problem, key=name, origin="environment")

    changes: dict[str, Any] = {}
    for name, attr in ((ENV_ARCHIVE_ROOT, "archive_root"), (ENV_LAKE_ROOT, "lake_root")):
        if env.get(name):
            try:
                changes[attr] = resolve_root(env[name], os.getcwd())
            except SettingsError as e:
                raise failed(e.problem, name) from None
    for name, section, key, read in _ENV_OVERRIDES:
        if not env.get(name):  # an empty variable counts as unset
            continue
        try:
            value = read(env[name])
        except ValueError:  # not an integer
            raise failed(f"must be an integer >= 1, got {env[name]!r}", name) from None
        current = changes.get(section, getattr(settings, section))
        try:
            changes[section] = dataclasses.replace(current, **{key: value})
        except SettingsError as e:  # a bad value, or one that needs another key of the section
            raise failed(
                e.problem if e.key == key else f"[{section}] {e.key}: {e.problem}", name
            ) from None
    if env.get(ENV_TABLE_FORMAT):
        value = env[ENV_TABLE_FORMAT].strip()
        if value not in TABLE_FORMATS:
            raise failed(
                f"unknown table format {value!r}; allowed: {', '.join(map(repr, TABLE_FORMATS))}",
                ENV_TABLE_FORMAT,
            )
        changes["table_format"] = value
    if env.get(ENV_WRITE_KEYS):
        changes["sources"] = sources_with_env_keys(settings, env[ENV_WRITE_KEYS])
    if not changes:
        return settings
    try:
        return dataclasses.replace(settings, **changes)
    except SettingsError as e:  # the roots or backends changed no longer fit together
        raise SettingsError(e.problem, key=e.key, origin="environment") from None
