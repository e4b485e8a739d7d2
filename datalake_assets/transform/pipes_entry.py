"""The sync on a cluster (EMR steps, EMR Serverless, Databricks): the entry point it runs.

``datalake_assets.orchestration.compute.emr`` submits::

    spark-submit --py-files s3://<bucket>/_jobs/<sha256>/datalake_assets.zip \\
        s3://<bucket>/_jobs/<sha256>/pipes_entry.py \\
        [--dagster-pipes-context C --dagster-pipes-messages M] [--aws-region R] \\
        [--emr-cluster-id j-...] -- <the job's argv: SyncRequest.to_args()>

Databricks (``orchestration/compute/databricks.py``) runs ``DATABRICKS_ENTRY_SCRIPT`` as a
``spark_python_task`` with the same arguments plus ``--package <zip> --pipes-via storage``.

With the Pipes arguments it opens Dagster Pipes (on AWS the context is read from S3 and
messages are written to S3: ``dagster_pipes.PipesS3ContextLoader`` / ``PipesS3MessageWriter``;
with ``--pipes-via storage`` both go through the lake's storage, ``orchestration/compute/pipes_channel.py``), logs its
progress to the Dagster run and reports the outcome as a custom message::

    {"kind": "datalake_sync", "status": "finished", "report_path": ".../report.json",
     "source": {...the source row...}}
    {"kind": "datalake_sync", "status": "failed", "error": "...", "error_code": "..."}

The report itself stays in the lake (``report_path``); Dagster reads it from there. Without the
Pipes arguments it is ``python -m datalake_assets.transform.job <argv>``: Pipes is optional, and
``dagster_pipes``/``boto3`` are only imported when it is used. A ``SyncError`` exits with 1, so the
step / job run fails.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING

from datalake_assets.lake.report import report_location
from datalake_assets.transform.job import main as job_main
from datalake_assets.transform.session import job_spark_session
from datalake_assets.transform.sync import run_sync
from datalake_assets.transform.sync_request import SyncError, parse_args

if TYPE_CHECKING:  # imported when Pipes is used: the plain job needs no dagster_pipes
    from dagster_pipes import PipesContextLoader, PipesMessageWriter

MESSAGE_KIND = "datalake_sync"
PIPES_CONTEXT_ARG = "--dagster-pipes-context"  # = dagster_pipes.DAGSTER_PIPES_CONTEXT_CLI_ARGUMENT
PIPES_MESSAGES_ARG = "--dagster-pipes-messages"
EMR_JOB_FLOW_INFO = "/mnt/var/lib/info/job-flow.json"  # on EMR on EC2 nodes: {"jobFlowId": ...}


def _entry_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="pipes_entry.py", description="The datalake sync under spark-submit, with Pipes."
    )
    p.add_argument(PIPES_CONTEXT_ARG, dest="pipes_context", default=None)
    p.add_argument(PIPES_MESSAGES_ARG, dest="pipes_messages", default=None)
    p.add_argument("--aws-region", default=None, help="region of the S3 client for Pipes")
    p.add_argument("--emr-cluster-id", default=None, help="recorded in the sync report")
    p.add_argument(
        "--pipes-interval",
        type=float,
        default=10.0,
        help="seconds between two uploads of buffered Pipes messages",
    )
    p.add_argument(
        "--pipes-via",
        choices=("s3", "storage"),
        default="s3",
        help="where the Pipes context and messages are: S3 (boto3) or the lake's "
        "storage (pyarrow.fs)",
    )
    p.add_argument(
        "--package",
        default=None,
        help="the package zip (Databricks: the entry script put it on the path)",
    )
    p.add_argument("--runs-on", default=None, help="where the job runs, for its first log line")
    return p


def split_argv(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """``(entry options, job argv)``: the job's argv is everything after ``--``."""
    if "--" in argv:
        i = argv.index("--")
        own, job_argv = argv[:i], argv[i + 1 :]
    else:
        own, job_argv = [], argv
    return _entry_parser().parse_args(own), job_argv


def _note_cluster_id(given: str | None) -> None:
    """``EMR_CLUSTER_ID`` for the report's ``emr_cluster_id`` (Segment's field)."""
    if os.environ.get("EMR_CLUSTER_ID"):
        return
    cluster_id = given
    if not cluster_id and os.path.exists(EMR_JOB_FLOW_INFO):
        try:
            with open(EMR_JOB_FLOW_INFO, encoding="utf-8") as f:
                cluster_id = json.load(f).get("jobFlowId")
        except (OSError, ValueError):
            cluster_id = None
    if cluster_id:
        os.environ["EMR_CLUSTER_ID"] = cluster_id


