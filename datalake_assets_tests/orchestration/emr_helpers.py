"""The EMR tests' AWS side: moto's account, the lake bucket, a world of clusters and an
application, moto's backends, and helpers that play the cluster."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from types import SimpleNamespace

import boto3

from datalake_assets.catalog.config import CatalogConfig
from datalake_assets.lake.report import SyncReport, write_report
from datalake_assets.orchestration.compute import remote_compute as remote_module
from datalake_assets.spec import layout
from datalake_assets.transform.job import SyncRequest

ACCOUNT = "123456789012"  # moto's
REGION = "us-east-1"
BUCKET = "lake-bucket"
LAKE = f"s3://{BUCKET}/lake"
ARCHIVE = f"s3://{BUCKET}/archive"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/datalake-job-runtime"
# fast polls; bounded waits, so a broken simulation fails a test instead of hanging it
FAST = {
    "region": REGION,
    "poll_interval_s": 0.02,
    "pipes_interval_s": 1.0,
    "submit_timeout_s": 120.0,
    "run_timeout_s": 900.0,
}


def make_world(endpoint_url: str | None = None) -> SimpleNamespace:
    kw = {"region_name": REGION, "endpoint_url": endpoint_url}
    s3, emr, es = (boto3.client(s, **kw) for s in ("s3", "emr", "emr-serverless"))
    s3.create_bucket(Bucket=BUCKET)

    def cluster(name: str) -> str:
        return emr.run_job_flow(
            Name=name,
            ReleaseLabel="emr-7.5.0",
            LogUri=f"s3://{BUCKET}/emr-logs/",
            Instances={
                "MasterInstanceType": "m5.xlarge",
                "InstanceCount": 1,
                "KeepJobFlowAliveWhenNoSteps": True,
            },
            JobFlowRole="EMR_EC2_DefaultRole",
            ServiceRole="EMR_DefaultRole",
        )["JobFlowId"]

    app = es.create_application(name="lake", releaseLabel="emr-7.5.0", type="SPARK")
    return SimpleNamespace(
        s3=s3,
        emr=emr,
        es=es,
        cluster=cluster("hourly"),
        replay_cluster=cluster("replays"),
        app=app["applicationId"],
    )


def emr_backend():
    from moto.emr.models import emr_backends

    return emr_backends[ACCOUNT][REGION]


def serverless_backend():
    from moto.emrserverless.models import emrserverless_backends

    return emrserverless_backends[ACCOUNT][REGION]


def our_step(cluster_id: str):
    steps = [
        s for s in emr_backend().clusters[cluster_id].steps if s.name.startswith("datalake sync")
    ]
    return steps[-1] if steps else None


def our_job_run(app: str, states: tuple[str, ...] | None = None):
    runs = serverless_backend().job_runs.get(app, [])
    runs = [r for r in runs if states is None or r.state in states]
    return runs[-1] if runs else None


def when(find: Callable, act: Callable, timeout: float = 120.0) -> threading.Thread:
    """AWS's side of a run: ``act(x)`` in a thread as soon as ``find()`` returns ``x``."""
    errors: list[BaseException] = []

    def loop() -> None:
        end = time.monotonic() + timeout
        try:
            while time.monotonic() < end:
                found = find()
                if found is not None:
                    act(found)
                    return
                time.sleep(0.02)
        except BaseException as e:  # noqa: BLE001 - the test reads t.errors
            errors.append(e)

    t = threading.Thread(target=loop, daemon=True)
    t.errors = errors
    t.start()
    return t


def interrupt_once_waiting(monkeypatch, find: Callable) -> None:
    """Ctrl-C (what terminating a Dagster run raises in the step), raised in the main thread
    at the wait's first pause once the step / job run exists: at a known point of the wait,
    not whenever a helper thread's simulated signal happens to land."""
    real_sleep = time.sleep

    def sleep(seconds: float) -> None:
        if threading.current_thread() is threading.main_thread() and find() is not None:
            raise KeyboardInterrupt
        real_sleep(seconds)

    monkeypatch.setattr(remote_module.time, "sleep", sleep)


def request(**kw) -> SyncRequest:
    base = {
        "lake_root": LAKE,
        "archive_root": ARCHIVE,
        "source_id": "web-prod",
        "source_dir": "web-prod",
        "database": "web_prod",
        "hours": ("2026-11-21T10",),
        "run_id": "run-1",
        "catalog": CatalogConfig(backend="glue"),
    }
    return SyncRequest(**{**base, **kw})


def as_submitted(req: SyncRequest) -> SyncRequest:
    """The request the cluster gets: resolved, Glue in the resource's region."""
    r = req.resolved()
    return replace(r, catalog=replace(r.catalog, glue_region=REGION))


def sample_report(tmp_path, req: SyncRequest) -> bytes:
    """A report as the job writes it (``write_report``), for ``req``, finished now (one
    reading of the clock: its folder's day is its finish time's, even at midnight)."""
    now = datetime.now(UTC)
    day = now.strftime("%Y-%m-%d")
    base = {
        "run_id": req.run_id,
        "source_id": req.source_id,
        "database": req.database,
        "replay": req.replay,
        "status": "finished",
        "error": None,
        "error_code": None,
        "finish_time": now.isoformat(),
        "emr_cluster_id": "j-X",
    }
    rows = [
        {
            "type": "event",
            "table_name": "tracks",
            **base,
            "row_count": 3,
            "duplicates": 1,
            "columns": [{"name": "message_id", "type": "string"}],
            "partitions": [],
            "checks": {
                "repeated_message_ids": 0,
                "misfits_by_column": {},
                "conformance_failures": [],
            },
        },
        {
            "type": "source",
            "table_name": None,
            **base,
            "lines_in": 5,
            "messages_written": 3,
            "duplicates": 1,
            "lines_quarantined": 1,
            "values_quarantined": 0,
            "tables": 1,
            "hours_synced": list(req.hours),
        },
    ]
    path = write_report(str(tmp_path / "lake"), SyncReport.from_rows(rows), day)
    with open(path, "rb") as f:
        return f.read()


def put_report(s3, req: SyncRequest, body: bytes) -> str:
    day = json.loads(body.splitlines()[-1])["finish_time"][:10]  # where the job puts it
    location = layout.report_path(req.lake_root, req.source_id, req.run_id, day)
    key = location.split(f"s3://{BUCKET}/", 1)[1]
    s3.put_object(Bucket=BUCKET, Key=key, Body=body)
    return location


def after_double_dash(args: list[str]) -> list[str]:
    return args[args.index("--") + 1 :]
