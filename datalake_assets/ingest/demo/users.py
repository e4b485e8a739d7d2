"""The recurring users of a demo source (one per 100 lines of an hour, within bounds), each with
one channel (browser, mobile or server), a device, a library and a place, and the message
templates built from them on a user's first message."""

from __future__ import annotations

import random

from datalake_assets.ingest.demo.catalogue import _CAMPAIGNS, _COMPANIES, _PLANS
from datalake_assets.ingest.demo.json_parts import _frozen
from datalake_assets.ingest.demo.message_ids import _ajs_id, _uuid, _uuid_upper
from datalake_assets.ingest.demo.timestamps import _DAY_US, _FORMAT_TABLE, _fmt

_CREATED_BASE_US = 1_767_225_600_000_000  # 2026-01-01: users signed up up to 900 days before
# recurring users per source: one per 100 lines of an hour, within these bounds
_USERS_MIN, _USERS_MAX = 300, 20_000
_VISITS = 4  # page contexts (page and campaign) per browser user

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
_APP_VERSIONS = ["3.14.0", "3.15.1", "3.16.0"]
_CARRIERS = ["Vodafone", "T-Mobile", "AT&T", "Orange", "unknown"]
_SCREEN_WIDTHS = [390, 393, 412, 430]
_SCREEN_HEIGHTS = [844, 852, 915, 932]
_DENSITIES = [2, 3, 2.625, 3.5]


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
