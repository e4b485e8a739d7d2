"""The sync on a cluster (EMR steps, EMR Serverless): the entry point ``spark-submit`` runs.

``datalake_assets.orchestration.emr`` submits::

    spark-submit --py-files s3://<bucket>/_jobs/<sha256>/datalake_assets.zip \\
        s3://<bucket>/_jobs/<sha256>/pipes_entry.py \\
        [--dagster-pipes-context C --dagster-pipes-messages M] [--aws-region R] \\
        [--emr-cluster-id j-...] -- <the job's argv: SyncRequest.to_args()>

With the Pipes arguments it opens Dagster Pipes (the context is read from S3, messages are
written to S3: ``dagster_pipes.PipesS3ContextLoader`` / ``PipesS3MessageWriter``), logs its
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

from datalake_assets.lake.report import report_location
from datalake_assets.transform.job import main as job_main
from datalake_assets.transform.request import SyncError, parse_args
from datalake_assets.transform.session import job_spark_session
from datalake_assets.transform.sync import run_sync

MESSAGE_KIND = "datalake_sync"
PIPES_CONTEXT_ARG = "--dagster-pipes-context"  # = dagster_pipes.DAGSTER_PIPES_CONTEXT_CLI_ARGUMENT
PIPES_MESSAGES_ARG = "--dagster-pipes-messages"
EMR_JOB_FLOW_INFO = "/mnt/var/lib/info/job-flow.json"  # on EMR on EC2 nodes: {"jobFlowId": ...}


def _entry_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="pipes_entry.py", description="The datalake sync under spark-submit, with Pipes.")
    p.add_argument(PIPES_CONTEXT_ARG, dest="pipes_context", default=None)
    p.add_argument(PIPES_MESSAGES_ARG, dest="pipes_messages", default=None)
    p.add_argument("--aws-region", default=None, help="region of the S3 client for Pipes")
    p.add_argument("--emr-cluster-id", default=None, help="recorded in the sync report")
    p.add_argument("--pipes-interval", type=float, default=10.0,
                   help="seconds between two uploads of buffered Pipes messages")
    return p


def split_argv(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """``(entry options, job argv)``: the job's argv is everything after ``--``."""
    if "--" in argv:
        i = argv.index("--")
        own, job_argv = argv[:i], argv[i + 1:]
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


def _main_with_pipes(opts: argparse.Namespace, job_argv: list[str]) -> int:
    import boto3
    from dagster_pipes import (
        DAGSTER_PIPES_CONTEXT_ENV_VAR,
        DAGSTER_PIPES_MESSAGES_ENV_VAR,
        PipesMappingParamsLoader,
        PipesS3ContextLoader,
        PipesS3MessageWriter,
        open_dagster_pipes,
    )

    s3 = boto3.client("s3", region_name=opts.aws_region)
    # The params come from our argv (not sys.argv): the same call works in-process in tests.
    params = PipesMappingParamsLoader({
        DAGSTER_PIPES_CONTEXT_ENV_VAR: opts.pipes_context,
        DAGSTER_PIPES_MESSAGES_ENV_VAR: opts.pipes_messages or "",
    })
    with open_dagster_pipes(
        context_loader=PipesS3ContextLoader(s3),
        message_writer=PipesS3MessageWriter(s3, interval=opts.pipes_interval),
        params_loader=params,
    ) as pipes:
        req = parse_args(job_argv).resolved()
        where = os.environ.get("EMR_CLUSTER_ID") or "EMR Serverless"
        pipes.log.info(f"sync {req.source_id} hours {req.hours[0]}..{req.hours[-1]} "
                       f"(run_id {req.run_id}) starting on {where}")
        try:
            result = run_sync(job_spark_session(req.catalog), req)
        except SyncError as e:
            pipes.log.error(f"sync failed ({e.code}): {e}")
            pipes.report_custom_message({
                "kind": MESSAGE_KIND, "status": "failed", "error": str(e), "error_code": e.code,
            })
            print(json.dumps({"status": "failed", "error": str(e), "error_code": e.code}))
            return 1
        src = result.source
        path = report_location(req.lake_root, src)
        pipes.log.info(f"sync finished: {src.lines_in} lines in, {src.messages_written} "
                       f"rows, {src.duplicates} duplicates, {src.lines_quarantined} "
                       f"quarantined, {src.suppressed} suppressed; report {path}")
        pipes.report_custom_message({
            "kind": MESSAGE_KIND, "status": "finished", "report_path": path,
            "source": src.to_dict(),
        })
        print(json.dumps(src.to_dict()))
    return 0


# The script spark-submit runs (uploaded next to the zip; the zip is on its PYTHONPATH).
ENTRY_SCRIPT = (
    '"""Runs datalake_assets.transform.pipes_entry (from --py-files) under spark-submit."""\n'
    "import sys\n\n"
    "from datalake_assets.transform.pipes_entry import main\n\n"
    "sys.exit(main())\n"
)


if __name__ == "__main__":
    sys.exit(main())
