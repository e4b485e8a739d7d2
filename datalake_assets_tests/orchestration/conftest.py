import pytest

from datalake_assets_tests.orchestration.emr_helpers import make_world


@pytest.fixture()
def emr_world(mocked_aws):
    """In-process moto with the lake's bucket, two EMR clusters and a Serverless application."""
    return make_world()


@pytest.fixture()
def moto_cancel_steps(monkeypatch):
    """moto 5.2.5 has no CancelSteps: add it to moto, acting on moto's steps as EMR does (a
    PENDING or RUNNING step becomes CANCELLED). Returns the calls it received."""
    from moto.core.responses import ActionResult
    from moto.emr.responses import ElasticMapReduceResponse

    calls = []

    def cancel_steps(self):
        cluster_id = self._get_param("ClusterId")
        step_ids = self._get_param("StepIds", [])
        calls.append((cluster_id, list(step_ids), self._get_param("StepCancellationOption")))
        out = []
        for step in self.backend.clusters[cluster_id].steps:
            if step.id in step_ids and step.state in ("PENDING", "RUNNING"):
                step.state = "CANCELLED"
                step.last_state_change_reason = "Cancelled by the user"
                out.append({"StepId": step.id, "Status": "SUBMITTED", "Reason": ""})
        return ActionResult({"CancelStepsInfoList": out})

    monkeypatch.setattr(ElasticMapReduceResponse, "cancel_steps", cancel_steps, raising=False)
    return calls


@pytest.fixture()
def fake_databricks(tmp_path, monkeypatch):
    """A Databricks workspace on loopback (``databricks_fake.py``). Its token is the
    environment's ``DATABRICKS_TOKEN``, as in production; no other Databricks or Azure
    configuration of this machine is read."""
    import os

    from datalake_assets_tests.orchestration.databricks_fake import FAKE_TOKEN, FakeDatabricks

    for name in [k for k in os.environ if k.startswith(("DATABRICKS_", "ARM_", "AZURE_"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("DATABRICKS_CONFIG_FILE", str(tmp_path / "no-databrickscfg"))
    monkeypatch.setenv("DATABRICKS_TOKEN", FAKE_TOKEN)
    with FakeDatabricks(tmp_path / "databricks") as fake:
        yield fake
