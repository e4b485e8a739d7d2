"""The driver-local path of a small sync: stages A and B as plain calls in the driver.

A batch of a few hundred kilobytes of archive pays seconds for Spark itself (a job per phase,
the start of the Python workers, a shuffle for the dedup) and well under a second for its
work. Below ``SyncRequest.local_max_bytes`` of archive (compressed, as listed) the sync runs
the same functions over the same inputs in its own process instead (``sync.py`` picks the
path; ``bench/README.md`` has the measurements behind the default):

* stage A (``run_stage_a``): one call per archive file, as Spark runs one task per file;
* the dedup: ``dedup.duplicates_of``, the driver's dedup that a Spark batch of up to
  ``dedup.DRIVER_MAX_KEYS`` messages uses too;
* stage B (``run_stage_b``): one call per task of ``plan_stage_b_tasks``;
* the check of the output for repeated ids: ``dedup.repeated_message_ids``, which reads a
  small output back on the driver whatever the path.

Like a Spark task (``local[N,4]``), a call that fails is run again, up to ``TASK_ATTEMPTS``
times: its files have deterministic names and a failed attempt's output is discarded. The
result, the lake and the report are those of the Spark path; the report's timings keep their
names (``parse_s``, ``dedup_s``, ``write_s``, ``check_s``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import pyarrow as pa

from datalake_assets.lake import faults, storage
from datalake_assets.transform import keys as key_payloads
from datalake_assets.transform.dedup import Duplicates, duplicates_of, index_files
from datalake_assets.transform.identity_tally import IDENTITY
from datalake_assets.transform.manifest import ManifestEntry
from datalake_assets.transform.run import SyncRun
from datalake_assets.transform.stage_a import (
    STATS,
    StageAConfig,
    run_stage_a,
)
from datalake_assets.transform.stage_a_stats import StageAStats, merge_stats
from datalake_assets.transform.stage_b import StageBConfig, run_stage_b
from datalake_assets.transform.sync_request import SyncError, SyncRequest

TASK_ATTEMPTS = 4  # = the local session's spark.task.maxFailures (session._with_task_retries)
LOCAL_TASK_THREADS = 4  # stage-B tasks at once (write)
_T = TypeVar("_T")


def is_small(req: SyncRequest, files: list[tuple[str, str, int]]) -> bool:
    """Whether the batch's archive files (``[(location, hour, size)]``) take the local path."""
    return sum(size for _, _, size in files) < req.local_max_bytes


def _task(what: str, fn: Callable[[], _T]) -> _T:
    """``fn()``, attempted up to ``TASK_ATTEMPTS`` times; the last failure fails the sync
    with nothing committed, as a failed Spark task does (``sync.run_sync``)."""
    for attempt in range(1, TASK_ATTEMPTS + 1):
        try:
            return fn()
        except Exception as e:  # noqa: BLE001 - as Spark: any task failure is retried
            if attempt == TASK_ATTEMPTS:
                code = "storage" if isinstance(e, (OSError, storage.ShortRead)) else "internal"
                raise SyncError(
                    f"a task ({what}) failed {TASK_ATTEMPTS} times, nothing "
                    f"committed: {type(e).__name__}: {str(e)[:1000]}",
                    code,
                ) from e
    raise AssertionError("unreachable")


# ------------------------------------------------------------------------------ stage A


def read(
    run: SyncRun, cfg: StageAConfig, files: list[tuple[str, str, int]]
) -> tuple[StageAStats, pa.Table]:
    """Stage A over ``files``, one call per file: the merged statistics (with the identity
    index entries) and the key rows (``keys.KEY_SCHEMA``)."""
    t = time.monotonic()
    stats, identity, keys = [], [], []
    for i, (location, hour, _) in enumerate(files):
        task_in = pa.RecordBatch.from_arrays(
            [pa.array([i], pa.int32()), pa.array([location]), pa.array([hour])],
            names=["file_idx", "location", "hour"],
        )
        out = _task(f"stage A of {location}", lambda b=task_in: list(run_stage_a(iter([b]), cfg)))
        for batch in out:
            for k, payload in zip(
                batch.column("kind").to_pylist(), batch.column("payload").to_pylist()
            ):
                (stats if k == STATS else identity if k == IDENTITY else keys).append(payload)
    merged = merge_stats(stats)
    merged.identity_parts = identity
    key_rows = key_payloads.decode(keys)
    run.timings["parse_s"] = time.monotonic() - t
    faults.checkpoint("parsed")
    return merged, key_rows


# -------------------------------------------------------------------------------- dedup


def dedup(run: SyncRun, keys: pa.Table, hours: list[str]) -> Duplicates:
    """``dedup.find_duplicates`` on the driver (``dedup.duplicates_of``, as a Spark batch of
    up to ``DRIVER_MAX_KEYS`` messages does it)."""
    t = time.monotonic()
    req = run.req
    prior_files = index_files(
        req.lake_root, req.source_dir, req.dedup_lookback_hours, hours, req.batch
    )
    found = duplicates_of(keys, prior_files)
    found.prior_files = prior_files
    run.timings["dedup_s"] = time.monotonic() - t
    return found


# ------------------------------------------------------------------------------ stage B


def write(
    run: SyncRun, cfg: StageBConfig, tasks: list[tuple[int, str, str]]
) -> list[ManifestEntry]:
    """Stage B, one call per task; the manifest of what was written."""
    t = time.monotonic()

    def one(task: tuple[int, str, str]) -> list[dict]:
        task_in = pa.RecordBatch.from_arrays(
            [pa.array([task[0]], pa.int32()), pa.array([task[1]]), pa.array([task[2]])],
            names=["task", "table", "items"],
        )
        return _task(
            f"stage B of {task[1]}",
            lambda: [r for out in run_stage_b(iter([task_in]), cfg) for r in out.to_pylist()],
        )

    # Tasks in threads: each writes its own table's files. On local disk they mostly take
    # turns (Python holds the GIL); on S3 each file is a few round trips of tens of ms, and
    # those overlap (pyarrow waits without the GIL). The first failure, in task order, fails
    # the sync once the others have ended.
    with ThreadPoolExecutor(LOCAL_TASK_THREADS, thread_name_prefix="stage-b") as pool:
        manifest = [ManifestEntry.from_row(r) for rows in pool.map(one, tasks) for r in rows]
    run.timings["write_s"] = time.monotonic() - t
    return manifest
