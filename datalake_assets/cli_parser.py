"""``datalake``'s arguments: every command and option with its help, the checks of their values,
and ``UsageError``, the one way a user's mistake leaves the command line (``cli.main`` prints
it as one line and exits with code 2, as it does for invalid settings). Beside ``cli.py``,
which runs the commands."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import datetime

from datalake_assets.settings import LakeSettings, SourceSettings
from datalake_assets.settings.fields import SettingsError
from datalake_assets.spec import layout

DESCRIPTION = (
    "The command line of datalake-assets, a self-hosted replacement for Segment Data Lakes: "
    "demo traffic, syncs outside Dagster, the collector, the catalog, privacy requests. "
    "Settings come from --settings, else $DATALAKE_SETTINGS, else the defaults (a local lake "
    "under $DATALAKE_HOME, default ./.datalake, with one source, demo). See README.md and docs/."
)


class UsageError(Exception):
    """A user's mistake (an option's value, an unknown source, a query on a table that does not
    exist): one line ``<command>: <message>`` on stderr, exit code 2, no traceback. ``prog``
    names the command when the parser raised it (``cli.main`` knows it otherwise)."""

    def __init__(self, message: str, prog: str | None = None) -> None:
        super().__init__(message)
        self.prog = prog


class Parser(argparse.ArgumentParser):
    """argparse's own errors (a missing option, an unknown command, a value its type refused)
    as a ``UsageError``: one line pointing to ``--help``, instead of the usage block."""

    def error(self, message: str):  # type: ignore[override]  # raises, never returns
        raise UsageError(f"{message} (see `{self.prog} --help`)", prog=self.prog)


# ------------------------------------------------------------------ values argparse checks


def archive_hour(text: str) -> layout.ArchiveHour:
    """An hour as ``datalake sync --hours`` and ``demo --end`` take it (UTC)."""
    try:
        return layout.ArchiveHour.parse(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{e}; e.g. 2026-11-21T09, UTC") from None


def received_day(text: str) -> str:
    """A day as ``datalake import --from/--to`` take it."""
    try:
        datetime.strptime(text, "%Y-%m-%d")
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a day: {text!r} (expected YYYY-MM-DD)") from None
    return text


def whole_number(low: int, high: int | None = None) -> Callable[[str], int]:
    """An ``int`` type from ``low`` (to ``high``), refusing others with the range."""

    def number(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < low or (high is not None and value > high):
            allowed = f"at least {low}" if high is None else f"from {low} to {high}"
            raise argparse.ArgumentTypeError(f"must be {allowed}, got {value}")
        return value

    return number


def _command(sub, name: str, summary: str, description: str = "") -> Parser:
    """A subcommand: ``summary`` in ``datalake --help``'s list, ``description`` (or the
    summary) at the top of its own ``--help``."""
    return sub.add_parser(name, help=summary, description=description or f"{summary}.")


SOURCE_HELP = "source id or slug (default: the first of the settings)"


def _add_sources(p: Parser) -> None:
    """``--source``, repeatable, for a command that does every source unless told which."""
    p.add_argument(
        "--source",
        action="append",
        default=[],
        metavar="ID",
        help="a source id or slug (repeatable; default: every source)",
    )


def build_parser() -> Parser:
    """The parser of ``datalake`` and its commands; ``args.command`` names the command."""
    p = Parser(prog="datalake", description=DESCRIPTION)
    p.add_argument(
        "--settings",
        help="lake settings file (TOML); default: $DATALAKE_SETTINGS, else the defaults",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="command", parser_class=Parser)

    d = _command(
        sub,
        "dev",
        "demo data if needed, then `dg dev`",
        "Start the platform locally: demo traffic for source demo if its archive is "
        "empty (yesterday, UTC, and today's closed hours), the embedded metastore's "
        "server, and `dg dev` (Ctrl-C stops it all).",
    )
    d.add_argument(
        "--host", default="127.0.0.1", help="address of Dagster's webserver (default 127.0.0.1)"
    )
    d.add_argument(
        "--port",
        type=whole_number(1, 65535),
        default=3000,
        help="port of Dagster's webserver (default 3000)",
    )
    d.add_argument(
        "--log-level",
        choices=["critical", "error", "warning", "info", "debug"],
        default="warning",
        help="log level of Dagster's webserver and daemon (default warning: their failures; "
        "info adds every sensor tick and queue check); runs print their events whatever it is",
    )

    g = _command(
        sub,
        "demo",
        "write demo traffic into the raw archive",
        "Write synthetic Segment traffic (tracks, identifies, pages... with a few "
        "duplicate deliveries and malformed lines) into a source's raw archive.",
    )
    g.add_argument("--source", help=SOURCE_HELP)
    g.add_argument("--hours", type=whole_number(1), default=6, help="how many hours (default 6)")
    g.add_argument(
        "--end", type=archive_hour, help="last hour, YYYY-MM-DDTHH (default: the last closed hour)"
    )
    g.add_argument(
        "--events-per-hour",
        type=whole_number(0),
        default=2000,
        help="lines written per hour (default 2000)",
    )
    g.add_argument(
        "--files-per-hour",
        type=whole_number(1),
        default=2,
        help="archive files per hour (default 2)",
    )
    g.add_argument(
        "--seed",
        type=int,
        default=7,
        help="random seed: the same seed writes the same events (default 7)",
    )

    s = _command(
        sub,
        "sync",
        "sync hours now, outside Dagster",
        "Sync archive hours of one source now, in a local Spark session, and print "
        "the report (JSON). Exit code 1 on a failed sync.",
    )
    s.add_argument("--source", help=SOURCE_HELP)
    how = s.add_mutually_exclusive_group()
    how.add_argument(
        "--replay",
        action="store_true",
        help="record the run as a replay (replay: true, replay_from/replay_to in "
        "the report), as a Dagster backfill does; every sync replaces the "
        "hours it writes",
    )
    how.add_argument(
        "--batch",
        action="store_true",
        help="an open hour's batch: append the hours' archive files that no sync or batch "
        "took in yet, replacing nothing (Iceberg lakes; the hour's sync replaces it whole "
        "when it closes: docs/concepts/freshness.md)",
    )
    s.add_argument(
        "--hours", nargs="+", required=True, type=archive_hour, help="UTC hours, YYYY-MM-DDTHH"
    )

    i = _command(
        sub,
        "import",
        "import Segment's S3-destination archive (segment-logs/)",
        "Import received days of a source's Segment S3-destination archive "
        "(segment_archive) into the raw archive (docs/guides/segment-import.md).",
    )
    i.add_argument("--source", help=SOURCE_HELP)
    i.add_argument(
        "--from",
        dest="first",
        type=received_day,
        help="first received day, YYYY-MM-DD (default: all)",
    )
    i.add_argument(
        "--to", dest="last", type=received_day, help="last received day, YYYY-MM-DD (default: all)"
    )
    i.add_argument(
        "--force",
        action="store_true",
        help="import files again even if their manifest says they are unchanged",
    )
    i.add_argument(
        "--sync",
        action="store_true",
        help="then sync the changed hours here (local Spark), a day per Spark job",
    )

    t = _command(
        sub,
        "ddl",
        "print CREATE EXTERNAL TABLE / ADD PARTITION statements",
        "Print the DDL that registers a source's lake tables and partitions by hand "
        "(Athena console, Hive CLI).",
    )
    t.add_argument("--source", help=SOURCE_HELP)
    t.add_argument("table", nargs="?", help="lake table name (default: every table)")

    c = _command(
        sub,
        "collect",
        "run the Segment-compatible collector (docs/guides/collect-events.md)",
        "Run the Segment-compatible HTTP collector until SIGTERM or Ctrl-C; accepted "
        "messages are rolled into the raw archive (docs/guides/collect-events.md).",
    )
    c.add_argument("--host", help="listening address (default: [collector] host)")
    c.add_argument(
        "--port",
        type=whole_number(0, 65535),
        help="port, 0 for any free one (default: [collector] port)",
    )
    c.add_argument(
        "--workers", type=whole_number(1, 64), help="processes (default: [collector] workers)"
    )

    k = _command(
        sub,
        "catalog",
        "catalog maintenance (docs/concepts/catalogs.md)",
        "Maintain the catalog (docs/concepts/catalogs.md).",
    )
    actions = k.add_subparsers(dest="action", required=True, metavar="action", parser_class=Parser)
    _command(
        actions,
        "init-metastore",
        "create the Hive schema of metastore_jdbc_url's database (idempotent)",
        "Create the Hive metastore schema in [catalog] metastore_jdbc_url's MySQL/MariaDB "
        "database, once, up front (sessions never create it). Idempotent.",
    )

    q = _command(
        sub,
        "sql",
        "run SQL on the lake's tables",
        "Run one SQL statement on the lake's tables and print its rows. Iceberg (the "
        "default table format): DuckDB SQL, each table a view over its current snapshot. "
        'Segment layout (table_format = "segment"): Spark SQL on the Hive catalog, through '
        "the metastore's server while `datalake dev` runs, else in a local session.",
    )
    q.add_argument("query", help='e.g. "SELECT event, count(*) FROM demo.tracks GROUP BY 1"')
    q.add_argument("--limit", type=whole_number(1), default=50, help="rows shown (default 50)")

    m = _command(
        sub,
        "maintain",
        "expire old table versions (Iceberg: docs/guides/iceberg.md)",
        "Expire each table's snapshots older than the retention and delete the files "
        "no snapshot references (a killed sync's, replaced ones), source by source "
        "under its lock: what the nightly table_maintenance job does. Nothing to do "
        "with the Segment layout, which keeps no old versions.",
    )
    _add_sources(m)
    m.add_argument(
        "--retention-hours",
        type=whole_number(0),
        default=None,
        metavar="N",
        help="keep versions younger than N hours (default: [iceberg] "
        "retention_hours; 0 keeps only the current one)",
    )

    c = _command(
        sub,
        "compact",
        "right-size cold data's files (docs/guides/compaction.md)",
        "Rewrite the small files of each table's cold hours (ended more than [iceberg] "
        "compact_after_hours ago) into files of about target_file_mb, coarsening their "
        "partitions to a day or a month; one atomic commit a table, source by source "
        "under its lock: what the nightly table_maintenance job does first. Prints "
        "files and bytes before and after. The Segment layout: see docs/concepts/compaction.md.",
    )
    _add_sources(c)
    c.add_argument(
        "--after-hours",
        type=whole_number(0),
        default=None,
        metavar="N",
        help="hours that ended more than N hours ago are cold (default: [iceberg] "
        "compact_after_hours)",
    )
    c.add_argument(
        "--target-mb",
        type=whole_number(1),
        default=None,
        metavar="N",
        help="the files' target size in MB (default: [iceberg] target_file_mb)",
    )

    cv = _command(
        sub,
        "convert",
        "a Segment-layout lake's tables as Iceberg tables (docs/guides/iceberg.md)",
        "Register each table's Parquet files of the Segment layout (day=/hr= folders), and "
        "the quarantine's, in the Iceberg table the lake's Iceberg format expects, where "
        "they are: one commit a table, source by source under its lock; hours already in "
        "the table are skipped (a second run commits nothing). Prints hours, files and rows "
        "per table. It does not switch the lake's table_format.",
    )
    cv.add_argument("--to", choices=["iceberg"], required=True, help="the table format")
    _add_sources(cv)
    cv.add_argument(
        "--rewrite",
        action="store_true",
        help="write each hour again as a sync would (field ids, day/hr in the files) instead "
        "of registering the files in place",
    )

    b = _command(
        sub,
        "batches",
        "append the open hour's new events every few minutes (docs/concepts/freshness.md)",
        "Run the open hour's batches of every source at its [freshness] interval until stopped: "
        "each takes the hour's archive files no run took in yet and appends their rows (Iceberg "
        "lakes); the hourly sync replaces the hour when it closes. One line per batch that read "
        "something. `datalake dev` runs this beside Dagster.",
    )
    b.add_argument("--once", action="store_true", help="one batch of each source now, then exit")

    st = _command(
        sub,
        "status",
        "each source's last synced hour, lag, failures and rows (docs/guides/production.md)",
        "Print each source's last synced hour and its lag behind now, its failed sync runs "
        "and quarantined lines of the last 24 hours, and its rows per day of the last 7 days: "
        "the figures from the lake's sync reports (either table format), the failed runs "
        "from the Dagster instance ($DAGSTER_HOME, else the one `datalake dev` uses).",
    )
    _add_sources(st)
    st.add_argument("--json", action="store_true", help="print one JSON object, for machines")
    st.add_argument(
        "--at",
        type=archive_hour,
        metavar="HOUR",
        help="as at the start of this UTC hour, YYYY-MM-DDTHH (default: now)",
    )

    pl = _command(
        sub,
        "plan",
        "tracking plans: check one before a source uses it",
        "Tracking plans: the events a team agreed on, in Segment's Public API rules, its "
        "Config API shape, or a folder of one JSON Schema per event.",
    )
    plan_actions = pl.add_subparsers(
        dest="action", required=True, metavar="action", parser_class=Parser
    )
    pv = _command(
        plan_actions,
        "validate",
        "check a plan and print what it declares",
        "Read a tracking plan as the sync will: print its shape, its rules and hash, and per "
        "rule its properties; an invalid plan is one line naming the file and the JSON path, "
        "exit code 1.",
    )
    pv.add_argument("file", help="a plan's JSON file, or a folder of JSON Schema files")
    pc = _command(
        plan_actions,
        "check",
        "what a plan would do to archived hours, without syncing",
        "Judge every message of the source's archived hours by its tracking plan (or --plan) "
        "under its modes (unplanned_events, unplanned_properties, violations), and print the "
        "violations by type and by event, the lines it would quarantine and the values it "
        "would omit. Nothing is written. Exit code 1 when a message breaks the plan.",
    )
    pc.add_argument("--source", help=SOURCE_HELP)
    pc.add_argument(
        "--hours", nargs="+", required=True, type=archive_hour, help="UTC hours, YYYY-MM-DDTHH"
    )
    pc.add_argument("--plan", help="a plan file or folder (default: the source's tracking_plan)")
    pc.add_argument("--json", action="store_true", help="print one JSON object, for machines")
    pd = _command(
        plan_actions,
        "diff",
        "what changing a plan does to the tables",
        "Compare two plans: the rules added, removed and changed, and for each table the planned "
        "columns added, widened, narrowed (the sync refuses a narrowing once the table holds "
        "the older type) or no longer planned. Exit code 1 when a column narrows.",
    )
    pd.add_argument("old", help="the plan now in use (file or folder)")
    pd.add_argument("new", help="the plan to ship (file or folder)")
    pi = _command(
        plan_actions,
        "infer",
        "draft a plan from what a source sent",
        "Draft a tracking plan in Segment's Public API rules shape from the source's archived "
        "messages of the last days: one rule per track event (and identify, group, page, "
        "screen), each property typed as it was sent, required when every message sent it. "
        "Every message read keeps to the draft; review and tighten it before use.",
    )
    pi.add_argument("--source", help=SOURCE_HELP)
    pi.add_argument(
        "--days", type=whole_number(1, 366), default=7, help="how many days back (default 7)"
    )
    pi.add_argument(
        "--max-messages",
        type=whole_number(1),
        default=200_000,
        help="read at most this many messages (default 200000)",
    )
    pi.add_argument("--out", help="write the plan to this file (default: print it)")

    f = _command(
        sub,
        "forget",
        "erase and suppress a person's data (docs/guides/forget-a-person.md)",
        "Erase a person's rows from the lake and add their identities to the "
        "suppression list (docs/guides/forget-a-person.md). Prints counts, never an identity; exit "
        "code 1 when the request failed (run it again, or --resume).",
    )
    f.add_argument(
        "--user-id",
        action="append",
        default=[],
        metavar="X",
        help="a userId to forget (repeatable)",
    )
    f.add_argument(
        "--anonymous-id",
        action="append",
        default=[],
        metavar="X",
        help="an anonymousId to forget (repeatable)",
    )
    f.add_argument(
        "--trait",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a trait listed in [privacy] identity_traits, e.g. email=a@b.com",
    )
    f.add_argument("--file", help="a request file: JSON, or one KIND=VALUE per line")
    f.add_argument(
        "--follow-links",
        action="store_true",
        help="also forget the identities linked by identify/alias calls",
    )
    f.add_argument(
        "--source",
        action="append",
        default=[],
        help="only this source (repeatable; default: every source)",
    )
    f.add_argument("--no-erase", action="store_true", help="suppress only: erase nothing")
    f.add_argument("--no-suppress", action="store_true", help="erase only: do not suppress")
    f.add_argument("--request-id", help="[A-Za-z0-9_-]{1,64}; the same id re-runs the request")
    f.add_argument(
        "--resume",
        action="store_true",
        help="re-run every request that did not complete (killed or failed)",
    )
    return p


def chosen_source(settings: LakeSettings, args: argparse.Namespace) -> SourceSettings:
    """``--source`` (an id or a slug), else the first source; an unknown one is a user's
    mistake, told with the sources there are."""
    if not args.source:
        return settings.sources[0]
    try:
        return settings.source(args.source)
    except SettingsError as e:
        raise UsageError(f"--source: {e.problem} ({e.origin})") from None
