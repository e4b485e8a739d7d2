"""Forget a person in a real, synced lake: every trace gone, everyone else untouched, a replay
brings nothing back, a stranger or a hostile id is a no-op, the audit row is queryable."""

import glob
import logging
import os

import pytest

from datalake_assets.catalog.hive import HiveCatalog
from datalake_assets.lake.identities import lake_key, read_suppressed
from datalake_assets.privacy.audit import read_audit_rows
from datalake_assets.privacy.forget import forget
from datalake_assets.privacy.forget_request import ForgetRequest, RequestError, request_from_dict
from datalake_assets.privacy.state import load_state
from datalake_assets.spec.identity import IdentityError, identity, identity_hash
from datalake_assets.transform.sync import run_sync
from datalake_assets.transform.sync_request import request_from_settings
from datalake_assets_tests.privacy.people import (
    EMAIL,
    HOURS,
    TARGET_VALUES,
    lake_snapshot,
    oracle_expected,
    read_source,
    target_traces,
    without_target,
)

pytestmark = pytest.mark.spark

TARGET = (
    identity("user_id", "u-target"),
    identity("anonymous_id", "anon-t"),
    identity("anonymous_id", "anon-old"),
    identity("email", EMAIL),
)


def target_hashes(settings) -> frozenset[str]:
    key = lake_key(settings.lake_root)
    return frozenset(identity_hash(key, i) for i in TARGET)


def files_mentioning(root: str, values=TARGET_VALUES) -> list[str]:
    """Files of the lake's own records (state, suppression, audit, reports) holding a value."""
    out = []
    for path in glob.glob(f"{root}/**/*", recursive=True):
        if os.path.isfile(path) and "/data/" not in path and "/quarantine/" not in path:
            data = open(path, "rb").read().lower()
            if any(v.encode() in data for v in values):
                out.append(path)
    return out


@pytest.mark.parametrize("lake_fixture", ["indexed_lake", "people_lake"])
def test_forget_with_links_erases_every_trace_and_nothing_else(lake_fixture, request, caplog):
    """With the identity index, and without one (a lake synced before it existed: the hours
    are scanned): the same outcome."""
    settings = request.getfixturevalue(lake_fixture)
    hashes = target_hashes(settings)
    before = lake_snapshot(settings)
    assert target_traces(before, hashes)

    with caplog.at_level(logging.INFO, logger="datalake_assets.privacy"):
        result = forget(
            settings,
            ForgetRequest("r-links", (identity("user_id", "u-target"),), follow_links=True),
        )

    assert result.status == "completed", result
    assert result.rows_remaining == 0 and result.proof_checked_at
    assert set(result.identity_hashes) == hashes  # anon-t, the email, anon-old: linked
    after = lake_snapshot(settings)
    assert target_traces(after, hashes) == []  # tables, tracks, quarantine, both indexes, archive
    assert_id_index_hashed(settings.lake_root)  # the rewritten id-index files keep id_hash
    assert without_target(after, hashes) == without_target(before, hashes)
    assert result.rows_removed == {
        "aliases": 1,
        "identifies": 2,
        "opened": 1,
        "order_completed": 4,
        "pages": 1,
        "signed_up": 1,
        "tracks": 6,  # t1 t5 t6 t7 t8 (web), ta1 (app)
        "quarantine": 4,
    }  # t-bad1, t-cut, t8's value, t6's misfit value
    assert result.archive_lines_removed == 13  # t7 twice (a duplicate delivery)
    assert result.hours_rewritten == 5  # web's three hours, app's first two
    assert read_suppressed(settings.lake_root) == hashes
    # no clear value in the lake's own records, the logs or the result
    assert files_mentioning(settings.lake_root) == []
    assert not any(v in caplog.text.casefold() for v in TARGET_VALUES)
    assert not any(v in str(result.to_dict()).casefold() for v in TARGET_VALUES)
    [row] = read_audit_rows(settings.lake_root)
    assert (row["request_id"], row["status"], row["rows_remaining"]) == ("r-links", "completed", 0)
    assert sorted(row["identity_hashes"]) == sorted(hashes)


def assert_id_index_hashed(lake: str) -> None:
    """Every id-index file of the lake has the sync's ``id_hash`` column, matching its ids."""
    import pyarrow.parquet as pq

    from datalake_assets.spec.id_index import id_hashes

    files = glob.glob(f"{lake}/_index/*/hour=*/*.parquet")
    assert files
    for f in files:
        t = pq.read_table(f)
        assert t.column_names == ["message_id", "id_hash"], f
        assert t.column("id_hash").to_pylist() == id_hashes(t.column("message_id")).to_pylist()


