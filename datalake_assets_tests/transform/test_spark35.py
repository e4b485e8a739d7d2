"""The sync on PySpark 3.5 (EMR 7.x ships Spark 3.5) writes the same lake as on the project's
PySpark 4.x: issue #14's "must also run on Spark 3.5 with the same results".

The same archive (the demo's messy hours plus hand-made lines: malformed and oversized lines,
duplicates in a file, in a batch and across hours through the lookback window, a suppressed
person, a column that widens in the second run and a value that does not fit, nested values
and arrays) is synced by ``spark_version_driver.py`` under each interpreter, in a process of
its own: hours 10 and 11, then hours 11 (again) and 12 on the Spark paths of a batch too big for the driver (the
dedup's window, the check's Spark job). Both go through the job's entry point with a Hive catalog in embedded Derby, and
run Spark jobs (stage A, the dedup, stage B, the checks). Then every file of the two lakes is compared: each table's rows and Parquet
schemas per partition, quarantine, the id and identity indexes, the schema record, the reports
(JSON and ``sync_reports``), and the two catalogs (tables, columns, partitions, row counts
through Spark SQL). Only run ids, times and the lake's own path may differ.

PySpark 3.5 lives in a venv of its own (``SPARK35_INSTALL``: the job's libraries as on an EMR
node, no Dagster). Missing, the test skips, except under CI (``CI`` set, as ``.ci/run``
does), where it fails.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest

from datalake_assets.ingest.demo import generate_archive
from datalake_assets.lake.identities import KEY_BYTES, write_suppressed
from datalake_assets.settings.orchestration_section import JOB_LIBRARIES
from datalake_assets.spec import layout
from datalake_assets.spec.identity import identity, identity_hash
from datalake_assets_tests.support.archive_builders import msg, write_hour

REPO = Path(__file__).resolve().parents[2]
REQUIREMENTS = Path(__file__).with_name("spark35-requirements.txt")
SPARK35_INSTALL = (
    "python3 -m venv .venv-spark35 && .venv-spark35/bin/pip install -q "
    "-r datalake_assets_tests/transform/spark35-requirements.txt"
)
DRIVER = Path(__file__).with_name("spark_version_driver.py")
IN_CI = bool(os.environ.get("CI"))
SRC = "src35"
KEY = bytes(range(KEY_BYTES))  # one privacy key for both lakes: their identity hashes agree
RUN_ID = re.compile(r"\d{8}T\d{6}-[0-9a-f]{8}")
# What may differ between two syncs of the same archive: when they ran and under which id.
VOLATILE = {
    "run_id",
    "start_time",
    "finish_time",
    "duration_mins",
    "timings",
    "updated_at",
    "recorded_at",  # when the lake recorded its table format (lake/formats/format_record.py)
}


def spark35_python() -> str | None:
    """SPARK35_PYTHON, else the repository's ``.venv-spark35``; ``None`` if it is missing."""
    python = Path(os.environ.get("SPARK35_PYTHON") or REPO / ".venv-spark35" / "bin" / "python")
    return str(python) if python.exists() else None


def _joined(lines: list[str]) -> str:
    return " ".join(line.strip().rstrip("\\").strip() for line in lines)


