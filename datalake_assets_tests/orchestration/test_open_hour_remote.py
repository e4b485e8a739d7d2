"""The open hour's batches on a remote compute backend (issue #55): ``run_loop`` with
``[compute] backend = "emr"`` / ``"emr_serverless"`` / ``"databricks"`` submits each batch as a
job of the cluster, through the compute seam (``build_compute``, ``SparkCompute.run_sync``
without a Dagster context, so without Pipes), and the job appends to the Iceberg tables as the
local loop does.

The harnesses are the end-to-end tests' (``test_emr_end_to_end.py``: a moto server on
loopback and a "cluster" thread that runs each submitted step's / job run's entry script in a
subprocess; ``test_databricks_end_to_end.py``: the fake workspace, whose runs are
``spark-submit`` processes). Unlike those tests, which hand the asset a compute resource, the
loop builds its compute from the settings, and the settings refuse a remote backend with a
local lake (``check_compute_fits``): so the lake and the archive are on moto's S3, the Iceberg
catalog is moto's Glue, as a lake on AWS is configured (Databricks on AWS for the third).

Each test, on one backend (``assert_batches_on_the_backend``): a batch whose job fails (one
line; the loop goes on and the next batch takes the files), a batch of the open hour's first
file (its line; an append snapshot per table carrying the batch id of the job's report), a
batch of the next file (only its rows: a message resent across the two files is one row; on
EMR steps only, the other backends' job being the same code), and a batch with nothing new (no job sent: the
loop reads the hours' ledgers first; no line, no snapshot, no report; not on Databricks: the
loop's code for it is the same). A job that found nothing all the same (a file taken by the
hour's close in between) is ``test_a_batch_job_that_wrote_no_report_found_nothing_new``'s. Job by job they cost 3-7 s on EMR, 10-15 s on
Databricks (the fake's spark-submit).
"""

from __future__ import annotations

import gzip
import shlex
import subprocess
import threading
from datetime import UTC, datetime
from pathlib import Path

import boto3
import orjson
import pytest

from datalake_assets.lake.report import SyncReport
from datalake_assets.orchestration.freshness.open_hour_loader import run_loop
from datalake_assets.spec import layout
from datalake_assets.spec.layout import ArchiveHour
from datalake_assets_tests.orchestration.emr_helpers import (
    BUCKET,
    REGION,
    ROLE,
    emr_backend,
    make_world,
    serverless_backend,
)
from datalake_assets_tests.orchestration.test_databricks_end_to_end import CLUSTER
from datalake_assets_tests.orchestration.test_emr_end_to_end import run_like_spark_submit
from datalake_assets_tests.support.archive_builders import msg
from datalake_assets_tests.support.iceberg_reader import tables
from datalake_assets_tests.support.settings_files import load_lake_toml

SRC, DB = "web-prod", "web_prod"
ARCHIVE, LAKE = f"s3://{BUCKET}/archive", f"s3://{BUCKET}/lake"
# the resources' waits, from the settings: a poll every second (the settings' floor)
WAITS = "poll_interval_s = 1\nsubmit_timeout_s = 120\nrun_timeout_s = 900\n"


def lake_settings(tmp_path, endpoint: str, compute: str):
    """An Iceberg lake on (moto's) S3, its catalog (moto's) Glue, batched every minute, its
    jobs on ``compute`` (a ``[compute]`` section)."""
    return load_lake_toml(
        tmp_path,
        f"""
archive_root = "{ARCHIVE}"
lake_root = "{LAKE}"
[catalog]
backend = "glue"
glue_region = "{REGION}"
glue_endpoint_url = "{endpoint}"
[iceberg]
s3_endpoint_url = "{endpoint}"
[freshness]
interval_minutes = 1
[[sources]]
id = "{SRC}"
slug = "{DB}"
start = "2026-11-01-00:00"
{compute}
""",
        env={"DATALAKE_HOME": str(tmp_path / "home")},
        table_format="iceberg",
    )


@pytest.fixture()
def aws(moto_endpoint, monkeypatch):
    """moto's server for every AWS client of this process, boto3's and pyarrow's (the lake's
    storage: a Databricks job's report is read through it): its URL. Nothing reaches AWS."""
    from datalake_assets.lake import storage

    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_endpoint)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    storage._fs_for.cache_clear()  # pyarrow's S3 filesystems read the endpoint when made
    yield moto_endpoint
    storage._fs_for.cache_clear()


