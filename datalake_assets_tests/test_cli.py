"""``datalake`` as a user runs it: a subprocess of the installed command, with a settings file
and a lake home in a temporary folder (never the user's).

* a user's mistake (a bad hour, an unknown source, a missing option, a query on a table that
  does not exist) is one line on stderr and exit code 2, like an invalid settings file;
* a successful ``datalake sync`` prints its report and nothing from Spark, Hive or the JVM;
* every command and every option has help (walked on the parser, so it cannot drift).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from datalake_assets_tests.support.settings_files import write_lake_toml

HOUR = "2026-11-21T10"
SETTINGS = """\
archive_root = "archive"
lake_root = "lake"
[spark]
master = "local[2]"
driver_memory = "1g"
shuffle_partitions = 2
[catalog]
backend = "hive"
metastore_dir = "metastore"
[[sources]]
id = "demo"
[[sources]]
id = "web-site"
slug = "web"
"""


def datalake_command() -> list[str]:
    """The console script next to this Python (``pip install -e .``), else the module."""
    script = Path(sys.executable).with_name("datalake")
    return [str(script)] if script.exists() else [sys.executable, "-m", "datalake_assets.cli"]


def run_datalake(
    folder: Path,
    *args: str,
    timeout: float = 300,
    env_extra: dict[str, str] | None = None,
    settings: bool = True,
) -> subprocess.CompletedProcess:
    """``datalake --settings <folder>/lake.toml ARGS`` in ``folder`` (``settings`` False: no
    settings file at all, the defaults under ``DATALAKE_HOME=folder``), with no ``DATALAKE_*``
    or ``DAGSTER_HOME`` of the caller's environment (but those of ``env_extra``)."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("DATALAKE_") and k != "DAGSTER_HOME"
    }
    env["DATALAKE_HOME"] = str(folder)
    env.update(env_extra or {})
    file = ["--settings", str(folder / "lake.toml")] if settings else []
    return subprocess.run(
        [*datalake_command(), *file, *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture()
def home(tmp_path) -> Path:
    write_lake_toml(tmp_path, SETTINGS)
    return tmp_path


def one_line_error(done: subprocess.CompletedProcess, prefix: str) -> str:
    """The single stderr line of a refused command (exit code 2, nothing on stdout)."""
    lines = done.stderr.splitlines()
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(prefix), lines[0]
    assert done.stdout == ""
    return lines[0]


# ------------------------------------------------------------------------ a user's mistakes


# the command line, the start of its one line, words the line must hold
MISTAKES = [
    ("sync --hours 2026-11-20", "datalake sync: ", ["--hours", "'2026-11-20'", "YYYY-MM-DDTHH"]),
    (f"sync --hours {HOUR} 2026-11-21T25", "datalake sync: ", ["'2026-11-21T25'"]),
    (
        f"sync --source nope --hours {HOUR}",
        "datalake sync: ",
        ["--source", "'nope'", "demo", "web-site (slug web)", "lake.toml"],
    ),
    ("demo --source nope", "datalake demo: ", ["'nope'", "demo"]),
    ("ddl --source nope", "datalake ddl: ", ["'nope'"]),
    ("demo --end yesterday", "datalake demo: ", ["--end", "'yesterday'"]),
    ("demo --hours 0", "datalake demo: ", ["--hours", "at least 1"]),
    ("import --from 2026-13-01", "datalake import: ", ["--from", "'2026-13-01'", "YYYY-MM-DD"]),
    ("collect --workers 0", "datalake collect: ", ["--workers", "1 to 64"]),
    ("sync", "datalake sync: ", ["--hours", "datalake sync --help"]),
    (f"sync --hours {HOUR} --bogus", "datalake: ", ["--bogus"]),
    ("nope", "datalake: ", ["'nope'", "sync"]),
    ("", "datalake: ", ["command"]),
]


@pytest.mark.parametrize(
    "args, prefix, words", MISTAKES, ids=[args or "(no command)" for args, _, _ in MISTAKES]
)
def test_a_user_mistake_is_one_line_and_exit_code_2(home, args, prefix, words):
    line = one_line_error(run_datalake(home, *args.split()), prefix)
    for word in words:
        assert word in line, line
    assert "Traceback" not in line


def test_an_invalid_settings_file_is_one_line_and_exit_code_2(home):
    (home / "lake.toml").write_text(SETTINGS.replace('id = "demo"', 'id = "demo"\ncolour = 1'))
    line = one_line_error(run_datalake(home, "sync", "--hours", HOUR), "datalake: ")
    assert "invalid settings" in line and "colour" in line and "lake.toml" in line, line


# ------------------------------------------------------------------ Spark commands: quiet output


@pytest.fixture(scope="module")
def synced_home(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """A few hundred demo events of one hour, synced by ``datalake sync`` (Hive catalog)."""
    folder = tmp_path_factory.mktemp("cli_sync")
    write_lake_toml(folder, SETTINGS)
    demo = run_datalake(
        folder,
        "demo",
        "--hours",
        "1",
        "--end",
        HOUR,
        "--events-per-hour",
        "300",
        "--files-per-hour",
        "1",
    )
    assert demo.returncode == 0, demo.stderr
    return folder, run_datalake(folder, "sync", "--hours", HOUR)


@pytest.mark.slow
@pytest.mark.spark
def test_a_successful_sync_prints_its_report_and_no_spark_or_hive_warnings(synced_home):
    _, done = synced_home
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["status"] == "finished" and report["lines_in"] == 300, report
    assert report["tables"] > 1 and report["messages_written"] > 200, report
    # Spark's log4j lines (``26/11/26 05:37:20 WARN log: ...``), its start banner, the JVM's
    # incubator notice: none of them, and nothing else either.
    assert not [line for line in done.stderr.splitlines() if "WARN" in line], done.stderr
    assert done.stderr == "", done.stderr


@pytest.mark.slow
@pytest.mark.spark
def test_sql_on_an_unknown_table_is_one_line_and_exit_code_2(synced_home):
    folder, _ = synced_home
    done = run_datalake(folder, "sql", "SELECT * FROM demo.no_such_table")
    line = one_line_error(done, "datalake sql: ")
    assert "TABLE_OR_VIEW_NOT_FOUND" in line and "no_such_table" in line, line
    assert len(line) < 400, line  # the message, not the JVM's stack trace


@pytest.mark.slow
@pytest.mark.spark
def test_a_query_failing_as_it_runs_still_shows_sparks_errors_and_exits_1(synced_home):
    """Quiet is not blind: the JVM's ERROR lines (here a task failing 4 times) reach stderr
    before the command's own line."""
    folder, _ = synced_home
    done = run_datalake(folder, "sql", "SELECT assert_true(n < 0) FROM (SELECT 1 AS n)")
    lines = done.stderr.splitlines()
    assert done.returncode == 1, done.stderr[-3000:]
    assert any(" ERROR Executor: Exception in task" in line for line in lines), done.stderr
    assert lines[-1].startswith("datalake sql: [USER_RAISED_EXCEPTION]"), lines[-1]
    assert not [line for line in lines if "WARN" in line], done.stderr


# ---------------------------------------------------------------------------------- status


@pytest.mark.slow
@pytest.mark.spark
def test_status_tells_the_figures_a_reader_of_the_lake_counts(synced_home):
    """``datalake status`` on the lake ``datalake sync`` wrote: the figures equal DuckDB's
    counts over the lake's own files (each message once, quarantined lines), not the
    report's numbers read back."""
    import duckdb

    folder, _ = synced_home
    done = run_datalake(folder, "status", "--json", "--at", "2026-11-21T12")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    status = json.loads(done.stdout)
    assert status["dagster_instance"] is None and status["table_format"] == "segment"
    demo, web = status["sources"]
    parquet = "hive_partitioning = true, hive_types_autocast = false, union_by_name = true"
    ((messages,),) = duckdb.sql(
        f"SELECT count(DISTINCT message_id) FROM read_parquet("
        f"'{folder}/lake/data/demo/*/*/*/*.parquet', {parquet})"
    ).fetchall()
    quarantine = folder / "lake" / "quarantine" / "demo"  # none when no line was malformed
    ((lines,),) = (
        duckdb.sql(
            f"SELECT count(*) FROM read_parquet('{quarantine}/*/*/*.parquet', {parquet}) "
            "WHERE level = 'line'"
        ).fetchall()
        if quarantine.exists()
        else [(0,)]
    )
    assert (demo["source"], demo["last_synced_hour"], demo["lag_seconds"]) == (
        "demo",
        HOUR,
        3600,
    )
    assert demo["messages_per_day"]["2026-11-21"] == messages > 200
    assert sum(demo["messages_per_day"].values()) == messages
    assert demo["quarantined_lines_24h"] == lines
    assert demo["failed_runs_24h"] is None  # no Dagster instance: not known, not zero
    assert (web["slug"], web["last_synced_hour"], web["lag_seconds"]) == ("web", None, None)
    table = run_datalake(folder, "status", "--source", "web", "--at", "2026-11-21T12")
    assert table.returncode == 0 and table.stderr == "", table.stderr
    assert "web-site (slug web)" in table.stdout and "demo" not in table.stdout, table.stdout
    assert "last synced hour        none yet" in table.stdout, table.stdout


@pytest.mark.slow
def test_status_counts_each_sources_failed_runs_of_the_last_day(home):
    """Real runs in a real instance: a failed run of web's own job and a failed batched run
    that synced web's hours count for web; a failed batched run of demo's hours, and a
    successful run of web's job, do not."""
    from dagster import DagsterInstance, Failure, job, op

    from datalake_assets.orchestration.automation.batch_sync import BATCH_JOB, SOURCE_HOURS_TAG

    @op
    def fails():
        raise Failure("the sync failed")

    @op
    def succeeds():
        return None

    def one_op_job(name, body):
        @job(name=name)
        def sync_job():
            body()

        return sync_job

    dagster_home = home / "dagster_instance"
    dagster_home.mkdir()
    (dagster_home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    expected = []
    with DagsterInstance.from_config(str(dagster_home)) as instance:
        for name, body, tags in [
            ("web_sync_job", fails, {}),
            (BATCH_JOB, fails, {SOURCE_HOURS_TAG: f"demo:{HOUR} web-site:{HOUR}"}),
            (BATCH_JOB, fails, {SOURCE_HOURS_TAG: f"demo:{HOUR}"}),
            ("web_sync_job", succeeds, {}),
        ]:
            result = one_op_job(name, body).execute_in_process(
                instance=instance, tags=tags, raise_on_error=False
            )
            if name == "web_sync_job" and body is fails or "web-site" in str(tags):
                expected.append(result.run_id)
    done = run_datalake(
        home, "status", "--json", env_extra={"DAGSTER_HOME": str(dagster_home)}, timeout=120
    )
    assert done.returncode == 0, done.stderr
    status = json.loads(done.stdout)
    assert status["dagster_instance"] == str(dagster_home)
    by_source = {s["source"]: s for s in status["sources"]}
    assert by_source["web-site"]["failed_runs_24h"] == 2
    assert set(by_source["web-site"]["failed_run_ids"]) == set(expected)
    assert by_source["demo"]["failed_runs_24h"] == 2  # both batched runs synced demo's hours


# ----------------------------------------------------------------------------------- help


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """``(path, parser)`` of the top-level parser and of every (nested) subcommand."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, (*path, name))


def all_commands() -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    from datalake_assets.cli import build_parser

    return list(commands(build_parser()))


def test_every_command_has_a_description_and_every_option_and_argument_has_help():
    missing = []
    for path, parser in all_commands():
        name = " ".join(("datalake", *path))
        if not (parser.description or "").strip():
            missing.append(f"{name}: no description")
        assert "``" not in (parser.description or ""), f"{name}: markup in its description"
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                missing += [
                    f"{name} {c.dest}: no help"
                    for c in action._choices_actions
                    if not (c.help or "").strip()
                ]
            elif not (action.help or "").strip() or action.help == argparse.SUPPRESS:
                missing.append(f"{name} {'/'.join(action.option_strings) or action.dest}: no help")
    assert not missing, "\n".join(missing)


@pytest.mark.parametrize(
    "path", [p for p, _ in all_commands()], ids=lambda p: " ".join(p) or "datalake"
)
def test_help_of_each_command_shows_its_own_usage_and_description(tmp_path, path):
    done = subprocess.run(
        [*datalake_command(), *path, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    usage, _, rest = done.stdout.partition("\n\n")
    assert " ".join(usage.split()).startswith(f"usage: {' '.join(('datalake', *path))} "), usage
    description = rest.split("\n\n")[0]
    assert description.strip() and not description.startswith(("positional", "options")), (
        done.stdout
    )
    assert "``" not in done.stdout, done.stdout


@pytest.mark.parametrize(
    "now, first, n",
    [
        ("2026-11-26T12:30", "2026-11-25T00", 36),
        ("2026-11-26T00:05", "2026-11-25T00", 24),  # just after midnight: yesterday, complete
        ("2026-11-26T23:59", "2026-11-25T00", 47),
    ],
)
def test_the_dev_demo_is_yesterday_whole_and_todays_closed_hours(now, first, n):
    """``datalake dev``'s demo holds a complete day, so the daily models have one to build
    by themselves (docs/concepts/models.md)."""
    from datetime import UTC, datetime

    from datalake_assets.cli_demo import _last_closed_hours, demo_hours

    at = datetime.fromisoformat(now).replace(tzinfo=UTC)
    hours = _last_closed_hours(demo_hours(at), at)
    assert (str(hours[0]), len(hours)) == (first, n)
    assert hours[-1].start.hour == (at.hour - 1) % 24