def test_the_spark35_venv_is_an_emr_node_and_ci_installs_it():
    """The venv holds what a cluster node gets (``JOB_LIBRARIES``, which the EMR bootstrap
    and Databricks install) plus PySpark 3.5; the README's test command builds it, and
    ``.ci/run`` runs that same command."""
    lines = [
        s.strip()
        for s in REQUIREMENTS.read_text(encoding="utf-8").splitlines()
        if s.strip() and not s.lstrip().startswith("#")
    ]
    assert re.fullmatch(r"pyspark==3\.5\.\d+", lines[0]), lines[0]
    assert tuple(lines[1:]) == JOB_LIBRARIES
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = readme.split("Run the test suite", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    ci = (REPO / ".ci/run").read_text(encoding="utf-8").split("# The README's test command:\n")[1]
    command = _joined(block.splitlines())
    assert _joined(ci.splitlines()) == command
    assert SPARK35_INSTALL in command


# ---------------------------------------------------------------------------------- archive


def _first_valid(path: str, n: int) -> list[dict]:
    import gzip

    out = []
    with gzip.open(path, "rb") as f:
        for line in f:
            try:
                m = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if (
                isinstance(m, dict)
                and isinstance(m.get("messageId"), str)
                and m["messageId"] not in {o["messageId"] for o in out}
            ):
                out.append(m)
            if len(out) == n:
                break
    return out


def _probe(mid: str, hour: str, minute: int, **props) -> dict:
    return msg(mid, hour, minute, event="Probe Seen", properties=props)


def write_archive(archive: str) -> None:
    hours = [layout.ArchiveHour.parse(h) for h in ("2026-11-21T10", "2026-11-21T11")]
    summary = generate_archive(
        archive,
        SRC,
        hours,
        events_per_hour=1500,
        files_per_hour=2,
        seed=35,
        malformed_rate=0.01,
        duplicate_rate=0.03,
    )
    assert summary.malformed_lines and summary.duplicate_lines
    big = {
        "type": "track",
        "event": "Big",
        "messageId": "big-1",
        "receivedAt": "2026-11-21T11:30:00Z",
        "properties": {"blob": "x" * 40_000},
    }
    write_hour(
        archive,
        SRC,
        "2026-11-21T11",
        [
            _probe(
                "p1",
                "2026-11-21T11",
                1,
                amount=1,
                ratio=2,
                flag=True,
                tags=["a", "b"],
                when="2026-11-20T08:00:00Z",
                nested={"x": {"y": 1}},
            ),
            _probe(
                "p2",
                "2026-11-21T11",
                3,
                amount=2,
                ratio=3,
                flag="false",
                tags=[],
                when="2026-11-20T09:00:00+01:00",
            ),
            _probe("p2", "2026-11-21T11", 2, amount=20, ratio=30),  # in-file duplicate, earlier
            msg("s1", "2026-11-21T11", 4, anonymousId="anon-suppressed"),
            msg(
                "s2",
                "2026-11-21T11",
                5,
                type="identify",
                anonymousId="anon-suppressed",
                traits={"email": "Someone@Example.com"},
            ),
            b"{not json",
            b'"a string"',
            b"",
            orjson.dumps(big),
            {"type": "track", "event": "No Id", "receivedAt": "2026-11-21T11:06:00Z"},
            {"type": "nonsense", "messageId": "bad-type", "receivedAt": "2026-11-21T11:07:00Z"},
        ],
        name="part-9000.jsonl.gz",
    )
    # Hour 12: copies of hour 10's messages (duplicates across hours, in the lookback
    # window); a probe column widens (bigint -> double), another gets a value that does not
    # fit (quarantined).
    copies = _first_valid(
        os.path.join(layout.archive_hour_dir(archive, SRC, hours[0]), "part-0000.jsonl.gz"), 6
    )
    for m in copies:
        m["receivedAt"] = "2026-11-21T12:10:00.000Z"
    write_hour(
        archive,
        SRC,
        "2026-11-21T12",
        [
            *copies,
            _probe("p3", "2026-11-21T12", 1, amount="1.5x", ratio=2.5, flag=False, tags=["c"]),
            _probe("p1", "2026-11-21T12", 2, amount=7),  # p1 is in hour 11: a duplicate
            msg("s3", "2026-11-21T12", 3, anonymousId="anon-suppressed"),
            b"[1, 2]",
        ],
    )


# ------------------------------------------------------------------------------- the runs


def _run_drivers(tmp: Path, archive: str, pythons: dict[str, str]) -> dict[str, dict]:
    """Both drivers side by side, each on a lake and a metastore of its own."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "PYSPARK_PYTHON",
            "PYSPARK_DRIVER_PYTHON",
            "SPARK_HOME",
            "SPARK_ENV_LOADED",
            "PYTHONPATH",
        )
    }
    env["PYTHONPATH"] = str(REPO)
    procs = {}
    for name, python in pythons.items():
        work = tmp / name
        work.mkdir()
        lake_root = str(work / "lake")
        os.makedirs(os.path.dirname(layout.privacy_key_path(lake_root)))
        Path(layout.privacy_key_path(lake_root)).write_bytes(KEY)
        write_suppressed(
            lake_root, "req-1", [identity_hash(KEY, identity("id", "anon-suppressed"))]
        )
        spec = {
            "lake_root": lake_root,
            "archive_root": archive,
            "source_id": SRC,
            "metastore_dir": str(work / "metastore"),
            "runs": [
                {"hours": ["2026-11-21T10", "2026-11-21T11"]},
                {"hours": ["2026-11-21T11", "2026-11-21T12"], "big_batch": True},
            ],
        }
        (work / "spec.json").write_text(json.dumps(spec))
        procs[name] = (
            lake_root,
            subprocess.Popen(
                [python, str(DRIVER), str(work / "spec.json")],
                cwd=work,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            ),
        )
    out = {}
    for name, (lake_root, proc) in procs.items():
        stdout, stderr = proc.communicate(timeout=900)
        assert proc.returncode == 0, f"{name}: exit {proc.returncode}\n{stderr[-6000:]}"
        result = json.loads(stdout.strip().splitlines()[-1])
        assert result["exit_codes"] == [0, 0], f"{name}: {stdout[-3000:]}\n{stderr[-6000:]}"
        out[name] = {"lake_root": lake_root, **result}
    return out


# ------------------------------------------------------------------------- the comparison


def _substitutions(lake_root: str) -> list[tuple[str, str]]:
    """What names the lake itself in its files: its path, and the days its syncs ran on
    (the reports' partitions)."""
    days = {r["start_time"][:10] for r in _reports(lake_root)}
    return [(lake_root, "<lake>"), *((d, "<run day>") for d in sorted(days))]


def _text(value: str, subs: list[tuple[str, str]]) -> str:
    for old, new in subs:
        value = value.replace(old, new)
    return RUN_ID.sub("<run>", value)


def _normal(value, subs: list[tuple[str, str]]):
    """``value`` without what may differ between the two lakes (``VOLATILE`` keys, run ids,
    ``_substitutions``), JSON text included."""
    if isinstance(value, dict):
        return {k: _normal(v, subs) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_normal(v, subs) for v in value]
    if isinstance(value, str):
        if value[:1] in "{[":
            try:
                return _normal(json.loads(value), subs)
            except ValueError:
                pass
        return _text(value, subs)
    return value


def _documents(path: str) -> list:
    """A JSON file's document, or a JSON-lines file's."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        return [json.loads(text)]
    except ValueError:
        return [json.loads(line) for line in text.splitlines() if line.strip()]


def lake_view(lake_root: str) -> dict[str, object]:
    """Every folder of the lake -> what a reader finds there: Parquet rows (sorted) and
    schemas, JSON documents, other files' bytes; keyed without run ids."""
    view: dict[str, dict] = {}
    subs = _substitutions(lake_root)
    for directory, _, names in os.walk(lake_root):
        rel = _text(os.path.relpath(directory, lake_root), subs)
        if rel.startswith(("_locks", "_staging")):
            continue
        slot = view.setdefault(rel, {"rows": [], "schemas": set(), "json": [], "files": set()})
        for name in sorted(names):
            path = os.path.join(directory, name)
            if name.endswith(".parquet"):
                table = pq.read_table(path)
                slot["schemas"].add(tuple((f.name, str(f.type)) for f in table.schema))
                slot["rows"] += [repr(_normal(r, subs)) for r in table.to_pylist()]
            elif name.endswith((".json", ".jsonl")):
                slot["json"] += [repr(_normal(d, subs)) for d in _documents(path)]
            elif name != "_COMMITTED_BY":  # holds the committing run's id
                slot["files"].add((_text(name, subs), Path(path).read_bytes()))
    for slot in view.values():
        slot["rows"].sort()
        slot["json"].sort()
    return view


def _reports(lake_root: str) -> list[dict]:
    out = []
    for path in sorted(Path(lake_root, "reports").rglob("report.json")):
        out += _documents(str(path))
    return sorted((r for r in out if r.get("type") != "event"), key=lambda r: r["start_time"])


@pytest.mark.slow
@pytest.mark.spark
def test_spark35_and_spark4_write_the_same_lake(tmp_path):
    python35 = spark35_python()
    if python35 is None:
        reason = (
            f"PySpark 3.5's venv is missing (SPARK35_PYTHON or .venv-spark35); build it "
            f"with: {SPARK35_INSTALL}"
        )
        if IN_CI:
            pytest.fail(f"{reason} (CI: a test dependency, installed by .ci/run)")
        pytest.skip(reason)
    archive = str(tmp_path / "archive")
    write_archive(archive)
    t = time.monotonic()
    runs = _run_drivers(tmp_path, archive, {"spark35": python35, "spark4": sys.executable})
    print(f"both drivers: {time.monotonic() - t:.1f} s")
    assert runs["spark35"]["pyspark"].startswith("3.5.")
    assert runs["spark35"]["spark"].startswith("3.5.")
    assert runs["spark4"]["pyspark"].startswith("4.")

    # The scenario covers what it claims (two empty lakes would compare equal too).
    first, second = _reports(runs["spark4"]["lake_root"])
    for report in (first, second):
        assert report["status"] == "finished"
        assert report["lines_in"] == (
            report["messages_written"]
            + report["duplicates"]
            + report["lines_quarantined"]
            + report["suppressed"]
        )
    assert first["duplicates"] > 0 and first["lines_quarantined"] > 0 and first["suppressed"] == 2
    assert second["cross_hour_duplicates"] == 6 and second["suppressed"] == 3
    assert second["values_quarantined"] == 1
    assert [r["suppressed"] for r in _reports(runs["spark35"]["lake_root"])] == [2, 3]

    views = {name: lake_view(run["lake_root"]) for name, run in runs.items()}
    folders35, folders4 = set(views["spark35"]), set(views["spark4"])
    assert folders35 == folders4, (sorted(folders35 - folders4), sorted(folders4 - folders35))
    assert any(f.startswith("data/") for f in folders4) and any("quarantine" in f for f in folders4)
    differ = [f for f in sorted(folders4) if views["spark35"][f] != views["spark4"][f]]
    assert not differ, f"folders that differ between PySpark 3.5 and 4: {differ[:10]}"

    catalogs = {
        name: _normal(run["catalog"], _substitutions(run["lake_root"]))
        for name, run in runs.items()
    }
    assert catalogs["spark35"] == catalogs["spark4"]
    tables = catalogs["spark4"][SRC]
    assert tables["probe_seen"]["rows"] == 3 and len(tables["probe_seen"]["partitions"]) == 2
    assert ["properties_ratio", "double"] in tables["probe_seen"]["columns"]  # widened
    assert ["properties_amount", "bigint"] in tables["probe_seen"]["columns"]  # "1.5x": quarantined
