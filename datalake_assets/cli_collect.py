"""``datalake collect``: the Segment-compatible collector (``ingest/collector/``) as a
long-running process, until SIGTERM (an orchestrator's: drained for ``[collector]
drain_seconds`` first) or Ctrl-C; what it accepted is rolled into the archive before it exits."""

from __future__ import annotations

import argparse
import signal
import sys

from datalake_assets.cli_parser import UsageError
from datalake_assets.settings import LakeSettings


def cmd_collect(settings: LakeSettings, args: argparse.Namespace) -> int:
    import logging
    import threading

    from datalake_assets.ingest.collector import Collector
    from datalake_assets.ingest.collector.spool import SpoolError
    from datalake_assets.ingest.collector.workers import Workers

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    cs = settings.collector
    n = cs.workers if args.workers is None else args.workers  # both from 1 to 64
    service = (
        Collector(settings, host=args.host, port=args.port)
        if n == 1
        else Workers(settings, n, host=args.host, port=args.port)
    )
    try:
        service.start()
    except (RuntimeError, SpoolError, OSError) as e:  # the port taken, the spool unwritable
        raise UsageError(f"cannot start the collector: {e}") from None
    stop = threading.Event()
    received: list[int] = []  # the stop signals, first first

    def on_signal(signum: int, _frame: object) -> None:
        received.append(signum)
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    if cs.max_message_bytes > settings.sync.max_message_bytes:
        print(
            f"warning: [collector] max_message_bytes ({cs.max_message_bytes}) is larger than "
            f"[sync] max_message_bytes ({settings.sync.max_message_bytes}): the sync will "
            "quarantine the largest accepted messages",
            file=sys.stderr,
        )
    sources = ", ".join(
        f"{s.id} ({len(s.write_keys)} write key{'' if len(s.write_keys) == 1 else 's'})"
        for s in settings.sources
        if s.write_keys
    )
    processes = "" if n == 1 else f" ({n} worker processes)"
    print(
        f"collector listening on {service.url}{processes}\nsources: {sources}\n"
        f"spool: {cs.spool_path()}\narchive: {settings.archive_root}\n"
        "SIGTERM or Ctrl-C stops it (pending messages are rolled into the archive first)",
        flush=True,
    )
    if isinstance(service, Collector):
        if service.recovered:
            print(
                f"rolling {service.recovered} spool segment(s) left by an earlier run", flush=True
            )
        while not stop.wait(1.0):
            pass
    else:
        service.supervise(stop.is_set)
    # SIGTERM is an orchestrator's: /ready fails while requests are still accepted, so its load
    # balancer stops sending them before the port closes. Ctrl-C (SIGINT) has no balancer to
    # wait for.
    drain = cs.drain_seconds if received[:1] == [signal.SIGTERM] else 0
    print(
        "stopping: "
        + (f"/ready fails, requests still accepted for {drain} s, then " if drain else "")
        + "finishing requests, rolling the spool into the archive...",
        flush=True,
    )
    complete = service.stop(drain_seconds=drain)
    for signum, handler in previous.items():
        signal.signal(signum, handler)
    stats = [service.stats()] if isinstance(service, Collector) else service.stats
    total = {
        k: sum(s.get(k, 0) for s in stats) for k in ("accepted", "rejected", "segments_rolled")
    }
    per_worker = (
        ""
        if len(stats) < 2
        else (" (per worker: " + ", ".join(str(s.get("accepted", 0)) for s in stats) + ")")
    )
    print(
        f"stopped: {total['accepted']} messages accepted{per_worker}, "
        f"{total['rejected']} rejected, {total['segments_rolled']} segments rolled"
        + (
            ""
            if complete
            else "; some segments could not be rolled and stay in the spool for the next start"
        ),
        flush=True,
    )
    return 0 if complete else 1
