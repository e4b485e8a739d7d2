"""Mutations the test suite must catch: each one a bug that loses, doubles or misfiles data.

For each mutation: copy the working tree to a scratch folder, patch one place of the source
(exact text; a patch whose text is no longer there fails loudly instead of testing nothing),
run the tests that must catch it there, and expect them to fail. Prints one line per mutation
and ``mutations tried N, caught N``; exits non-zero if any mutation survived or could not be
applied. Not part of the pytest suite (it runs the suite against broken copies).

    .venv/bin/python bench/mutations.py            # all (about 20-30 min on 2 cores)
    .venv/bin/python bench/mutations.py -k journal # those whose name contains "journal"
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
T = "datalake_assets_tests/"
ANY_ORDER = T + "reliability/test_any_order.py"


@dataclass(frozen=True)
class Mutation:
    name: str
    path: str
    patches: tuple[tuple[str, str], ...]  # (exact old text, new text), each found exactly once
    tests: tuple[str, ...]  # pytest arguments: what must turn red


MUTATIONS = [
    Mutation(
        "drop one row per stage-B batch on s3:// lakes",
        "datalake_assets/transform/stage_b.py",
        (
            (
                "        self._writer(hour).write(self._as_written(written, hour))\n",
                (
                    "        self._writer(hour).write(self._as_written(\n"
                    "            written.slice(1) if storage.is_uri(self.cfg.staging_root) else written,"
                    " hour))\n"
                ),
            ),
        ),
        (T + "reliability/test_storage_faults.py", "-k", "throttled"),
    ),
    Mutation(
        "the reader drops the last buffer of a file",
        "datalake_assets/lake/storage.py",
        (
            (
                "                if d.eof:\n                    yield from pending\n",
                "                if d.eof:\n",
            ),
        ),
        (T + "reliability/test_hostile_input.py", "-k", "oracle"),
    ),
    Mutation(
        "skip the cross-hour dedup (id index)",
        "datalake_assets/transform/dedup.py",
        (
            (  # the driver's dedup (the local path, and Spark batches up to DRIVER_MAX_KEYS)
                (
                    "    held = (\n"
                    '        prior_ids(prior_files, ordered.column("message_id"))\n'
                    "        if prior_files\n"
                    "        else pa.array([], pa.string())\n"
                    "    )\n"
                ),
                "    held = pa.array([], pa.string())\n",
            ),
            (  # the Spark window of bigger batches
                "    if prior_files:\n        # A batch this big stays in the cluster",
                "    if False:\n        # A batch this big stays in the cluster",
            ),
        ),
        (T + "transform/test_job.py", "-k", "kept_once_across_syncs"),
    ),
    Mutation(
        "treat one valid line as quarantined",
        "datalake_assets/transform/stage_a.py",
        (
            (  # a file's first line goes the Python way, not through the native parser
                "                if self.native is None:\n",
                "                if self.native is None or f.line_no == 1:\n",
            ),
            (
                "            _, table, message_id = validate(obj)\n",
                (
                    "            _, table, message_id = validate(obj)\n"
                    "            if line_no == 1:\n"
                    '                raise Rejected("invalid_json", "mutation")\n'
                ),
            ),
        ),
        (T + "reliability/test_hostile_input.py", "-k", "oracle"),
    ),
    Mutation(
        "write a partition's rows twice",
        "datalake_assets/transform/stage_b.py",
        (
            (
                "        self._writer(hour).write(self._as_written(written, hour))\n",
                (
                    "        self._writer(hour).write(self._as_written(written, hour))\n"
                    "        self._writer(hour).write(self._as_written(written, hour))\n"
                ),
            ),
        ),
        (T + "reliability/test_hostile_input.py", "-k", "oracle"),
    ),
    Mutation(
        "commit without the journal",
        "datalake_assets/lake/commit.py",
        (
            (
                (
                    "    journal = write_journal(lake_root, source_dir, run_id, swaps, steps)\n"
                    "    _apply(run_id, swaps, list(steps), apply_step)\n"
                    "    _delete_file(journal)\n"
                ),
                "    _apply(run_id, swaps, list(steps), apply_step)\n",
            ),
        ),
        (T + "reliability/test_faults.py", "-k", "mid_commit"),
    ),
    Mutation(
        "the collector replies before the fsync",
        "datalake_assets/ingest/collector/spool.py",
        (
            (
                "        r.done.wait()\n        error = r.failed.get(seg)\n",
                "        error = r.failed.get(seg)\n",
            ),
        ),
        (
            T + "ingest/collector/test_spool.py",
            T + "ingest/collector/test_crash_restart.py",
            "-k",
            "returns_only_after_its_fsync or kill_9",
        ),
    ),
    Mutation(
        "the importer skips a file",
        "datalake_assets/ingest/segment_import.py",
        (("        for obj in sorted(files):\n", "        for obj in sorted(files)[1:]:\n"),),
        (T + "ingest/test_segment_import.py", "-k", "import_then_sync_finds_every_message_once"),
    ),
    # Order-dependent logic (issue #32): caught by the generated histories of
    # reliability/test_any_order.py, which sync hours in any order and batching.
    Mutation(
        "the lookback window only looks back (an older hour synced after a newer one)",
        "datalake_assets/transform/dedup.py",
        (
            (
                "    hi = layout.ArchiveHour.of(last + span).compact\n",
                "    hi = layout.ArchiveHour.of(last).compact\n",
            ),
        ),
        (ANY_ORDER, "-k", "generated_histories"),
    ),  # local path first, then the Spark path
    Mutation(
        "the lookback window leaves out its edges",
        "datalake_assets/transform/dedup.py",
        (
            (
                "        if hour and lo <= hour <= hi and (appends if hour in own else lookback_hours > 0):\n",
                "        if hour and lo < hour < hi and (appends if hour in own else lookback_hours > 0):\n",
            ),
        ),
        (ANY_ORDER, "-k", "generated_histories_on_the_local_path"),
    ),
    Mutation(
        "a batch keeps the first file's copy, not the earliest received",
        "datalake_assets/transform/keys.py",
        (
            (
                '                ("message_id", "ascending"),\n                ("_received", "ascending"),\n',
                '                ("message_id", "ascending"),\n',
            ),
        ),
        (ANY_ORDER, "-k", "generated_histories_on_the_local_path"),
    ),
    Mutation(
        "a cut commit is rolled forward only by a sync that has files",
        "datalake_assets/transform/sync.py",
        (
            (
                "    recovered = commit.recover(req.lake_root, req.source_dir, run.tables.apply)\n",
                (
                    "    recovered = (\n"
                    "        commit.recover(req.lake_root, req.source_dir, run.tables.apply)\n"
                    "        if list_archive_files(req)\n"
                    "        else []\n"
                    "    )\n"
                ),
            ),
        ),
        (ANY_ORDER, "-k", "generated_histories_on_the_local_path"),
    ),
    Mutation(
        "an erasure skips the late files of hours already synced",
        "datalake_assets/privacy/hours.py",
        (
            (
                "    late = {h for h, t in newest.items() if h in indexed and t >= indexed[h]}\n",
                "    late: set[str] = set()\n",
            ),
        ),
        # a program the generator found, kept: the generated histories rarely erase a person
        # whose line came in a late file after its hour's sync, before the hour is synced again
        (ANY_ORDER + "::test_an_erasure_finds_a_late_file_in_an_hour_already_synced",),
    ),
]


def scratch_copy(dest: str) -> None:
    """The working tree as it is (uncommitted changes included), without venvs and caches."""
    shutil.copytree(
        REPO,
        dest,
        symlinks=True,
        ignore=shutil.ignore_patterns(
            ".git", ".venv*", "__pycache__", ".datalake", "*.egg-info", ".pytest_cache"
        ),
    )


def apply(m: Mutation, root: str) -> None:
    path = os.path.join(root, m.path)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for old, new in m.patches:
        n = text.count(old)
        if n != 1:
            raise SystemExit(
                f"mutation {m.name!r}: the text to patch is in {m.path} {n} times "
                f"(expected once); update the mutation:\n{old}"
            )
        text = text.replace(old, new)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def run(m: Mutation, python: str, keep: bool) -> tuple[bool, float, str]:
    """``(caught, seconds, last lines of the output)``."""
    scratch = tempfile.mkdtemp(prefix="mutation-")
    root = os.path.join(scratch, "repo")
    try:
        scratch_copy(root)
        apply(m, root)
        # The copy's package first on the path, not the editable install of the repo: every
        # process the tests start (syncs, collectors) gets PYTHONPATH too.
        env = {**os.environ, "PYTHONPATH": root, "PYTHONDONTWRITEBYTECODE": "1"}
        where = subprocess.run(
            [python, "-c", "import datalake_assets; print(datalake_assets.__file__)"],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        if not where.stdout.startswith(root):
            raise SystemExit(f"the scratch copy is not what runs: {where.stdout}")
        t = time.monotonic()
        done = subprocess.run(
            # -n 0: one process. Under the suite's two xdist workers, -x ends the run as
            # "interrupted" (exit 2) at the first failure instead of failed (exit 1).
            [python, "-m", "pytest", "-n", "0", "-x", "-q", "-p", "no:cacheprovider", *m.tests],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        lines = (done.stdout + done.stderr).strip().splitlines()
        why = next((ln for ln in lines if ln.startswith("E ")), "")[:200]  # the first failure
        tail = "\n".join([why, *lines[-6:]])
        # 1: tests failed (caught). 0: all passed (survived). 5: no test ran: not a catch.
        if done.returncode not in (0, 1):
            raise SystemExit(f"mutation {m.name!r}: pytest exited {done.returncode}:\n{tail}")
        return done.returncode == 1, time.monotonic() - t, tail
    finally:
        if keep:
            print(f"  kept {root}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-k", default="", help="only mutations whose name contains this")
    p.add_argument("--python", default=os.path.join(REPO, ".venv", "bin", "python"))
    p.add_argument("--keep", action="store_true", help="keep the scratch copies")
    a = p.parse_args(argv)
    chosen = [m for m in MUTATIONS if a.k in m.name]
    caught = 0
    for m in chosen:
        ok, seconds, tail = run(m, a.python, a.keep)
        caught += ok
        print(
            f"{'caught  ' if ok else 'SURVIVED'} {m.name} ({seconds:.0f} s: {' '.join(m.tests)})",
            flush=True,
        )
        print("  " + (tail if not ok else tail.splitlines()[0]).replace("\n", "\n  "), flush=True)
    print(f"mutations tried {len(chosen)}, caught {caught}")
    return 0 if chosen and caught == len(chosen) else 1


if __name__ == "__main__":
    sys.exit(main())
