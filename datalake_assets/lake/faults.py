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

A privacy request (``privacy/forget.py``) passes its own points, in this order (and
``mid_commit`` inside each hour's commit):

``forget_recorded``   state and suppression list written; nothing erased
``forget_staged``     an hour's next version staged, its commit not begun
``forget_committed``  an hour's partitions swapped; its archive files not yet rewritten
``forget_archive``    the first archive file of an hour replaced, the others not
``forget_proved``     the proof counted and recorded; the audit row not yet written
"""

from __future__ import annotations

import os
import signal
import sys

ENV = "DATALAKE_FAULT_AT"
POINTS = ("parsed", "staged", "swap_aside", "mid_commit", "committed", "registered")
FORGET_POINTS = (
    "forget_recorded",
    "forget_staged",
    "mid_commit",
    "forget_committed",
    "forget_archive",
    "forget_proved",
)


def checkpoint(point: str) -> None:
    """Die here (SIGKILL) if the environment asks for a fault at ``point``."""
    if os.environ.get(ENV) == point:
        sys.stderr.write(f"datalake: injected fault: killed at {point}\n")
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGKILL)
