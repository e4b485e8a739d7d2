"""Schema conformance of the fixed columns of every table, with pandera.

Run by the sync's stage B on what it writes (one validation per task and hour, on the fixed
columns only), reported per table in the sync report and turned into the ``schema_conformance``
asset check. The rules:

* ``message_id``: present in every row, 1 to 255 characters.
* ``type``: present, and the table's own call type (``identifies`` rows are ``identify``...;
  event tables and ``tracks`` are ``track``).
* ``event``: present and not blank in ``tracks`` and event tables.
* ``received_at``: present (Segment's API stamps every message it receives).
* ``user_id`` or ``anonymous_id``: at least one in every row.

Timestamps and ids are typed by the sync itself (``types.FIXED_TYPES``); these checks are about
values, which is what the data can get wrong.
"""

from __future__ import annotations

import pyarrow as pa

from datalake_assets.spec.naming import TYPE_TABLES

CHECKED_COLUMNS = ("message_id", "type", "event", "received_at", "user_id", "anonymous_id")
_TYPE_OF_TABLE = {table: t for t, table in TYPE_TABLES.items()}


def call_type_of(table: str) -> str:
    return _TYPE_OF_TABLE.get(table, "track")


def _schema(table: str, columns: set[str]):
    import pandera.pandas as pap

    call_type = call_type_of(table)
    spec = {
        "message_id": pap.Column(
            nullable=False,
            required=True,
            checks=pap.Check(lambda s: s.str.len().between(1, 255), name="length_1_to_255"),
        ),
        "type": pap.Column(
            nullable=False,
            required=True,
            checks=pap.Check(lambda s: s == call_type, name=f"equals_{call_type}"),
        ),
        "received_at": pap.Column(nullable=False, required=True),
    }
    if call_type == "track":
        spec["event"] = pap.Column(
            nullable=False,
            required=True,
            checks=pap.Check(lambda s: s.str.strip().str.len() > 0, name="not_blank"),
        )
    checks = []
    if {"user_id", "anonymous_id"} <= columns:
        checks.append(
            pap.Check(
                lambda df: df["user_id"].notna() | df["anonymous_id"].notna(),
                name="user_id_or_anonymous_id",
            )
        )
    return pap.DataFrameSchema(spec, checks=checks, coerce=False, strict=False)


def check_conformance(table: str, data: pa.Table) -> list[dict]:
    """Failures of the table's rules on ``data`` (its fixed columns): one summary per column
    and check, ``{"column", "check", "failures", "example"}``; empty when everything holds."""
    import pandas as pd
    import pandera.pandas as pap

    if data.num_rows == 0:
        return []
    present = [c for c in CHECKED_COLUMNS if c in data.column_names]
    frame = data.select(present).to_pandas(types_mapper=pd.ArrowDtype)
    try:
        _schema(table, set(present)).validate(frame, lazy=True)
    except pap.errors.SchemaErrors as e:
        out: dict[tuple[str, str], dict] = {}
        rows: dict[tuple[str, str], set] = {}
        for r in e.failure_cases.to_dict("records"):
            # a check over the whole row is reported once per column by pandera: count rows
            row_check = r.get("schema_context") == "DataFrameSchema"
            column = "(row)" if row_check else str(r.get("column"))
            key = (column, str(r.get("check")))
            entry = out.setdefault(
                key, {"column": key[0], "check": key[1], "failures": 0, "example": None}
            )
            seen = rows.setdefault(key, set())
            index = r.get("index")
            if index is None or index not in seen:
                seen.add(index)
                entry["failures"] += 1
            if entry["example"] is None and r.get("failure_case") is not None and not row_check:
                entry["example"] = str(r["failure_case"])[:200]
        return sorted(out.values(), key=lambda x: (x["column"], x["check"]))
    return []