def message_ids(snapshot) -> set[str]:
    return {
        r["message_id"] for rows in snapshot["rows"].values() for r in rows if r.get("message_id")
    }


def test_without_links_only_the_named_identity_goes(people_lake):
    settings = people_lake
    before = lake_snapshot(settings)
    result = forget(settings, ForgetRequest("r-one", (identity("user_id", "u-target"),)))
    assert result.status == "completed" and result.rows_remaining == 0
    after = lake_snapshot(settings)
    # the page of anon-t alone, anon-old's sign-up, u-shared's message with the email: kept
    assert {m for m in message_ids(after) if m.startswith("t")} == {"t3", "t5", "t6"}
    assert not any("u-target" in t for t in target_traces(after))
    assert without_target(after) == without_target(before)


def test_replay_of_the_erased_hours_brings_nothing_back(spark, people_lake, reliability):
    settings = people_lake
    forget(settings, ForgetRequest("r-replay", TARGET))
    erased = lake_snapshot(settings)
    # the erased lake is exactly what a clean sync of the erased archive makes
    oracle = oracle_expected(settings, "web")
    reliability.cases += 1
    reliability.expect(oracle, lambda: read_source(settings, "web"))
    assert reliability.compare().ok
    for source in ("web", "app"):
        run_sync(
            spark, request_from_settings(settings, settings.source(source), HOURS, replay=True)
        )
    replayed = lake_snapshot(settings)
    assert target_traces(replayed) == []

    def content(snapshot):  # a re-sync writes new files: compare rows, not file names
        # (not the identity index: this lake had none before the request, the replay writes it)
        return {
            k: sorted(
                str(
                    {
                        c: (os.path.basename(v) if c == "archive_file" else v)
                        for c, v in r.items()
                        if c != "run_id"
                    }
                )
                for r in rows
            )
            for k, rows in snapshot["rows"].items()
            if rows and not k.startswith("_identities/")
        }

    assert content(replayed) == content(erased)
    assert replayed["lines"] == erased["lines"]
    reliability.expect(oracle, lambda: read_source(settings, "web"))
    found = reliability.compare()
    assert found.ok, str(found)


def test_an_unknown_person_completes_with_nothing_removed(indexed_lake):
    settings = indexed_lake
    before = lake_snapshot(settings)
    result = forget(
        settings,
        ForgetRequest(
            "r-nobody", (identity("user_id", "nobody"), identity("email", "no@where.org"))
        ),
    )
    assert result.status == "completed"
    assert (
        result.rows_removed,
        result.archive_lines_removed,
        result.hours_rewritten,
        result.files_rewritten,
        result.rows_remaining,
    ) == ({}, 0, 0, 0, 0)
    assert lake_snapshot(settings) == before


HOSTILE = [
    "'; DROP TABLE identifies; --",
    "../../etc/passwd",
    "*",
    "%",
    "_",
    "%25",
    '"quoted"',
    "a\\b",
    "..",
    "/",
    "\u202e\u0000nul",
    "u-target*",
    "u-%",
]


def test_hostile_ids_are_a_correct_no_op(indexed_lake, reliability):
    settings = indexed_lake
    before = lake_snapshot(settings)
    request = request_from_dict(
        {
            "request_id": "r-hostile",
            "identities": [
                *(f"user_id={v}" for v in HOSTILE),
                *({"kind": "email", "value": v} for v in HOSTILE),
            ],
        }
    )
    reliability.cases += 2 * len(HOSTILE)
    result = forget(settings, request)
    assert result.status == "completed" and result.rows_removed == {}
    assert lake_snapshot(settings) == before  # no wildcard, path or SQL meaning anywhere
    created = sorted(
        os.path.relpath(p, settings.lake_root)
        for p in glob.glob(f"{settings.lake_root}/_privacy/**", recursive=True)
        if os.path.isfile(p)
    )
    assert created == [
        "_privacy/key",
        "_privacy/state/r-hostile.json",
        "_privacy/suppressed/r-hostile.json",
    ]


