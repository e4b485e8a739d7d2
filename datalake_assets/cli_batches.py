"""``datalake batches``: the open hour's batches of every source, at its ``[freshness]``
interval (``orchestration/freshness/open_hour_loader.py``); ``datalake dev`` runs it beside
Dagster."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading

from datalake_assets.settings import LakeSettings


def cmd_batches(settings: LakeSettings, args: argparse.Namespace) -> int:
    from datalake_assets.orchestration.freshness.open_hour_loader import run_loop
    from datalake_assets.settings.orchestration_section import dagster_home

    # The source's open hour in the Dagster instance datalake dev uses, if there is one
    has_instance = (dagster_home() / "dagster.yaml").is_file()
    reporter = _reporter_opening_instance(settings) if has_instance else None
    stop = threading.Event()
    # SIGTERM: the batch under way ends first (a kill would leave its journal to roll forward)
    signal.signal(signal.SIGTERM, lambda _signum, _frame: stop.set())
    threading.Thread(target=_stop_when_orphaned, args=(stop,), daemon=True).start()
    try:
        run_loop(
            settings,
            stop,
            say=lambda line: print(line, flush=True),
            once=args.once,
            reporter=reporter,
        )
    except KeyboardInterrupt:  # Ctrl-C: the journal rolls a batch cut short forward next time
        pass
    return 0


def _reporter_opening_instance(settings: LakeSettings):
    """The loop's record of each batch in the Dagster instance, opened at the first batch and
    again at each batch until it opens: an instance that cannot be opened (its database down
    when the loop starts, Postgres restarting) stops no batch, the lake comes first, and the
    batch's line says it was not recorded; a later batch records the open hour with every
    row so far (counted from the tables)."""
    from datalake_assets.orchestration.freshness.open_hour_asset import dagster_reporter
    from datalake_assets.orchestration.sync.sync_records import existing_instance

    opened: list = []

    def report(source, report, at) -> None:
        if not opened:
            instance = existing_instance()
            if instance is None:
                raise RuntimeError("no Dagster instance (its dagster.yaml is gone)")
            opened.append(dagster_reporter(instance, settings))
        opened[0](source, report, at)

    return report


def _stop_when_orphaned(stop: threading.Event) -> None:
    """Stop once the process that started this one is gone (``datalake dev`` killed with no
    chance to stop it): no loader left running on its own."""
    parent = os.getppid()
    while not stop.wait(5.0):
        if os.getppid() != parent:
            stop.set()


def prepare_instance(settings: LakeSettings, home: str) -> None:
    """The Dagster instance at ``home`` created now, before ``dg dev`` and the batches open it
    side by side (the loop records each batch in it): two first openings of a new SQLite
    instance at once can both stamp its schema, and Dagster's code server then refuses it
    ("more than one head present") and the webserver never comes up. Only when batches run:
    otherwise ``dg dev`` alone opens it."""
    if not any(settings.freshness_minutes(s) for s in settings.sources):
        return
    from dagster import DagsterInstance

    with DagsterInstance.from_config(home):
        pass


def start_batches(settings: LakeSettings, env: dict[str, str]) -> subprocess.Popen | None:
    """``datalake batches`` beside Dagster when a source has a [freshness] interval: the open
    hour's new events in the lake within minutes (docs/concepts/freshness.md). Its own
    process, a session of its own: Ctrl-C reaches it through ``stop`` as SIGTERM, so a batch
    under way finishes."""
    if not any(settings.freshness_minutes(s) for s in settings.sources):
        return None
    return subprocess.Popen(
        [sys.executable, "-m", "datalake_assets.cli", "batches"], env=env, start_new_session=True
    )


def stop_batches(batches: subprocess.Popen | None) -> None:
    """The batch under way ends first (SIGTERM), then the loop exits."""
    if batches is None:
        return
    batches.terminate()
    try:
        batches.wait(timeout=120)
    except subprocess.TimeoutExpired:
        batches.kill()