# ----------------------------------------------------------------------------- the archive


def s3(endpoint: str):
    return boto3.client("s3", region_name=REGION, endpoint_url=endpoint)


def key_of(location: str) -> str:
    return location.split(f"s3://{BUCKET}/", 1)[1]


def put_hour_file(endpoint: str, hour: str, name: str, lines: list) -> None:
    """An archive file of the hour, as the collector's spool segment lands in S3."""
    body = b"".join((x if isinstance(x, bytes) else orjson.dumps(x)) + b"\n" for x in lines)
    folder = layout.archive_hour_dir(ARCHIVE, SRC, ArchiveHour.parse(hour))
    s3(endpoint).put_object(Bucket=BUCKET, Key=key_of(f"{folder}/{name}"), Body=gzip.compress(body))


def first_file(endpoint: str, hour: str) -> None:
    """The open hour's first spool segment: two orders, a page, a line that is no JSON."""
    put_hour_file(
        endpoint,
        hour,
        "part-0000.jsonl.gz",
        [
            msg("a1", hour, 1, properties={"total": 10}),
            msg("a2", hour, 2, properties={"total": 11}),
            msg("p1", hour, 3, type="page", name="Home"),
            b'{"broken json',
        ],
    )


def second_file(endpoint: str, hour: str) -> None:
    """The next segment: a new order, and ``a1`` resent (a duplicate across batches)."""
    put_hour_file(
        endpoint,
        hour,
        "part-0001.jsonl.gz",
        [msg("a3", hour, 20, properties={"total": 12}), msg("a1", hour, 21)],
    )


# ------------------------------------------------------------------------------ the loop


def the_hour() -> str:
    """The current wall-clock hour: the loop batches it (and, until it closes, the one
    before, so a test that crosses the hour still finds its files)."""
    return str(ArchiveHour.of(datetime.now(UTC)))


def batches(settings) -> list[str]:
    """One batch of each source, as ``datalake batches --once`` runs it: the loop's lines
    after its first (which says what it batches)."""
    lines: list[str] = []
    run_loop(settings, threading.Event(), say=lines.append, once=True)
    assert lines and lines[0].startswith(
        f"freshness: the open hour's events in their tables within 1 min ({SRC}: "
    ), lines
    assert all("\n" not in line for line in lines)
    return lines[1:]


def job_argv(args: list[str]) -> list[str]:
    """The job's own arguments (``SyncRequest.to_args``): after the entry's ``--``."""
    return args[args.index("--") + 1 :]


def run_id_of(argv: list[str]) -> str:
    return argv[argv.index("--run-id") + 1]


def reports(endpoint: str) -> dict[str, SyncReport]:
    """The reports the jobs wrote in the lake, by run id."""
    found = s3(endpoint).list_objects_v2(Bucket=BUCKET, Prefix=key_of(f"{LAKE}/reports/"))
    out = {}
    for o in found.get("Contents", []):
        if o["Key"].endswith("/report.json"):
            body = s3(endpoint).get_object(Bucket=BUCKET, Key=o["Key"])["Body"].read()
            out[o["Key"].split("run_id=", 1)[1].split("/", 1)[0]] = SyncReport.parse(body)
    return out


def glue_reader(endpoint: str):
    """The lake's Iceberg tables as a reader opens them: pyiceberg's own Glue catalog."""
    from pyiceberg.catalog.glue import GlueCatalog

    return GlueCatalog(
        "reader",
        **{
            "glue.region": REGION,
            "glue.endpoint": endpoint,
            "s3.endpoint": endpoint,
            "s3.region": REGION,
        },
    )


def snapshots(catalog) -> dict[str, list[tuple[str, str | None, str | None]]]:
    """Each table's snapshots: ``(operation, run id, batch id)`` from their summaries."""
    out = {}
    for name, tbl in tables(catalog, DB).items():
        out[name] = [
            (
                s.summary.operation.value,
                s.summary.additional_properties.get("datalake.run-id"),
                s.summary.additional_properties.get("datalake.batch-id"),
            )
            for s in tbl.snapshots()
        ]
    return out


def message_ids(catalog) -> dict[str, list[str]]:
    return {
        name: sorted(tbl.scan(selected_fields=("message_id",)).to_arrow()["message_id"].to_pylist())
        for name, tbl in tables(catalog, DB).items()
        if name != "quarantine"
    }


