"""Settings of the sync job: ``[spark]`` (local Spark) and ``[sync]`` (the job's limits)."""

import dataclasses
from collections.abc import Mapping
from typing import Annotated

from pydantic import AfterValidator, Field

from datalake_assets.settings.fields import (
    Int,
    Match,
    SettingsError,
    SparkConf,
    Str,
    settings_model,
)


def _default_spark_conf() -> dict[str, str]:
    return {"spark.sql.files.maxPartitionBytes": "64m"}


DEFAULT_SPARK_CONF: Mapping[str, str] = _default_spark_conf()
MAX_DEPTH_LIMIT = 64
# Archive bytes (compressed) under which a batch runs in the sync's own process, without Spark
# jobs (transform/local_path.py; bench/README.md, "Small hours", for the measurements).
DEFAULT_LOCAL_MAX_BYTES = 16 * 1024 * 1024


def _master(value: str) -> str:
    if not value.strip() or value != value.strip():
        raise SettingsError(
            f"invalid Spark master {value!r}; allowed: a Spark master URL such as 'local[2]', "
            "'local[*]' or 'spark://host:7077' (no surrounding spaces)"
        )
    return value


@settings_model
class SparkSettings:
    """``[spark]``: how the sync's local Spark runs."""

    master: Annotated[Str, AfterValidator(_master)] = "local[2]"
    driver_memory: Match(
        r"(?i)[0-9]+(?:b|[kmgtp]b?)?",
        "driver memory",
        "a JVM size such as '512m', '4g' or '4096mb'",
    ) = "4g"
    shuffle_partitions: Int(1) = 4
    # any spark.* key -> value; defaults to DEFAULT_SPARK_CONF. Callers apply it after
    # master / driver_memory / shuffle_partitions (which it may not contain). In the file:
    # [spark.conf], added to the defaults.
    extra_conf: Annotated[
        SparkConf(
            {
                "spark.master": "has its own setting: set [spark] master instead",
                "spark.driver.memory": "has its own setting: set [spark] driver_memory instead",
                "spark.sql.shuffle.partitions": "has its own setting: set [spark] shuffle_partitions instead",
            },
            _default_spark_conf,
        ),
        Field(alias="conf"),
    ] = dataclasses.field(default_factory=_default_spark_conf)


@settings_model
class SyncSettings:
    """``[sync]``: the job's limits."""

    max_message_bytes: Int(1) = 32768  # larger messages are quarantined
    max_depth: Int(1, MAX_DEPTH_LIMIT) = 16  # deeper nesting is kept as JSON text
    dedup_lookback_days: Int(0, 90) = 7  # messageId unique across this many days of earlier hours
    # a batch of fewer archive bytes runs without Spark jobs; 0: always as Spark jobs
    local_max_bytes: Int(0) = DEFAULT_LOCAL_MAX_BYTES
