"""The identity index and the suppression, through real syncs on the local Spark session:
the index of each hour (presence counts, links) committed with the hour and replaced by a
re-sync, and suppressed messages counted and stored nowhere (tables, quarantine, id index,
identity index)."""

from __future__ import annotations

import glob

import duckdb
import orjson
import pyarrow.parquet as pq
import pytest

from datalake_assets.catalog.reports import REPORT_SCHEMA
from datalake_assets.lake.identities import (
    INDEX_SCHEMA,
    LINK,
    QUARANTINE,
    SUPPRESSED,
    lake_key,
    write_suppressed,
)
from datalake_assets.lake.report import SourceReport, SyncReport
from datalake_assets.spec.identity import identity, identity_hash
from datalake_assets.transform.job import SyncRequest, run_sync
from datalake_assets_tests.support.archive_builders import msg, write_hour

SRC = "src1"
H10, H11 = "2026-11-21T10", "2026-11-21T11"


def sync(spark, lake, *hours, **kw):
    return run_sync(
        spark, SyncRequest(lake["lake_root"], lake["archive_root"], SRC, tuple(hours), **kw)
    )


def h(lake, kind: str, value: str) -> str:
    return identity_hash(lake_key(lake["lake_root"]), identity(kind, value))


def index_rows(lake, compact_hour: str) -> set[tuple]:
    """The hour's committed identity index as ``{(identity, table, rows, linked)}``."""
    files = glob.glob(f"{lake['lake_root']}/_identities/{SRC}/hour={compact_hour}/*.parquet")
    out: set[tuple] = set()
    for f in files:
        t = pq.read_table(f)
        assert t.schema.equals(INDEX_SCHEMA)
        out |= {(r["identity"], r["table"], r["rows"], r["linked"]) for r in t.to_pylist()}
    return out


def person(uid: str, anon: str, mid: str, hour: str = H10, **kw) -> dict:
    return msg(mid, hour=hour, userId=uid, anonymousId=anon, **kw)


@pytest.mark.spark
def test_each_hour_gets_its_index_of_identities_tables_and_links(spark, lake):
    write_hour(
        lake["archive_root"],
        SRC,
        H10,
        [
            person("u1", "a1", "t1"),
            person("u1", "a1", "t2"),
            person("u1", "a1", "i1", type="identify", traits={"email": " Ann@Example.com "}),
            msg("p1", type="page", anonymousId="a2", context={"traits": {"email": "bob@x.io"}}),
            {"type": "track", "event": "Order Completed", "userId": "u9"},  # no messageId
            b'{"broken',  # names nobody
        ],
    )
    write_hour(lake["archive_root"], SRC, H11, [person("u1", "a1", "t3", hour=H11)])
    report = sync(spark, lake, H10, H11)
    src = report.source
    assert (src.lines_in, src.messages_written, src.lines_quarantined, src.suppressed) == (
        7,
        5,
        2,
        0,
    )
    assert src.reconciled
    u1, a1 = h(lake, "user_id", "u1"), h(lake, "anonymous_id", "a1")
    ann, bob = h(lake, "email", "ann@example.com"), h(lake, "email", "bob@x.io")
    a2 = h(lake, "id", "a2")
    u9 = h(lake, "user_id", "u9")
    link = lambda x, y, n: (min(x, y), LINK, n, max(x, y))  # noqa: E731
    assert index_rows(lake, "2026112110") == {
        (u1, "order_completed", 2, None),
        (u1, "tracks", 2, None),
        (u1, "identifies", 1, None),
        (a1, "order_completed", 2, None),
        (a1, "tracks", 2, None),
        (a1, "identifies", 1, None),
        (ann, "identifies", 1, None),
        (a2, "pages", 1, None),
        (bob, "pages", 1, None),
        (u9, QUARANTINE, 1, None),
        # the identify call links its three identities; the page links nothing
        link(u1, a1, 1),
        link(u1, ann, 1),
        link(a1, ann, 1),
    }
    assert index_rows(lake, "2026112111") == {
        (u1, "order_completed", 1, None),
        (u1, "tracks", 1, None),
        (a1, "order_completed", 1, None),
        (a1, "tracks", 1, None),
    }
    # Never in clear: the index holds hashes only.
    for row in index_rows(lake, "2026112110"):
        assert all(len(x) == 32 and int(x, 16) >= 0 for x in (row[0], row[3]) if x)


