"""Deterministic, realistic and deliberately messy Segment traffic, written as a raw archive.

Layout (the input the lake's syncs read; see ``spec/layout.py``), one folder per source and
*received* hour (UTC)::

    <archive_root>/<source_id>/day=YYYY-MM-DD/hr=HH/part-0000.jsonl.gz
                                                    part-0001.jsonl.gz   (files_per_hour files)

Each file holds one JSON message per line, ``\\n``-terminated, gzip level 1 (or plain
``part-NNNN.jsonl`` with ``compress=False``). A file is written under a temporary dot-name
(``.part-0000.jsonl.gz.tmp``) in the same folder and renamed when complete, so readers, which
ignore dot-files, never see half a file. ``archive_root`` is a local path or any URI pyarrow
understands (``s3://bucket/prefix``, ``abfss://``, ``az://``; on S3 and blob-only Azure the
rename is a copy and a delete).

What one hour holds (``events_per_hour`` lines, exactly):

* Traffic of a web shop with a mobile app and a back end: a pool of recurring users (one per
  100 lines of an hour, 300 to 20,000; the same ``anonymousId``/``userId`` in every hour of one
  source, seed and ``events_per_hour``), each with one channel
  (``browser`` ~55 %, ``mobile`` ~35 %, ``server`` ~10 %) and its own ``context`` (``ip``,
  ``library``, ``userAgent``, ``locale``, ``timezone``; browsers add ``page`` and, half the time,
  ``campaign``; mobile adds ``device``, ``os``, ``app``, ``screen``, ``network``).
* All six types, about track 70 %, page 12 %, identify 7 %, screen 5 %, group 3 %, alias 3 %;
  pages come from browsers, screens from mobile. Twelve track events (``EVENTS``), each with
  its own properties: nested objects, arrays of objects and of strings, camelCase keys, keys
  with spaces, dots and ``%``, integers, floats, booleans, ``null``s, non-ASCII text, dates in
  several formats, and numbers sent as strings for about 10 % of the values of numeric
  properties (``"revenue": "29.99"``). For speed, a quarter of the track events get freshly
  drawn properties and the others reuse those of a recent event of the hour (with a new
  ``orderId`` where there is one), so identical property sets recur, as in real traffic.
* Common fields on every valid message: ``type``, ``messageId`` (uuid-like, random from the
  seeded generator: unique across hours, sources and seeds), ``anonymousId`` (always), ``userId`` (~60 %; anonymous browser messages
  sometimes carry ``"userId": null``), ``receivedAt`` (``YYYY-MM-DDTHH:MM:SS.mmmZ``, inside the
  hour of the folder), ``sentAt``, ``originalTimestamp``, ``timestamp`` (consistent:
  ``timestamp = receivedAt - (sentAt - originalTimestamp)``, device clocks are sometimes
  skewed), ``context``, ``integrations``, ``channel``, ``version`` (mostly 2, sometimes 1).
* Timestamps other than ``receivedAt`` in five formats (``TIMESTAMP_FORMATS``):
  ``...00.123Z``, ``...+02:00`` local time with offset, ``...00Z``, ``...00.123456Z`` and
  ``2026-11-21 10:00:00`` (no zone, meaning UTC).
* ``late_rate`` of the messages happened 1-5 days before they were received.
* ``duplicate_rate`` of the valid messages are delivered again later in the same hour
  (possibly in another file of the hour; rarely a third time): the identical body except a
  later ``receivedAt``.
* ``malformed_rate`` of the lines are defective, each exactly one of ``MALFORMED_KINDS``
  (truncated JSON, an array, no ``type``, ``type`` "bogus", no ``messageId``, a track without
  ``event``, neither ``userId`` nor ``anonymousId``); no valid line has any of these defects.

The summary (``GenerateSummary``) counts exactly what was written:
``lines == valid_messages + duplicate_lines + malformed_lines``.

Same arguments, same bytes: every hour draws from a ``random.Random`` seeded with
``(seed, source_id, hour)`` and the user pool from ``(seed, source_id)``; nothing reads the
clock or the OS's randomness, and an hour's bytes do not depend on the other hours of the
call. Files hold consecutive slices of the hour's received time, ``part-0000`` first.

Speed: an hour is streamed (1 MiB chunks; only pending re-deliveries are kept), messages are
built from per-user templates whose shared parts are pre-serialized (``orjson.Fragment``),
and one writer thread compresses and writes while the next lines are generated (zlib
releases the GIL), so a second core takes the gzip work. On a shared 2-vCPU AMD EPYC VM a
line (~1.1 KB) costs about 20-30 µs of CPU to generate and 12-18 µs to gzip: 2,000,000 lines
in 20 files took 53-75 s (27,000-38,000 lines/s, depending on the host's load), 21,000-27,000
lines per CPU-second.
"""

from __future__ import annotations

import os
import random
import zlib
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import date

import orjson

from datalake_assets.lake import storage
from datalake_assets.spec.azure_uri import is_azure
from datalake_assets.spec.layout import ArchiveHour, archive_hour_dir, join

__all__ = [
    "EVENTS",
    "MALFORMED_KINDS",
    "MALFORMED_REASONS",
    "TIMESTAMP_FORMATS",
    "TYPE_WEIGHTS",
    "GenerateSummary",
    "generate_archive",
]

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

TIMESTAMP_FORMATS: tuple[str, ...] = (
    "2026-11-21T10:00:00.123Z",
    "2026-11-21T12:00:00.123+02:00",
    "2026-11-21T10:00:00Z",
    "2026-11-21T10:00:00.123456Z",
    "2026-11-21 10:00:00",
)
_F_MS_Z, _F_OFFSET, _F_SEC_Z, _F_US_Z, _F_NAIVE = range(5)

_HOUR_MS = 3_600_000
_CREATED_BASE_US = 1_767_225_600_000_000  # 2026-01-01: users signed up up to 900 days before
_DAY_US = 86_400_000_000
# recurring users per source: one per 100 lines of an hour, within these bounds
_USERS_MIN, _USERS_MAX = 300, 20_000
_VISITS = 4  # page contexts (page and campaign) per browser user
_FRESH, _POOL_MIN, _POOL_MAX = 0.25, 64, 4096  # track properties: share built fresh, pool size


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


