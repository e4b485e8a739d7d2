"""Screenshots of the Dagster UI of a running ``datalake dev``, in a real browser.

    python -m datalake_assets_tests.orchestration.ui_screenshots --url http://127.0.0.1:3000 --out bench/out/ui

Opens an event table's asset page (overview, Partitions and Checks tabs), the asset catalog,
the lineage graph of the source's group and, with ``--backfill ID``, a backfill's page, with Playwright driving Debian's ``/usr/bin/chromium``
(never a downloaded browser), waits until each page has rendered, and saves 1400x900 PNGs.
Not part of the test suite: it needs ``pip install playwright`` and a server with synced data.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
import urllib.request
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
VIEWPORT = {"width": 1400, "height": 900}
# Texts the UI shows while it loads; a page still showing one of them is not rendered yet.
LOADING_MARKERS = ("Loading", "Fetching")


def location_path(url: str) -> str:
    """``<repository>@<location>`` of the first code location (the lineage page's route)."""
    query = (
        "{ workspaceOrError { ... on Workspace { locationEntries { name "
        "locationOrLoadError { ... on RepositoryLocation { repositories { name } } } } } } }"
    )
    req = urllib.request.Request(
        f"{url}/graphql",
        data=json.dumps({"query": query}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=60) as resp:
        entries = json.loads(resp.read())["data"]["workspaceOrError"]["locationEntries"]
    entry = entries[0]
    return f"{entry['locationOrLoadError']['repositories'][0]['name']}@{entry['name']}"


def pages(
    url: str, source: str, table: str, backfill: str | None = None
) -> list[tuple[str, str, str]]:
    """(file name, URL, a text the rendered page must contain); ``backfill``: a backfill's id,
    whose page is shown too."""
    asset = f"{url}/assets/{source}/{table}"
    shown = [("backfill", f"{url}/runs/b/{backfill}", backfill)] if backfill else []
    return shown + [
        ("asset_overview", asset, table),
        ("asset_partitions", f"{asset}?view=partitions", "Partitions"),
        ("asset_checks", f"{asset}?view=checks", "duplicates"),
        ("asset_catalog", f"{url}/assets", source),
        (
            "group_lineage",
            # the graph opens zoomed on its middle (the raw archive); a table may be off-screen
            f"{url}/locations/{location_path(url)}/asset-groups/{source}/lineage",
            "raw_archive",
        ),
    ]


def dismiss_onboarding(page) -> None:
    """A fresh browser profile gets Dagster's "Join the Dagster community" dialog over the
    first page; Skip closes it for the session (the UI remembers it in local storage)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    skip = page.get_by_role("button", name="Skip")
    try:
        skip.wait_for(state="visible", timeout=5_000)
    except PlaywrightTimeout:  # no dialog: it was dismissed before
        return
    skip.click()
    page.wait_for_timeout(500)


def wait_rendered(page, must_contain: str, timeout: float) -> None:
    """Until the page shows ``must_contain``, no loading marker, and the network is idle; the
    UI polls GraphQL, so 'networkidle' alone may never come: it is bounded separately."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    deadline = time.monotonic() + timeout
    page.get_by_text(must_contain, exact=False).first.wait_for(timeout=timeout * 1000)
    with contextlib.suppress(PlaywrightTimeout):  # live polling may keep the network busy
        page.wait_for_load_state("networkidle", timeout=15_000)
    while time.monotonic() < deadline:
        body = page.inner_text("body")
        if not any(m in body for m in LOADING_MARKERS):
            break
        page.wait_for_timeout(500)
    page.wait_for_timeout(1500)  # charts and the graph layout animate in


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", default="http://127.0.0.1:3000")
    p.add_argument("--out", default="bench/out/ui")
    p.add_argument("--source", default="web", help="asset group / key prefix of the source")
    p.add_argument("--table", default="order_completed", help="event table to show")
    p.add_argument("--timeout", type=float, default=90.0, help="seconds per page")
    p.add_argument("--backfill", help="a backfill's id: its page too (backfill.png)")
    args = p.parse_args(argv)
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    url = args.url.rstrip("/")
    failed = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            for name, target, text in pages(url, args.source, args.table, args.backfill):
                page.goto(target, wait_until="domcontentloaded", timeout=args.timeout * 1000)
                dismiss_onboarding(page)
                try:
                    wait_rendered(page, text, args.timeout)
                except PlaywrightError as e:  # timeouts included: report, keep going
                    failed.append(f"{name}: {target} never showed {text!r}: {e}")
                path = out / f"{name}.png"
                page.screenshot(path=str(path))
                print(f"{path}  {target}")
        finally:
            browser.close()
    for f in failed:
        print(f"NOT RENDERED {f}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