@pytest.mark.spark
def test_a_resync_replaces_the_hours_index_and_an_emptied_hour_loses_it(spark, lake):
    write_hour(lake["archive_root"], SRC, H10, [person("u1", "a1", "t1")])
    sync(spark, lake, H10)
    assert {r[0] for r in index_rows(lake, "2026112110")} == {
        h(lake, "id", "u1"),
        h(lake, "id", "a1"),
    }
    write_hour(lake["archive_root"], SRC, H10, [person("u2", "a2", "t1")])  # same file name
    sync(spark, lake, H10)
    assert {r[0] for r in index_rows(lake, "2026112110")} == {
        h(lake, "id", "u2"),
        h(lake, "id", "a2"),
    }
    # The hour now holds nothing that names anyone: its index is swapped with an empty one.
    write_hour(lake["archive_root"], SRC, H10, [b"[1, 2]", b"not json"])
    report = sync(spark, lake, H10)
    assert report.source.lines_quarantined == 2
    assert index_rows(lake, "2026112110") == set()
    assert glob.glob(f"{lake['lake_root']}/_identities/{SRC}/hour=2026112110/*.parquet") == []


@pytest.mark.spark
def test_suppressed_messages_are_counted_and_stored_nowhere(spark, lake):
    oversize = orjson.dumps(person("u1", "a9", "big", properties={"pad": "x" * 40_000}))
    lines = [
        person("u1", "a1", "t1"),
        person("u1", "a1", "i1", type="identify", traits={"email": "ann@example.com"}),
        msg("t2", anonymousId="a1"),  # suppressed through the anonymousId alone
        msg("t3", anonymousId="a3", context={"traits": {"email": " ANN@example.com"}}),
        {"type": "track", "userId": "u1", "messageId": "noevent"},  # would be quarantined
        oversize,  # quarantined as oversize, still read for its identities
        person("u2", "a2", "keep1"),
        {"type": "track", "userId": "u2", "messageId": "noevent2"},  # quarantined (u2)
    ]
    write_hour(lake["archive_root"], SRC, H10, lines)
    # Suppress u1 and the email; a1 is not listed but every line with it also names u1,
    # except t2: list a1 too (a request that followed links would have).
    write_suppressed(
        lake["lake_root"],
        "req-1",
        [h(lake, "user_id", "u1"), h(lake, "email", "ann@example.com"), h(lake, "id", "a1")],
    )
    report = sync(spark, lake, H10)
    src = report.source
    assert (
        src.lines_in,
        src.messages_written,
        src.duplicates,
        src.lines_quarantined,
        src.suppressed,
    ) == (8, 1, 0, 1, 6)
    assert src.reconciled
    assert report.tables["order_completed"].suppressed == 3  # t1, t2, t3
    assert report.tables["tracks"].suppressed == 3
    assert "identifies" not in report.tables  # its only message was suppressed
    # Nowhere: tables, quarantine, id index; the identity index names them only as
    # SUPPRESSED (the raw archive still holds the lines: a later erasure must find the hour).
    root = lake["lake_root"]
    ((ids,),) = duckdb.sql(
        f"select list(message_id order by message_id) from read_parquet("
        f"'{root}/data/{SRC}/**/*.parquet')"
    ).fetchall()
    assert ids == ["keep1", "keep1"]  # order_completed and tracks
    quarantine = duckdb.sql(
        f"select raw_line from read_parquet('{root}/quarantine/{SRC}/**/*.parquet')"
    ).fetchall()
    assert [orjson.loads(r[0])["messageId"] for r in quarantine] == ["noevent2"]
    ((indexed,),) = duckdb.sql(
        f"select list(message_id) from read_parquet('{root}/_index/{SRC}/**/*.parquet')"
    ).fetchall()
    assert indexed == ["keep1"]
    rows = index_rows(lake, "2026112110")
    assert {r[0] for r in rows if r[1] != SUPPRESSED} == {h(lake, "id", "u2"), h(lake, "id", "a2")}
    assert {h(lake, "user_id", "u1"), h(lake, "email", "ann@example.com"), h(lake, "id", "a1")} <= {
        r[0] for r in rows if r[1] == SUPPRESSED
    }
    # The report file and the sync_reports table carry the count.
    rows = [
        orjson.loads(line)
        for f in glob.glob(f"{root}/reports/**/report.json", recursive=True)
        for line in open(f, "rb").read().splitlines()
    ]
    assert [r["suppressed"] for r in rows if r["type"] == "source"] == [6]
    table = pq.read_table(glob.glob(f"{root}/sync_reports/**/*.parquet", recursive=True)[0])
    assert table.schema.field("suppressed").type == REPORT_SCHEMA.field("suppressed").type
    assert max(n for n in table.column("suppressed").to_pylist() if n is not None) == 6


