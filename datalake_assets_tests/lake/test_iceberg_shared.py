"""The shared append-only Iceberg table (the sync reports, ``lake/formats/iceberg_shared.py``):
every run's append lands, its manifests are merged as they come, and its snapshots stay
bounded, so an append costs the same after a day of open hours' batches as after one."""

from __future__ import annotations

import pyarrow as pa

from datalake_assets.lake.formats import iceberg_shared, table_format
from datalake_assets.settings.formats_section import FormatConfig
from datalake_assets_tests.support.iceberg_reader import sql_catalog

DB, TABLE = "segment_datalake_meta", "sync_reports"


def rows(i: int) -> pa.Table:
    return pa.table({"run_id": [f"run-{i}"], "source_id": ["web"], "day": ["2026-11-29"]})


def test_appends_land_and_the_snapshots_stay_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(iceberg_shared, "KEPT_SNAPSHOTS", 2)
    fmt = table_format(FormatConfig(format="iceberg"), str(tmp_path))
    counts = []
    for i in range(9):
        assert fmt.append(DB, TABLE, rows(i), ("source_id", "day"))
        tbl = sql_catalog(str(tmp_path)).load_table((DB, TABLE))
        counts.append(len(tbl.snapshots()))
    # every run's row is there, once
    got = tbl.scan().to_arrow().column("run_id").to_pylist()
    assert sorted(got) == [f"run-{i}" for i in range(9)]
    # a snapshot an append, down to the newest 2 once there are more than 4 (+1: the table's
    # creation commits the partition spec first)
    assert max(counts) <= 2 * 2 + 1 and counts[-1] <= 2 * 2 + 1, counts
    assert min(counts[4:]) <= 3, counts  # the expiry happened
    assert tbl.properties["commit.manifest-merge.enabled"] == "true"


def test_a_table_made_before_the_merge_property_gets_it_at_its_next_append(tmp_path):
    (tmp_path / "_iceberg").mkdir()  # where the lake's SQL catalog is
    cat = sql_catalog(str(tmp_path))
    cat.create_namespace(DB)
    cat.create_table((DB, TABLE), schema=rows(0).schema, location=f"file://{tmp_path}/meta")
    fmt = table_format(FormatConfig(format="iceberg"), str(tmp_path))
    assert fmt.append(DB, TABLE, rows(1), ("source_id", "day"))
    tbl = sql_catalog(str(tmp_path)).load_table((DB, TABLE))
    assert tbl.properties["commit.manifest-merge.enabled"] == "true"
    assert tbl.scan().to_arrow().column("run_id").to_pylist() == ["run-1"]
