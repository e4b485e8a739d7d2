"""A privacy request: who to forget, and how (``forget.py`` carries it out).

The shapes a request arrives in, all checked by ``request_from_dict``:

* a JSON object (a request file dropped under ``_privacy/requests/``, a Dagster run config,
  a program)::

      {"request_id": "ticket-4711",                    # optional: [A-Za-z0-9_-]{1,64}
       "identities": ["user_id=u123", "email=a@b.com",
                      {"kind": "anonymous_id", "value": "a-9"}],
       "follow_links": false, "sources": ["web"],      # optional; sources: [] = every source
       "erase": true, "suppress": true}                # optional

* a plain text file, one ``KIND=VALUE`` per line (blank lines and ``#`` comments skipped): a
  file of many ids (``load_request_file``).

Errors say where (``identities[2]``, ``line 7``) and what is wrong, never the value: a request
names a person, and error messages end up in logs, Dagster run records and tickets.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from datalake_assets.lake import storage
from datalake_assets.spec.identity import Identity, IdentityError, identity, parse_identity

REQUEST_ID_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")
MAX_IDENTITIES = 100_000  # a request file of many ids; more is a bulk job, not a request
MAX_REQUEST_BYTES = 64 << 20
MAX_KIND_CHARS = 128  # a trait name's limit in [privacy] identity_traits
_KEYS = ("request_id", "identities", "follow_links", "sources", "erase", "suppress", "received_at")


class RequestError(ValueError):
    """A request that cannot be carried out; the message never holds an identity value."""


@dataclass(frozen=True)
class ForgetRequest:
    """Forget ``identities``: erase their rows everywhere (``erase``) and drop their future
    events (``suppress``), in ``sources`` (``()``: every source), with the identities linked
    to them through ``identify``/``alias`` calls when ``follow_links``."""

    request_id: str
    identities: tuple[Identity, ...]
    follow_links: bool = False
    sources: tuple[str, ...] = ()
    erase: bool = True
    suppress: bool = True
    received_at: datetime = field(default_factory=lambda: datetime.now(UTC))

    def __post_init__(self) -> None:
        check_request_id(self.request_id)
        if not self.identities:
            raise RequestError("a request names at least one identity")
        if not (self.erase or self.suppress):
            raise RequestError(
                "a request that neither erases nor suppresses does nothing: set erase or suppress"
            )


def check_request_id(request_id: object) -> str:
    if not isinstance(request_id, str) or not REQUEST_ID_RE.fullmatch(request_id):
        # a request id is ours (a ticket number), not a person's: safe to show, but cut short
        shown = repr(request_id)[:80] if isinstance(request_id, str) else type(request_id).__name__
        raise RequestError(f"invalid request_id {shown}: 1-64 characters from [A-Za-z0-9_-]")
    return request_id


def new_request_id() -> str:
    return uuid.uuid4().hex


def _flag(d: dict, key: str, default: bool) -> bool:
    value = d.get(key, default)
    if not isinstance(value, bool):
        raise RequestError(f"{key} must be true or false, got {type(value).__name__}")
    return value


def parse_identity_text(text: str) -> Identity:
    """``parse_identity`` with a short kind: a 10 MB "kind" is refused like a 10 MB value."""
    kind = text.partition("=")[0]
    if len(kind) > MAX_KIND_CHARS:
        raise IdentityError(
            f"an identity kind is {len(kind)} characters; at most "
            f"{MAX_KIND_CHARS} (user_id, anonymous_id or a trait name)"
        )
    return parse_identity(text)


def _identity_of(item: Any, where: str) -> Identity:
    try:
        if isinstance(item, str):
            return parse_identity_text(item)
        if isinstance(item, dict):
            extra = sorted(set(item) - {"kind", "value"})
            if extra or "kind" not in item or "value" not in item:
                raise IdentityError(
                    'expected {"kind": ..., "value": ...}'
                    + (f" (unknown keys {extra[:5]})" if extra else "")
                )
            if not isinstance(item["kind"], str) or len(item["kind"]) > MAX_KIND_CHARS:
                raise IdentityError("kind must be a short text such as user_id or email")
            return identity(item["kind"], item["value"])
        raise IdentityError(f'expected "KIND=VALUE" or an object, got {type(item).__name__}')
    except IdentityError as e:
        raise IdentityError(f"{where}: {e}") from None


def _unique(idents: list[Identity]) -> tuple[Identity, ...]:
    return tuple(sorted(set(idents)))


def request_from_dict(d: dict, default_request_id: str | None = None) -> ForgetRequest:
    """The request of a request file's or a Dagster config's object (see the module doc).
    Raises ``RequestError`` or ``IdentityError`` (a ``ValueError`` either way)."""
    if not isinstance(d, dict):
        raise RequestError(f"a request is an object, got {type(d).__name__}")
    unknown = sorted(k for k in d if k not in _KEYS)
    if unknown:
        shown = [k[:40] if isinstance(k, str) else type(k).__name__ for k in unknown[:5]]
        raise RequestError(f"unknown request keys {shown}; allowed: {', '.join(_KEYS)}")
    items = d.get("identities")
    if not isinstance(items, list) or not items:
        raise RequestError(
            'identities must be a non-empty list of "KIND=VALUE" texts or {"kind", "value"} objects'
        )
    if len(items) > MAX_IDENTITIES:
        raise RequestError(f"{len(items)} identities in one request; at most {MAX_IDENTITIES}")
    idents = [_identity_of(item, f"identities[{i}]") for i, item in enumerate(items)]
    sources = d.get("sources", [])
    if not isinstance(sources, list) or not all(isinstance(s, str) and s for s in sources):
        raise RequestError("sources must be a list of source ids (empty: every source)")
    request_id = d.get("request_id") or default_request_id or new_request_id()
    received = d.get("received_at")
    kw: dict[str, Any] = {}
    if received is not None:
        try:
            ts = datetime.fromisoformat(str(received).replace("Z", "+00:00"))
        except ValueError:
            raise RequestError("received_at must be an ISO-8601 time") from None
        kw["received_at"] = ts if ts.tzinfo else ts.replace(tzinfo=UTC)
    return ForgetRequest(
        request_id=check_request_id(request_id),
        identities=_unique(idents),
        follow_links=_flag(d, "follow_links", False),
        sources=tuple(dict.fromkeys(sources)),
        erase=_flag(d, "erase", True),
        suppress=_flag(d, "suppress", True),
        **kw,
    )


def identities_from_text(text: str) -> tuple[Identity, ...]:
    """``KIND=VALUE`` per line; blank lines and ``#`` comments skipped."""
    out: list[Identity] = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.rstrip("\r")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if len(out) >= MAX_IDENTITIES:
            raise RequestError(f"more than {MAX_IDENTITIES} identities in one request")
        try:
            out.append(parse_identity_text(line))
        except IdentityError as e:
            raise IdentityError(f"line {n}: {e}") from None
    if not out:
        raise RequestError("the file names no identity (one KIND=VALUE per line)")
    return _unique(out)


