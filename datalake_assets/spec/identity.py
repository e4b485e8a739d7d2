"""Who a message is about: the identities a privacy request names, the identity index records
and suppression matches. Pure: no I/O, no Spark.

An identity is ``(kind, value)``:

* kind ``id``: a ``userId``, an ``anonymousId``, or an ``alias`` call's ``previousId``. They
  share one namespace because ``previousId`` is either of the other two (Segment: "the
  previous unique identifier"), so forgetting ``userId`` X also forgets an ``anonymousId`` X.
  Numbers are ids too (Segment coerces them to strings): ``42`` and ``"42"`` are one id.
* kind ``trait:<name>``: a trait the settings list (``[privacy] identity_traits``, default
  ``email``), from an ``identify`` call's ``traits`` or any message's ``context.traits``.
  Trait values are compared trimmed and case-folded (``A@B.com`` is ``a@b.com``).

**Links** (``links_of``): the identities of one ``identify`` or ``alias`` message belong to one
person (that is what those calls are for: Segment's identity resolution joins on them). Other
messages link nothing, even when they carry a userId and an anonymousId: a shared device's
anonymousId would otherwise chain strangers together. A request that follows links starts from
its identities and adds every identity linked to one of them, again and again, up to
``[privacy] link_depth`` steps (default 2).

The lake never stores an identity in clear outside the data itself: the identity index, the
suppression list and the audit table hold ``identity_hash`` (HMAC-SHA256 under the lake's own
key, truncated to 128 bits), so an audit row cannot be reversed by hashing a list of emails.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from dataclasses import dataclass

ID = "id"
TRAIT_PREFIX = "trait:"
DEFAULT_IDENTITY_TRAITS = ("email",)
DEFAULT_LINK_DEPTH = 2
MAX_IDENTITY_CHARS = 4096  # longer values are refused, never truncated (a 10 MB "email" is a bug)
LINKING_TYPES = ("identify", "alias")
# Spellings a person (CLI, request file, Dagster config) may use for the ``id`` kind.
ID_SPELLINGS = ("user_id", "userId", "anonymous_id", "anonymousId", "previous_id", "id")
_SUSPECT_FLOAT = 2.0**63


class IdentityError(ValueError):
    """An identity a request cannot use; the message never contains the value."""


@dataclass(frozen=True, order=True)
class Identity:
    kind: str  # ``id`` or ``trait:<name>``
    value: str  # normalized (``normalize``)

    def __repr__(self) -> str:  # never the value: identities end up in logs and errors
        return f"Identity({self.kind}, <{len(self.value)} chars>)"


def trait_kind(name: str) -> str:
    return f"{TRAIT_PREFIX}{name}"


def normalize(kind: str, value: object) -> str | None:
    """The comparable text of a value of ``kind``, or None when the value names nobody
    (missing, empty, a bool, an object, an imprecise number)."""
    if type(value) is str:
        text = value
    elif type(value) is int or (
        type(value) is float and value.is_integer() and abs(value) < _SUSPECT_FLOAT
    ):
        text = str(int(value))
    elif type(value) is float:
        if value.is_integer():  # an integer this big was rounded: it may be another's id
            return None
        text = repr(value)
    else:
        return None
    if kind != ID:
        text = text.strip().casefold()
    return text or None


def identity(kind: str, value: object) -> Identity:
    """A requested identity, checked: raises ``IdentityError`` for an unknown kind, a value
    that is not text, empty, or longer than ``MAX_IDENTITY_CHARS``."""
    if kind in ID_SPELLINGS:
        kind = ID
    elif not kind.startswith(TRAIT_PREFIX):
        kind = trait_kind(kind)
    name = kind[len(TRAIT_PREFIX) :] if kind != ID else ID
    if not name or not name.replace("_", "").isalnum():
        raise IdentityError(
            f"unknown identity kind (trait name {len(name)} chars): use "
            "user_id, anonymous_id or a trait name such as email"
        )
    if not isinstance(value, (str, int)) or isinstance(value, bool):
        raise IdentityError(f"an identity value must be text, got {type(value).__name__}")
    if isinstance(value, str) and len(value) > MAX_IDENTITY_CHARS:
        raise IdentityError(
            f"an identity value is {len(value)} characters; at most "
            f"{MAX_IDENTITY_CHARS} are accepted"
        )
    text = normalize(kind, value)
    if text is None:
        raise IdentityError("an identity value is empty")
    return Identity(kind, text)


def parse_identity(text: str) -> Identity:
    """``user_id=X``, ``anonymous_id=X``, ``email=X`` or ``trait:<name>=X`` (CLI and request
    files). The value is everything after the first ``=``, quotes and all."""
    kind, sep, value = text.partition("=")
    if not sep:
        raise IdentityError("expected KIND=VALUE, e.g. user_id=u123 or email=a@b.com")
    return identity(kind.strip(), value)


def identities_of(message: dict, traits: Iterable[str] = DEFAULT_IDENTITY_TRAITS) -> set[Identity]:
    """Every identity a decoded message carries."""
    out: set[Identity] = set()
    for field in ("userId", "anonymousId", "previousId"):
        text = normalize(ID, message.get(field))
        if text is not None and len(text) <= MAX_IDENTITY_CHARS:
            out.add(Identity(ID, text))
    holders = []
    if message.get("type") == "identify" and type(message.get("traits")) is dict:
        holders.append(message["traits"])
    context = message.get("context")
    if type(context) is dict and type(context.get("traits")) is dict:
        holders.append(context["traits"])
    for holder in holders:
        for name in traits:
            text = normalize(TRAIT_PREFIX, holder.get(name))
            if text is not None and len(text) <= MAX_IDENTITY_CHARS:
                out.add(Identity(trait_kind(name), text))
    return out


_ID_FIELDS = ("userId", "anonymousId", "previousId")


def _value_hash(key: bytes, kind: str, value: object) -> str:
    """The hash of one raw value of ``kind`` as ``identities_of`` would take it, ``""`` when
    it names nobody."""
    text = normalize(kind, value)
    if text is None or len(text) > MAX_IDENTITY_CHARS:
        return ""
    return identity_hash(key, Identity(kind, text))


def identity_hashes(
    message: dict, traits: tuple[str, ...], key: bytes, cache: dict[object, str]
) -> set[str]:
    """``{identity_hash(key, i) for i in identities_of(message, traits)}``, for hot paths
    (the sync's stage A, the collector): ``cache`` (the caller's, one per key; a plain dict
    the caller bounds) maps each raw text value already seen to its hash, so a value is
    normalized and hashed once, and no ``Identity`` is built for it again."""
    out: set[str] = set()
    for field in _ID_FIELDS:
        v = message.get(field)
        if v is None:
            continue
        if type(v) is str:
            h = cache.get(v)
            if h is None:
                h = cache[v] = _value_hash(key, ID, v)
        else:
            h = _value_hash(key, ID, v)
        if h:
            out.add(h)
    if not traits:
        return out
    context = message.get("context")
    for holder in (
        message.get("traits") if message.get("type") == "identify" else None,
        context.get("traits") if type(context) is dict else None,
    ):
        if type(holder) is not dict:
            continue
        for name in traits:
            v = holder.get(name)
            if v is None:
                continue
            if type(v) is str:
                ck = (name, v)  # a tuple: never equal to an id's plain text key
                h = cache.get(ck)
                if h is None:
                    h = cache[ck] = _value_hash(key, trait_kind(name), v)
            else:
                h = _value_hash(key, trait_kind(name), v)
            if h:
                out.add(h)
    return out


def links_of(message: dict, identities: set[Identity]) -> set[tuple[Identity, Identity]]:
    """The pairs of ``identities`` (of ``message``) that one person's message links: every
    pair of an ``identify`` or ``alias`` call, none of other calls. Each pair once, ordered."""
    if message.get("type") not in LINKING_TYPES or len(identities) < 2:
        return set()
    ordered = sorted(identities)
    return {(a, b) for i, a in enumerate(ordered) for b in ordered[i + 1 :]}


def identity_hash(key: bytes, ident: Identity) -> str:
    """The identity's keyed hash (32 hex characters): what the lake stores instead of it."""
    data = f"{ident.kind}\x00{ident.value}".encode("utf-8", "surrogatepass")
    return hmac.new(key, data, hashlib.sha256).hexdigest()[:32]