def assert_batches_on_the_backend(
    settings, endpoint: str, jobs, failing, next_file: bool = True, nothing_new: bool = True
) -> str:
    """The story every backend tells; the failed line. ``jobs()``: the job arguments (their
    ``to_args`` part) submitted so far; ``failing(True)`` makes its jobs fail,
    ``failing(False)`` no more. ``next_file``, ``nothing_new``: the batch of a second file,
    and one that finds nothing new (each a job: a cheaper test may leave one out)."""
    catalog = glue_reader(endpoint)
    hour = the_hour()
    first_file(endpoint, hour)

    # a job that fails: one line; nothing in the tables
    failing(True)
    (failed,) = batches(settings)
    failing(False)
    assert failed.startswith(f"batch {SRC} failed: "), failed
    (argv,) = jobs()
    assert "--batch" in argv and hour in argv[argv.index("--hours") + 1 :]  # the open hours
    assert tables(catalog, DB) == {}

    # the loop goes on: the next batch takes the files, a job of the backend, its line
    (line,) = batches(settings)
    assert line.startswith(f"batch {SRC} {hour}: 4 lines, 3 rows, 0 duplicates, 1 quarantined "), (
        line
    )
    assert "(1 files, " in line
    argv = jobs()[-1]
    assert len(jobs()) == 2 and "--batch" in argv
    run_ids = [run_id_of(argv)]
    first = reports(endpoint)[run_ids[0]].source
    assert first.batch_id and first.hours_synced == [hour]
    # one append per table, its summary carrying the run and the batch
    once = [("append", run_ids[0], first.batch_id)]
    assert snapshots(catalog) == {
        "tracks": once,
        "order_completed": once,
        "pages": once,
        "quarantine": once,
    }
    assert message_ids(catalog) == {
        "tracks": ["a1", "a2"],
        "order_completed": ["a1", "a2"],
        "pages": ["p1"],
    }

    if next_file:  # only its rows (a1 resent is a duplicate of the first batch's row)
        second_file(endpoint, hour)
        (line,) = batches(settings)
        assert line.startswith(
            f"batch {SRC} {hour}: 2 lines, 1 rows, 1 duplicates, 0 quarantined "
        ), line
        argv = jobs()[-1]
        assert len(jobs()) == 3 and "--batch" in argv
        run_ids.append(run_id_of(argv))
        second = reports(endpoint)[run_ids[1]].source
        assert second.batch_id and second.batch_id != first.batch_id
        twice = [*once, ("append", run_ids[1], second.batch_id)]
        assert snapshots(catalog) == {
            "tracks": twice,
            "order_completed": twice,
            "pages": once,  # a table the batch wrote no row to gets no snapshot
            "quarantine": once,
        }
        assert message_ids(catalog) == {
            "tracks": ["a1", "a2", "a3"],
            "order_completed": ["a1", "a2", "a3"],
            "pages": ["p1"],
        }

    if nothing_new:  # no new file: no job is sent, nothing recorded, the loop says nothing
        before = snapshots(catalog)
        assert batches(settings) == []
        assert len(jobs()) == len(run_ids) + 1
        assert snapshots(catalog) == before
        assert set(reports(endpoint)) == set(run_ids)
    return failed


# ---------------------------------------------------------------------------------- EMR


