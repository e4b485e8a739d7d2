"""The tracking plan of the sync benchmark's ``ours_plan`` contender (``bench_sync.py``): 20
track events x 15 properties, as a team's plan is, over the generated hour.

The generator's events are drafted as ``datalake plan infer`` drafts them (from the first
100,000 messages), five properties get a maximum that about 1 % of their events break, each
rule padded to 15 planned properties with the keywords plans use (``maxLength``,
``minimum``, ``enum``, ``pattern``, ``format``), and events the hour never sends fill the plan
to 20 rules."""

from __future__ import annotations

from datetime import datetime

from datalake_assets.lake.plan_infer import infer

EVENTS, PROPERTIES = 20, 15
# A team's limits that about 1 % of those events break (the 99th percentile of the generated
# hour's values, seed 7): the violating messages take the sync's Python path, as real traffic
# that breaks a plan does.
MAXIMUMS = {
    ("Cart Viewed", "value"): 1036,
    ("Checkout Started", "revenue"): 879,
    ("Order Completed", "total"): 1056,
    ("Search Performed", "resultsCount"): 237,
    ("Video Played", "position"): 457,
}
_PADDING = [
    {"type": "string", "maxLength": 64},
    {"type": "integer", "minimum": 0},
    {"enum": ["web", "ios", "android"]},
    {"type": "string", "pattern": "^[a-z0-9_-]+$"},
    {"type": "string", "format": "date-time"},
    {"type": "number", "minimum": 0, "maximum": 1e9},
    {"type": "boolean"},
]


def bench_plan(archive_root: str, source_id: str, hour: datetime) -> dict:
    draft = infer(archive_root, source_id, hour, days=0, max_messages=100_000).document
    tracks = [r for r in draft["rules"] if r["type"] == "TRACK"][:EVENTS]
    for rule in tracks:
        body = rule["jsonSchema"]["properties"]["properties"]
        props = body.setdefault("properties", {})
        for name, schema in props.items():  # the keywords a team adds to its draft
            if schema.get("type") == "string" and "format" not in schema:
                schema["maxLength"] = 200
            if schema.get("type") in ("number", "integer"):
                schema["minimum"] = 0
            if (rule["key"], name) in MAXIMUMS:
                schema["maximum"] = MAXIMUMS[(rule["key"], name)]
        for i in range(PROPERTIES - len(props)):
            props[f"planned_{i}"] = dict(_PADDING[i % len(_PADDING)])
    for i in range(EVENTS - len(tracks)):
        props = {f"p{j}": dict(_PADDING[j % len(_PADDING)]) for j in range(PROPERTIES)}
        tracks.append(
            {
                "key": f"Unsent Event {i}",
                "type": "TRACK",
                "version": 1,
                "jsonSchema": {
                    "properties": {
                        "properties": {"type": "object", "required": ["p0"], "properties": props}
                    }
                },
            }
        )
    others = [r for r in draft["rules"] if r["type"] != "TRACK"]
    return {"name": "bench (20 events x 15 properties)", "rules": tracks + others}