def test_oversized_and_malformed_ids_are_refused_without_echo(reliability):
    huge = "x" * (10 << 20)
    cases = [
        {"identities": [f"user_id={huge}"]},
        {"identities": [{"kind": "email", "value": huge}]},
        {"identities": ["no-equals-sign"]},
        {"identities": [{"kind": "../etc", "value": "v"}]},
        {"identities": [{"kind": "user_id", "value": ["a", "list"]}]},
        {"identities": [f"{huge}=x"]},
        {"identities": []},
        {"identities": ["user_id=a"], "request_id": "../../x"},
        {"identities": ["user_id=a"], "erase": False, "suppress": False},
        {"identities": ["user_id=a"], "sources": "web"},
    ]
    reliability.cases += len(cases)
    for case in cases:
        with pytest.raises((IdentityError, RequestError)) as e:
            request_from_dict(case)
        assert len(str(e.value)) < 300 and "xxxx" not in str(e.value)


def test_an_unlisted_trait_or_unknown_source_is_refused(people_lake):
    with pytest.raises(RequestError, match="identity_traits"):
        forget(people_lake, ForgetRequest("r-x", (identity("phone", "+331234"),)))
    with pytest.raises(RequestError, match="unknown source"):
        forget(people_lake, ForgetRequest("r-y", (identity("user_id", "u"),), sources=("nope",)))
    assert not os.path.exists(f"{people_lake.lake_root}/_privacy/state/r-x.json")


def test_suppress_only_keeps_the_lake_and_erase_only_keeps_no_suppression(indexed_lake):
    settings = indexed_lake
    before = lake_snapshot(settings)
    result = forget(settings, ForgetRequest("r-supp", TARGET, erase=False))
    assert result.status == "completed" and result.rows_removed == {}
    assert result.rows_remaining > 0  # the proof counts what was kept on purpose
    assert lake_snapshot(settings) == before
    assert read_suppressed(settings.lake_root) == target_hashes(settings)
    forget(settings, ForgetRequest("r-erase", TARGET, suppress=False))
    assert not os.path.exists(f"{settings.lake_root}/_privacy/suppressed/r-erase.json")


def test_one_source_only(indexed_lake):
    settings = indexed_lake
    result = forget(settings, ForgetRequest("r-app", TARGET, sources=("app",)))
    assert result.rows_removed == {"identifies": 1, "opened": 1, "tracks": 1}
    places = {t.split(":", 1)[0] for t in target_traces(lake_snapshot(settings))}
    assert places and all("web" in p for p in places)  # web's traces are all still there


def test_a_rerun_of_a_completed_request_changes_nothing_and_keeps_its_counts(indexed_lake):
    settings = indexed_lake
    first = forget(settings, ForgetRequest("r-twice", TARGET))
    erased = lake_snapshot(settings)
    again = forget(settings, ForgetRequest("r-twice", TARGET))
    assert lake_snapshot(settings) == erased
    assert (again.status, again.rows_removed, again.archive_lines_removed) == (
        "completed",
        first.rows_removed,
        first.archive_lines_removed,
    )
    assert load_state(settings.lake_root, "r-twice").attempts == 2
    assert len(read_audit_rows(settings.lake_root)) == 1
    with pytest.raises(RequestError, match="another request"):
        forget(settings, ForgetRequest("r-twice", (identity("user_id", "someone-else"),)))


def test_the_audit_row_is_queryable_by_name_in_the_catalog(spark, indexed_lake):
    settings = indexed_lake
    forget(settings, ForgetRequest("r-audit", TARGET), catalog=HiveCatalog(spark))
    rows = spark.sql(
        "SELECT request_id, status, identity_hashes, rows_removed, rows_remaining,"
        " archive_lines_removed, day FROM segment_datalake_meta.privacy_requests "
        "WHERE request_id = 'r-audit'"
    ).collect()
    assert len(rows) == 1
    r = rows[0]
    assert (r.status, r.rows_remaining, r.archive_lines_removed) == ("completed", 0, 13)
    assert sorted(r.identity_hashes) == sorted(target_hashes(settings))
    assert '"tracks":6' in r.rows_removed