# --------------------------------------------------------------------------------------------
# time formatting, from integer microseconds (or milliseconds) since the epoch, UTC. Hot path:
# the "YYYY-MM-DDTHH:MM:" prefix of each minute and the "SS.mmm" text of each millisecond of a
# minute are looked up, not formatted.

_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_SS = [f"{s:02d}" for s in range(60)]
_SSMMM: list[str] = []  # filled on first use by _tables()
_MIN_T: dict[int, str] = {}  # minute since the epoch -> "YYYY-MM-DDTHH:MM:"
_MIN_SP: dict[int, str] = {}  # minute since the epoch -> "YYYY-MM-DD HH:MM:"
_MIN_CACHE_MAX = 500_000


def _tables() -> None:
    if not _SSMMM:
        _SSMMM.extend([f"{s:02d}.{m:03d}" for s in range(60) for m in range(1000)])


def _min_t(minute: int) -> str:
    if len(_MIN_T) >= _MIN_CACHE_MAX:
        _MIN_T.clear()
    days, m = divmod(minute, 1440)
    s = _MIN_T[minute] = (
        f"{date.fromordinal(_EPOCH_ORDINAL + days).isoformat()}T{m // 60:02d}:{m % 60:02d}:"
    )
    return s


def _min_sp(minute: int) -> str:
    if len(_MIN_SP) >= _MIN_CACHE_MAX:
        _MIN_SP.clear()
    s = _MIN_SP[minute] = (_MIN_T.get(minute) or _min_t(minute)).replace("T", " ")
    return s


def _ms_z(ms: int) -> str:
    """``YYYY-MM-DDTHH:MM:SS.mmmZ``: the strict form used for ``receivedAt``."""
    m, r = divmod(ms, 60_000)
    return f"{_MIN_T.get(m) or _min_t(m)}{_SSMMM[r]}Z"


def _offset_suffix(offset_min: int) -> str:
    s = _SUFFIX.get(offset_min)
    if s is None:
        oh, om = divmod(abs(offset_min), 60)
        s = _SUFFIX[offset_min] = f"{'-' if offset_min < 0 else '+'}{oh:02d}:{om:02d}"
    return s


_SUFFIX: dict[int, str] = {}


def _fmt(us: int, kind: int, offset_min: int) -> str:
    """``us`` in one of the five ``TIMESTAMP_FORMATS`` (``kind``); ``offset_min`` is used by the
    local-time-with-offset form."""
    if kind == _F_OFFSET:
        us += offset_min * 60_000_000
    m, r = divmod(us, 60_000_000)
    if kind == _F_NAIVE:
        return f"{_MIN_SP.get(m) or _min_sp(m)}{_SS[r // 1_000_000]}"
    p = _MIN_T.get(m) or _min_t(m)
    if kind == _F_MS_Z:
        return f"{p}{_SSMMM[r // 1000]}Z"
    if kind == _F_OFFSET:
        return f"{p}{_SSMMM[r // 1000]}{_offset_suffix(offset_min)}"
    if kind == _F_SEC_Z:
        return f"{p}{_SS[r // 1_000_000]}Z"
    return f"{p}{_SSMMM[r // 1000]}{r % 1000:03d}Z"  # _F_US_Z


# Most libraries send the millisecond form; the others are the minority (percent, cumulative).
_FORMAT_TABLE = [_F_MS_Z] * 70 + [_F_OFFSET] * 10 + [_F_SEC_Z] * 8 + [_F_US_Z] * 8 + [_F_NAIVE] * 4


def _pick_format(r: float) -> int:
    return _FORMAT_TABLE[int(r * 100)]


