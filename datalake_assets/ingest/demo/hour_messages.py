"""The messages of one demo source hour: valid messages of the six types, built from the users'
templates with consistent timestamps (network delay, batching on the device, late events),
and malformed lines of each kind of ``MALFORMED_KINDS``."""

from __future__ import annotations

import random

import orjson

from datalake_assets.ingest.demo.json_parts import _frozen
from datalake_assets.ingest.demo.timestamps import _DAY_US, _F_MS_Z, _MIN_T, _SSMMM, _fmt, _min_t
from datalake_assets.ingest.demo.track_events import _TrackProperties
from datalake_assets.ingest.demo.traffic_mix import EVENTS, TYPE_WEIGHTS, _table
from datalake_assets.ingest.demo.users import _VISITS, _templates

_FRESH, _POOL_MIN, _POOL_MAX = 0.25, 64, 4096  # track properties: share built fresh, pool size
_SCREENS = [
    ("Home", "Main"),
    ("Product Detail", "Catalog"),
    ("Cart", "Checkout"),
    ("Search Results", "Catalog"),
    ("Settings", "Account"),
    ("Order History", "Account"),
    ("Onboarding Step 2", "Onboarding"),
]


class _Hour(_TrackProperties):
    """The message factory of one source hour (all randomness from one seeded ``Random``);
    the properties of track events come from ``_TrackProperties``."""

    def __init__(self, rng: random.Random, cat: dict, users: list[dict], late_rate: float) -> None:
        super().__init__(rng, cat)
        self.cat = cat
        self.groups = cat["groups"]
        self.users = users
        self.n_users = len(users)
        self.browser = [u for u in users if u["channel"] == "browser"]
        self.mobile = [u for u in users if u["channel"] == "mobile"]
        self.late_rate = late_rate
        self.event_table = _table(EVENTS)
        self.track_pool: list[tuple[str, object, dict | None]] = []  # (event, props, raw)
        self.type_table = _table(TYPE_WEIGHTS)

    def _templates(self, u: dict) -> dict:
        tpl = u["tpl"] = _templates(u, self.cat)
        return tpl

    # ---- messages
    def message(self, received_ms: int, mtype: str | None = None) -> dict:
        """A new valid message received at ``received_ms``; its nested objects may be shared
        with other messages, so callers must not modify them."""
        rnd = self.rnd
        if mtype is None:
            mtype = self.type_table[int(rnd() * 1000)]
        if mtype == "page":
            u = self.browser[int(rnd() * len(self.browser))]
        elif mtype == "screen":
            u = self.mobile[int(rnd() * len(self.mobile))]
        else:
            u = self.users[int(rnd() * self.n_users)]
        channel = u["channel"]
        tpl = u["tpl"] or self._templates(u)
        if mtype == "alias":
            msg = tpl["head_alias"].copy()
        elif tpl["head_null"] is not None and rnd() < 0.3:
            msg = tpl["head_null"].copy()
        else:
            msg = tpl["head"].copy()

        # device time, sending time and server time: network delay, then batching on the
        # device (mobile libraries batch up to ~30 s), or days offline for a late event
        rec_us = received_ms * 1000
        net_us = 20_000 + int(rnd() * 400_000)
        if rnd() < self.late_rate:
            queue_us = _DAY_US + 600_000_000 + int(rnd() * (4 * _DAY_US - 1_200_000_000))
        elif channel == "mobile":
            queue_us = int(rnd() * 30_000_000)
        else:
            queue_us = int(rnd() ** 3 * 2_000_000)
        skew = u["skew"]
        sent_us = rec_us - net_us + skew
        orig_us = sent_us - queue_us
        ts_us = rec_us - queue_us  # = receivedAt - (sentAt - originalTimestamp)
        fmt = u["fmt"]
        if fmt == _F_MS_Z:
            mt = _MIN_T
            m, r = divmod(orig_us, 60_000_000)
            msg["originalTimestamp"] = f"{mt.get(m) or _min_t(m)}{_SSMMM[r // 1000]}Z"
            m, r = divmod(sent_us, 60_000_000)
            msg["sentAt"] = f"{mt.get(m) or _min_t(m)}{_SSMMM[r // 1000]}Z"
            m, r = divmod(ts_us, 60_000_000)
            msg["timestamp"] = f"{mt.get(m) or _min_t(m)}{_SSMMM[r // 1000]}Z"
        else:
            off = u["offset"]
            msg["originalTimestamp"] = _fmt(orig_us, fmt, off)
            msg["sentAt"] = _fmt(sent_us, fmt, off)
            msg["timestamp"] = _fmt(ts_us, fmt, off)
        m, r = divmod(received_ms, 60_000)
        msg["receivedAt"] = f"{_MIN_T.get(m) or _min_t(m)}{_SSMMM[r]}Z"
        msg["messageId"] = u["new_id"](self.bits(128))
        msg["type"] = mtype

        page = None
        if channel == "browser":  # the page (and campaign) of one of the user's visits
            ctx, page = tpl["visits"][int(rnd() * _VISITS)]
            msg["context"] = ctx

        if mtype == "track":
            # Properties are built fresh for a quarter of the events and otherwise reused from
            # this hour's recent ones (with new order ids): realistic, and four times cheaper.
            pool = self.track_pool
            if rnd() < _FRESH or len(pool) < _POOL_MIN:
                event = self.event_table[int(rnd() * 1000)]
                raw = self.builders[event](u, ts_us)
                if raw.get("orderId") is None:
                    props = _frozen(raw)
                    entry = (event, props, None)
                else:  # reused with a new orderId
                    props = raw
                    entry = (event, None, raw)
                if len(pool) < _POOL_MAX:
                    pool.append(entry)
                else:
                    pool[int(rnd() * _POOL_MAX)] = entry
            else:
                event, props, raw = pool[int(rnd() * len(pool))]
                if raw is not None:
                    props = raw.copy()
                    props["orderId"] = self.order_id()
            msg["event"] = event
            msg["properties"] = props
        elif mtype == "page":
            name, category, _, props = page
            msg["name"] = name
            if category is not None:
                msg["category"] = category
            msg["properties"] = props
        elif mtype == "identify":
            msg["traits"] = tpl["traits"][int(rnd() * 2)]
        elif mtype == "screen":
            name, category = _SCREENS[int(rnd() * len(_SCREENS))]
            msg["name"] = name
            msg["properties"] = {
                "category": category,
                "loadTimeMs": self.count(80 + int(rnd() ** 2 * 2500)),
                "fromBackground": rnd() < 0.2,
            }
        elif mtype == "group":
            group_id, traits = self.groups[u["company"]]
            msg["groupId"] = group_id
            msg["traits"] = traits[rnd() < 0.1]  # employees sent as text 1 time in 10
        else:  # alias: the anonymous id becomes the user id
            msg["previousId"] = u["anon"]
        return msg

    def malformed(self, kind: str, received_ms: int) -> bytes:
        """One malformed line (without its newline) of ``kind``; see ``MALFORMED_REASONS``."""
        if kind == "truncated_json":
            raw = orjson.dumps(self.message(received_ms))
            return raw[: len(raw) // 4 + int(self.rnd() * (len(raw) // 2))]
        if kind == "json_array":  # a batch written as it was posted
            n = 1 + int(self.rnd() * 2)
            return orjson.dumps([self.message(received_ms) for _ in range(n)])
        if kind == "missing_event":
            msg = self.message(received_ms, "track")
            del msg["event"]
        else:
            msg = self.message(received_ms)
            if kind == "missing_type":
                del msg["type"]
            elif kind == "unknown_type":
                msg["type"] = "bogus"
            elif kind == "missing_message_id":
                del msg["messageId"]
            elif kind == "missing_user_ids":
                del msg["anonymousId"]
                msg.pop("userId", None)
            else:
                raise ValueError(f"unknown malformed kind {kind!r}")
        return orjson.dumps(msg)
