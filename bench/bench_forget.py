"""Forgetting one person in a year of one source: what finding their hours costs with the
identity summary, against a scan of every table file's identity columns.

    python bench/bench_forget.py [--hours 8760] [--person-hours 50] [--out bench/out/forget]

Builds, with pyarrow and in the lake's layout, ``--hours`` hours of one source (from
2025-01-01T00): five tables an hour (pages, identifies, product_viewed, order_completed and
tracks, the copy of every track event), 50 to 200 events an hour, drawn from 50,000 people,
and each hour's identity index file (``lake/identities.INDEX_SCHEMA``, hashed with the lake's
key). One more person is in exactly ``--person-hours`` hours. Then, in one run:

* compacts the summaries (``privacy/summary.compact``: once, then nightly in Dagster);
* looks the person up in the summaries (``find_hours_compacted``), by user id and by all
  three of their identities, then again after a day of hours re-synced since the compaction;
* reads every per-hour index file (the lookup of a lake never compacted);
* scans the identity columns of every table file (pyarrow dataset, column-pruned, bytes
  counted by a counting filesystem; timed again without it), computes the least any
  column-pruned reader must read (each file's footer and identity column chunks), and times
  the same query in DuckDB;
* erases the person (``privacy.forget.forget``) when it exists.

Every lookup must find exactly the person's hours. Prints a Markdown table; everything is in
``<out>/results.json``. ``--reuse`` keeps a lake built with the same arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from datalake_assets.lake.identities import LINK, index_table, lake_key  # noqa: E402
from datalake_assets.privacy import summary, summary_lookup  # noqa: E402
from datalake_assets.privacy.index_files import Reads, hour_dir, open_parquet  # noqa: E402
from datalake_assets.spec import layout  # noqa: E402
from datalake_assets.spec.identity import ID, Identity, identity_hash, trait_kind  # noqa: E402

SOURCE = "bench"
FIRST_HOUR = datetime(2025, 1, 1, tzinfo=UTC)
PEOPLE = 50_000
RUN_ID = "seed0001"
TRACK_TABLES = ("product_viewed", "order_completed")
TABLES = ("pages", "identifies", *TRACK_TABLES, "tracks")
SHARES = {"pages": 0.45, "identifies": 0.10, "product_viewed": 0.35, "order_completed": 0.10}
TRACK_COLUMNS = [
    "message_id",
    "type",
    "user_id",
    "anonymous_id",
    "received_at",
    "timestamp",
    "channel",
    "context_ip",
    "context_library_name",
    "context_page_url",
    "context_user_agent",
    "context_traits_email",
    "event",
]
# The columns a query without the index must read to find a person (email: a trait).
IDENTITY_COLUMNS = ("user_id", "anonymous_id", "context_traits_email")
PERSON = {
    "user_id": "u-person-0000000000000042",
    "anonymous_id": "a-7f3c2e1d-person",
    "email": "the.person@example.org",
}
URLS = [f"https://shop.example.com/{p}" for p in ("", "cart", "checkout", "p/1", "p/2", "help")]
AGENTS = [
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_1) AppleWebKit/605.1.15 Safari/605.1.15",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) Chrome/120.0.0.0 Safari/537.36",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) Mobile/15E148",
]


class People:
    """The population's identities and their hashes, as arrays to take rows from."""

    def __init__(self, key: bytes, rng: np.random.Generator):
        n = PEOPLE
        ids = rng.integers(0, 2**62, size=(n, 2))
        user = [f"u-{a:016x}{b % 0xFFFF:04x}" for a, b in ids]
        anon = [f"{b:016x}-{a % 0xFFFFFF:06x}-anon" for a, b in ids]
        email = [f"person{i}@mail{i % 97}.example.com" for i in range(n)]
        user.append(PERSON["user_id"])
        anon.append(PERSON["anonymous_id"])
        email.append(PERSON["email"])
        self.person = n  # the last row is the person
        self.user, self.anon, self.email = (pa.array(v, pa.string()) for v in (user, anon, email))
        self.user_h = pa.array([identity_hash(key, Identity(ID, v)) for v in user])
        self.anon_h = pa.array([identity_hash(key, Identity(ID, v)) for v in anon])
        self.email_h = pa.array(
            [identity_hash(key, Identity(trait_kind("email"), v)) for v in email]
        )

    def hashes(self) -> dict[str, str]:
        return {
            "user_id": self.user_h[self.person].as_py(),
            "anonymous_id": self.anon_h[self.person].as_py(),
            "email": self.email_h[self.person].as_py(),
        }


