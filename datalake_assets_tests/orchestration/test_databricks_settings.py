"""``[compute] backend = "databricks"`` from the settings file: the resource it builds, and the
errors that say what is missing."""

from __future__ import annotations

import pytest

from datalake_assets.orchestration.compute.databricks import DatabricksSparkCompute
from datalake_assets.settings import load_settings
from datalake_assets.settings.fields import SettingsError
from datalake_assets.settings.orchestration_section import JOB_LIBRARIES
from datalake_assets_tests.support.settings_files import write_lake_toml

DATABRICKS_TOML = """
archive_root = "abfss://lake@acmelake.dfs.core.windows.net/archive"
lake_root = "abfss://lake@acmelake.dfs.core.windows.net/lake"
[catalog]
backend = "none"
[compute]
backend = "databricks"
databricks_host = "https://adb-1234567890123456.7.azuredatabricks.net"
databricks_policy_id = "E0631F5C0D0003E6"
databricks_max_workers = 4
databricks_package_dir = "/Volumes/main/lake/jobs"
databricks_libraries = ["orjson>=3.9", "pandera[pandas]>=0.20"]
submit_timeout_s = 600
run_timeout_s = 7200
poll_interval_s = 30
[compute.conf]
"spark.executor.memory" = "8g"
"""


def load(tmp_path, text: str, **env: str):
    path = str(write_lake_toml(tmp_path, text))
    return load_settings(path, env={"DATALAKE_HOME": str(tmp_path / "home"), **env})


def test_databricks_settings_build_the_resource(tmp_path):
    from datalake_assets.orchestration.compute.compute_factory import build_compute

    compute = build_compute(load(tmp_path, DATABRICKS_TOML))
    assert isinstance(compute, DatabricksSparkCompute)
    assert (compute.host, compute.cluster_id, compute.policy_id, compute.max_workers) == (
        "https://adb-1234567890123456.7.azuredatabricks.net",
        "",
        "E0631F5C0D0003E6",
        4,
    )
    assert compute.package_dir == "/Volumes/main/lake/jobs"
    assert compute.libraries == ["orjson>=3.9", "pandera[pandas]>=0.20"]
    assert (compute.submit_timeout_s, compute.run_timeout_s, compute.poll_interval_s) == (
        600,
        7200,
        30,
    )
    assert compute.conf == {"spark.executor.memory": "8g"}

    # the customer's own cluster; every other key at its default
    minimal = (
        'archive_root = "abfss://lake@acmelake.dfs.core.windows.net/archive"\n'
        'lake_root = "abfss://lake@acmelake.dfs.core.windows.net/lake"\n'
        '[catalog]\nbackend = "none"\n[compute]\nbackend = "databricks"\n'
        'databricks_cluster_id = "0123-456789-abcd1234"\n'
    )
    compute = build_compute(load(tmp_path, minimal))
    assert (compute.host, compute.cluster_id) == ("", "0123-456789-abcd1234")
    assert compute.package_dir == "/Workspace/Shared/datalake/jobs"
    assert tuple(compute.libraries) == JOB_LIBRARIES


def test_job_libraries_follow_pyproject():
    """The task installs what pyproject.toml requires of the job, with the same bounds."""
    import tomllib
    from pathlib import Path

    pyproject = Path(__file__).parents[2] / "pyproject.toml"
    deps = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    for requirement in JOB_LIBRARIES:
        assert requirement in deps, requirement


@pytest.mark.parametrize(
    "change, key, fragment",
    [
        (
            ('databricks_policy_id = "E0631F5C0D0003E6"\n', ""),
            "compute.databricks_policy_id",
            "a job cluster (no databricks_cluster_id) needs databricks_policy_id",
        ),
        (
            (
                'databricks_policy_id = "E0631F5C0D0003E6"',
                'databricks_cluster_id = "0123-456789-abcd1234"',
            ),
            "compute.conf",
            "cannot set its Spark settings",
        ),
        (
            (
                'databricks_policy_id = "E0631F5C0D0003E6"',
                'databricks_cluster_id = "j-2AXXXXXXGAPLF"',
            ),
            "compute.databricks_cluster_id",
            "Databricks cluster id",
        ),
        (
            (
                'databricks_package_dir = "/Volumes/main/lake/jobs"',
                'databricks_package_dir = "abfss://lake@acmelake.dfs.core.windows.net/_jobs"',
            ),
            "compute.databricks_package_dir",
            "/Workspace/..., /Volumes/... or dbfs:/...",
        ),
        (
            (
                'databricks_host = "https://adb-1234567890123456.7.azuredatabricks.net"',
                'databricks_host = "adb-1.azuredatabricks.net"',
            ),
            "compute.databricks_host",
            "http",
        ),
        (
            ('"pandera[pandas]>=0.20"]', '"pandera pandas"]'),
            "compute.databricks_libraries[1]",
            "invalid requirement",
        ),
        (
            (
                'databricks_libraries = ["orjson>=3.9", "pandera[pandas]>=0.20"]',
                'databricks_libraries = "orjson"',
            ),
            "compute.databricks_libraries",
            "array",
        ),
        (
            ('lake_root = "abfss://lake@acmelake.dfs.core.windows.net/lake"', 'lake_root = "lake"'),
            "lake_root",
            "must be a URI of the cloud storage the cluster reads",
        ),
        (('backend = "none"', 'backend = "hive"'), "catalog.backend", "runs the job on Databricks"),
    ],
)
def test_databricks_settings_errors(tmp_path, change, key, fragment):
    text = DATABRICKS_TOML.replace(*change)
    assert text != DATABRICKS_TOML
    with pytest.raises(SettingsError) as err:
        load(tmp_path, text)
    assert err.value.key == key, str(err.value)
    assert fragment in str(err.value)


def test_a_job_cluster_without_a_policy_names_its_runtime_and_size(tmp_path):
    text = DATABRICKS_TOML.replace(
        'databricks_policy_id = "E0631F5C0D0003E6"',
        'databricks_spark_version = "15.4.x-scala2.12"\ndatabricks_node_type = "Standard_D4ds_v5"',
    )
    compute = load(tmp_path, text).compute
    assert (compute.databricks_spark_version, compute.databricks_node_type) == (
        "15.4.x-scala2.12",
        "Standard_D4ds_v5",
    )


def test_a_mysql_metastore_is_one_the_cluster_can_share(tmp_path):
    """The Hive backend on Databricks needs a metastore the cluster reaches: a MySQL/MariaDB
    one (the infra/azure module's) is accepted where the embedded Derby one is refused."""
    text = DATABRICKS_TOML.replace(
        'backend = "none"',
        'backend = "hive"\nmetastore_jdbc_url = '
        '"jdbc:mysql://acmelake-metastore.mysql.database.azure.com'
        ':3306/metastore"\nmetastore_user = "metastore"',
    )
    settings = load(tmp_path, text)
    assert settings.catalog.metastore_jdbc_url.endswith("/metastore")
