"""Benchmark: an Iceberg table commit of files written in place, against pyiceberg writing the
same rows (issue #42), and the cost of a type widening on a large table.

    PYTHONPATH=. .venv/bin/python bench/bench_iceberg_commit.py [--files 1 40 400]
        [--rows-per-file 5000] [--widen-rows 2000000]

**Commit by files.** For each ``--files`` count N, a fresh lake's table (the SQL catalog in
SQLite under the lake) gets one hour of N Parquet files written as stage B writes them
(``HourFiles`` with the format's ``write_targets``: field ids, ``day``/``hr`` inside), each of
``--rows-per-file`` rows of demo-like columns; then the hour is committed twice, timed:
``in place`` (``IcebergFormat.apply`` of the step the sync journals: footers read, one
overwrite snapshot) and, on a second lake, ``pyiceberg writes`` (the same rows read into Arrow
and ``Table.overwrite``: the commit before issue #42). A replay of the hour (its files
replaced) is timed too. The figure that matters is how the in-place commit grows with N and
not with the rows.

**Widening.** A table of ``--widen-rows`` rows over 24 hours gets an hour whose ``value``
column widens ``bigint -> double``: the commit rewrites every kept row with the new type
(``iceberg_schema.commit_widening``). Printed: its wall and the rows rewritten, against the
same hour's commit without a widening.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time
import warnings
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parent.parent
HOUR = "2026112110"
COLUMNS = (
    ("message_id", "string"),
    ("user_id", "string"),
    ("event", "string"),
    ("value", "bigint"),
    ("price", "double"),
    ("timestamp", "timestamp"),
)


def rows(n: int, seed: int, value_type: pa.DataType | None = None) -> pa.Table:
    import datetime as dt

    value_type = value_type or pa.int64()

    base = dt.datetime(2026, 11, 21, 10, tzinfo=dt.UTC)
    return pa.table(
        {
            "message_id": [f"m-{seed}-{i}" for i in range(n)],
            "user_id": [f"u{(i * 7919) % 5000}" for i in range(n)],
            "event": [("Order Completed", "Product Viewed", "Signed Up")[i % 3] for i in range(n)],
            "value": pa.array([i % 1000 for i in range(n)], value_type),
            "price": [float(i % 997) / 3 for i in range(n)],
            "timestamp": pa.array(
                [base + dt.timedelta(milliseconds=i) for i in range(n)], pa.timestamp("us", "UTC")
            ),
        }
    )


def lake(out: Path, name: str):
    from datalake_assets.lake.formats import SourceTables, table_format
    from datalake_assets.settings.formats_section import FormatConfig

    root = out / name
    shutil.rmtree(root, ignore_errors=True)
    return table_format(FormatConfig(format="iceberg"), str(root)), SourceTables("bench", "bench")


def write_in_place(
    fmt, src, n_files: int, per_file: int, seed: int, columns=COLUMNS, hour=HOUR, widened=()
):
    """The hour's files as stage B writes them; ``[(location, bytes, hour)]``."""
    from datalake_assets.spec.layout import ArchiveHour
    from datalake_assets.transform.hour_files import HourFiles

    widen = {"events": tuple(widened)} if widened else {}
    target = fmt.write_targets(src, {"events": columns}, widen, [hour])["events"]
    h = ArchiveHour.parse(hour)
    out = []
    for i in range(n_files):
        files = HourFiles(target.directories[hour], h, f"r{seed}", i, target.schema)
        t = rows(per_file, seed * 100_000 + i, target.schema.field("value").type)
        t = t.append_column("day", pa.array([h.day] * per_file)).append_column(
            "hr", pa.array([h.hr] * per_file)
        )
        files.write(t.cast(target.schema))
        out += [(w.location, w.bytes, hour) for w in files.close()]
    return out


def commit(fmt, src, written, run_id: str, columns=COLUMNS, widened=(), hour=HOUR) -> float:
    from datalake_assets.lake.formats import TablesToCommit

    batch = TablesToCommit(
        src,
        run_id,
        "",
        (hour,),
        {"events": columns},
        widened={"events": tuple(widened)} if widened else {},
        written={"events": tuple(written)},
    )
    _, steps = fmt.plan(batch)
    t = time.perf_counter()
    fmt.apply(steps[0], run_id)
    return time.perf_counter() - t


def by_pyiceberg(fmt, src, written, run_id: str) -> float:
    """The same rows committed the way the sync did before: read into Arrow, written by
    pyiceberg (``Table.overwrite`` of the hour)."""
    from datalake_assets.lake.formats.iceberg_hours import hours_filter

    warnings.filterwarnings("ignore", "Delete operation did not match")  # a first overwrite
    t = time.perf_counter()
    data = pa.concat_tables(pq.read_table(loc) for loc, _, _ in written)
    tbl = fmt.load(src, "events")
    if tbl is None:
        tbl = fmt._create(src, "events", COLUMNS)
    tbl.overwrite(data.cast(tbl.schema().as_arrow()), overwrite_filter=hours_filter([HOUR]))
    return time.perf_counter() - t


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--files", type=int, nargs="+", default=[1, 40, 400])
    p.add_argument("--rows-per-file", type=int, default=5000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--widen-rows", type=int, default=2_000_000)
    p.add_argument("--out", default=str(REPO / "bench" / "out" / "iceberg_commit"))
    a = p.parse_args()
    out = Path(a.out)
    import os

    print(f"load {os.getloadavg()[0]:.1f}\n")
    print("| files | rows | in place s (first, replay) | pyiceberg writes s | ratio |")
    print("|---|---|---|---|---|")
    for n in a.files:
        ins, pys = [], []
        for r in range(a.repeat):
            fmt, src = lake(out, f"inplace-{n}-{r}")
            first = write_in_place(fmt, src, n, a.rows_per_file, 1)
            t1 = commit(fmt, src, first, "r1")
            again = write_in_place(fmt, src, n, a.rows_per_file, 2)
            t2 = commit(fmt, src, again, "r2")
            ins.append((t1, t2))
            old, osrc = lake(out, f"pyiceberg-{n}-{r}")
            pys.append(by_pyiceberg(old, osrc, first, "p1"))
        first_s = statistics.median(t for t, _ in ins)
        replay_s = statistics.median(t for _, t in ins)
        py_s = statistics.median(pys)
        print(
            f"| {n} | {n * a.rows_per_file:,} | {first_s:.2f}, {replay_s:.2f} | {py_s:.2f} | "
            f"{py_s / replay_s:.1f}x |"
        )

    if a.widen_rows:
        fmt, src = lake(out, "widen")
        per_hour = a.widen_rows // 24
        for h in range(24):  # the table: a day of hours, written and committed in place
            hour = f"20261120{h:02d}"
            written = write_in_place(fmt, src, 1, per_hour, 10 + h, hour=hour)
            commit(fmt, src, written, f"w{h}", hour=hour)
        plain = commit(fmt, src, write_in_place(fmt, src, 1, 1000, 50), "plain")
        widened_cols = tuple((c, "double" if c == "value" else t) for c, t in COLUMNS)
        written = write_in_place(fmt, src, 1, 1000, 51, widened_cols, widened=("value",))
        widen = commit(fmt, src, written, "widen", widened_cols, widened=("value",))
        kept = fmt.load(src, "events").scan().to_arrow().num_rows
        print(
            f"\nwidening bigint -> double on a table of {kept:,} rows: {widen:.2f} s "
            f"(every kept row rewritten), against {plain:.2f} s for the same hour's commit "
            f"without a widening ({widen / plain:.0f}x)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
