"""What the JVM routes of issue #14 cost on the 2M-event hour, before any of our rules.

    python bench/bench_jvm_routes.py --archive /tmp/b2m/archive [--steps text,parse,schema,fromjson]
                                     [--out bench/out/jvm] [--spark-memory 8g]

The issue suggests moving the per-line work of stage A into Spark's JVM: ``parse_json`` to
VARIANT, ``schema_of_variant_agg`` for the column statistics, ``try_variant_get`` to flatten
and cast; or ``from_json`` with a schema from a cheap first pass. This script times the bare
engine doing those things on ``bench_sync.py``'s archive (``--archive``: the folder it
generated, ``<out>/archive`` of that run), in one local session sized as our sync's
(``local[2]``, the same ``transform/session.py`` conf). Nothing of the sync's contract is
done: no validation, no naming rules, no kinds, no dedup, no quarantine. So each figure is a
lower bound for a sync built that way, to set against ``bench_sync.py``'s naive PySpark job
(``spark.read.json`` + ``write.partitionBy``) measured the same day.

Steps (``--steps``, in this order):

- ``text``: ``spark.read.text`` and a count: gunzip and line splitting in the JVM.
- ``parse``: ``try_parse_json`` of every line and a count by ``variant_get($.type)``.
- ``schema``: ``schema_of_variant_agg`` per event (``coalesce(event, type)``): the statistics
  pass of the VARIANT route.
- ``fromjson``: the ``from_json`` route, two passes: the schema of every object line
  (``schema_of_variant_agg``), then ``from_json`` with it, every leaf as a column, written as
  Parquet partitioned by event.
- ``variant``: the VARIANT route's write: ``try_variant_get`` per leaf column (the union of
  the events' schemas) from the parsed VARIANT, written partitioned by event. Slow (about five
  minutes on 2 cores); not in the default steps.

CPU seconds are those of this process and its children (the JVM); no step runs Python
workers. Printed: one line per step, and all of them as JSON at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

DEFAULT_STEPS = "text,parse,schema,fromjson"


def tree_cpu_s() -> float:
    """User + system CPU seconds of this process and its live children (the JVM)."""
    me = os.getpid()
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(pid) == me or int(fields[1]) == me:
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def leaf_paths(dt, path=()):
    """The paths of every non-struct field of a Spark struct type."""
    from pyspark.sql.types import StructType

    if isinstance(dt, StructType):
        for f in dt.fields:
            yield from leaf_paths(f.dataType, (*path, f.name))
    else:
        yield path, dt


def variant_schema_to_struct(text: str):
    """``schema_of_variant_agg``'s text as a Spark struct type: OBJECT is STRUCT, a VARIANT
    (types that disagree) is read as STRING, decimals as DOUBLE."""
    from pyspark.sql.types import _parse_datatype_string

    ddl = text.replace("OBJECT<", "STRUCT<").replace("VARIANT", "STRING")
    return _parse_datatype_string(re.sub(r"DECIMAL\(\d+,\d+\)", "DOUBLE", ddl))


def column_name(path: tuple[str, ...]) -> str:
    return re.sub(r"[^a-z0-9_]", "_", "_".join(path).lower())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--archive", required=True, help="bench_sync.py's <out>/archive")
    p.add_argument("--steps", default=DEFAULT_STEPS)
    p.add_argument("--out", default=str(REPO / "bench" / "out" / "jvm"))
    p.add_argument("--spark-memory", default="8g")
    args = p.parse_args()
    steps = args.steps.split(",")
    out = Path(args.out)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    hours = sorted(Path(args.archive).glob("*/day=*/hr=*"))
    if not hours:
        raise SystemExit(f"no archive hour under {args.archive}: run bench_sync.py first")

    from datalake_assets.transform.session import local_spark_session

    spark = local_spark_session(
        "local[2]",
        args.spark_memory,
        {"spark.local.dir": str(out / "tmp"), "spark.ui.showConsoleProgress": "false"},
    )
    spark.sparkContext.setLogLevel("ERROR")
    from pyspark.sql import functions as F

    results: list[dict] = []

    def step(name: str, fn) -> object:
        c, t = tree_cpu_s(), time.monotonic()
        r = fn()
        row = {
            "step": name,
            "wall_s": round(time.monotonic() - t, 1),
            "cpu_s": round(tree_cpu_s() - c, 1),
        }
        results.append(row)
        print(json.dumps(row), flush=True)
        return r

    text = spark.read.text([str(h) for h in hours])
    parsed = text.select(F.try_parse_json("value").alias("v"))
    event = F.coalesce(
        F.try_variant_get("v", "$.event", "string"), F.try_variant_get("v", "$.type", "string")
    ).alias("e")
    if "text" in steps:
        step("text: read, gunzip, split, count", text.count)
    if "parse" in steps:
        step(
            "parse: try_parse_json, count by type",
            lambda: parsed.groupBy(F.try_variant_get("v", "$.type", "string")).count().collect(),
        )
    if "schema" in steps or "variant" in steps:
        per_event = step(
            "schema: schema_of_variant_agg per event",
            lambda: (
                parsed.select(event, "v")
                .groupBy("e")
                .agg(F.expr("schema_of_variant_agg(v)").alias("s"))
                .collect()
            ),
        )
    if "fromjson" in steps:
        is_object = "try_variant_get(v, '$.type', 'string') is not null"
        whole = step(
            "fromjson 1/2: schema_of_variant_agg of every object line",
            lambda: parsed.select(
                F.expr(f"schema_of_variant_agg(v) filter (where {is_object})")
            ).collect()[0][0],
        )
        schema = variant_schema_to_struct(whole)
        j = text.select(F.from_json("value", schema).alias("j"))
        cols, seen = [], set()
        for path, _ in leaf_paths(schema):
            name = column_name(path)
            if name not in seen:
                seen.add(name)
                cols.append(F.col("j." + ".".join(f"`{x}`" for x in path)).alias(name))
        step(
            f"fromjson 2/2: from_json, {len(cols)} columns, write by event",
            lambda: (
                j.select(F.coalesce(F.col("j.event"), F.col("j.type")).alias("e"), *cols)
                .write.mode("overwrite")
                .partitionBy("e")
                .parquet(str(out / "fromjson"))
            ),
        )
    if "variant" in steps:
        cols, seen = [], set()
        for r in per_event:
            for path, dt in leaf_paths(variant_schema_to_struct(r["s"])):
                name = column_name(path)
                if name in seen:
                    continue
                seen.add(name)
                typ = dt.simpleString()
                cols.append(
                    F.try_variant_get(
                        "v",
                        "$" + "".join(f'["{x}"]' for x in path),
                        typ if typ in ("bigint", "double", "boolean") else "string",
                    ).alias(name)
                )
        step(
            f"variant: try_variant_get, {len(cols)} columns, write by event",
            lambda: (
                parsed.select(event, *cols)
                .write.mode("overwrite")
                .partitionBy("e")
                .parquet(str(out / "variant"))
            ),
        )
    spark.stop()
    print(json.dumps({"archive": args.archive, "steps": results}, indent=1))


if __name__ == "__main__":
    main()
