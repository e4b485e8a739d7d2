"""Asset checks: each fails on purpose-built bad data and passes on good data (real Spark)."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dagster import AssetCheckSeverity, DagsterInstance, materialize

from datalake_assets.lake.report import TableChecks, TableReport
from datalake_assets.orchestration.compute.spark_compute import LocalSparkCompute
from datalake_assets.orchestration.sync.source_assets import build_source_assets
from datalake_assets.orchestration.sync.sync_checks import table_check_results
from datalake_assets.transform import dedup, local_path, sync
from datalake_assets_tests.support.archive_builders import msg, write_hour
from datalake_assets_tests.support.settings_files import load_lake_toml

pytestmark = [pytest.mark.spark, pytest.mark.dagster]
HOUR = "2026-11-21T10"


@pytest.fixture()
def settings(tmp_path):
    return load_lake_toml(
        tmp_path,
        'archive_root = "archive"\nlake_root = "lake"\n'
        '[[sources]]\nid = "web"\nstart = "2026-11-01-00:00"\n',
    )


def run(settings, raise_on_error=True):
    result = materialize(
        build_source_assets(settings, settings.sources[0]),
        resources={"compute": LocalSparkCompute()},
        partition_key="2026-11-21-10:00",
        instance=DagsterInstance.ephemeral(),
        raise_on_error=raise_on_error,
    )
    return result, {
        (e.asset_key.path[-1], e.check_name): e for e in result.get_asset_check_evaluations()
    }


@pytest.mark.slow
def test_checks_pass_on_good_data(spark, settings):
    write_hour(
        settings.archive_root,
        "web",
        HOUR,
        [msg(f"m{i}", type="page", name="Home") for i in range(20)] + [msg("m1", type="page")],
    )
    result, checks = run(settings)
    assert result.success
    assert checks[("sync_reports", "completeness")].passed
    for name in ("duplicates", "type_drift", "schema_conformance"):
        assert checks[("pages", name)].passed, name
    assert checks[("pages", "duplicates")].metadata["duplicates_removed"].value == 1


@pytest.mark.slow
def test_type_drift_and_conformance_fail_on_bad_data(spark, settings):
    page = {"type": "page", "name": "Home"}
    lines = [msg(f"m{i}", properties={"n": i}, **page) for i in range(20)]
    lines += [
        msg("bad-n", properties={"n": "not a number"}, **page),
        msg("no-received", receivedAt=None, **page),
    ]
    write_hour(settings.archive_root, "web", HOUR, lines)
    result, checks = run(settings)
    assert result.success  # warnings and non-blocking failures do not fail the run
    drift = checks[("pages", "type_drift")]
    assert not drift.passed and drift.severity == AssetCheckSeverity.WARN
    assert drift.metadata["misfits_by_column"].value == {"properties_n": 1}
    # A message without receivedAt is quarantined by validation (missing_received_at), so the
    # rows written conform; the pandera check stays as a second line of defence.
    assert checks[("pages", "schema_conformance")].passed
    assert checks[("pages", "duplicates")].passed


def test_conformance_check_reports_the_failing_column_and_rule():
    from datalake_assets.spec.conformance import check_conformance

    data = pa.table(
        {
            "message_id": ["a", "b", "c"],
            "type": ["page", "page", "page"],
            "anonymous_id": ["x", "y", None],
            "user_id": [None, None, None],
            "received_at": pa.array([1, None, 3], pa.timestamp("us", tz="UTC")),
        }
    )
    failures = check_conformance("pages", data)
    got = sorted((f["column"], f["check"], f["failures"]) for f in failures)
    assert ("received_at", "not_nullable", 1) in got
    assert check_conformance("pages", data.slice(0, 1)) == []


def test_duplicates_check_reads_the_written_output(spark, tmp_path):
    staged = tmp_path / "data"
    for part, ids in (("day=2026-11-21/hr=10", ["a", "b"]), ("day=2026-11-21/hr=11", ["b", "c"])):
        d = staged / "segment_type=pages" / part
        d.mkdir(parents=True)
        pq.write_table(pa.table({"message_id": ids, "x": [1, 2]}), d / "part-0.parquet")
    d = staged / "segment_type=screens" / "day=2026-11-21/hr=10"
    d.mkdir(parents=True)
    pq.write_table(pa.table({"message_id": ["s1"]}), d / "part-0.parquet")
    assert dedup.repeated_message_ids(spark, str(staged), ["pages", "screens"], []) == {"pages": 1}
    # an id that the lake already holds for another hour of the window is repeated too: the
    # batch's ids found in the window's index (as the dedup found them) are passed along
    prior = tmp_path / "index" / "hour=2026112109"
    prior.mkdir(parents=True)
    pq.write_table(pa.table({"message_id": ["s1", "zzz"]}), prior / "part-0.parquet")
    held = dedup.prior_ids([str(prior / "part-0.parquet")], pa.array(["a", "b", "c", "s1"]))
    assert held.to_pylist() == ["s1"]
    repeated = dedup.repeated_message_ids(spark, str(staged), ["pages", "screens"], held)
    assert repeated == {"pages": 1, "screens": 1}
    # an id in two tables counts under the smaller name, whatever the order asked (Spark's min)
    assert dedup.repeated_in_output(str(staged), ["screens", "pages"], held) == repeated
    report = TableReport(checks=TableChecks(repeated_message_ids=repeated["pages"]), duplicates=0)
    dup = [r for r in table_check_results("web", "pages", report) if r.check_name == "duplicates"][
        0
    ]
    assert not dup.passed and dup.severity == AssetCheckSeverity.ERROR


def test_completeness_fails_and_nothing_is_committed_when_lines_go_missing(
    spark, settings, monkeypatch
):
    write_hour(settings.archive_root, "web", HOUR, [msg("a1"), msg("a2")])
    real = sync.merge_stats

    def one_line_lost(payloads):
        stats = real(payloads)
        stats.lines_in += 1
        return stats

    monkeypatch.setattr(sync, "merge_stats", one_line_lost)
    monkeypatch.setattr(local_path, "merge_stats", one_line_lost)  # a small hour's path
    result, checks = run(settings, raise_on_error=False)
    assert not result.success
    c = checks[("sync_reports", "completeness")]
    assert not c.passed and "reconciliation failed" in c.metadata["error"].value


@pytest.mark.slow
def test_duplicates_check_driver_and_spark_paths_agree(spark, tmp_path, monkeypatch):
    staged = tmp_path / "data"
    for table, part, ids in (
        ("pages", "day=2026-11-21/hr=10", ["a", "b", "b"]),
        ("pages", "day=2026-11-21/hr=11", ["c"]),
        ("screens", "day=2026-11-21/hr=10", ["c", "d"]),
    ):
        d = staged / f"segment_type={table}" / part
        d.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"message_id": ids}), d / f"part-{len(ids)}.parquet")
    tables = ["pages", "screens"]
    driver = dedup.repeated_in_output(str(staged), tables)
    monkeypatch.setattr(dedup, "_DRIVER_CHECK_MAX_ROWS", 0)  # too big for the driver: Spark
    assert dedup.repeated_in_output(str(staged), tables) is None
    spark_side = dedup.repeated_message_ids(spark, str(staged), tables, [])
    assert driver == spark_side == {"pages": 2}  # "b" twice in pages; "c" in pages and screens
    held = pa.array(["d", "not-written"])  # "d" is also held by another hour of the window
    spark_side = dedup.repeated_message_ids(spark, str(staged), tables, held)
    monkeypatch.setattr(dedup, "_DRIVER_CHECK_MAX_ROWS", 100)
    driver = dedup.repeated_in_output(str(staged), tables, held)
    assert driver == spark_side == {"pages": 2, "screens": 1}


@pytest.mark.slow
def test_completeness_counts_the_lines_of_suppressed_identities(spark, settings):
    from datalake_assets.lake.identities import lake_key, write_suppressed
    from datalake_assets.lake.report import SourceReport
    from datalake_assets.orchestration.sync.sync_checks import completeness_results
    from datalake_assets.spec.identity import identity, identity_hash

    write_hour(settings.archive_root, "web", HOUR, [msg("a1", userId="gone"), msg("a2")])
    gone = identity_hash(lake_key(settings.lake_root), identity("user_id", "gone"))
    write_suppressed(settings.lake_root, "req-1", [gone])
    result, checks = run(settings)
    c = checks[("sync_reports", "completeness")]
    assert result.success and c.passed
    assert (
        c.metadata["lines_in"].value,
        c.metadata["rows"].value,
        c.metadata["suppressed"].value,
    ) == (2, 1, 1)
    # the same counts without the suppressed line would not add up
    short = SourceReport(lines_in=2, messages_written=1)
    assert not completeness_results("web", short)[0].passed


@pytest.mark.slow
def test_checks_run_alone_re_evaluate_the_lake(spark, settings):
    """*Execute all* on a Checks tab runs the checks without the assets and without a
    partition (#27.3): nothing is synced, each check is measured again from the lake for the
    latest synced hours; a duplicate that appeared in the lake since the sync fails it."""
    import shutil
    from pathlib import Path

    from dagster import AssetCheckKey, AssetKey

    write_hour(
        settings.archive_root,
        "web",
        HOUR,
        [msg(f"m{i}", type="page", name="Home") for i in range(10)],
    )
    result, _ = run(settings)
    assert result.success
    assets = build_source_assets(settings, settings.sources[0])
    checks = [
        AssetCheckKey(AssetKey(["web", "pages"]), n)
        for n in ("duplicates", "type_drift", "schema_conformance")
    ]

    def alone():
        from dagster import AssetSelection

        out = materialize(
            assets,
            selection=AssetSelection.checks(*checks),
            resources={"compute": LocalSparkCompute()},
            instance=DagsterInstance.ephemeral(),
        )
        assert out.success
        assert not out.get_asset_materialization_events(), "checks alone must sync nothing"
        return {(e.check_name, e.partition): e for e in out.get_asset_check_evaluations()}

    first = alone()
    key = ("duplicates", "2026-11-21-10:00")
    assert set(first) == {(c.name, "2026-11-21-10:00") for c in checks}
    assert first[key].passed and first[key].metadata["repeated_message_ids"].value == 0
    # a second copy of the hour's file: every id of the hour is now written twice
    part = next(Path(settings.lake_root).rglob("segment_type=pages/*/*/part-2026112110-*"))
    shutil.copy(part, part.with_name(part.name.replace("part-2026112110-", "part-2026112110-x")))
    again = alone()
    assert not again[key].passed
    assert again[key].metadata["repeated_message_ids"].value == 10
