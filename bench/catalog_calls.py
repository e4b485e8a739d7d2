"""How often one sync crosses the catalog's boundary (issue #41, part 4).

    cd <checkout> && PYTHONPATH=. .venv/bin/python bench/catalog_calls.py

One real local sync of one small hour (``ingest.demo.generate_archive``, 200 events: the
driver-local path, no Spark job) with the Glue catalog under moto's ``mock_aws``, then the
repair of the same hour (a ``catalog_only = "register"`` request: ``catalog_phase``'s path
when the catalog asset is materialized alone). ``sys.setprofile`` (and
``threading.setprofile``, for the registration's thread pool) sees every Python call:

* **down**: a function of ``datalake_assets`` outside ``datalake_assets.catalog`` calling a
  function of ``datalake_assets.catalog.*``;
* **up**: a function of ``datalake_assets.catalog.*`` calling a function of ``datalake_assets``
  outside it (``spec.layout``, ``lake.storage``, a callback of the sync, ...).

Printed per run: the distinct call edges (caller function -> callee function: what a reader
follows) and the calls made (the edges times how often each ran), down and up, the calls up
by the package they reach (``spec`` and ``lake`` are below the catalog; anything else is a
layer above it called back), then the edges themselves. The calls inside boto3/moto and the standard library are not counted.

Measured (``--quiet``; dataclass constructors and ``to_dict`` count as calls too)::

    before the catalog step (e03d1ea)       after (catalog/step.py)
    sync:   down 10 edges / 10 calls        down 8 / 8  (prepare, register_and_check, record_report,
            up 27 edges / 302 calls          read_schemas, catalog_from_config + 3 constructors)
                                            up 33 / 326 (the hour entries are built inside now)
    repair: down 7 edges / 8 calls          down 5 / 5
            up 26 edges / 372 calls         up 30 / 322 (the table-hours listed once, not twice)

Every call up reaches ``spec`` or ``lake`` (below the catalog), before and after: the catalog
never calls back into the sync or Dagster.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
from collections import Counter

PKG, CATALOG = "datalake_assets", "datalake_assets.catalog"
HOUR = "2026-11-21T10"


def _module(frame) -> str:
    return frame.f_globals.get("__name__", "") or ""


def _inside(module: str, pkg: str) -> bool:
    return module == pkg or module.startswith(pkg + ".")


class Crossings:
    """The calls across the catalog's boundary, by edge."""

    def __init__(self) -> None:
        self.down: Counter[tuple[str, str]] = Counter()
        self.up: Counter[tuple[str, str]] = Counter()

    def profile(self, frame, event, _arg):
        if event != "call" or frame.f_back is None:
            return
        callee, caller = _module(frame), _module(frame.f_back)
        if not (_inside(callee, PKG) and _inside(caller, PKG)):
            return
        into, outof = _inside(callee, CATALOG), _inside(caller, CATALOG)
        if into == outof:
            return
        edge = (
            f"{caller}.{frame.f_back.f_code.co_name}",
            f"{callee}.{frame.f_code.co_name}",
        )
        (self.down if into else self.up)[edge] += 1

    def __enter__(self):
        threading.setprofile(self.profile)
        sys.setprofile(self.profile)
        return self

    def __exit__(self, *exc):
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]

    def print(self, title: str, edges: bool) -> None:
        print(
            f"{title}: down {len(self.down)} edges / {sum(self.down.values())} calls, "
            f"up {len(self.up)} edges / {sum(self.up.values())} calls"
        )
        by_package: Counter[str] = Counter()
        for (_, b), n in self.up.items():
            by_package[".".join(b.split(".")[:2])] += n
        print(
            "  up, by the package called: "
            + ", ".join(f"{k} {n}" for k, n in sorted(by_package.items()))
        )
        if edges:
            for name, counts in (("down", self.down), ("up", self.up)):
                for (a, b), n in sorted(counts.items()):
                    print(f"  {name:4} {n:4}  {a} -> {b}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=200)
    ap.add_argument("--quiet", action="store_true", help="the totals only, not each edge")
    args = ap.parse_args()
    for k in [k for k in os.environ if k.startswith("AWS_")]:
        del os.environ[k]
    os.environ.update(
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="eu-west-1",
        AWS_EC2_METADATA_DISABLED="true",
    )
    from moto import mock_aws

    from datalake_assets.catalog.config import CatalogConfig
    from datalake_assets.ingest.demo import generate_archive
    from datalake_assets.spec.layout import ArchiveHour
    from datalake_assets.transform.job import SyncRequest, run_sync

    def no_spark():
        raise AssertionError("this small sync should need no Spark session")

    with tempfile.TemporaryDirectory() as tmp, mock_aws():
        archive, lake = f"{tmp}/archive", f"{tmp}/lake"
        generate_archive(archive, "bench", [ArchiveHour.parse(HOUR)], events_per_hour=args.events)
        cfg = CatalogConfig(backend="glue", glue_region="eu-west-1")

        def request(**kw) -> SyncRequest:
            return SyncRequest(
                lake_root=lake,
                archive_root=archive,
                source_id="bench",
                hours=[HOUR],
                catalog=cfg,
                local_max_bytes=1 << 40,
                **kw,
            )

        with Crossings() as sync:
            report = run_sync(no_spark, request())
        assert report.source.by_hour[0].catalog.problems == [], report.source.by_hour
        with Crossings() as repair:
            again = run_sync(no_spark, request(catalog_only="register"))
        assert again.source.by_hour[0].catalog.problems == [], again.source.by_hour
    sync.print("sync", not args.quiet)
    repair.print("repair (catalog_only = register)", not args.quiet)


if __name__ == "__main__":
    main()