def _table(weights: dict[str, int]) -> list[str]:
    """A lookup table of 1000 entries: ``table[int(random() * 1000)]`` draws by weight."""
    total = sum(weights.values())
    out: list[str] = []
    acc = 0
    for name, w in weights.items():
        acc += w
        out.extend([name] * (acc * 1000 // total - len(out)))
    return out


# --------------------------------------------------------------------------------------------
# ids. messageIds: 122 or 128 random bits of the hour's seeded generator, shaped like the
# library of the sender ("ajs-next-<32 hex>" from analytics.js, a v4 uuid from the other
# libraries, upper-case from iOS). Different (seed, source, hour) give independent streams, so
# ids are unique within and across them with overwhelming probability (about n^2 / 2^123 for
# n ids: for 10^9 ids, 10^-19).


_VARIANT = {c: "89ab"[int(c, 16) & 3] for c in "0123456789abcdef"}


def _uuid(x: int) -> str:
    """A version-4 uuid from 128 random bits ``x`` (version and variant bits overwritten)."""
    h = f"{x:032x}"
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{_VARIANT[h[16]]}{h[17:20]}-{h[20:]}"


def _uuid_upper(x: int) -> str:
    return _uuid(x).upper()


def _ajs_id(x: int) -> str:
    return f"ajs-next-{x:032x}"


# --------------------------------------------------------------------------------------------
# catalogue: products, pages, campaigns, users

_CITIES = [
    ("Berlin", "DE", "10115"),
    ("München", "DE", "80331"),
    ("Paris", "FR", "75001"),
    ("London", "GB", "EC1A 1BB"),
    ("New York", "US", "10001"),
    ("Boston", "US", "02139"),
    ("San Francisco", "US", "94103"),
    ("São Paulo", "BR", "01000-000"),
    ("Tokyo", "JP", "100-0001"),
    ("Bengaluru", "IN", "560001"),
    ("Sydney", "AU", "2000"),
    ("Zürich", "CH", "8001"),
    ("Kraków", "PL", "30-001"),
    ("Montréal", "CA", "H2X 1Y4"),
    ("Austin", "US", "73301"),
]
_FIRST = [
    "Anna",
    "Ben",
    "Chloé",
    "David",
    "Elif",
    "Farid",
    "Grace",
    "Hiro",
    "Ines",
    "Jonas",
    "Kemal",
    "Lena",
    "Mateo",
    "Nora",
    "Oskar",
    "Priya",
    "Quentin",
    "Rosa",
    "Søren",
    "Tara",
    "Uma",
    "Victor",
    "Wen",
    "Ximena",
    "Yusuf",
    "Zoë",
    "José",
    "Łukasz",
    "Amélie",
    "Björn",
]
_LAST = [
    "Müller",
    "Smith",
    "García",
    "Nguyen",
    "Kowalski",
    "Rossi",
    "Tanaka",
    "Dubois",
    "O'Brien",
    "Johansson",
    "Patel",
    "Silva",
    "Schmidt",
    "Kim",
    "Novak",
    "Moreau",
]
# (timezone, UTC offset in minutes in November, locale)
_ZONES = [
    ("Europe/Berlin", 60, "de-DE"),
    ("Europe/Paris", 60, "fr-FR"),
    ("Europe/London", 0, "en-GB"),
    ("America/New_York", -300, "en-US"),
    ("America/Los_Angeles", -480, "en-US"),
    ("America/Sao_Paulo", -180, "pt-BR"),
    ("Asia/Tokyo", 540, "ja-JP"),
    ("Asia/Kolkata", 330, "en-IN"),
    ("Australia/Sydney", 660, "en-AU"),
    ("Europe/Warsaw", 60, "pl-PL"),
    ("America/Toronto", -300, "fr-CA"),
]
_BROWSER_UAS = [
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "Version/17.1 Safari/605.1.15",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/119.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:120.0) Gecko/20100101 Firefox/120.0",
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/118.0.0.0 Safari/537.36",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 "
    "(KHTML, like Gecko) Version/17.1 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/119.0.6045.163 Mobile Safari/537.36",
]
_BROWSER_LIBS = [
    {"name": "analytics.js", "version": "next-1.61.0"},
    {"name": "analytics.js", "version": "next-1.55.0"},
    {"name": "analytics.js", "version": "4.1.0"},
]
# (library, os name, os versions, manufacturer, models, user agent template)
_MOBILE_KINDS = [
    (
        {"name": "analytics-ios", "version": "4.1.8"},
        "iOS",
        ["16.7.2", "17.1", "17.1.1"],
        "Apple",
        ["iPhone14,5", "iPhone15,2", "iPhone16,1", "iPad13,4"],
        "ShopApp/{app} CFNetwork/1474 Darwin/23.0.0",
    ),
    (
        {"name": "analytics-android", "version": "4.11.3"},
        "Android",
        ["12", "13", "14"],
        "samsung",
        ["SM-S911B", "SM-A546B", "SM-G991B"],
        "Dalvik/2.1.0 (Linux; U; Android {os}; {model} Build/UP1A.231005.007)",
    ),
    (
        {"name": "analytics-kotlin", "version": "1.14.2"},
        "Android",
        ["13", "14"],
        "Google",
        ["Pixel 7", "Pixel 8 Pro"],
        "Dalvik/2.1.0 (Linux; U; Android {os}; {model} Build/UD1A.230803.041)",
    ),
]
_SERVER_KINDS = [
    ({"name": "analytics-python", "version": "2.3.2"}, "python-requests/2.31.0"),
    (
        {"name": "analytics-node", "version": "1.3.0"},
        "node-fetch/1.0 (+https://github.com/bitinn/node-fetch)",
    ),
    ({"name": "analytics-ruby", "version": "2.4.0"}, "Ruby"),
]
_INTEGRATIONS = [
    {"All": True},
    {"All": True},
    {"All": True, "Mixpanel": False},
    {},
    {"All": True, "Amplitude": {"session_id": 1732182000000}},
    {"All": False, "Google Analytics": True, "Braze": True},
]
_CAMPAIGNS = [
    {"name": "black_friday_2026", "source": "google", "medium": "cpc", "term": "running shoes"},
    {
        "name": "newsletter_week_47",
        "source": "newsletter",
        "medium": "email",
        "content": "hero_banner",
    },
    {"name": "winter-sale", "source": "facebook", "medium": "paid_social"},
    {"name": "Retargeting Q4", "source": "criteo", "medium": "display"},
    {"name": "brand", "source": "bing", "medium": "cpc", "term": "acme store"},
]
_CATEGORIES = ["Shoes", "Jackets", "Accessories", "Outdoor", "Kids", "Sale"]
_BRANDS = ["Acme", "Northwind", "Globex", "Initech", "Umbrella"]
_ADJ = ["Trail", "Classic", "Ultra", "Urban", "Alpine", "Everyday", "Pro", "Lite"]
_NOUN = ["Runner", "Parka", "Backpack", "Beanie", "Boot", "Sneaker", "Vest", "Glove", "Tee"]
_SCREENS = [
    ("Home", "Main"),
    ("Product Detail", "Catalog"),
    ("Cart", "Checkout"),
    ("Search Results", "Catalog"),
    ("Settings", "Account"),
    ("Order History", "Account"),
    ("Onboarding Step 2", "Onboarding"),
]
# (name, industry, employees)
_COMPANIES = [
    ("Acme Corp", "Retail", 250),
    ("Globex", "Manufacturing", 1800),
    ("Initech", "Software", 12),
    ("Umbrella GmbH", "Healthcare", 54000),
    ("Stark Industries", "Defense", 9000),
    ("Wayne Enterprises", "Conglomerate", 320),
    ("Hooli", "Software", 7),
]
_PLANS = ["free", "starter", "pro", "enterprise"]
_QUERIES = [
    "running shoes",
    "winter jacket",
    "gore-tex",
    "rucksack 30l",
    "beanie",
    "größe 44",
    "kids boots",
    "sale",
    "trail runner ultra",
    "vest",
]
_VIDEOS = [
    ("vid_001", "How to lace trail shoes", 312, ["howto"]),
    ("vid_002", "Winter collection 2026", 95, ["collection", "2026"]),
    ("vid_003", "Unboxing: Alpine Parka", 480, ["unboxing", "parka"]),
    ("vid_004", "Care guide – leather", 204, []),
]
_VIDEO_QUALITIES = ["1080p", "720p", "auto"]
_EXPERIMENTS = [
    ("exp_checkout_v2", "Checkout redesign", ["control", "one_page"]),
    ("exp_price_anchor", "Price anchoring", ["control", "anchor_high", "anchor_low"]),
    ("exp_hero_video", "Hero video on home", ["control", "video"]),
]
_SHIP_METHODS = ["standard", "express", "pickup"]
_APP_VERSIONS = ["3.14.0", "3.15.1", "3.16.0"]
_CARRIERS = ["Vodafone", "T-Mobile", "AT&T", "Orange", "unknown"]
_SCREEN_WIDTHS = [390, 393, 412, 430]
_SCREEN_HEIGHTS = [844, 852, 915, 932]
_DENSITIES = [2, 3, 2.625, 3.5]
_UTM_SOURCES = ["google", "newsletter", "facebook"]
_ORDER_TAGS = [["gift"], ["gift", "express"], [], ["first-order"]]
_PAYMENT_METHODS = ["card", "paypal", "klarna", "apple_pay"]
_SIGN_IN_METHODS = ["email", "google", "apple", "sso"]
_SORTS = ["relevance", "price_asc", "newest"]
_COUPONS = ["WINTER10", "WELCOME5", "FREESHIP", "BF2026"]


_Fragment = getattr(orjson, "Fragment", None)  # orjson >= 3.10


def _frozen(obj: dict):
    """``obj`` serialized once (an ``orjson.Fragment``; ``obj`` itself with an older orjson):
    the same output bytes, without re-serializing a shared part for every message."""
    return obj if _Fragment is None else _Fragment(orjson.dumps(obj))


def _build_catalogue(rng: random.Random) -> dict:
    products = []
    for i in range(60):
        price = round(
            rng.choice([9.99, 14.5, 19.99, 24.0, 29.99, 49.95, 79.0, 129.99, 249.0])
            * rng.choice([1, 1, 1, 0.8, 1.2]),
            2,
        )
        products.append(
            {
                "productId": f"prod_{1000 + i}",
                "sku": f"SKU-{rng.randrange(10**5, 10**6)}-{rng.choice('ABCDEFGH')}",
                "name": f"{rng.choice(_ADJ)} {rng.choice(_NOUN)} {rng.randrange(2, 9)}",
                "category": rng.choice(_CATEGORIES),
                "brand": rng.choice(_BRANDS),
                "price": price,
                "url": f"https://shop.example.com/products/prod_{1000 + i}",
                "imageUrl": f"https://cdn.example.com/img/prod_{1000 + i}.jpg",
            }
        )
    # line items (product + quantity) with a minority of numbers sent as strings
    items, item_totals = [], []
    for p in products:
        for q in (1, 1, 1, 2, 2, 3):
            it = {
                "productId": p["productId"],
                "sku": p["sku"],
                "name": p["name"],
                "category": p["category"],
                "price": p["price"],
                "quantity": q,
            }
            r = rng.random()
            if r < 0.08:
                it["price"] = f"{p['price']:.2f}"
            elif r < 0.16:
                it["quantity"] = str(q)
            if rng.random() < 0.3:
                it["variant"] = rng.choice(["black", "navy", "42", "M", "L"])
            items.append(it)
            item_totals.append(p["price"] * q)
    product_names = {p["productId"]: p["name"] for p in products}
    pages = []
    paths = (
        [
            "/",
            "/sale",
            "/cart",
            "/checkout",
            "/account",
            "/search",
            "/blog/winter-guide",
            "/help/shipping",
        ]
        + [f"/products/{p['productId']}" for p in products[:30]]
        + [f"/c/{c.lower()}" for c in _CATEGORIES]
    )
    referrers = [
        "",
        "",
        "https://www.google.com/",
        "https://www.bing.com/",
        "https://t.co/xYz123",
        "https://shop.example.com/",
    ]
    for path in paths:
        for _ in range(3):
            search = rng.choice(
                ["", "", "?utm_source=google&utm_medium=cpc", "?q=boots", "?page=2&sort=price"]
            )
            if path.startswith("/products/"):
                title = f"{product_names[path.rsplit('/', 1)[1]]} | Acme Store"
                name, category = "Product", "Catalog"
            elif path.startswith("/c/"):
                cat = path[3:].title()
                title, name, category = f"{cat} | Acme Store", cat, "Catalog"
            else:
                name = path.strip("/").split("/")[0].title() or "Home"
                title, category = f"{name} | Acme Store", rng.choice(["Content", "Shop", None])
            page = {
                "path": path,
                "referrer": rng.choice(referrers),
                "search": search,
                "title": title,
                "url": f"https://shop.example.com{path}{search}",
            }
            pages.append((name, category, page, _frozen(page)))
    groups = []
    for i, (cname, industry, employees) in enumerate(_COMPANIES):
        traits = {
            "name": cname,
            "employees": employees,
            "industry": industry,
            "plan": rng.choice(_PLANS),
            "website": f"https://{cname.split()[0].lower()}.example",
        }
        groups.append(
            (f"grp_{i:03d}", (_frozen(traits), _frozen({**traits, "employees": str(employees)})))
        )
    return {
        "products": products,
        "items": items,
        "item_totals": item_totals,
        "pages": pages,
        "groups": groups,
    }


def _build_users(rng: random.Random, cat: dict, n_users: int) -> list[dict]:
    """The recurring users of one source. Only their random draws are made here; the message
    templates (``_templates``) are built on a user's first message, a pure function of these
    draws, so building a large pool is cheap and an hour's bytes do not depend on the hours
    generated before it."""
    rnd, g = rng.random, rng.getrandbits
    n_pages, n_campaigns = len(cat["pages"]), len(_CAMPAIGNS)

    def pick(seq):
        return seq[int(rnd() * len(seq))]

    users = []
    for n in range(n_users):
        r = rnd()
        if n < 3:  # at least one user of each channel
            r = (0.0, 0.6, 0.95)[n]
        channel = "browser" if r < 0.55 else ("mobile" if r < 0.9 else "server")
        zone, offset, locale = pick(_ZONES)
        first, last = pick(_FIRST), pick(_LAST)
        city, country, zip_code = pick(_CITIES)
        ip = f"{2 + g(7) + g(6)}.{g(8)}.{g(8)}.{1 + int(rnd() * 254)}"
        identified = rnd() < 0.6 or (channel == "server" and rnd() < 0.5)
        created_days = 1 + int(rnd() * 900)
        u = {
            "n": n,
            "channel": channel,
            "anon": _uuid(g(128)),
            "new_id": _uuid,
            "uid": f"usr_{g(32):08x}{n:04d}",
            "identified": identified,
            "zone": zone,
            "offset": offset,
            "locale": locale,
            "ip": ip,
            "skew": 0 if rnd() < 0.8 else int((rnd() - 0.5) * 600_000_000),
            "fmt": _FORMAT_TABLE[int(rnd() * 100)],
            "version": 1 if (channel == "server" and rnd() < 0.5) or rnd() < 0.05 else 2,
            "integrations": int(rnd() * len(_INTEGRATIONS)),
            "first": first,
            "last": last,
            "email": f"{first.lower()}.{last.lower()}{n}@example.com".replace("'", ""),
            "city": city,
            "country": country,
            "zip": zip_code,
            "plan": pick(_PLANS),
            "company": int(rnd() * len(_COMPANIES)),
            "cart": f"cart_{g(40):010x}",
            "created_days": created_days,
            "created_us": (
                _CREATED_BASE_US - created_days * _DAY_US + int(rnd() * 86_400) * 1_000_000
            ),
            "traits_draws": [(int(rnd() * 5), rnd(), rnd()) for _ in range(2)],
            "tpl": None,
        }
        if channel == "browser":
            u["new_id"] = _ajs_id
            u["library"], u["ua"] = pick(_BROWSER_LIBS), pick(_BROWSER_UAS)
            u["visits"] = [
                (int(rnd() * n_pages), int(rnd() * n_campaigns) if rnd() < 0.5 else None)
                for _ in range(_VISITS)
            ]
        elif channel == "mobile":
            lib, os_name, os_versions, maker, models, ua = pick(_MOBILE_KINDS)
            model, app_version = pick(models), pick(_APP_VERSIONS)
            os_version = pick(os_versions)
            ipad = model.startswith("iPad")
            if os_name == "iOS":  # iOS sends upper-case identifiers
                u["anon"], u["new_id"] = u["anon"].upper(), _uuid_upper
            u["library"] = lib
            u["ua"] = ua.format(app=app_version, os=os_version, model=model)
            u["mobile"] = {
                "app": {
                    "build": str(900 + int(rnd() * 99)),
                    "name": "Acme Shop",
                    "namespace": "com.example.shop",
                    "version": app_version,
                },
                "device": {
                    "id": _uuid(g(128)),
                    "manufacturer": maker,
                    "model": model,
                    "type": "ios" if os_name == "iOS" else "android",
                    "adTrackingEnabled": rnd() < 0.3,
                },
                "network": {
                    "wifi": rnd() < 0.6,
                    "cellular": rnd() < 0.5,
                    "carrier": pick(_CARRIERS),
                },
                "os": {"name": os_name, "version": os_version},
                "screen": {
                    "width": 820 if ipad else pick(_SCREEN_WIDTHS),
                    "height": 1180 if ipad else pick(_SCREEN_HEIGHTS),
                    "density": pick(_DENSITIES),
                },
            }
        else:
            u["library"], u["ua"] = pick(_SERVER_KINDS)
            u["zone"] = "UTC"
        users.append(u)
    return users


def _templates(u: dict, cat: dict) -> dict:
    """A user's message templates (built once, on the user's first message): the common
    fields in the key order of the messages, whose per-message values are then set in place;
    shared parts pre-serialized."""
    if u["channel"] == "mobile":
        m = u["mobile"]
        ctx = {
            "app": m["app"],
            "device": m["device"],
            "ip": u["ip"],
            "library": u["library"],
            "locale": u["locale"],
            "network": m["network"],
            "os": m["os"],
            "screen": m["screen"],
            "timezone": u["zone"],
            "userAgent": u["ua"],
        }
    else:
        ctx = {
            "ip": u["ip"],
            "library": u["library"],
            "locale": u["locale"],
            "timezone": u["zone"],
            "userAgent": u["ua"],
        }
    head = {
        "anonymousId": u["anon"],
        "channel": u["channel"],
        "context": _frozen(ctx),
        "integrations": _frozen(_INTEGRATIONS[u["integrations"]]),
        "messageId": None,
        "originalTimestamp": None,
        "receivedAt": None,
        "sentAt": None,
        "timestamp": None,
        "type": None,
        "userId": u["uid"],
        "version": u["version"],
    }
    head_alias = dict(head)  # an alias always carries the userId
    head_null = dict(head)  # analytics.js sends an explicit null userId before identify
    head_null["userId"] = None
    if not u["identified"]:
        del head["userId"]
    visits = []
    for page_i, campaign_i in u.get("visits", ()):
        page = cat["pages"][page_i]
        visit = {**ctx, "page": page[2]}
        if campaign_i is not None:
            visit["campaign"] = _CAMPAIGNS[campaign_i]
        visits.append((_frozen(visit), page))
    traits = []
    for extra_logins, fmt_r, text_r in u["traits_draws"]:
        logins = 1 + u["created_days"] // 7 + extra_logins
        traits.append(
            _frozen(
                {
                    "email": u["email"],
                    "name": f"{u['first']} {u['last']}",
                    "firstName": u["first"],
                    "lastName": u["last"],
                    "createdAt": _fmt(
                        u["created_us"], _FORMAT_TABLE[int(fmt_r * 100)], u["offset"]
                    ),
                    "plan": u["plan"],
                    "logins": str(logins) if text_r < 0.1 else logins,
                    "address": {"city": u["city"], "country": u["country"], "postalCode": u["zip"]},
                }
            )
        )
    return {
        "head": head,
        "head_alias": head_alias,
        "head_null": head_null if u["channel"] == "browser" and not u["identified"] else None,
        "visits": visits,
        "traits": traits,
    }


# --------------------------------------------------------------------------------------------
# one hour


class _Hour:
    """The message factory of one source hour (all randomness from one seeded ``Random``)."""

    def __init__(self, rng: random.Random, cat: dict, users: list[dict], late_rate: float) -> None:
        self.cat = cat
        self.rnd = rng.random
        self.bits = rng.getrandbits
        self.items = cat["items"]
        self.item_totals = cat["item_totals"]
        self.products = cat["products"]
        self.groups = cat["groups"]
        self.users = users
        self.n_users = len(users)
        self.browser = [u for u in users if u["channel"] == "browser"]
        self.mobile = [u for u in users if u["channel"] == "mobile"]
        self.late_rate = late_rate
        self.event_table = _table(EVENTS)
        self.track_pool: list[tuple[str, object, dict | None]] = []  # (event, props, raw)
        self.type_table = _table(TYPE_WEIGHTS)
        self.builders = {
            "Product Viewed": self._p_product_viewed,
            "Product Added": self._p_product_added,
            "Cart Viewed": self._p_cart_viewed,
            "Checkout Started": self._p_checkout_started,
            "Order Completed": self._p_order_completed,
            "Signed In": self._p_signed_in,
            "Signed Up": self._p_signed_up,
            "Video Played": self._p_video_played,
            "Search Performed": self._p_search,
            "Coupon Applied": self._p_coupon,
            "Subscription Renewed": self._p_subscription,
            "Experiment Viewed": self._p_experiment,
        }

    def _templates(self, u: dict) -> dict:
        tpl = u["tpl"] = _templates(u, self.cat)
        return tpl

    # ---- small helpers
    def pick(self, seq):
        return seq[int(self.rnd() * len(seq))]

    def money(self, v: float):
        """A price or amount; sent as text about 10 % of the time."""
        v = round(v, 2)
        return f"{v:.2f}" if self.rnd() < 0.1 else v

    def count(self, v: int):
        """A count; sent as text about 10 % of the time."""
        return str(v) if self.rnd() < 0.1 else v

    def date_value(self, us: int, offset: int) -> str:
        return _fmt(us, _pick_format(self.rnd()), offset)

    def cart(self, lo: int, hi: int) -> tuple[list, float]:
        rnd, items, totals = self.rnd, self.items, self.item_totals
        n_items = len(items)
        picked = [int(rnd() * n_items) for _ in range(lo + int(rnd() * (hi - lo + 1)))]
        return [items[i] for i in picked], round(sum([totals[i] for i in picked]), 2)

    def order_id(self) -> str:
        return f"ord_{self.bits(48):012x}"

    # ---- track properties, one builder per event
    def _p_product_viewed(self, u, t_us):
        rnd = self.rnd
        p = self.products[int(rnd() * len(self.products))]
        props = {
            "productId": p["productId"],
            "sku": p["sku"],
            "name": p["name"],
            "category": p["category"],
            "brand": p["brand"],
            "price": self.money(p["price"]),
            "currency": "EUR" if u["offset"] >= 0 else "USD",
            "position": self.count(1 + int(rnd() * 24)),
            "url": p["url"],
            "imageUrl": p["imageUrl"],
        }
        if rnd() < 0.3:
            props["utm.source"] = _UTM_SOURCES[int(rnd() * 3)]
        return props

    def _p_product_added(self, u, t_us):
        it = self.items[int(self.rnd() * len(self.items))]
        return {
            "cartId": u["cart"],
            "productId": it["productId"],
            "sku": it["sku"],
            "name": it["name"],
            "price": it["price"],
            "quantity": it["quantity"],
            "coupon": None if self.rnd() < 0.8 else "WINTER10",
        }

    def _p_cart_viewed(self, u, t_us):
        items, total = self.cart(1, 4)
        return {
            "cartId": u["cart"],
            "products": items,
            "itemCount": self.count(len(items)),
            "value": self.money(total),
        }

    def _p_checkout_started(self, u, t_us):
        items, total = self.cart(1, 4)
        return {
            "orderId": self.order_id(),
            "value": self.money(total),
            "revenue": self.money(total / 1.19),
            "currency": "EUR",
            "products": items,
            "step": 1,
        }

    def _p_order_completed(self, u, t_us):
        rnd = self.rnd
        items, total = self.cart(1, 5)
        shipping = 0.0 if total > 100 else 4.95
        discount = round(total * 0.1, 2) if rnd() < 0.2 else 0
        props = {
            "orderId": self.order_id(),
            "checkoutId": f"chk_{int(rnd() * 1e9)}",
            "total": round(total + shipping - discount, 2),
            "revenue": self.money(total / 1.19),
            "shippingCost": shipping,
            "tax": round(total - total / 1.19, 2),
            "discount": discount,
            "coupon": "WINTER10" if discount else None,
            "currency": "EUR",
            "products": items,
            "shipping": {
                "method": self.pick(_SHIP_METHODS),
                "address": {"city": u["city"], "zip": u["zip"], "country": u["country"]},
            },
            "tags": self.pick(_ORDER_TAGS),
            "isFirstPurchase": rnd() < 0.3,
        }
        if rnd() < 0.5:
            props["paymentMethod"] = self.pick(_PAYMENT_METHODS)
        return props

    def _p_signed_in(self, u, t_us):
        rnd = self.rnd
        return {
            "method": _SIGN_IN_METHODS[int(rnd() * 4)],
            "username": u["email"],
            "rememberMe": rnd() < 0.5,
            "attempt": self.count(1 + int(rnd() ** 4 * 3)),
        }

    def _p_signed_up(self, u, t_us):
        rnd = self.rnd
        return {
            "method": _SIGN_IN_METHODS[int(rnd() * 3)],
            "firstName": u["first"],
            "lastName": u["last"],
            "email": u["email"],
            "Plan Name": u["plan"].title(),
            "trialEndsAt": self.date_value(t_us + 14 * _DAY_US, u["offset"]),
            "newsletter": rnd() < 0.4,
            "referralCode": None if rnd() < 0.7 else f"REF{int(rnd() * 1e5):05d}",
        }

    def _p_video_played(self, u, t_us):
        rnd = self.rnd
        vid, title, duration, tags = _VIDEOS[int(rnd() * len(_VIDEOS))]
        pos = int(rnd() * duration)
        return {
            "videoId": vid,
            "title": title,
            "position": self.count(pos),
            "duration": duration,
            "% complete": round(100.0 * pos / duration, 1),
            "quality": _VIDEO_QUALITIES[int(rnd() * 3)],
            "autoplay": rnd() < 0.2,
            "sound": int(rnd() * 101),
            "tags": tags,
        }

    def _p_search(self, u, t_us):
        rnd = self.rnd
        props = {
            "query": _QUERIES[int(rnd() * len(_QUERIES))],
            "resultsCount": self.count(int(rnd() * 240)),
            "page": 1 + int(rnd() ** 3 * 4),
            "sortBy": _SORTS[int(rnd() * 3)],
        }
        if rnd() < 0.5:
            props["filters"] = {
                "category": _CATEGORIES[int(rnd() * len(_CATEGORIES))],
                "priceMax": self.money(self.pick([50, 100, 200])),
                "inStock": rnd() < 0.7,
            }
        return props

    def _p_coupon(self, u, t_us):
        code = self.pick(_COUPONS)
        return {
            "couponId": code,
            "couponName": code.title(),
            "discount": self.money(self.pick([5, 10, 4.95, 15.5])),
            "cartId": u["cart"],
            "orderId": None,
            "utm.source": self.pick(["newsletter", "affiliate", "direct"]),
        }

    def _p_subscription(self, u, t_us):
        interval = self.pick(["month", "month", "year"])
        amount = {"month": 9.99, "year": 99.0}[interval] * (1 + _PLANS.index(u["plan"]))
        return {
            "Plan Name": u["plan"].title(),
            "planId": f"plan_{u['plan']}_{interval}",
            "amount": self.money(amount),
            "currency": "EUR",
            "interval": interval,
            "renewalDate": self.date_value(t_us, u["offset"]),
            "nextBillingDate": self.date_value(
                t_us + (30 if interval == "month" else 365) * _DAY_US, u["offset"]
            ),
            "seats": self.count(1 + int(self.rnd() ** 3 * 50)),
            "autoRenew": self.rnd() < 0.9,
        }

    def _p_experiment(self, u, t_us):
        eid, name, variations = self.pick(_EXPERIMENTS)
        v = self.pick(variations)
        return {
            "experimentId": eid,
            "experimentName": name,
            "variationId": f"{eid}_{v}",
            "variationName": v,
            "nonInteraction": 1,
            "utm.source": None if self.rnd() < 0.6 else "google",
        }

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


# --------------------------------------------------------------------------------------------
# writing


class _Sink:
    """One archive file, written under a temporary dot-name and renamed when complete.

    Chunks are compressed and written by a background thread (zlib and file writes release the
    GIL, so compression overlaps generation); one writer thread per call keeps the bytes in
    order, so the output does not depend on timing.
    """

    _MAX_IN_FLIGHT = 4

    def __init__(
        self,
        fs,
        directory: str,
        name: str,
        compress: bool,
        pool: ThreadPoolExecutor,
        root: str = "",
    ) -> None:
        self.fs = fs
        self.root = root  # the archive root: how a file is published there (storage.publish)
        self.final = f"{directory}/{name}"
        self.tmp = f"{directory}/.{name}.tmp"
        self.pool = pool
        self.in_flight: deque[Future] = deque()
        if fs is None:
            self.out = open(self.tmp, "wb")  # noqa: SIM115 - closed in close()/abort()
        else:
            self.out = fs.open_output_stream(self.tmp, compression=None)
        # wbits 31: a gzip stream (header without name or mtime, so the bytes are reproducible)
        self.z = zlib.compressobj(1, zlib.DEFLATED, 31) if compress else None

    def _write(self, data: bytes) -> None:
        self.out.write(self.z.compress(data) if self.z is not None else data)

    def write(self, data: bytes) -> None:
        self.in_flight.append(self.pool.submit(self._write, data))
        if len(self.in_flight) > self._MAX_IN_FLIGHT:
            self.in_flight.popleft().result()

    def close(self) -> None:
        while self.in_flight:
            self.in_flight.popleft().result()
        if self.z is not None:
            self.out.write(self.z.flush())
        self.out.close()
        if self.fs is None:
            os.replace(self.tmp, self.final)
        else:  # a rename, or on blob-only Azure a copy and a delete
            storage.publish(self.fs, self.tmp, self.final, self.root)

    def abort(self) -> None:
        for fut in self.in_flight:
            fut.cancel()
        for fut in self.in_flight:
            if not fut.cancelled():
                try:
                    fut.result()
                except Exception:  # noqa: BLE001, S110 - the original error is re-raised
                    pass
        self.in_flight.clear()
        try:
            self.out.close()
        except Exception:  # noqa: BLE001, S110
            pass
        try:
            if self.fs is None:
                os.remove(self.tmp)
            else:
                self.fs.delete_file(self.tmp)
        except Exception:  # noqa: BLE001, S110
            pass


def _check_args(
    hours: list, events_per_hour: int, files_per_hour: int, rates: dict[str, float]
) -> None:
    if events_per_hour < 1:
        raise ValueError(f"events_per_hour must be >= 1, got {events_per_hour}")
    if files_per_hour < 1:
        raise ValueError(f"files_per_hour must be >= 1, got {files_per_hour}")
    for name, r in rates.items():
        if not 0.0 <= r <= 1.0:
            raise ValueError(f"{name} must be within [0, 1], got {r}")
    for h in hours:
        if not isinstance(h, ArchiveHour):
            raise TypeError(f"hours must be ArchiveHour values, got {type(h).__name__}")
    if len(set(hours)) != len(hours):
        raise ValueError("hours lists the same hour twice")


def generate_archive(
    archive_root: str,
    source_id: str,
    hours: list[ArchiveHour],
    *,
    events_per_hour: int = 2000,
    files_per_hour: int = 2,
    seed: int = 7,
    malformed_rate: float = 0.002,
    duplicate_rate: float = 0.01,
    late_rate: float = 0.02,
    compress: bool = True,
) -> GenerateSummary:
    """Write ``events_per_hour`` lines (exactly) for each of ``hours`` to
    ``<archive_root>/<source_id>/day=YYYY-MM-DD/hr=HH/part-NNNN.jsonl[.gz]`` and count them.

    The files of an hour are consecutive slices of its received time, ``part-0000`` first; an
    hour of fewer lines than ``files_per_hour`` gets one file per line. Writing an hour again
    replaces its files of the same names (files beyond the new ``files_per_hour`` stay).
    """
    hours = list(hours)
    _check_args(
        hours,
        events_per_hour,
        files_per_hour,
        {
            "malformed_rate": malformed_rate,
            "duplicate_rate": duplicate_rate,
            "late_rate": late_rate,
        },
    )
    if is_azure(archive_root):  # built from the environment, never from the URI
        fs, base = storage.resolve(archive_root)
    elif "://" in archive_root:
        from pyarrow import fs as pafs

        fs, base = pafs.FileSystem.from_uri(archive_root)
    else:
        fs, base = None, archive_root

    _tables()
    pool_rng = random.Random(f"datalake-demo|users|{seed}|{source_id}")
    cat = _build_catalogue(pool_rng)
    users = _build_users(pool_rng, cat, min(_USERS_MAX, max(_USERS_MIN, events_per_hour // 100)))
    summary = GenerateSummary(
        hours=[],
        files=[],
        lines=0,
        valid_messages=0,
        duplicate_lines=0,
        malformed_lines=0,
        by_type={t: 0 for t in TYPE_WEIGHTS},
        by_event={},
        bytes_uncompressed=0,
        malformed_by_reason={},
    )
    ext = ".jsonl.gz" if compress else ".jsonl"
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="demo-writer") as pool:
        for hour in hours:
            _write_hour(
                fs,
                base,
                archive_root,
                source_id,
                hour,
                ext,
                compress,
                pool,
                cat,
                users,
                summary,
                events_per_hour,
                files_per_hour,
                seed,
                malformed_rate,
                duplicate_rate,
                late_rate,
            )
            summary.hours.append(str(hour))
    summary.by_type = {t: n for t, n in summary.by_type.items() if n}
    summary.by_event = dict(sorted(summary.by_event.items()))
    summary.malformed_by_reason = dict(sorted(summary.malformed_by_reason.items()))
    return summary


def _write_hour(
    fs,
    base: str,
    archive_root: str,
    source_id: str,
    hour: ArchiveHour,
    ext: str,
    compress: bool,
    pool: ThreadPoolExecutor,
    cat: dict,
    users: list[dict],
    summary: GenerateSummary,
    n_lines: int,
    files_per_hour: int,
    seed: int,
    malformed_rate: float,
    duplicate_rate: float,
    late_rate: float,
) -> None:
    rng = random.Random(f"datalake-demo|hour|{seed}|{source_id}|{hour}")
    rnd = rng.random
    start_ms = int(hour.start.timestamp()) * 1000
    end_ms = start_ms + _HOUR_MS  # exclusive
    gen = _Hour(rng, cat, users, late_rate)
    message = gen.message
    dumps = orjson.dumps
    directory = archive_hour_dir(base, source_id, hour)
    if fs is None:
        os.makedirs(directory, exist_ok=True)
    else:
        fs.create_dir(directory, recursive=True)

    n_files = min(files_per_hour, n_lines)
    ms_per_slot = _HOUR_MS / n_lines
    jitter = max(1, _HOUR_MS // n_lines)
    by_type, by_event = summary.by_type, summary.by_event
    reasons = summary.malformed_by_reason
    # slot -> (message, the receivedAt in ms of its previous delivery)
    pending: dict[int, tuple[dict, int]] = {}
    valid = dups = bad = nbytes = 0
    buf: list[bytes] = []
    add = buf.append

    for f in range(n_files):
        first, last = f * n_lines // n_files, (f + 1) * n_lines // n_files
        name = f"part-{f:04d}{ext}"
        sink = _Sink(fs, directory, name, compress, pool, archive_root)
        try:
            for slot in range(first, last):
                # this line's receivedAt: its share of the hour plus jitter, inside the hour
                rec = start_ms + int(slot * ms_per_slot) + int(rnd() * jitter)
                if rec >= end_ms:
                    rec = end_ms - 1
                again = pending.pop(slot, None) if pending else None
                if again is not None and rec <= again[1]:
                    # only possible above one line per millisecond: a little later, or never
                    rec = again[1] + 1
                    if rec >= end_ms:
                        again, rec = None, end_ms - 1
                if again is not None:
                    msg = again[0].copy()
                    msg["receivedAt"] = _ms_z(rec)
                    add(dumps(msg))
                    dups += 1
                    if rnd() < 0.05:  # a third delivery, now and then
                        _schedule(pending, msg, rec, slot, n_lines, ms_per_slot, rnd)
                elif rnd() < malformed_rate:
                    kind = MALFORMED_KINDS[int(rnd() * len(MALFORMED_KINDS))]
                    add(gen.malformed(kind, rec))
                    bad += 1
                    reason = MALFORMED_REASONS[kind]
                    reasons[reason] = reasons.get(reason, 0) + 1
                else:
                    msg = message(rec)
                    add(dumps(msg))
                    valid += 1
                    t = msg["type"]
                    by_type[t] += 1
                    if t == "track":
                        e = msg["event"]
                        by_event[e] = by_event.get(e, 0) + 1
                    if rnd() < duplicate_rate:
                        _schedule(pending, msg, rec, slot, n_lines, ms_per_slot, rnd)
                if len(buf) >= 1024:
                    buf.append(b"")  # so the join ends with a newline
                    data = b"\n".join(buf)
                    buf.clear()
                    nbytes += len(data)
                    sink.write(data)
            if buf:
                buf.append(b"")
                data = b"\n".join(buf)
                buf.clear()
                nbytes += len(data)
                sink.write(data)
            sink.close()
        except BaseException:
            sink.abort()
            raise
        summary.files.append(join(archive_hour_dir(archive_root, source_id, hour), name))

    if pending:  # cannot happen: every reserved slot lies inside the hour
        raise AssertionError("a scheduled re-delivery was not written")
    summary.lines += n_lines
    summary.valid_messages += valid
    summary.duplicate_lines += dups
    summary.malformed_lines += bad
    summary.bytes_uncompressed += nbytes


def _schedule(
    pending: dict, msg: dict, rec: int, slot: int, n_lines: int, ms_per_slot: float, rnd
) -> None:
    """Reserve a later slot of the hour for a re-delivery of ``msg``: mostly seconds to
    minutes later, sometimes up to half an hour; at least two slots on, so its receivedAt is
    later. No re-delivery when the hour has no later free slot."""
    r = rnd()
    delay_ms = 1000 + r * r * r * 1_800_000
    target = slot + max(2, int(delay_ms / ms_per_slot))
    if target >= n_lines:
        lo = slot + 2
        if lo >= n_lines:
            return
        target = lo + int(rnd() * (n_lines - lo))
    while target in pending:
        target += 1
        if target >= n_lines:
            return
    pending[target] = (msg, rec)
