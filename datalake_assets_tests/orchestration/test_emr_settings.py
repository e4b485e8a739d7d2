"""The compute settings: local, EMR or EMR Serverless, from the file and the environment."""

from __future__ import annotations

import pytest

from datalake_assets.orchestration.compute.emr_serverless import EmrServerlessCompute
from datalake_assets.orchestration.compute.emr_steps import EmrSparkCompute
from datalake_assets.settings import load_settings
from datalake_assets.settings.fields import SettingsError
from datalake_assets_tests.orchestration.emr_helpers import ROLE
from datalake_assets_tests.support.settings_files import write_lake_toml


def write_settings(tmp_path, text: str):
    return str(write_lake_toml(tmp_path, text))


EMR_TOML = """
archive_root = "s3://lake-bucket/archive"
lake_root = "s3://lake-bucket/lake"
[catalog]
backend = "glue"
[compute]
backend = "emr"
region = "eu-west-1"
cluster_id = "j-2AXXXXXXGAPLF"
replay_cluster_id = "j-3BXXXXXXGAPLF"
deploy_mode = "cluster"
submit_timeout_s = 600
run_timeout_s = 7200
poll_interval_s = 30
[compute.conf]
"spark.executor.memory" = "8g"
"spark.dynamicAllocation.enabled" = true
"spark.executor.cores" = 4
"""


def test_compute_settings_choose_the_resource(tmp_path):
    from datalake_assets.orchestration.compute.compute_factory import build_compute
    from datalake_assets.orchestration.compute.spark_compute import LocalSparkCompute

    home = {"DATALAKE_HOME": str(tmp_path / "home")}
    assert isinstance(build_compute(load_settings(env=home)), LocalSparkCompute)

    s = load_settings(write_settings(tmp_path, EMR_TOML), env=home)
    c = s.compute
    assert (c.backend, c.region, c.cluster_id, c.deploy_mode, c.poll_interval_s) == (
        "emr",
        "eu-west-1",
        "j-2AXXXXXXGAPLF",
        "cluster",
        30,
    )
    assert c.conf == {
        "spark.executor.memory": "8g",
        "spark.dynamicAllocation.enabled": "true",
        "spark.executor.cores": "4",
    }
    hash(s)
    compute = build_compute(s)
    assert isinstance(compute, EmrSparkCompute)
    assert (compute.cluster_id, compute.replay_cluster_id, compute.deploy_mode) == (
        "j-2AXXXXXXGAPLF",
        "j-3BXXXXXXGAPLF",
        "cluster",
    )
    assert (compute.submit_timeout_s, compute.run_timeout_s) == (600, 7200)
    assert compute.conf["spark.executor.cores"] == "4"

    serverless_toml = EMR_TOML.replace('backend = "emr"', 'backend = "emr_serverless"').replace(
        'deploy_mode = "cluster"',
        f'application_id = "00fm4oe0607u5a1d"\nexecution_role_arn = "{ROLE}"',
    )
    compute = build_compute(load_settings(write_settings(tmp_path, serverless_toml), env=home))
    assert isinstance(compute, EmrServerlessCompute)
    assert (compute.application_id, compute.execution_role_arn) == ("00fm4oe0607u5a1d", ROLE)
    # the environment picks the backend
    env = {**home, "DATALAKE_COMPUTE_BACKEND": "emr"}
    assert load_settings(write_settings(tmp_path, EMR_TOML), env=env).compute.backend == "emr"


@pytest.mark.parametrize(
    "change, key, fragment",
    [
        (('backend = "emr"', 'backend = "k8s"'), "compute.backend", "'emr_serverless'"),
        (
            ('cluster_id = "j-2AXXXXXXGAPLF"\n', ""),
            "compute.cluster_id",
            "required when backend = 'emr'",
        ),
        (
            ('cluster_id = "j-2AXXXXXXGAPLF"', 'cluster_id = "cluster-1"'),
            "compute.cluster_id",
            "EMR cluster id",
        ),
        (('backend = "emr"', 'backend = "emr_serverless"'), "compute.application_id", "required"),
        (('deploy_mode = "cluster"', 'deploy_mode = "yarn"'), "compute.deploy_mode", "'client'"),
        (("poll_interval_s = 30", "poll_interval_s = 0"), "compute.poll_interval_s", "1 to 600"),
        (("run_timeout_s = 7200", 'run_timeout_s = "2h"'), "compute.run_timeout_s", "integer"),
        (
            ("[compute.conf]", '[compute.conf]\n"spark.master" = "yarn"'),
            'compute.conf."spark.master"',
            "not allowed here",
        ),
        (
            ("[compute.conf]", '[compute.conf]\n"spark.submit.deployMode" = "cluster"'),
            'compute.conf."spark.submit.deployMode"',
            "deploy_mode",
        ),
        (
            ('region = "eu-west-1"', 'region = "eu-west-1"\nstaging_prefix = "/tmp/jobs"'),
            "compute.staging_prefix",
            "S3 URI",
        ),
        (
            ('region = "eu-west-1"', 'regoin = "eu-west-1"'),
            "compute.regoin",
            "did you mean 'region'",
        ),
        (
            ('lake_root = "s3://lake-bucket/lake"', 'lake_root = "lake"'),
            "lake_root",
            "must be an s3:// URI when [compute] backend = 'emr'",
        ),
        (('backend = "glue"', 'backend = "hive"'), "catalog.backend", "embedded Derby metastore"),
    ],
)
def test_compute_settings_errors(tmp_path, change, key, fragment):
    text = EMR_TOML.replace(*change)
    assert text != EMR_TOML
    with pytest.raises(SettingsError) as err:
        load_settings(write_settings(tmp_path, text), env={"DATALAKE_HOME": str(tmp_path)})
    assert err.value.key == key, str(err.value)
    assert fragment in str(err.value)
    assert str(err.value).startswith(f"settings file {tmp_path / 'lake.toml'}: ")


def test_emr_from_the_environment_is_checked_like_the_file(tmp_path):
    env = {"DATALAKE_HOME": str(tmp_path), "DATALAKE_COMPUTE_BACKEND": "emr"}
    with pytest.raises(SettingsError) as err:
        load_settings(env=env)
    assert str(err.value) == (
        "environment: DATALAKE_COMPUTE_BACKEND: [compute] cluster_id: required when backend = 'emr'"
    )
    local_roots = EMR_TOML.replace('backend = "emr"', 'backend = "local"').replace(
        "s3://lake-bucket/", ""
    )
    with pytest.raises(SettingsError) as err:
        load_settings(write_settings(tmp_path, local_roots), env=env)
    assert str(err.value).startswith(
        "environment: archive_root: must be an s3:// URI when [compute] backend = 'emr'"
    )
