"""The lake of ``bench_compaction.py``: generated hours of an order_completed table, written
with pyarrow as hourly Parquet files (the same bytes on the local disk and in moto's S3), the
Iceberg table over them (as ``lake/formats/iceberg.py`` creates one, files added a day at a
time), the Segment layout's hourly and daily folders, and the compaction."""

from __future__ import annotations

import collections
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

FIRST_HOUR = datetime(2025, 1, 1, tzinfo=UTC)
USERS = 50_000
MB = 1 << 20
URLS = [f"https://shop.example.com/{p}" for p in ("", "cart", "checkout", "p/1", "p/2", "help")]
AGENTS = [
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_1) AppleWebKit/605.1.15 Safari/605.1.15",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) Chrome/120.0.0.0 Safari/537.36",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) Mobile/15E148",
]
USER_IDS = pa.array([f"u-{i:08d}-{(i * 2654435761) % 2**32:08x}" for i in range(USERS)])
THE_USER = USER_IDS[4242].as_py()


def hour_table(i: int, rows: int, rng: np.random.Generator) -> pa.Table:
    """One hour of order_completed, with its ``day`` and ``hr`` columns (the Iceberg
    tables' partition columns; the Segment layout keeps them in the path)."""
    hour = FIRST_HOUR + timedelta(hours=i)
    at = int(hour.timestamp() * 1e6)
    received = np.sort(rng.integers(at, at + 3_600_000_000, rows))
    who = pa.array(rng.integers(0, USERS, rows))
    return pa.table(
        {
            "message_id": pa.array(
                [f"{hour:%Y%m%d%H}-{k:05d}-{rng.integers(1 << 30):x}" for k in range(rows)]
            ),
            "user_id": USER_IDS.take(who),
            "anonymous_id": pa.array([f"anon-{x:012x}" for x in rng.integers(0, 1 << 48, rows)]),
            "received_at": pa.array(received, pa.timestamp("us", "UTC")),
            "timestamp": pa.array(
                received - rng.integers(0, 5_000_000, rows), pa.timestamp("us", "UTC")
            ),
            "event": pa.array(["Order Completed"] * rows),
            "context_ip": pa.array(
                [f"10.{a}.{b}.{c}" for a, b, c in rng.integers(0, 255, (rows, 3))]
            ),
            "context_page_url": pa.array(URLS).take(pa.array(rng.integers(0, len(URLS), rows))),
            "context_user_agent": pa.array(AGENTS).take(
                pa.array(rng.integers(0, len(AGENTS), rows))
            ),
            "properties_order_id": pa.array([f"o-{x:09d}" for x in rng.integers(0, 10**9, rows)]),
            "properties_revenue": pa.array(np.round(rng.random(rows) * 300, 2)),
            "properties_currency": pa.array(["EUR"] * rows),
            "day": pa.array([f"{hour:%Y-%m-%d}"] * rows),
            "hr": pa.array([f"{hour:%H}"] * rows),
        }
    )


# ----------------------------------------------------------------------------- storage


class Places:
    """The local folder and the S3 bucket (moto direct for writing, the proxy for reading)."""

    def __init__(self, out: Path, moto: str, proxy_url: str, bucket: str) -> None:
        self.out, self.moto, self.proxy_url, self.bucket = out, moto, proxy_url, bucket

    def put(self, rel: str, data: bytes) -> None:
        """The same object in both places. Into S3 straight through moto's in-process store:
        building is not what is measured, and 10,000 PUTs through its HTTP server take
        minutes."""
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.s3.models import s3_backends

        path = self.out / "lake" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        s3_backends[DEFAULT_ACCOUNT_ID]["aws"].put_object(self.bucket, rel, data)

    def root(self, where: str) -> str:
        return str(self.out / "lake") if where == "local" else f"s3://{self.bucket}"

    def catalog(self, where: str):
        from pyiceberg.catalog.sql import SqlCatalog

        io = (
            {}
            if where == "local"
            else {
                "s3.endpoint": self.moto,
                "s3.access-key-id": "testing",
                "s3.secret-access-key": "testing",
                "s3.region": "us-east-1",
            }
        )
        return SqlCatalog(
            "bench",
            uri=f"sqlite:///{self.out}/catalog-{where}.db",
            warehouse=self.root(where),
            **io,
        )


def parquet_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="snappy")
    return sink.getvalue().to_pybytes()


