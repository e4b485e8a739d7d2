"""Hand-made traffic over three days for the models' tests, and the models computed from it
independently (pandas, straight from the messages: no lake, no SQL), to compare row by row."""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta

import pandas as pd

D0, D1, D2, D3 = "2026-11-20", "2026-11-21", "2026-11-22", "2026-11-23"
GAP = timedelta(minutes=30)
LATE = timedelta(hours=3)


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def at(day: str, hhmmss: str) -> datetime:
    return datetime.strptime(f"{day} {hhmmss}", "%Y-%m-%d %H:%M:%S")


class Traffic:
    def __init__(self) -> None:
        self.messages: list[dict] = []

    def add(
        self,
        type_: str,
        ts: datetime,
        *,
        anon: str | None = None,
        user: str | None = None,
        received: datetime | None = None,
        **fields,
    ) -> dict:
        received = received or ts
        m = {
            "type": type_,
            "messageId": f"m{len(self.messages):04d}",
            "timestamp": _iso(ts),
            "receivedAt": _iso(received),
            **fields,
        }
        if anon:
            m["anonymousId"] = anon
        if user:
            m["userId"] = user
        if type_ == "track":
            m.setdefault("event", "Clicked")
        self.messages.append(m)
        return m

    def by_hour(self) -> dict[str, list[dict]]:
        out: dict[str, list[dict]] = {}
        for m in self.messages:
            out.setdefault(m["receivedAt"][:13], []).append(m)
        return out


def traffic() -> Traffic:
    """Every case the issue names: a gap of exactly 30 minutes (same session) and of 30 min
    1 s (a new one), a session across midnight (twice: one day builds, then the next), late
    events within and beyond the 3 h lookback (one across midnight), several anonymous ids of
    one user, an alias, a user without anonymous id, traits that change."""
    t = Traffic()
    page = {
        "context": {
            "page": {
                "url": "https://shop.example/",
                "path": "/",
                "referrer": "https://www.google.com/",
            },
            "campaign": {"source": "newsletter", "medium": "email", "name": "winter"},
        }
    }
    t.add("page", at(D0, "10:00:00"), anon="a1", user="u1", name="Home", **page)
    t.add("track", at(D0, "10:30:00"), anon="a1", user="u1")  # exactly 30 min
    t.add("track", at(D0, "11:00:01"), anon="a1", user="u1")  # 30 min 1 s: new
    t.add(
        "identify",
        at(D0, "10:05:00"),
        anon="a1",
        user="u1",
        traits={"email": "u1@example.com", "plan": "free"},
    )
    t.add("identify", at(D1, "09:00:00"), anon="a1", user="u1", traits={"plan": "pro"})
    # across midnight D0 -> D1 (built in one range) and D1 -> D2 (D2 built later)
    t.add("track", at(D0, "23:50:00"), anon="a2")
    t.add("page", at(D1, "00:10:00"), anon="a2", name="Cart")
    t.add("track", at(D1, "23:45:00"), anon="a3")
    t.add("track", at(D2, "00:05:00"), anon="a3")
    # late within the lookback (2 h 20 min): joins the 12:00 session
    t.add("page", at(D1, "12:00:00"), anon="a4")
    t.add("track", at(D1, "12:10:00"), anon="a4", received=at(D1, "14:30:00"))
    # late beyond it (4 h 55 min): placed at its receipt, a session of its own
    t.add("page", at(D1, "08:00:00"), anon="a5")
    t.add("track", at(D1, "08:05:00"), anon="a5", received=at(D1, "13:00:00"))
    # late within the lookback across midnight: received on D2, belongs to D1's session
    t.add("page", at(D1, "23:30:00"), anon="a6")
    t.add("track", at(D1, "23:40:00"), anon="a6", received=at(D2, "01:00:00"))
    # one user, three anonymous ids (identify, a page carrying both)
    t.add("identify", at(D0, "14:00:00"), anon="b1", user="u2", traits={"email": "u2@example.com"})
    t.add("page", at(D0, "14:01:00"), anon="b1")
    t.add("identify", at(D1, "15:00:00"), anon="b2", user="u2")
    t.add("track", at(D1, "15:10:00"), anon="b2", user="u2")
    t.add("page", at(D2, "09:00:00"), anon="b3", user="u2")
    # alias: the anonymous id becomes a user id
    t.add("page", at(D1, "16:00:00"), anon="c1")
    t.add("alias", at(D1, "16:05:00"), user="u3", previousId="c1")
    t.add("track", at(D1, "16:06:00"), anon="c1", user="u3", event="Signed Up")
    # a server-side user without anonymous id
    t.add("track", at(D2, "10:00:00"), user="u4", event="Invoice Paid")
    t.add("track", at(D2, "10:45:00"), user="u4", event="Invoice Paid")
    # the person the erasure test forgets: on D2 and D3 only, so the models are rebuilt for
    # those days alone (which rewrites D1's sessions too: a3's and a6's must come out as they
    # were); D3 is theirs alone, so its partitions must go, not keep the person's rows
    t.add("identify", at(D2, "12:00:00"), anon="e1", user="u9", traits={"email": "u9@example.com"})
    t.add("page", at(D2, "12:01:00"), anon="e1", user="u9", **page)
    t.add("track", at(D2, "12:02:00"), anon="e2", user="u9")
    t.add("page", at(D3, "09:00:00"), anon="e1", user="u9", **page)
    t.add("track", at(D3, "09:05:00"), anon="e1", user="u9", event="Order Completed")
    t.add("screen", at(D2, "11:00:00"), anon="d1", name="Settings")
    t.add("group", at(D2, "11:01:00"), anon="d1", user="u5", groupId="g1")
    return t


