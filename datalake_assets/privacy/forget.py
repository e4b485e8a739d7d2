"""Carry out a privacy request: suppress, erase, prove, audit (``docs/concepts/privacy.md``).

``forget(settings, request)`` runs these steps; each is idempotent, so a request killed at any
moment converges when it is run again (the same request, or ``resume`` from its state file):

1. **Record** ``_privacy/state/<request id>.json`` (hashes and counts only: ``state.py``).
2. **Suppress** (``suppress``): ``_privacy/suppressed/<request id>.json`` with the hashes, so
   the collector and the sync drop the identities' new events from now on.
3. **Follow links** (``follow_links``): ``lookup.follow_links`` on every source's identity
   index, and the links of hours without one (``lookup.scan_hours``); the linked hashes are
   added to the state and to the suppression list.
4. **Spool** (``erase``): the collector's spool, through ``_erase_spool``.
5. **Per source**, under its ``SourceLock`` (no sync interleaves): roll forward any commit a
   crash left, find the hours (``lookup.find_hours``, plus ``scan_hours`` for hours without an
   identity index, plus the hours an earlier run of the request touched), and for each hour
   plan, commit and rewrite the archive (``rewrite.py``), recording the hour's counts before
   its commit and again when it is done.
6. **Proof**: every hour found is read again; what remains of the identities (archive lines,
   rows, quarantine records, index entries) is counted: ``rows_remaining``, 0 or the request
   fails.
7. **Audit**: the request's row in ``privacy_requests`` (``audit.py``), registered in the
   catalog.

Nothing here logs, stores or raises an identity value: only hashes and counts.

Steps 3 to 6 (links, spool, per source: erase and prove) are ``forget_steps.py``'s; this
module runs the request through them and reports it (``ForgetResult``, the audit row).
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field

from datalake_assets.catalog.catalog_interface import Catalog, CatalogError
from datalake_assets.catalog.config import catalog_from_config, config_from_settings
from datalake_assets.lake import faults
from datalake_assets.lake.identities import lake_key, write_suppressed
from datalake_assets.privacy import audit
from datalake_assets.privacy.forget_request import ForgetRequest, RequestError
from datalake_assets.privacy.forget_steps import (
    MANY_HOURS,
    _erase_spool,
    _expand,
    _matcher,
    _Run,
    _source,
)
from datalake_assets.privacy.hours import SourcePlace
from datalake_assets.privacy.matching import needles_of
from datalake_assets.privacy.state import (
    COMPLETED,
    FAILED,
    RUNNING,
    RequestState,
    load_state,
    now,
    save_state,
    unfinished,
)
from datalake_assets.settings import LakeSettings
from datalake_assets.settings.formats_section import FormatConfig
from datalake_assets.spec.identity import TRAIT_PREFIX, identity_hash

log = logging.getLogger(__name__)


@dataclass
class ForgetResult:
    """What a request did (counts and hashes only)."""

    request_id: str
    status: str  # "completed" / "failed"
    identity_hashes: list[str]  # requested and linked
    hours_rewritten: int
    files_rewritten: int
    rows_removed: dict[str, int]  # table (and "quarantine") -> rows
    archive_lines_removed: int
    spool_lines_removed: int
    rows_remaining: int  # the proof: traces left in the hours found (0 after an erasure)
    started_at: str
    completed_at: str
    received_at: str = ""
    index_entries_removed: int = 0
    hours_examined: int = 0
    lookup_bytes_read: int = 0
    lookup_files_read: int = 0
    proof_checked_at: str | None = None
    remaining: dict[str, int] = field(default_factory=dict)  # the proof's counts by kind
    error: str | None = None
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def forget(
    settings: LakeSettings, request: ForgetRequest, *, catalog: Catalog | None = None
) -> ForgetResult:
    """Carry out ``request`` (module doc). ``catalog``: where ``privacy_requests`` is
    registered; default: the settings' catalog (the Hive backend needs a Spark session, so a
    caller with one passes ``HiveCatalog(spark)``). Raises ``RequestError`` for a request that
    cannot start (unknown source, request id used for another request); any later failure is
    a ``failed`` result, recorded in the state and the audit table."""
    traits = settings.privacy.identity_traits
    for ident in request.identities:
        name = ident.kind[len(TRAIT_PREFIX) :]
        if ident.kind.startswith(TRAIT_PREFIX) and name not in traits:
            # the sync neither indexes nor matches other traits: the request would find nothing
            raise RequestError(
                f"trait {name!r} is not in [privacy] identity_traits "
                f"({', '.join(traits)}); add it there to forget by it"
            )
    key = lake_key(settings.lake_root)
    requested = sorted({identity_hash(key, i) for i in request.identities})
    state = load_state(settings.lake_root, request.request_id)
    fresh = RequestState(
        request_id=request.request_id,
        requested=requested,
        needles=sorted(needles_of(key, request.identities), key=lambda n: n.digest),
        follow_links=request.follow_links,
        sources=list(request.sources),
        erase=request.erase,
        suppress=request.suppress,
        received_at=request.received_at.isoformat(timespec="microseconds"),
    )
    if state is None:
        state = fresh
    elif (state.requested, state.follow_links, state.sources, state.erase, state.suppress) != (
        fresh.requested,
        fresh.follow_links,
        fresh.sources,
        fresh.erase,
        fresh.suppress,
    ):
        raise RequestError(
            f"request id {request.request_id!r} was used for another request "
            "(other identities or options); use a new request id"
        )
    _places(settings, state.sources)  # an unknown source fails before anything is written
    return _execute(_Run(settings, state, key, catalog))


def resume(settings: LakeSettings, *, catalog: Catalog | None = None) -> list[ForgetResult]:
    """Run again every request whose state says it did not complete (killed or failed), from
    its state alone (hashes: no clear value is needed)."""
    key = lake_key(settings.lake_root)
    return [_execute(_Run(settings, s, key, catalog)) for s in unfinished(settings.lake_root)]


def _places(settings: LakeSettings, sources: list[str]) -> list[SourcePlace]:
    chosen = list(settings.sources)
    if sources:
        try:
            chosen = [settings.source(s) for s in sources]
        except Exception as e:  # SettingsError: the source id is ours, not a person's
            raise RequestError(str(e)) from None
    fmt = FormatConfig.of_settings(settings)
    return [
        SourcePlace(
            s.id,
            s.lake_dir,
            s.date_layout,
            settings.lake_root,
            settings.archive_root,
            s.database,
            s.effective_table_prefix,
            fmt,
        )
        for s in chosen
    ]


def _execute(run: _Run) -> ForgetResult:
    state, lake_root = run.state, run.settings.lake_root
    state.status, state.error, state.attempts = RUNNING, None, state.attempts + 1
    state.started_at = state.started_at or now()
    save_state(lake_root, state)
    try:
        if state.suppress:
            write_suppressed(lake_root, state.request_id, state.hashes or state.requested)
        faults.checkpoint("forget_recorded")
        places = _places(run.settings, state.sources)
        if not state.hashes:
            state.hashes = sorted(_expand(run, places) if state.follow_links else state.requested)
            save_state(lake_root, state)
            if state.suppress:
                write_suppressed(lake_root, state.request_id, state.hashes)
        matcher = _matcher(run, state.hashes)
        if state.erase:
            spooled = _erase_spool(run, state.hashes)
            state.spool_lines_removed = max(state.spool_lines_removed, spooled)
        remaining: dict[str, int] = {}
        for place in places:
            for kind, n in _source(run, place, matcher).items():
                remaining[kind] = remaining.get(kind, 0) + n
        state.remaining, state.proof_checked_at = remaining, now()
        state.rows_remaining = sum(remaining.values())
        save_state(lake_root, state)
        faults.checkpoint("forget_proved")
        state.status = COMPLETED if not state.erase or state.rows_remaining == 0 else FAILED
        if state.status == FAILED:
            state.error = (
                f"the proof found {state.rows_remaining} traces left after the erasure: {remaining}"
            )
    except Exception as e:  # noqa: BLE001 - recorded as a failed request, with its reason
        log.exception("privacy request %s failed", state.request_id)
        state.status, state.error = FAILED, f"{type(e).__name__}: {e}"[:2000]
    state.completed_at = now()
    _audit(run)
    save_state(lake_root, state)
    result = _result(run)
    log.info(
        "privacy request %s %s: %d hours, %d files rewritten, rows removed %s, "
        "%d archive lines, %d spool lines, %d remaining",
        result.request_id,
        result.status,
        result.hours_rewritten,
        result.files_rewritten,
        result.rows_removed,
        result.archive_lines_removed,
        result.spool_lines_removed,
        result.rows_remaining,
    )
    return result


def _totals(state: RequestState) -> dict[str, object]:
    rows: dict[str, int] = {}
    archive = files = index = hours = 0
    for per in state.hours.values():
        for hour, rec in per.items():
            for t, n in rec.rows.items():
                rows[t] = rows.get(t, 0) + n
            archive += sum(rec.archive.values())
            files += rec.files
            index += rec.index_entries
            hours += 0 if rec.empty or hour == MANY_HOURS else 1
    return {
        "rows_removed": dict(sorted(rows.items())),
        "archive_lines_removed": archive,
        "files_rewritten": files,
        "index_entries_removed": index,
        "hours_rewritten": hours,
    }


def audit_row(state: RequestState) -> dict[str, object]:
    """The request's row of ``privacy_requests`` (``audit.PRIVACY_SCHEMA``) from its state."""
    return {
        **_totals(state),
        "request_id": state.request_id,
        "received_at": state.received_at,
        "started_at": state.started_at,
        "completed_at": state.completed_at,
        "identity_hashes": state.hashes or state.requested,
        "follow_links": state.follow_links,
        "sources": state.sources,
        "erase": state.erase,
        "suppress": state.suppress,
        "status": state.status,
        "spool_lines_removed": state.spool_lines_removed,
        "rows_remaining": state.rows_remaining,
        "proof_checked_at": state.proof_checked_at,
        "error": state.error,
    }