def table_of(
    name: str,
    who: np.ndarray,
    logged_in: np.ndarray,
    hour: datetime,
    people: People,
    rng: np.random.Generator,
    seq: int,
) -> pa.Table:
    n = len(who)
    take = pa.array(who)
    mask = pa.array(~logged_in)
    at = int(hour.timestamp() * 1e6)
    received = np.sort(rng.integers(at, at + 3_600_000_000, n))
    cols: dict[str, pa.Array] = {
        "message_id": pa.array([f"{hour:%Y%m%d%H}-{seq}-{i:04d}" for i in range(n)]),
        "type": pa.array(
            ["page" if name == "pages" else "identify" if name == "identifies" else "track"] * n
        ),
        "user_id": pc.if_else(mask, pa.scalar(None, pa.string()), people.user.take(take)),
        "anonymous_id": people.anon.take(take),
        "received_at": pa.array(received, pa.timestamp("us", "UTC")),
        "timestamp": pa.array(received - rng.integers(0, 5_000_000, n), pa.timestamp("us", "UTC")),
        "channel": pa.array(["client"] * n),
        "context_ip": pa.array([f"10.{a}.{b}.{c}" for a, b, c in rng.integers(0, 255, (n, 3))]),
        "context_library_name": pa.array(["analytics.js"] * n),
        "context_page_url": pa.array(URLS).take(pa.array(rng.integers(0, len(URLS), n))),
        "context_user_agent": pa.array(AGENTS).take(pa.array(rng.integers(0, len(AGENTS), n))),
        "context_traits_email": pc.if_else(
            mask, pa.scalar(None, pa.string()), people.email.take(take)
        ),
    }
    if name == "pages":
        cols["name"] = pa.array(["Product"] * n)
        cols["path"] = pa.array(["/p/1"] * n)
    elif name == "identifies":
        cols["plan"] = pa.array(rng.choice(["free", "pro", "team"], n).tolist())
        cols["created_at"] = cols["timestamp"]
    else:
        cols["event"] = pa.array([name] * n)
        if name != "tracks":
            cols["product_id"] = pa.array([f"sku-{x}" for x in rng.integers(0, 500, n)])
            cols["price"] = pa.array(rng.random(n) * 100)
        if name == "order_completed":
            cols["order_id"] = pa.array([f"o-{x:09d}" for x in rng.integers(0, 10**9, n)])
            cols["revenue"] = pa.array(rng.random(n) * 300)
            cols["currency"] = pa.array(["EUR"] * n)
    return pa.table(cols)


def index_rows(name: str, who: np.ndarray, logged_in: np.ndarray, people: People) -> list:
    """The identity index rows of one table of the hour (presence counts, identify links)."""
    take = pa.array(who)
    anon = people.anon_h.take(take).to_pylist()
    user = people.user_h.take(take).to_pylist()
    email = people.email_h.take(take).to_pylist()
    counts: dict[str, int] = {}
    links = set()
    for a, u, e, li in zip(anon, user, email, logged_in):
        ids = [a, u, e] if li else [a]
        for x in ids:
            counts[x] = counts.get(x, 0) + 1
        if name == "identifies" and li:
            links |= {tuple(sorted(p)) for p in ((a, u), (a, e), (u, e))}
    return [(x, name, c, None) for x, c in counts.items()] + [
        (a, LINK, 1, b) for a, b in sorted(links)
    ]


def write_parquet(path: str, table: pa.Table) -> int:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(table, path, compression="snappy")
    return os.path.getsize(path)


