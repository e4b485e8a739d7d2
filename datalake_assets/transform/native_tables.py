"""What the native parse (``native_parse.py``) hands over for each table of a chunk: the rows
it parsed (``TableRows``: flattened columns, line numbers, message ids, receivedAt), the lines
it handled, and the identities of those rows counted (``native_identities``), messages of a
suppressed identity left out. Stage A (``stage_a.py``) writes the rows as work files; the
lines not handled take the Python path."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from datalake_assets.spec.json_checks import field, received, unquoted
from datalake_assets.transform.identity_tally import IdentityTally
from datalake_assets.transform.native_identities import tally_batch


@dataclass
class TableRows:
    """One table's rows of a chunk: flattened columns, and per row its line number, message
    id and receivedAt (microseconds)."""

    columns: dict[str, pa.Array]
    lines: pa.Array
    ids: pa.Array
    received: pa.Array


@dataclass
class TableResult:
    """One table's part of a chunk: its rows (None: none left to write) and the indices of
    the lines handled natively (written, or dropped as a suppressed identity's)."""

    table: str
    rows: TableRows | None
    handled: np.ndarray


def _without(
    msgs: pa.StructArray, rows: np.ndarray, columns: dict, drop: np.ndarray
) -> tuple[pa.StructArray, np.ndarray, dict]:
    """``msgs``, ``rows`` and ``columns`` without the ``drop`` rows (and without the columns
    left empty)."""
    if not drop.any():
        return msgs, rows, columns
    keep = pa.array(~drop)
    columns = {c: a.filter(keep) for c, a in columns.items()}
    return (
        msgs.filter(keep),
        rows[~drop],
        {c: a for c, a in columns.items() if a.null_count < len(a)},
    )


def _finish(
    table: str,
    msgs: pa.StructArray,
    rows: np.ndarray,
    columns: dict,
    tally: IdentityTally | None,
    hour: str,
) -> TableResult:
    """Count a table's identities (``native_identities``): its rows (None: all dropped) and
    the line indices handled here (written, or dropped as suppressed)."""
    handled = rows
    if tally is not None and tally.key and len(rows):
        suppressed, unresolved = tally_batch(tally, msgs, np.ones(len(rows), bool), table, hour)
        handled = rows[~unresolved]
        msgs, rows, columns = _without(msgs, rows, columns, suppressed | unresolved)
    if not len(rows):
        return TableResult(table, None, handled)
    return TableResult(
        table,
        TableRows(
            columns, pa.array(rows, pa.int64()), unquoted(field(msgs, "messageId")), received(msgs)
        ),
        handled,
    )
