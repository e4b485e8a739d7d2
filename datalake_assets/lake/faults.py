"""Fault injection for the reliability suite: the sync kills its own process at a named point.

``DATALAKE_FAULT_AT=<point>`` in the environment of a sync makes it ``SIGKILL`` itself when it
reaches that point: no ``finally`` block, no cleanup, exactly like an OOM kill or a lost node.
Unset (always, in production), a checkpoint is one dictionary lookup.

The points, in the order a sync passes them:

``parsed``      stage A done: work files and staged quarantine exist, nothing else
``staged``      stage B done: every new Parquet file is staged, the lake is untouched
``swap_aside``  (``abfss://`` lakes only) the journal is written and the first partition's
                live dir renamed aside, the staged one not yet renamed in: the hour is absent
``mid_commit``  the commit journal is written and the first partition swapped, not the rest
``committed``   every swap done, journal removed; schema record, catalog and report not yet
``registered``  catalog updated; the sync report not yet written
"""

from __future__ import annotations

import os
import signal
import sys

ENV = "DATALAKE_FAULT_AT"
POINTS = ("parsed", "staged", "swap_aside", "mid_commit", "committed", "registered")


def checkpoint(point: str) -> None:
    """Die here (SIGKILL) if the environment asks for a fault at ``point``."""
    if os.environ.get(ENV) == point:
        sys.stderr.write(f"datalake: injected fault: killed at {point}\n")
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGKILL)