def _audit(run: _Run) -> None:
    state, lake_root = run.state, run.settings.lake_root
    row = audit_row(state)
    try:
        state.audit_location = audit.write_audit_row(lake_root, row, state.audit_location)
    except OSError as e:  # the request itself is done (or failed): say so, don't hide it
        run.warnings.append(f"privacy_requests row not written: {e}")
        return
    try:
        cfg = config_from_settings(run.settings.catalog)
        catalog = run.catalog if run.catalog is not None else catalog_from_config(cfg)
        audit.register_audit(catalog, cfg.reports_database, lake_root, state.completed_at[:10])  # type: ignore[index]
    except CatalogError as e:
        run.warnings.append(f"privacy_requests row written, not registered in the catalog: {e}")


def _result(run: _Run) -> ForgetResult:
    state = run.state
    t = _totals(state)
    return ForgetResult(
        request_id=state.request_id,
        status=state.status,
        identity_hashes=list(state.hashes or state.requested),
        hours_rewritten=t["hours_rewritten"],
        files_rewritten=t["files_rewritten"],  # type: ignore[arg-type]
        rows_removed=t["rows_removed"],  # type: ignore[arg-type]
        archive_lines_removed=t["archive_lines_removed"],  # type: ignore[arg-type]
        spool_lines_removed=state.spool_lines_removed,
        rows_remaining=state.rows_remaining if state.rows_remaining is not None else -1,
        started_at=state.started_at,
        completed_at=state.completed_at or now(),
        received_at=state.received_at,
        index_entries_removed=t["index_entries_removed"],  # type: ignore[arg-type]
        hours_examined=run.hours_examined,
        lookup_bytes_read=run.bytes_read,
        lookup_files_read=run.files_read,
        proof_checked_at=state.proof_checked_at,
        remaining=dict(state.remaining),
        error=state.error,
        warnings=list(run.warnings),
    )
