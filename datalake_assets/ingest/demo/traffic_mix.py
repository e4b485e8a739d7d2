"""What a demo archive's traffic is made of: the shares of the six types and of the twelve track
events, the kinds of malformed lines (with the quarantine reason a sync gives each), how a
share is drawn, and the summary that counts what was written."""

from __future__ import annotations

from dataclasses import dataclass, field

TYPE_WEIGHTS: dict[str, int] = {
    "track": 70,
    "page": 12,
    "identify": 7,
    "screen": 5,
    "group": 3,
    "alias": 3,
}

# Track event names and their relative weights.
EVENTS: dict[str, int] = {
    "Product Viewed": 22,
    "Product Added": 11,
    "Cart Viewed": 8,
    "Checkout Started": 6,
    "Order Completed": 5,
    "Signed In": 10,
    "Signed Up": 3,
    "Video Played": 10,
    "Search Performed": 11,
    "Coupon Applied": 4,
    "Subscription Renewed": 3,
    "Experiment Viewed": 7,
}

# Each malformed line is exactly one of these; the value is the quarantine reason a sync gives
# it (``spec/messages.py``).
MALFORMED_REASONS: dict[str, str] = {
    "truncated_json": "invalid_json",
    "json_array": "not_an_object",
    "missing_type": "missing_type",
    "unknown_type": "unknown_type",
    "missing_message_id": "missing_message_id",
    "missing_event": "missing_event",
    "missing_user_ids": "missing_user_id",
}
MALFORMED_KINDS: tuple[str, ...] = tuple(MALFORMED_REASONS)


@dataclass
class GenerateSummary:
    hours: list[str]  # str(ArchiveHour) of each hour written
    files: list[str]  # every file written (full paths, or URIs for a URI root)
    lines: int  # all lines written
    valid_messages: int  # distinct messageId among valid lines
    duplicate_lines: int  # extra deliveries of an already written valid messageId
    malformed_lines: int  # lines a sync must quarantine (one of MALFORMED_KINDS each)
    by_type: dict[str, int]  # unique valid messages per Segment type
    by_event: dict[str, int]  # unique valid track messages per event name
    bytes_uncompressed: int
    # malformed lines per quarantine reason (the values of MALFORMED_REASONS)
    malformed_by_reason: dict[str, int] = field(default_factory=dict)


def _table(weights: dict[str, int]) -> list[str]:
    """A lookup table of 1000 entries: ``table[int(random() * 1000)]`` draws by weight."""
    total = sum(weights.values())
    out: list[str] = []
    acc = 0
    for name, w in weights.items():
        acc += w
        out.extend([name] * (acc * 1000 // total - len(out)))
    return out