@pytest.mark.spark
def test_a_resync_after_suppression_removes_the_hours_rows_of_that_person(spark, lake):
    write_hour(lake["archive_root"], SRC, H10, [person("u1", "a1", "t1"), person("u2", "a2", "t2")])
    assert sync(spark, lake, H10).source.messages_written == 2
    write_suppressed(lake["lake_root"], "req-1", [h(lake, "id", "u1")])
    report = sync(spark, lake, H10)
    assert (report.source.messages_written, report.source.suppressed) == (1, 1)
    ((ids,),) = duckdb.sql(
        f"select list(distinct message_id) from read_parquet("
        f"'{lake['lake_root']}/data/{SRC}/**/*.parquet')"
    ).fetchall()
    assert ids == ["t2"]
    # the hour names u1 only as SUPPRESSED: in no table, but still in the raw archive
    rows = index_rows(lake, "2026112110")
    assert {r[1] for r in rows if r[0] == h(lake, "id", "u1")} == {SUPPRESSED}


@pytest.mark.spark
def test_identity_traits_come_from_the_request(spark, lake):
    write_hour(
        lake["archive_root"],
        SRC,
        H10,
        [
            person(
                "u1", "a1", "i1", type="identify", traits={"email": "e@x.io", "phone": "+1 555"}
            ),
        ],
    )
    sync(spark, lake, H10, identity_traits=("phone",))
    hashes = {r[0] for r in index_rows(lake, "2026112110")}
    assert h(lake, "phone", "+1 555") in hashes and h(lake, "email", "e@x.io") not in hashes


# ----------------------------------------------------------------------- no Spark: the request


def test_the_request_carries_the_traits_through_its_argv():
    from datalake_assets.transform.sync_request import parse_args

    req = SyncRequest("/lake", "/archive", SRC, (H10,), identity_traits=("email", "phone_no"))
    assert parse_args(req.to_args()).identity_traits == ("email", "phone_no")
    none = SyncRequest("/lake", "/archive", SRC, (H10,), identity_traits=())
    assert parse_args(none.to_args()).identity_traits == ()
    default = parse_args(
        ["--lake-root", "/l", "--archive-root", "/a", "--source-id", SRC, "--hours", H10]
    )
    assert default.identity_traits == ("email",)


def test_request_from_settings_takes_the_privacy_traits(tmp_path):
    from datalake_assets.settings import LakeSettings, SourceSettings
    from datalake_assets.settings.privacy_section import PrivacySettings
    from datalake_assets.transform.sync_request import request_from_settings

    settings = LakeSettings(
        str(tmp_path / "a"),
        str(tmp_path / "l"),
        (SourceSettings(SRC),),
        privacy=PrivacySettings(identity_traits=("email", "phone")),
    )
    req = request_from_settings(settings, settings.sources[0], [H10], replay=False)
    assert req.identity_traits == ("email", "phone")


def test_a_report_written_before_suppression_reads_back_reconciled():
    old = {
        "type": "source",
        "run_id": "r",
        "source_id": SRC,
        "lines_in": 5,
        "messages_written": 3,
        "duplicates": 1,
        "lines_quarantined": 1,
    }
    report = SyncReport.from_rows([old])
    assert report.source.suppressed == 0 and report.source.reconciled
    new = SourceReport(
        lines_in=5, messages_written=2, duplicates=1, lines_quarantined=1, suppressed=1
    )
    assert new.reconciled and new.to_dict()["suppressed"] == 1
    assert SourceReport.from_dict(new.to_dict()).suppressed == 1