class EmrCluster:
    """AWS's side of the loop's batches on EMR: every step of the world's cluster (or job run
    of its Serverless application) that the loop submits runs as spark-submit would run it
    (``run_like_spark_submit``), one at a time in a thread, and ends as its process ended;
    while ``failing(True)``, they end FAILED without running (a lost node)."""

    def __init__(self, world, endpoint: str, workdir: Path, serverless: bool = False) -> None:
        self.world, self.endpoint, self.workdir = world, endpoint, workdir
        self.serverless = serverless
        self.submitted: list[list[str]] = []  # spark-submit's arguments, in order
        self.outputs: list[subprocess.CompletedProcess] = []
        self.errors: list[BaseException] = []
        self._failing = False
        self._seen: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        workdir.mkdir()

    def __enter__(self) -> EmrCluster:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def failing(self, on: bool) -> None:
        self._failing = on

    def jobs(self) -> list[list[str]]:
        assert not self.errors, self.errors
        return [job_argv(a) for a in self.submitted]

    def _runs(self) -> list:
        if self.serverless:
            return list(serverless_backend().job_runs.get(self.world.app, []))
        steps = emr_backend().clusters[self.world.cluster].steps
        return [s for s in steps if s.name.startswith("datalake sync")]

    def _args(self, run) -> list[str]:
        if not self.serverless:
            return list(run.args[1:])  # command-runner.jar's: spark-submit <args>
        submit = run.job_driver["sparkSubmit"]
        return [
            *shlex.split(submit["sparkSubmitParameters"]),
            submit["entryPoint"],
            *submit["entryPointArguments"],
        ]

    def _serve(self) -> None:
        try:
            while not self._stop.is_set():
                for run in self._runs():
                    if run.id not in self._seen:
                        self._seen.add(run.id)
                        self._run(run)
                self._stop.wait(0.02)
        except BaseException as e:  # noqa: BLE001 - the test reads .errors
            self.errors.append(e)

    def _run(self, run) -> None:
        args = self._args(run)
        self.submitted.append(args)
        run.state = "RUNNING"
        if self._failing:
            reason = "the primary node was lost"
            if self.serverless:
                run.state_details = reason
            else:
                run.last_state_change_reason = reason
            run.state = "FAILED"
            return
        done = run_like_spark_submit(self.world, self.endpoint, args, self.workdir)
        self.outputs.append(done)
        if done.returncode == 0:
            run.state = "SUCCESS" if self.serverless else "COMPLETED"
            return
        if self.serverless:
            run.state_details = f"Job failed. ExitCode: {done.returncode}."
        run.state = "FAILED"


@pytest.mark.slow
@pytest.mark.spark
def test_the_open_hours_batches_run_as_steps_of_the_emr_cluster(aws, tmp_path):
    moto_endpoint = aws
    world = make_world(moto_endpoint)
    settings = lake_settings(
        tmp_path,
        moto_endpoint,
        f'[compute]\nbackend = "emr"\nregion = "{REGION}"\ncluster_id = "{world.cluster}"\n'
        f'endpoint_url = "{moto_endpoint}"\n{WAITS}',
    )
    assert (settings.table_format, settings.compute.backend) == ("iceberg", "emr")
    with EmrCluster(world, moto_endpoint, tmp_path / "cluster") as cluster:
        failed = assert_batches_on_the_backend(
            settings, moto_endpoint, cluster.jobs, cluster.failing
        )
    assert all(o.returncode == 0 for o in cluster.outputs), [
        o.stderr[-3000:] for o in cluster.outputs
    ]
    steps = emr_backend().clusters[world.cluster].steps
    # the failed step's line: which step, how it ended, where its logs are
    assert failed == (
        f"batch {SRC} failed: EMR step {steps[0].id} on cluster {world.cluster} ended FAILED: "
        f"the primary node was lost; logs: s3://{BUCKET}/emr-logs/{world.cluster}/steps/"
        f"{steps[0].id}/"
    )
    assert [s.state for s in steps] == ["FAILED", "COMPLETED", "COMPLETED"]  # none for nothing new
    assert all(s.action_on_failure == "CONTINUE" for s in steps)  # the cluster stays up
    # the job said which cluster ran it (the step's --emr-cluster-id), without Pipes
    reported = reports(moto_endpoint)[run_id_of(cluster.jobs()[1])].source
    assert reported.emr_cluster_id == world.cluster
    assert all("--dagster-pipes-context" not in a for a in cluster.submitted)
    assert not world.s3.list_objects_v2(Bucket=BUCKET, Prefix="_jobs/pipes/").get("KeyCount")


@pytest.mark.slow
@pytest.mark.spark
def test_the_open_hours_batches_run_as_emr_serverless_job_runs(aws, tmp_path, monkeypatch):
    moto_endpoint = aws
    monkeypatch.setattr("moto.emrserverless.models.JOB_STATUS", "PENDING")
    world = make_world(moto_endpoint)
    settings = lake_settings(
        tmp_path,
        moto_endpoint,
        f'[compute]\nbackend = "emr_serverless"\nregion = "{REGION}"\n'
        f'application_id = "{world.app}"\nexecution_role_arn = "{ROLE}"\n'
        f'endpoint_url = "{moto_endpoint}"\n{WAITS}',
    )
    assert settings.compute.backend == "emr_serverless"
    with EmrCluster(world, moto_endpoint, tmp_path / "serverless", serverless=True) as app:
        # the batch of a second file is the steps' test's (the same job, the same sync)
        failed = assert_batches_on_the_backend(
            settings, moto_endpoint, app.jobs, app.failing, next_file=False
        )
    assert all(o.returncode == 0 for o in app.outputs), [o.stderr[-3000:] for o in app.outputs]
    runs = serverless_backend().job_runs[world.app]
    assert [r.state for r in runs] == ["FAILED", "SUCCESS"]  # none for nothing new
    assert failed.startswith(
        f"batch {SRC} failed: EMR Serverless job run {runs[0].id} of application {world.app} "
        "ended FAILED: the primary node was lost; logs: "
    ), failed
    assert all("--emr-cluster-id" not in a for a in app.submitted)