def write_hours(
    places: Places, name: str, hours: int, rows: tuple[int, int], seed: int, segment: bool
) -> dict:
    """Every hour's Parquet file, local and S3 (the same bytes): the Iceberg table's data
    files and, when ``segment``, the Segment layout's hourly and daily files. Returns the
    files by day."""
    rng = np.random.default_rng(seed)
    by_day: dict[str, list[str]] = collections.defaultdict(list)
    day_parts: list[pa.Table] = []
    total = {"rows": 0, "bytes": 0}
    for i in range(hours):
        t = hour_table(i, int(rng.integers(rows[0], rows[1] + 1)), rng)
        day, hr = t["day"][0].as_py(), t["hr"][0].as_py()
        rel = f"iceberg/{name}/data/day={day}/hr={hr}/part-{i:05d}.parquet"
        data = parquet_bytes(t)
        places.put(rel, data)
        by_day[day].append(f"{places.root('local')}/{rel}")
        total["rows"] += t.num_rows
        total["bytes"] += len(data)
        if not segment:
            continue
        places.put(
            f"segment/day_hour/day={day}/hr={hr}/part-{i:05d}.parquet",
            parquet_bytes(t.drop(["day", "hr"])),
        )
        day_parts.append(t)
        if hr == "23" or i == hours - 1:  # the closed day merged: one file for its 24 hours
            merged = pa.concat_tables(day_parts).drop(["day", "hr"])
            places.put(f"segment/day/day={day}/part-{day}.parquet", parquet_bytes(merged))
            day_parts = []
    return {"by_day": dict(by_day), **total}


def build_iceberg(places: Places, where: str, name: str, by_day: dict[str, list[str]]):
    """The table (as ``lake/formats/iceberg.py`` creates one) and its files added a day at a
    time."""
    cat = places.catalog(where)
    cat.create_namespace_if_not_exists("bench")
    schema = hour_table(0, 1, np.random.default_rng(0)).schema
    tbl = cat.create_table(
        ("bench", name),
        schema=schema,
        location=f"{places.root(where)}/iceberg/{name}",
        properties={"format-version": "2"},
    )
    with tbl.update_spec() as spec:
        for c in ("day", "hr"):
            spec.add_identity(c)
    tbl = cat.load_table(("bench", name))
    prefix = places.root(where)
    for day in sorted(by_day):
        files = [p.replace(places.root("local"), prefix, 1) for p in by_day[day]]
        with tbl.transaction() as tx:
            tx.add_files(files, check_duplicate_files=False)
    return cat, ("bench", name)


def compact(cat, ident, target_bytes: int) -> dict:
    """Every hour cold, the product's compaction (``iceberg_compact.compact_table``); without
    it (a checkout before it), the same layout written here with pyiceberg."""
    try:
        from datalake_assets.lake.formats.iceberg_compact import compact_table
    except ImportError:
        return compact_by_month(cat, ident, target_bytes)
    done = compact_table(
        lambda: cat.load_table(ident), ident[1], datetime.now(UTC), target_bytes, owner="bench"
    )
    return {
        k: getattr(done, k)
        for k in ("files_before", "files_after", "bytes_before", "bytes_after", "rows", "seconds")
    }


def compact_by_month(cat, ident, target_bytes: int) -> dict:
    """Each month's files rewritten as files of about the target, unpartitioned (pyiceberg
    cannot write ``truncate(7, day)`` without the ``pyiceberg-core`` package; the files'
    ``day`` bounds still prune), one transaction a month, the hourly spec the default again
    after each: what the product's compaction does with days far below the target."""
    from pyiceberg.expressions import In
    from pyiceberg.transforms import IdentityTransform

    t0 = time.monotonic()
    tbl = cat.load_table(ident)
    files = list(tbl.scan().plan_files())
    months = sorted({f.file.partition[0][:7] for f in files})
    for month in months:
        tbl = cat.load_table(ident)
        days = sorted({f.file.partition[0] for f in files if f.file.partition[0][:7] == month})
        rows = (
            tbl.scan(row_filter=In("day", days))
            .to_arrow()
            .sort_by([("day", "ascending"), ("hr", "ascending")])
        )
        ratio = rows.nbytes / sum(
            f.file.file_size_in_bytes for f in files if f.file.partition[0][:7] == month
        )
        with tbl.transaction() as tx:
            tx.set_properties({"write.target-file-size-bytes": str(int(target_bytes * ratio))})
            with tx.update_spec() as us:
                us.remove_field("day")
                us.remove_field("hr")
            tx.overwrite(rows, overwrite_filter=In("day", days))
            with tx.update_spec() as us:
                us.add_field("day", IdentityTransform(), "day")
                us.add_field("hr", IdentityTransform(), "hr")
    after = list(cat.load_table(ident).scan().plan_files())
    return {
        "files_before": len(files),
        "files_after": len(after),
        "bytes_before": sum(f.file.file_size_in_bytes for f in files),
        "bytes_after": sum(f.file.file_size_in_bytes for f in after),
        "rows": sum(f.file.record_count for f in after),
        "seconds": round(time.monotonic() - t0, 3),
        "api": "bench fallback",
    }