def main(argv: list[str] | None = None) -> int:
    opts, job_argv = split_argv(sys.argv[1:] if argv is None else argv)
    _note_cluster_id(opts.emr_cluster_id)
    if not opts.pipes_context:
        return job_main(job_argv)
    return _main_with_pipes(opts, job_argv)


def _pipes_io(opts: argparse.Namespace) -> tuple[PipesContextLoader, PipesMessageWriter]:
    """``(context loader, message writer)`` of ``--pipes-via``."""
    if opts.pipes_via == "storage":
        from datalake_assets.transform.pipes_storage import (
            StorageContextLoader,
            StorageMessageWriter,
        )

        return StorageContextLoader(), StorageMessageWriter(interval=opts.pipes_interval)
    import boto3
    from dagster_pipes import PipesS3ContextLoader, PipesS3MessageWriter

    s3 = boto3.client("s3", region_name=opts.aws_region)
    return PipesS3ContextLoader(s3), PipesS3MessageWriter(s3, interval=opts.pipes_interval)


def _main_with_pipes(opts: argparse.Namespace, job_argv: list[str]) -> int:
    from dagster_pipes import (
        DAGSTER_PIPES_CONTEXT_ENV_VAR,
        DAGSTER_PIPES_MESSAGES_ENV_VAR,
        PipesMappingParamsLoader,
        open_dagster_pipes,
    )

    # The params come from our argv (not sys.argv): the same call works in-process in tests.
    params = PipesMappingParamsLoader(
        {
            DAGSTER_PIPES_CONTEXT_ENV_VAR: opts.pipes_context,
            DAGSTER_PIPES_MESSAGES_ENV_VAR: opts.pipes_messages or "",
        }
    )
    context_loader, message_writer = _pipes_io(opts)
    with open_dagster_pipes(
        context_loader=context_loader,
        message_writer=message_writer,
        params_loader=params,
    ) as pipes:
        req = parse_args(job_argv).resolved()
        where = opts.runs_on or os.environ.get("EMR_CLUSTER_ID") or "EMR Serverless"
        pipes.log.info(
            f"sync {req.source_id} hours {req.hours[0]}..{req.hours[-1]} "
            f"(run_id {req.run_id}) starting on {where}"
        )
        try:
            result = run_sync(job_spark_session(req.catalog), req)
        except SyncError as e:
            pipes.log.error(f"sync failed ({e.code}): {e}")
            pipes.report_custom_message(
                {
                    "kind": MESSAGE_KIND,
                    "status": "failed",
                    "error": str(e),
                    "error_code": e.code,
                }
            )
            print(json.dumps({"status": "failed", "error": str(e), "error_code": e.code}))
            return 1
        src = result.source
        path = report_location(req.lake_root, src)
        pipes.log.info(
            f"sync finished: {src.lines_in} lines in, {src.messages_written} "
            f"rows, {src.duplicates} duplicates, {src.lines_quarantined} "
            f"quarantined, {src.suppressed} suppressed; report {path}"
        )
        pipes.report_custom_message(
            {
                "kind": MESSAGE_KIND,
                "status": "finished",
                "report_path": path,
                "source": src.to_dict(),
            }
        )
        print(json.dumps(src.to_dict()))
    return 0


# The script spark-submit runs (uploaded next to the zip; the zip is on its PYTHONPATH).
ENTRY_SCRIPT = (
    '"""Runs datalake_assets.transform.pipes_entry (from --py-files) under spark-submit."""\n'
    "import sys\n\n"
    "from datalake_assets.transform.pipes_entry import main\n\n"
    "sys.exit(main())\n"
)


# What a Databricks spark_python_task runs (next to the zip in the package folder). A task has
# no --py-files: the zip given as --package is added to the session, which puts it on this
# driver's sys.path and ships it to the executors (whose Python workers import the sync's
# modules). On Databricks the session exists already; under spark-submit it is the submit's.
DATABRICKS_ENTRY_SCRIPT = (
    '"""Runs datalake_assets.transform.pipes_entry (from --package) on Databricks."""\n'
    "import sys\n\n"
    "from pyspark.sql import SparkSession\n\n"
    "args = sys.argv[1:]\n"
    'SparkSession.builder.getOrCreate().sparkContext.addPyFile(args[args.index("--package") + 1])\n'
    "from datalake_assets.transform.pipes_entry import main  # noqa: E402 - from the zip\n\n"
    "sys.exit(main())\n"
)


if __name__ == "__main__":
    sys.exit(main())
