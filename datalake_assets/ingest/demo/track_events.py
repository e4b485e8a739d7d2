"""The properties of the twelve track events of the demo traffic (``EVENTS``): nested objects,
arrays of objects and of strings, camelCase keys, keys with spaces, dots and ``%``, dates in
several formats, and about 10 % of numeric values sent as text."""

from __future__ import annotations

import random

from datalake_assets.ingest.demo.catalogue import _CATEGORIES, _PLANS
from datalake_assets.ingest.demo.timestamps import _DAY_US, _fmt, _pick_format

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
_UTM_SOURCES = ["google", "newsletter", "facebook"]
_ORDER_TAGS = [["gift"], ["gift", "express"], [], ["first-order"]]
_PAYMENT_METHODS = ["card", "paypal", "klarna", "apple_pay"]
_SIGN_IN_METHODS = ["email", "google", "apple", "sso"]
_SORTS = ["relevance", "price_asc", "newest"]
_COUPONS = ["WINTER10", "WELCOME5", "FREESHIP", "BF2026"]


class _TrackProperties:
    """The properties of the track events, one builder per event of ``EVENTS``, and the
    helpers that draw the values several events share; all randomness from the hour's seeded
    ``Random``."""

    def __init__(self, rng: random.Random, cat: dict) -> None:
        self.rnd = rng.random
        self.bits = rng.getrandbits
        self.items = cat["items"]
        self.item_totals = cat["item_totals"]
        self.products = cat["products"]
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