# --------------------------------------------------------------------------- the oracle


def frame(messages: list[dict]) -> pd.DataFrame:
    rows = []
    for m in messages:
        ctx = m.get("context", {})
        rows.append(
            {
                "message_id": m["messageId"],
                "type": m["type"],
                "event": m.get("event"),
                "anonymous_id": m.get("anonymousId"),
                "user_id": m.get("userId"),
                "previous_id": m.get("previousId"),
                "ts": pd.Timestamp(m["timestamp"]).tz_localize(None),
                "received_at": pd.Timestamp(m["receivedAt"]).tz_localize(None),
                "page_url": ctx.get("page", {}).get("url"),
                "page_path": ctx.get("page", {}).get("path"),
                "referrer": ctx.get("page", {}).get("referrer"),
                "utm_source": ctx.get("campaign", {}).get("source"),
                "utm_medium": ctx.get("campaign", {}).get("medium"),
                "utm_campaign": ctx.get("campaign", {}).get("name"),
                "traits": m.get("traits", {}),
            }
        )
    df = pd.DataFrame(rows)
    df["day"] = df["received_at"].dt.strftime("%Y-%m-%d")
    return df


def daily_event_counts(df: pd.DataFrame) -> pd.DataFrame:
    df = df.assign(event_name=[e if t == "track" else t for t, e in zip(df.type, df.event)])
    out = (
        df.groupby(["day", "type", "event_name"])
        .agg(
            events=("message_id", "size"),
            distinct_users=("user_id", "nunique"),
            distinct_anonymous_ids=("anonymous_id", "nunique"),
        )
        .reset_index()
    )
    return out.sort_values(["day", "type", "event_name"]).reset_index(drop=True)


def sessions(df: pd.DataFrame) -> pd.DataFrame:
    ev = df[df.type.isin(["page", "screen", "track"])].copy()
    ev["visitor"] = [a if a else f"user:{u}" for a, u in zip(ev.anonymous_id, ev.user_id)]
    ev["placed_at"] = [t if abs(r - t) <= LATE else r for t, r in zip(ev.ts, ev.received_at)]
    out = []
    for visitor, g in ev.sort_values(["placed_at", "message_id"]).groupby("visitor", sort=True):
        current: list = []
        for row in g.itertuples():
            if current and row.placed_at - current[-1].placed_at > GAP:
                out.append(_session(visitor, current))
                current = []
            current.append(row)
        out.append(_session(visitor, current))
    return pd.DataFrame(out).sort_values("session_id").reset_index(drop=True)


