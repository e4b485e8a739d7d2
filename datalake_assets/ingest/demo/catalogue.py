"""The demo shop's catalogue: products, line items (product and quantity, with a minority of
numbers sent as text), the pages of the site, the marketing campaigns a visit comes from, and
the companies users belong to (the traits of ``group`` messages). Built once per source from
the source's seeded ``Random``."""

from __future__ import annotations

import random

from datalake_assets.ingest.demo.json_parts import _frozen

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