def build_lake(lake: str, hours: int, person_hours: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    people = People(lake_key(lake), rng)
    chosen = set(rng.choice(hours, size=person_hours, replace=False).tolist())
    sizes = {"tables": 0, "index": 0}
    files = {"tables": 0, "index": 0}
    rows = 0
    for i in range(hours):
        hour = FIRST_HOUR + timedelta(hours=i)
        ah = layout.ArchiveHour(hour)
        n = int(rng.integers(50, 201))
        who = rng.integers(0, PEOPLE, n)
        logged_in = rng.random(n) < 0.7
        table_idx = rng.choice(len(SHARES), size=n, p=list(SHARES.values()))
        if i in chosen:  # the person: one to three events, logged in
            k = int(rng.integers(1, 4))
            who = np.concatenate([who, [people.person] * k])
            logged_in = np.concatenate([logged_in, [True] * k])
            table_idx = np.concatenate([table_idx, rng.integers(0, len(SHARES), k)])
        index: list = []
        tracks: list[tuple[pa.Table, np.ndarray, np.ndarray]] = []
        for t, name in enumerate(SHARES):
            sel = table_idx == t
            if not sel.any():
                continue
            tbl = table_of(name, who[sel], logged_in[sel], hour, people, rng, t)
            parts = [(name, tbl, who[sel], logged_in[sel])]
            if name in TRACK_TABLES:
                tracks.append((tbl.select(TRACK_COLUMNS), who[sel], logged_in[sel]))
            if name == TRACK_TABLES[-1] and tracks:  # tracks: every track event of the hour
                parts.append(
                    (
                        "tracks",
                        pa.concat_tables([x[0] for x in tracks]),
                        np.concatenate([x[1] for x in tracks]),
                        np.concatenate([x[2] for x in tracks]),
                    )
                )
            for target, rows_of, w, li in parts:
                path = layout.join(
                    layout.table_partition_dir(lake, SOURCE, target, "day_hour", ah),
                    layout.data_file_name(ah, RUN_ID, 0, 0),
                )
                sizes["tables"] += write_parquet(path, rows_of)
                files["tables"] += 1
                rows += rows_of.num_rows
                index += index_rows(target, w, li, people)
        path = layout.join(
            hour_dir(lake, SOURCE, ah.compact), layout.data_file_name(ah, RUN_ID, 0, 0)
        )
        sizes["index"] += write_parquet(path, index_table(index))
        files["index"] += 1
    person = sorted(layout.ArchiveHour(FIRST_HOUR + timedelta(hours=i)).compact for i in chosen)
    return {
        "hours": hours,
        "person_hours": person,
        "rows": rows,
        "files": files,
        "bytes": sizes,
        "hashes": people.hashes(),
    }


# ---------------------------------------------------------------------------- measurements


def timed(fn, repeat: int = 1):
    times, result = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return result, times


def per_hour_index_lookup(lake: str, hashes: set[str]) -> tuple[set[str], int, int]:
    """Every per-hour index file read (identity column): the lookup without a summary (what
    ``privacy.lookup.find_hours`` does for a lake never compacted)."""
    reads, found = Reads(), set()
    wanted = pa.array(sorted(hashes))
    hours, _ = summary.list_index_hours(lake, SOURCE)
    for hour, files in hours.items():
        for name, _, _ in files:
            t = open_parquet(layout.join(hour_dir(lake, SOURCE, hour), name), reads).read(
                columns=["identity"]
            )
            if pc.any(pc.is_in(t["identity"], wanted)).as_py():
                found.add(hour)
    return found, reads.bytes, reads.files


class CountingHandler(pafs.FileSystemHandler):
    """The local filesystem, counting what pyarrow's dataset reader reads through it."""

    def __init__(self):
        self.fs, self.bytes, self.files = pafs.LocalFileSystem(), 0, 0

    def _counted(self, raw):
        handler = self

        class Counted:
            closed = property(lambda s: raw.closed)

            def read(s, n=-1):
                data = raw.read(None if n is None or n < 0 else n)
                handler.bytes += len(data)
                return data

            def seek(s, *a):
                return raw.seek(*a)

            def tell(s):
                return raw.tell()

            def close(s):
                raw.close()

        self.files += 1
        return pa.PythonFile(Counted(), mode="r")

    def get_type_name(self):
        return "counting"

    def normalize_path(self, path):
        return path

    def get_file_info(self, paths):
        return self.fs.get_file_info(paths)

    def get_file_info_selector(self, selector):
        return self.fs.get_file_info(selector)

    def open_input_file(self, path):
        return self._counted(self.fs.open_input_file(path))

    def open_input_stream(self, path):
        return self._counted(self.fs.open_input_file(path))

    def _no(self, *a):
        raise NotImplementedError("read-only")

    create_dir = delete_dir = delete_dir_contents = delete_root_dir_contents = _no
    delete_file = move = copy_file = open_output_stream = open_append_stream = _no


def full_scan(lake: str, values: list[str], filesystem=None) -> set[str]:
    """The hours whose table files hold one of ``values`` in an identity column."""
    found = set()
    for name in TABLES:
        root = layout.table_root(lake, SOURCE, name)
        d = ds.dataset(root, format="parquet", filesystem=filesystem)
        cols = [c for c in IDENTITY_COLUMNS if c in d.schema.names]
        cond = None
        for c in cols:
            e = pc.field(c).isin(values)
            cond = e if cond is None else cond | e
        t = d.to_table(columns=["__filename"], filter=cond)
        found |= {layout.hour_of_data_file(f) for f in t["__filename"].unique().to_pylist()}
    return found


def scan_minimum(lake: str) -> tuple[int, int]:
    """What any column-pruned reader must read: each table file's footer (+8 bytes) and its
    identity column chunks. Read from the footers, untimed."""
    total, files = 0, 0
    for name in TABLES:
        for path in Path(layout.table_root(lake, SOURCE, name)).rglob("*.parquet"):
            md = pq.read_metadata(path)
            total += md.serialized_size + 8
            for g in range(md.num_row_groups):
                rg = md.row_group(g)
                total += sum(
                    rg.column(c).total_compressed_size
                    for c in range(rg.num_columns)
                    if rg.column(c).path_in_schema in IDENTITY_COLUMNS
                )
            files += 1
    return total, files


def duckdb_scan(lake: str, values: list[str]) -> set[str]:
    import duckdb

    con = duckdb.connect(config={"threads": 2})
    found = set()
    for name in TABLES:
        glob = f"{layout.table_root(lake, SOURCE, name)}/*/*/*.parquet"
        names = [
            d[0] for d in con.execute(f"SELECT * FROM read_parquet('{glob}') LIMIT 0").description
        ]
        cols = [c for c in IDENTITY_COLUMNS if c in names]
        where = " OR ".join(f"{c} IN (SELECT unnest(?))" for c in cols)
        rows = con.execute(
            f"SELECT DISTINCT filename FROM read_parquet('{glob}', filename=true) WHERE {where}",
            [values] * len(cols),
        ).fetchall()
        found |= {layout.hour_of_data_file(r[0]) for r in rows}
    return found


def resync_a_day(lake: str, hours: int) -> list[str]:
    """The last 24 hours' index files replaced under new names, as a day of syncs since the
    last compaction leaves them (same content: only their freshness changes)."""
    changed = []
    for i in range(max(0, hours - 24), hours):
        ah = layout.ArchiveHour(FIRST_HOUR + timedelta(hours=i))
        d = hour_dir(lake, SOURCE, ah.compact)
        run = uuid.uuid4().hex[:8]
        for seq, name in enumerate(sorted(os.listdir(d))):
            os.replace(
                os.path.join(d, name), os.path.join(d, layout.data_file_name(ah, run, 0, seq))
            )
        changed.append(ah.compact)
    return changed


def erase(lake: str, hashes: dict) -> dict:
    """``privacy.forget.forget`` on the person, when it exists (PRE-MERGE: may be absent)."""
    try:
        from datalake_assets.privacy.forget import forget
        from datalake_assets.privacy.forget_request import request_from_dict
        from datalake_assets.settings import load_settings
    except ImportError as e:
        return {"skipped": f"privacy.forget not importable ({e.name})"}
    toml = Path(lake).parent / "lake.toml"
    toml.write_text(
        f'lake_root = "{lake}"\narchive_root = "{Path(lake).parent / "archive"}"\n'
        f'[[sources]]\nid = "{SOURCE}"\nstart = "2025-01-01-00:00"\n'
    )
    try:
        settings = load_settings(str(toml), env={})
        request = request_from_dict(
            {
                "request_id": "bench-forget",
                "identities": [f"user_id={PERSON['user_id']}"],
                "follow_links": True,
            }
        )
        result, (seconds,) = timed(lambda: forget(settings, request))
    except Exception as e:  # noqa: BLE001 - a bench reports what failed and goes on
        return {"error": f"{type(e).__name__}: {str(e)[:300]}"}
    after = summary_lookup.find_hours_compacted(lake, SOURCE, set(hashes.values()))
    return {
        "seconds": round(seconds, 2),
        "status": result.status,
        "hours_rewritten": result.hours_rewritten,
        "files_rewritten": result.files_rewritten,
        "rows_removed": result.rows_removed,
        "rows_remaining": result.rows_remaining,
        "hours_found_after": len(after.hours),
        "stale_hours_after": after.stale_hours,
    }


def lookup_row(
    name: str, r: summary_lookup.SummaryLookup, times: list[float], expected: set[str]
) -> dict:
    return {
        "lookup": name,
        "hours_found": len(r.hours),
        "exact": set(r.hours) == expected,
        "bytes_read": r.bytes_read,
        "files_read": r.files_read,
        "row_groups_read": r.row_groups_read,
        "stale_hours": r.stale_hours,
        "files_listed": r.files_listed,
        "first_s": round(times[0], 3),
        "median_s": round(statistics.median(times), 3),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hours", type=int, default=8760)
    p.add_argument("--person-hours", type=int, default=50)
    p.add_argument("--seed", type=int, default=16)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--out", default=str(REPO / "bench" / "out" / "forget"))
    p.add_argument("--reuse", action="store_true")
    p.add_argument("--no-duckdb", action="store_true")
    p.add_argument("--no-forget", action="store_true")
    a = p.parse_args()
    out = Path(a.out)
    lake = str(out / "lake")
    marker = out / "build.json"
    wanted = {"hours": a.hours, "person_hours": a.person_hours, "seed": a.seed}
    built = json.loads(marker.read_text()) if a.reuse and marker.exists() else None
    if built is None or built["args"] != wanted:
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        build, (seconds,) = timed(lambda: build_lake(lake, a.hours, a.person_hours, a.seed))
        built = {"args": wanted, "build": build, "build_s": round(seconds, 1)}
        marker.write_text(json.dumps(built))
    b = built["build"]
    expected = set(b["person_hours"])
    print(
        f"lake: {b['hours']:,} hours, {b['rows']:,} rows in {b['files']['tables']:,} table "
        f"files ({b['bytes']['tables'] / 2**20:,.0f} MiB), {b['files']['index']:,} index "
        f"files ({b['bytes']['index'] / 2**20:,.1f} MiB); person in {len(expected)} hours; "
        f"built in {built['build_s']} s",
        flush=True,
    )
    h = b["hashes"]
    shutil.rmtree(summary.summary_root(lake, SOURCE), ignore_errors=True)  # compacted below
    results: dict = {
        "build": built,
        "machine": {
            "python": platform.python_version(),
            "pyarrow": pa.__version__,
            "cpus": os.cpu_count(),
        },
    }
    stats, (seconds,) = timed(lambda: summary.compact(lake, SOURCE))
    results["compaction"] = stats.to_dict()
    print(
        f"compaction: {stats.months_written} months, {stats.hours_read:,} hours read "
        f"({stats.bytes_read / 2**20:.1f} MiB), {stats.bytes_written / 2**20:.1f} MiB "
        f"written, {seconds:.1f} s",
        flush=True,
    )

    lookups = []
    for name, hashes in (
        ("summary, user id", {h["user_id"]}),
        ("summary, 3 identities", set(h.values())),
    ):
        r, times = timed(
            lambda: summary_lookup.find_hours_compacted(lake, SOURCE, hashes), a.repeat
        )
        lookups.append(lookup_row(name, r, times, expected))
    changed = resync_a_day(lake, a.hours)
    r, times = timed(
        lambda: summary_lookup.find_hours_compacted(lake, SOURCE, {h["user_id"]}), a.repeat
    )
    lookups.append(lookup_row(f"summary + {len(changed)} stale hours", r, times, expected))
    nightly, (seconds,) = timed(lambda: summary.compact(lake, SOURCE))
    results["nightly_compaction"] = nightly.to_dict()
    print(
        f"compaction after a day: {nightly.months_written} month, {nightly.hours_read} hours "
        f"read, {nightly.bytes_read / 2**20:.1f} MiB read, {seconds:.2f} s",
        flush=True,
    )
    (hours_listed, entries), times = timed(lambda: summary.list_index_hours(lake, SOURCE), a.repeat)
    lookups.append(
        {
            "lookup": "(listing the per-hour index alone)",
            "files_listed": entries,
            "first_s": round(times[0], 3),
            "median_s": round(statistics.median(times), 3),
        }
    )
    (found, nbytes, nfiles), times = timed(lambda: per_hour_index_lookup(lake, {h["user_id"]}))
    lookups.append(
        {
            "lookup": "every per-hour index file",
            "hours_found": len(found),
            "exact": found == expected,
            "bytes_read": nbytes,
            "files_read": nfiles,
            "first_s": round(times[0], 3),
            "median_s": round(times[0], 3),
        }
    )

    values = [PERSON["user_id"], PERSON["anonymous_id"], PERSON["email"]]
    counting = CountingHandler()
    found, times = timed(lambda: full_scan(lake, values, pafs.PyFileSystem(counting)))
    lookups.append(
        {
            "lookup": "full scan, pyarrow (counted)",
            "hours_found": len(found),
            "exact": found == expected,
            "bytes_read": counting.bytes,
            "files_read": counting.files,
            "first_s": round(times[0], 3),
            "median_s": round(times[0], 3),
        }
    )
    found, times = timed(lambda: full_scan(lake, values))
    lookups.append(
        {
            "lookup": "full scan, pyarrow (native fs)",
            "hours_found": len(found),
            "exact": found == expected,
            "first_s": round(times[0], 3),
            "median_s": round(times[0], 3),
        }
    )
    minimum, files = scan_minimum(lake)
    lookups.append(
        {
            "lookup": "full scan, minimum (footers + identity chunks)",
            "bytes_read": minimum,
            "files_read": files,
        }
    )
    if not a.no_duckdb:
        found, times = timed(lambda: duckdb_scan(lake, values))
        lookups.append(
            {
                "lookup": "full scan, DuckDB",
                "hours_found": len(found),
                "exact": found == expected,
                "first_s": round(times[0], 3),
                "median_s": round(times[0], 3),
            }
        )
    results["lookups"] = lookups
    ours = lookups[0]["bytes_read"]
    results["ratio_vs_scan_minimum"] = round(minimum / ours, 1)
    results["ratio_vs_pyarrow_scan"] = round(counting.bytes / ours, 1)
    if not a.no_forget:
        results["forget"] = erase(lake, h)
        if "skipped" not in results["forget"]:
            marker.unlink()  # the lake was changed: no --reuse of it

    print(
        "\n| lookup | hours found | exact | bytes read | files read | row groups | stale "
        "hours | first s | median s |"
    )
    print("|---|--:|---|--:|--:|--:|--:|--:|--:|")
    for r in lookups:

        def f(k, fmt="{:,}"):
            return fmt.format(r[k]) if r.get(k) is not None else ""

        print(
            f"| {r['lookup']} | {f('hours_found')} | {f('exact', '{}')} | {f('bytes_read')} | "
            f"{f('files_read')} | {f('row_groups_read')} | {f('stale_hours')} | "
            f"{f('first_s', '{:.3f}')} | {f('median_s', '{:.3f}')} |"
        )
    print(
        f"\nbytes: full-scan minimum / ours = {results['ratio_vs_scan_minimum']}x; "
        f"pyarrow scan / ours = {results['ratio_vs_pyarrow_scan']}x (target: 50x)"
    )
    if "forget" in results:
        print(f"forget: {json.dumps(results['forget'])}")
    (out / "results.json").write_text(json.dumps(results, indent=2))
    ok = all(r.get("exact", True) for r in lookups)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