def _stem_id(location: str) -> str | None:
    """A request file's name without its extension, when it is a valid request id: a file
    read again after a crash gets the same request id, so the re-run converges."""
    stem = location.rstrip("/").rsplit("/", 1)[-1].split(".", 1)[0]
    return stem if REQUEST_ID_RE.fullmatch(stem) else None


def load_request_file(location: str) -> ForgetRequest:
    """A request file (local path or URI): a JSON object (``request_from_dict``) or plain
    text, one ``KIND=VALUE`` per line. Without a ``request_id`` the file's name is the id (if
    it is a valid one), else a new random id."""
    data = storage.read_bytes(location)
    if len(data) > MAX_REQUEST_BYTES:
        raise RequestError(f"the request file is {len(data)} bytes; at most {MAX_REQUEST_BYTES}")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise RequestError("the request file is not UTF-8 text") from None
    if text.lstrip().startswith("{"):
        try:
            body = orjson.loads(text)
        except orjson.JSONDecodeError as e:  # the position only: the text may hold values
            raise RequestError(
                f"the request file is not valid JSON (at character {e.pos})"
            ) from None
        return request_from_dict(body, _stem_id(location))
    return ForgetRequest(
        request_id=_stem_id(location) or new_request_id(), identities=identities_from_text(text)
    )


def request_from_options(
    *,
    user_ids: Sequence[str] = (),
    anonymous_ids: Sequence[str] = (),
    traits: Sequence[str] = (),
    file: str | None = None,
    request_id: str | None = None,
    follow_links: bool = False,
    sources: Sequence[str] = (),
    erase: bool = True,
    suppress: bool = True,
) -> ForgetRequest:
    """The request of ``datalake forget``'s options: ids, ``NAME=VALUE`` traits and a request
    file's identities together (the file's request id unless one is given)."""
    idents = (
        [identity("user_id", v) for v in user_ids]
        + [identity("anonymous_id", v) for v in anonymous_ids]
        + [parse_identity_text(t) for t in traits]
    )
    from_file = load_request_file(file) if file else None
    if from_file is not None:
        idents += from_file.identities
    if not idents:
        raise RequestError("name someone: --user-id, --anonymous-id, --trait NAME=VALUE or --file")
    rid = request_id or (from_file.request_id if from_file else "") or new_request_id()
    return ForgetRequest(
        request_id=check_request_id(rid),
        identities=_unique(idents),
        follow_links=follow_links,
        sources=tuple(dict.fromkeys(sources)),
        erase=erase,
        suppress=suppress,
    )
