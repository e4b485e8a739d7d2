"""Proofs made after a request's own: copies of the lake's rows that other layers built from
them (the dbt models, ``models/erasure.py``), rebuilt without the person and checked.

Their count joins the request's proof in its state (``remaining[kind]``) and in its
``privacy_requests`` row: ``rows_remaining`` is then the lake's and the copies' together, and
a trace left in a copy, or a copy that could not be rebuilt, makes the request ``failed`` with
the reason, exactly as a trace left in the lake does. The row is rewritten where it is (its
partition is the day the request completed, already registered by ``forget``).
"""

from __future__ import annotations

from datalake_assets.privacy import audit
from datalake_assets.privacy.forget import audit_row
from datalake_assets.privacy.state import FAILED, load_state, now, save_state
from datalake_assets.settings import LakeSettings


def record_downstream_proof(
    settings: LakeSettings, request_id: str, kind: str, remaining: int, error: str | None = None
) -> None:
    """Add the proof of ``kind`` (e.g. ``"models"``) to request ``request_id``'s."""
    lake_root = settings.lake_root
    state = load_state(lake_root, request_id)
    if state is None:
        raise ValueError(f"no privacy request {request_id!r} in this lake")
    state.remaining[kind] = remaining
    state.rows_remaining = sum(state.remaining.values())
    state.proof_checked_at = now()
    if remaining or error:
        state.status = FAILED
        reason = error or f"the proof found {remaining} rows left in the {kind}"
        state.error = f"{state.error}; {reason}" if state.error else reason
        state.error = state.error[:2000]
    state.audit_location = audit.write_audit_row(lake_root, audit_row(state), state.audit_location)
    save_state(lake_root, state)