def test_hours_that_become_empty_stay_readable_partitions(indexed_lake):
    """app (coarse ``day`` layout): every row of its hours 11 and (next day) 09 goes; hour
    10 shares hour 11's day partition and keeps its files."""
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    settings = indexed_lake
    lake = settings.lake_root
    result = forget(
        settings,
        ForgetRequest(
            "r-empty",
            (identity("user_id", "u-target"), identity("user_id", "u-2")),
            sources=("app",),
        ),
    )
    assert result.status == "completed" and result.rows_remaining == 0
    assert result.rows_removed == {"identifies": 1, "opened": 3, "tracks": 3}
    for day in ("day=2026-11-21", "day=2026-11-22"):
        assert os.path.isfile(f"{lake}/data/app/segment_type=tracks/{day}/_COMMITTED_BY")
    assert not glob.glob(f"{lake}/data/app/segment_type=*/day=*/part-2026112111-*")
    assert not glob.glob(f"{lake}/data/app/segment_type=*/day=2026-11-22/*.parquet")
    opened = ds.dataset(
        f"{lake}/data/app/segment_type=opened", format="parquet", partitioning="hive"
    ).to_table()
    assert opened.column("message_id").to_pylist() == ["oa1"]  # hour 10, carried over
    archive = glob.glob(f"{settings.archive_root}/app/day=*/hr=*/*")
    assert [os.path.relpath(f, settings.archive_root) for f in archive] == [
        "app/day=2026-11-21/hr=10/part-0000.jsonl.gz"
    ]  # the others had only them: deleted
    for hour in ("2026112111", "2026112209"):  # the id index keeps an empty file per hour
        files = glob.glob(f"{lake}/_index/app/hour={hour}/*.parquet")
        assert files and all(pq.read_metadata(f).num_rows == 0 for f in files)
    assert_id_index_hashed(lake)  # the emptied files keep the sync's id_hash column
    # the identity index keeps the hour's other identities (anon-t, not requested): a
    # superset, as the sync writes it; none of the requested ones
    key = lake_key(lake)
    gone = {identity_hash(key, identity("user_id", u)) for u in ("u-target", "u-2")}
    left = pq.read_table(f"{lake}/_identities/app/hour=2026112111").to_pylist()
    assert left and not {r["identity"] for r in left} & gone


def test_a_compacted_identity_index_is_used_and_erased(indexed_lake):
    """web's index compacted into one file covering every hour (an ``hour`` column, sorted
    by identity): the lookup reads it, the erasure rewrites it."""
    import shutil

    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    settings = indexed_lake
    root = f"{settings.lake_root}/_identities/web"
    parts = []
    for folder in sorted(glob.glob(f"{root}/hour=*")):
        t = pq.read_table(glob.glob(f"{folder}/*.parquet")[0])
        parts.append(t.append_column("hour", pa.array([folder[-10:]] * t.num_rows)))
        shutil.rmtree(folder)
    compacted = pa.concat_tables(parts).sort_by("identity")
    os.makedirs(f"{root}/compacted")
    pq.write_table(compacted, f"{root}/compacted/part-all.parquet", row_group_size=4)
    hashes = target_hashes(settings)
    before = lake_snapshot(settings)

    result = forget(
        settings, ForgetRequest("r-compact", (identity("user_id", "u-target"),), follow_links=True)
    )
    assert result.status == "completed" and result.rows_remaining == 0
    assert set(result.identity_hashes) == hashes
    after = lake_snapshot(settings)
    assert target_traces(after, hashes) == []
    assert without_target(after, hashes) == without_target(before, hashes)
    left = pq.read_table(f"{root}/compacted/part-all.parquet")
    targets = pa.array(sorted(hashes))
    gone = pc.or_(
        pc.is_in(compacted.column("identity"), value_set=targets),
        pc.fill_null(pc.is_in(compacted.column("linked"), value_set=targets), False),
    )
    assert left.to_pylist() == compacted.filter(pc.invert(gone)).to_pylist()


def test_the_collectors_spool_loses_the_persons_lines(people_lake):
    """Lines accepted but not yet rolled into the archive (a sealed segment of a stopped
    collector) are erased with the rest; everyone else's stay byte for byte."""
    settings = people_lake
    spool = os.path.join(settings.collector.spool_path(), "web")
    os.makedirs(spool)
    other = b'{"type":"track","event":"E","messageId":"s1","userId":"u-other"}\n'
    theirs = b'{"type":"track","event":"E","messageId":"s2","userId":"u-target"}\n'
    segment = os.path.join(spool, "2026112110-20261121T100000-aaaaaaaaaaaa.wal")
    with open(segment, "wb") as f:
        f.write(other + theirs + other)
    result = forget(settings, ForgetRequest("r-spool", TARGET))
    assert result.status == "completed" and result.spool_lines_removed == 1
    with open(segment, "rb") as f:
        assert f.read() == other + other