# --------------------------------------------------------------------------- Databricks


@pytest.mark.slow
@pytest.mark.spark
def test_the_open_hours_batches_run_as_databricks_runs(fake_databricks, aws, tmp_path):
    """Databricks on AWS: the lake on S3, the tables in Glue. The task reaches (moto's) S3
    and Glue through ``AWS_ENDPOINT_URL``, as this process does."""
    moto_endpoint = aws
    s3(moto_endpoint).create_bucket(Bucket=BUCKET)
    settings = lake_settings(
        tmp_path,
        moto_endpoint,
        f'[compute]\nbackend = "databricks"\ndatabricks_host = "{fake_databricks.url}"\n'
        f'databricks_cluster_id = "{CLUSTER}"\n{WAITS}',
    )
    assert (settings.table_format, settings.compute.backend) == ("iceberg", "databricks")

    def runs() -> list:
        return [fake_databricks.runs[k] for k in sorted(fake_databricks.runs)]

    def jobs() -> list[list[str]]:
        return [job_argv(r.task["spark_python_task"]["parameters"]) for r in runs()]

    def failing(on: bool) -> None:  # the cluster cannot start the task: no Spark there
        if on:
            fake_databricks.env["SPARK_HOME"] = str(tmp_path / "no-spark-here")
        else:
            fake_databricks.env.pop("SPARK_HOME")

    # the next file's batch and a batch that finds nothing new are the EMR steps' test's (a
    # Spark session's start each saved here: the loop's and the remote compute's code for
    # them is the same)
    failed = assert_batches_on_the_backend(
        settings, moto_endpoint, jobs, failing, next_file=False, nothing_new=False
    )
    assert [(r.life, r.result) for r in runs()] == [
        ("TERMINATED", "FAILED"),
        ("TERMINATED", "SUCCESS"),
    ], runs()[-1].stderr[-3000:]
    assert failed.startswith(
        f"batch {SRC} failed: Databricks run {runs()[0].run_id} on cluster {CLUSTER} ended "
        "FAILED: Workload failed, see run output for details; task sync: "
    ), failed
    assert "no-spark-here/bin/spark-class: No such file or directory" in failed
    for r in runs():
        assert r.task["existing_cluster_id"] == CLUSTER
        assert "--pipes-via" not in r.task["spark_python_task"]["parameters"]  # no Pipes


# ------------------------------------------------------------- a batch that found nothing


def test_a_batch_job_that_wrote_no_report_found_nothing_new(emr_world):
    """A batch that finds no new file records nothing (no report): its job, COMPLETED without
    one, is the empty report a local batch returns (``warning: no_archive_files``), not a
    failure; from the job's Pipes message when one came. A sync without a report still fails
    (``test_emr.py``)."""
    from datalake_assets.orchestration.compute.emr_steps import EmrSparkCompute
    from datalake_assets.orchestration.compute.remote_compute import quiet_batch_report
    from datalake_assets_tests.orchestration.emr_helpers import FAST, our_step, request, when

    sim = when(lambda: our_step(emr_world.cluster), lambda s: setattr(s, "state", "COMPLETED"))
    compute = EmrSparkCompute(cluster_id=emr_world.cluster, **FAST)
    report = compute.run_sync(request(batch=True, run_id="run-quiet"))
    sim.join()
    assert "--batch" in job_argv(our_step(emr_world.cluster).args)
    src = report.source
    assert (src.run_id, src.source_id, src.lines_in, src.warning) == (
        "run-quiet",
        "web-prod",
        0,
        "no_archive_files",
    )
    assert report.tables == {} and src.status == "finished" and src.finish_time

    piped = {"run_id": "run-quiet", "source_id": "web-prod", "warning": "no_archive_files"}
    message = {"kind": "datalake_sync", "status": "finished", "source": piped}
    assert quiet_batch_report(request(batch=True), message).source.run_id == "run-quiet"