def _first(rows, name):
    return next((getattr(r, name) for r in rows if getattr(r, name) is not None), None)


def _session(visitor: str, rows: list) -> dict:
    start, end = rows[0].placed_at, rows[-1].placed_at
    micros = int((start - pd.Timestamp("1970-01-01")) / pd.Timedelta(microseconds=1))
    return {
        "session_id": hashlib.md5(f"{visitor}|{micros}".encode()).hexdigest(),
        "visitor": visitor,
        "started_at": start,
        "ended_at": end,
        "duration_seconds": (end - start).total_seconds(),
        "event_count": len(rows),
        "page_views": sum(r.type == "page" for r in rows),
        "user_id": max((r.user_id for r in rows if r.user_id), default=None),
        "first_page_url": _first(rows, "page_url"),
        "first_referrer": _first(rows, "referrer"),
        "first_utm_source": _first(rows, "utm_source"),
        "session_day": start.strftime("%Y-%m-%d"),
    }


def identity_graph(df: pd.DataFrame) -> pd.DataFrame:
    both = df[df.anonymous_id.notna() & df.user_id.notna()]
    links = [
        (a, u, t, ty) for a, u, t, ty in zip(both.anonymous_id, both.user_id, both.ts, both.type)
    ]
    al = df[(df.type == "alias") & df.previous_id.notna()]
    links += [
        (p, u, t, "alias_previous_id")
        for p, u, t in zip(al.previous_id, al.user_id, al.ts)
        if p != u
    ]
    g = pd.DataFrame(links, columns=["anonymous_id", "user_id", "t", "via"])
    out = (
        g.groupby(["anonymous_id", "user_id"])
        .agg(
            first_seen_at=("t", "min"),
            last_seen_at=("t", "max"),
            messages=("t", "size"),
            seen_in=("via", lambda v: ",".join(sorted(set(v)))),
        )
        .reset_index()
    )
    return out.sort_values(["anonymous_id", "user_id"]).reset_index(drop=True)


def users(df: pd.DataFrame) -> pd.DataFrame:
    known = df[df.user_id.notna()]
    graph = identity_graph(df)
    rows = []
    for user, g in known.groupby("user_id"):
        row = {
            "user_id": user,
            "first_seen_at": g.ts.min(),
            "last_seen_at": g.ts.max(),
            "messages": len(g),
            "anonymous_ids": int((graph.user_id == user).sum()),
        }
        for m in g[g.type == "identify"].sort_values(["ts", "message_id"]).itertuples():
            for k, v in m.traits.items():
                row[f"traits_{k}"] = v  # later identifies overwrite: the latest value
        rows.append(row)
    return pd.DataFrame(rows).sort_values("user_id").reset_index(drop=True)


def same(actual: pd.DataFrame, expected: pd.DataFrame, keys: list[str]) -> None:
    """``actual`` holds exactly ``expected``'s rows (its columns; order and dtypes aside)."""
    columns = list(expected.columns)
    a, e = (f[columns].sort_values(keys).reset_index(drop=True) for f in (actual, expected))
    a, e = (f.astype(object).where(f.notna(), None) for f in (a, e))  # None and NaN alike
    pd.testing.assert_frame_equal(a, e, check_dtype=False)


def synced(spark, settings) -> Traffic:
    """The traffic written into the settings' archive for its first source and synced in one
    batch (a replay of every hour); every message is in the lake."""
    from datalake_assets.transform.sync import run_sync
    from datalake_assets.transform.sync_request import request_from_settings
    from datalake_assets_tests.support.archive_builders import write_hour

    source = settings.sources[0]
    t = traffic()
    hours = t.by_hour()
    for hour, lines in hours.items():
        write_hour(settings.archive_root, source.id, hour, lines)
    report = run_sync(spark, request_from_settings(settings, source, sorted(hours), replay=True))
    assert report.source.messages_written == len(t.messages), report.source
    return t
