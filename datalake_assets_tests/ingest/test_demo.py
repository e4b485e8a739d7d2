"""The demo traffic generator: layout, counts recomputed from the files, realism, determinism."""

from __future__ import annotations

import gzip
import os
import re
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta

import orjson
import pytest

from datalake_assets.ingest.demo import (
    EVENTS,
    MALFORMED_KINDS,
    MALFORMED_REASONS,
    TYPE_WEIGHTS,
    generate_archive,
)
from datalake_assets.spec.layout import ArchiveHour, archive_hour_dir, is_archive_file

SOURCE = "src_demo"
# Two hours across a day boundary.
HOURS = [ArchiveHour.parse("2026-11-21T23"), ArchiveHour.parse("2026-11-22-00:00")]
EVENTS_PER_HOUR = 3000
FILES_PER_HOUR = 3
TYPES = set(TYPE_WEIGHTS)

RECEIVED_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
FORMATS = {
    "ms_z": re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$"),
    "offset": re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d$"),
    "sec_z": re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$"),
    "us_z": re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$"),
    "naive": re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$"),
}


def ts(text: str) -> datetime:
    dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def defects(obj: dict) -> list[str]:
    """Every line-level defect of a decoded object message (the malformed kinds)."""
    out = []
    if "type" not in obj:
        out.append("missing_type")
    elif obj["type"] not in TYPES:
        out.append("unknown_type")
    if not obj.get("messageId"):
        out.append("missing_message_id")
    if not obj.get("userId") and not obj.get("anonymousId"):
        out.append("missing_user_ids")
    if obj.get("type") == "track" and not obj.get("event"):
        out.append("missing_event")
    return out


def read_lines(path: str) -> list[bytes]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    assert data.endswith(b"\n")
    return data[:-1].split(b"\n")


def hour_of(path: str) -> ArchiveHour:
    m = re.search(r"/day=(\d{4}-\d\d-\d\d)/hr=(\d\d)/", path)
    assert m, path
    return ArchiveHour.parse(f"{m.group(1)}T{m.group(2)}")


class Recount:
    """Everything the summary claims, recomputed from the files alone."""

    def __init__(self, files: list[str]) -> None:
        self.lines = 0
        self.bytes = 0
        self.valid: list[tuple[dict, bytes, str]] = []  # (message, raw line, file)
        self.malformed: Counter[str] = Counter()
        self.received_outside: list[str] = []
        self.lines_per_hour: Counter[str] = Counter()
        for path in files:
            hour = hour_of(path)
            lo, hi = hour.start, hour.start + timedelta(hours=1)
            for raw in read_lines(path):
                self.lines += 1
                self.bytes += len(raw) + 1
                self.lines_per_hour[str(hour)] += 1
                try:
                    obj = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    self.malformed["truncated_json"] += 1
                    assert raw.startswith(b'{"'), raw[:40]
                    continue
                objs = obj if isinstance(obj, list) else [obj]
                for o in objs:
                    rec = o.get("receivedAt")
                    if not (RECEIVED_RE.match(rec) and lo <= ts(rec) < hi):
                        self.received_outside.append(rec)
                if isinstance(obj, list):
                    self.malformed["json_array"] += 1
                    assert obj and all(isinstance(o, dict) and not defects(o) for o in obj)
                    continue
                found = defects(obj)
                if found:
                    assert len(found) == 1, (found, raw[:200])  # exactly one defect
                    self.malformed[found[0]] += 1
                else:
                    self.valid.append((obj, raw, path))
        self.by_id: dict[str, list[tuple[dict, bytes, str]]] = defaultdict(list)
        for entry in self.valid:
            self.by_id[entry[0]["messageId"]].append(entry)
        firsts = [entries[0][0] for entries in self.by_id.values()]
        self.unique = firsts
        self.by_type = Counter(m["type"] for m in firsts)
        self.by_event = Counter(m["event"] for m in firsts if m["type"] == "track")


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("archive"))
    summary = generate_archive(
        root,
        SOURCE,
        HOURS,
        events_per_hour=EVENTS_PER_HOUR,
        files_per_hour=FILES_PER_HOUR,
        seed=11,
        malformed_rate=0.02,
        duplicate_rate=0.03,
        late_rate=0.05,
    )
    return root, summary, Recount(summary.files)


def test_files_at_documented_paths_and_no_leftovers(archive):
    root, summary, _ = archive
    assert summary.hours == [str(h) for h in HOURS]
    expected = [
        f"{archive_hour_dir(root, SOURCE, h)}/part-{i:04d}.jsonl.gz"
        for h in HOURS
        for i in range(FILES_PER_HOUR)
    ]
    assert summary.files == expected
    on_disk = []
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            assert not name.startswith("."), f"leftover temporary file {dirpath}/{name}"
            assert is_archive_file(name)
            on_disk.append(f"{dirpath}/{name}")
    assert sorted(on_disk) == sorted(expected)
    for path in expected:
        with open(path, "rb") as f:
            assert f.read(2) == b"\x1f\x8b"  # gzip


def test_summary_matches_the_files(archive):
    _, summary, rc = archive
    assert summary.lines == rc.lines == EVENTS_PER_HOUR * len(HOURS)
    assert dict(rc.lines_per_hour) == {str(h): EVENTS_PER_HOUR for h in HOURS}
    assert summary.bytes_uncompressed == rc.bytes
    assert summary.valid_messages == len(rc.by_id)
    assert summary.duplicate_lines == len(rc.valid) - len(rc.by_id)
    assert summary.malformed_lines == sum(rc.malformed.values())
    assert summary.lines == (
        summary.valid_messages + summary.duplicate_lines + summary.malformed_lines
    )
    assert summary.by_type == dict(rc.by_type)
    assert summary.by_event == dict(rc.by_event)
    expected_reasons = Counter()
    for kind, n in rc.malformed.items():
        expected_reasons[MALFORMED_REASONS[kind]] += n
    assert summary.malformed_by_reason == dict(expected_reasons)
    # the rates roughly hold
    assert 0.01 < summary.malformed_lines / summary.lines < 0.03
    assert 0.015 < summary.duplicate_lines / summary.valid_messages < 0.05


def test_all_types_events_and_malformed_kinds_present(archive):
    _, summary, rc = archive
    assert set(summary.by_type) == TYPES
    assert len(summary.by_event) >= 12 and set(summary.by_event) == set(EVENTS)
    assert set(rc.malformed) == set(MALFORMED_KINDS)
    total = sum(summary.by_type.values())
    share = {t: n / total for t, n in summary.by_type.items()}
    assert 0.6 < share["track"] < 0.8
    assert 0.07 < share["page"] < 0.17
    assert all(share[t] > 0.01 for t in TYPES)


def test_received_at_inside_the_folder_hour(archive):
    _, _, rc = archive
    assert rc.received_outside == []


def test_valid_messages_are_complete(archive):
    _, _, rc = archive
    channels = Counter()
    with_user = 0
    for m, _raw, _path in rc.valid:
        assert m["anonymousId"] and isinstance(m["anonymousId"], str)
        assert isinstance(m["messageId"], str) and 0 < len(m["messageId"]) <= 100
        assert m["channel"] in ("browser", "mobile", "server")
        assert m["version"] in (1, 2)
        assert "All" in m["integrations"] or m["integrations"] == {} or m["integrations"]
        ctx = m["context"]
        for key in ("ip", "library", "userAgent", "locale", "timezone"):
            assert key in ctx, (key, m)
        assert set(ctx["library"]) == {"name", "version"}
        if m["channel"] == "browser":
            assert set(ctx["page"]) == {"path", "referrer", "search", "title", "url"}
        if m["channel"] == "mobile":
            assert {"id", "manufacturer", "model", "type"} <= set(ctx["device"])
            assert set(ctx["os"]) == {"name", "version"}
            assert {"name", "version", "build"} <= set(ctx["app"])
            assert set(ctx["screen"]) == {"width", "height", "density"}
        for key in ("sentAt", "originalTimestamp", "timestamp"):
            assert any(rx.match(m[key]) for rx in FORMATS.values()), m[key]
        channels[m["channel"]] += 1
        with_user += bool(m.get("userId"))
        t = m["type"]
        if t == "track":
            assert isinstance(m["event"], str) and isinstance(m["properties"], dict)
        elif t == "identify":
            assert {"email", "name", "firstName", "createdAt", "plan", "logins"} <= set(m["traits"])
            assert set(m["traits"]["address"]) >= {"city", "country"}
        elif t == "page":
            assert m["channel"] == "browser" and "name" in m
            assert set(m["properties"]) == {"path", "url", "title", "referrer", "search"}
        elif t == "screen":
            assert m["channel"] == "mobile" and m["name"] and isinstance(m["properties"], dict)
        elif t == "group":
            assert m["groupId"] and {"name", "employees", "industry"} <= set(m["traits"])
        elif t == "alias":
            assert m["userId"] and m["previousId"]
    assert set(channels) == {"browser", "mobile", "server"}
    assert 0.45 < with_user / len(rc.valid) < 0.75


def test_timestamps_formats_lateness_and_consistency(archive):
    _, _, rc = archive
    seen_formats = Counter()
    late = 0
    for m in rc.unique:
        for key in ("sentAt", "originalTimestamp", "timestamp"):
            for name, rx in FORMATS.items():
                if rx.match(m[key]):
                    seen_formats[name] += 1
        received = ts(m["receivedAt"])
        event_time = ts(m["timestamp"])
        lag = received - event_time
        assert timedelta(0) <= lag < timedelta(days=5), m
        if lag >= timedelta(days=1):
            late += 1
            assert received - ts(m["originalTimestamp"]) > timedelta(days=1)
            assert received - ts(m["originalTimestamp"]) < timedelta(days=5)
        else:
            assert lag < timedelta(minutes=2)
        # timestamp = receivedAt - (sentAt - originalTimestamp), up to the formats' precision
        corrected = received - (ts(m["sentAt"]) - ts(m["originalTimestamp"]))
        assert abs(corrected - event_time) < timedelta(seconds=2)
    assert set(seen_formats) == set(FORMATS)
    assert seen_formats["ms_z"] > sum(seen_formats.values()) / 2
    assert 0.02 < late / len(rc.unique) < 0.09  # late_rate=0.05


def test_messy_properties(archive):
    _, _, rc = archive
    keys = set()
    revenue_kinds = Counter()
    price_kinds = Counter()
    nested_city = arrays = 0
    for m in rc.unique:
        if m["type"] != "track":
            continue
        p = m["properties"]
        keys.update(p)
        if "revenue" in p:
            revenue_kinds[type(p["revenue"]).__name__] += 1
        for item in p.get("products", []):
            price_kinds[type(item["price"]).__name__] += 1
        if isinstance(p.get("shipping"), dict):
            nested_city += "city" in p["shipping"]["address"]
        arrays += isinstance(p.get("tags"), list)
    assert {"utm.source", "% complete", "Plan Name", "orderId", "firstName"} <= keys
    assert nested_city > 0 and arrays > 0
    # numbers sent as strings for a minority of the values
    assert revenue_kinds["float"] > revenue_kinds["str"] > 0
    assert price_kinds["float"] > price_kinds["str"] > 0
    assert revenue_kinds["str"] / sum(revenue_kinds.values()) < 0.25


def test_duplicates_share_the_body_except_received_at(archive):
    _, _, rc = archive
    dup_groups = [entries for entries in rc.by_id.values() if len(entries) > 1]
    assert dup_groups
    across_files = 0
    for entries in dup_groups:
        first, first_raw, first_path = entries[0]
        body = {k: v for k, v in first.items() if k != "receivedAt"}
        previous = ts(first["receivedAt"])
        for m, raw, path in entries[1:]:
            assert {k: v for k, v in m.items() if k != "receivedAt"} == body
            # byte for byte, too
            assert raw.replace(b'"receivedAt":"%s"' % m["receivedAt"].encode(), b"") == (
                first_raw.replace(b'"receivedAt":"%s"' % first["receivedAt"].encode(), b"")
            )
            assert ts(m["receivedAt"]) > previous  # delivered later ...
            assert hour_of(path) == hour_of(first_path)  # ... in the same hour
            previous = ts(m["receivedAt"])
            across_files += path != first_path
    assert across_files > 0


def test_the_lake_validator_agrees(archive):
    from datalake_assets.spec import messages

    _, summary, _ = archive
    reasons: Counter[str] = Counter()
    ids = set()
    for path in summary.files:
        for raw in read_lines(path):
            try:
                msg = messages.parse_line(raw)
            except messages.Rejected as e:
                reasons[e.reason] += 1
                continue
            assert msg.problems == []
            ids.add(msg.message_id)
    assert dict(reasons) == summary.malformed_by_reason
    assert len(ids) == summary.valid_messages


def test_deterministic_and_ids_unique_across_seeds_sources_hours(tmp_path):
    hours = [ArchiveHour.parse("2026-11-21T09"), ArchiveHour.parse("2026-11-21T10")]
    kw = dict(events_per_hour=400, files_per_hour=2, malformed_rate=0.05, duplicate_rate=0.05)
    a = generate_archive(str(tmp_path / "a"), "src_x", hours, seed=3, **kw)
    b = generate_archive(str(tmp_path / "b"), "src_x", hours, seed=3, **kw)
    assert a.files and len(a.files) == len(b.files) == 4
    for fa, fb in zip(a.files, b.files, strict=True):
        assert os.path.relpath(fa, tmp_path / "a") == os.path.relpath(fb, tmp_path / "b")
        with open(fa, "rb") as f1, open(fb, "rb") as f2:
            assert f1.read() == f2.read()
    assert {k: v for k, v in vars(a).items() if k != "files"} == {
        k: v for k, v in vars(b).items() if k != "files"
    }
    # one hour alone is the same hour as within a run of several
    c = generate_archive(str(tmp_path / "c"), "src_x", hours[1:], seed=3, **kw)
    with open(a.files[2], "rb") as f1, open(c.files[0], "rb") as f2:
        assert f1.read() == f2.read()

    def ids(summary):
        return {m["messageId"] for m, _, _ in Recount(summary.files).valid}

    other_seed = generate_archive(str(tmp_path / "d"), "src_x", hours, seed=4, **kw)
    other_source = generate_archive(str(tmp_path / "e"), "src_y", hours, seed=3, **kw)
    id_sets = [ids(a), ids(other_seed), ids(other_source)]
    assert sum(len(s) for s in id_sets) == len(set().union(*id_sets))
    assert len(ids(a)) == a.valid_messages
    with open(a.files[0], "rb") as f1, open(other_seed.files[0], "rb") as f2:
        assert f1.read() != f2.read()


def test_uncompressed_jsonl(tmp_path):
    hour = ArchiveHour.parse("2026-11-21T10")
    s = generate_archive(
        str(tmp_path), SOURCE, [hour], events_per_hour=300, files_per_hour=2, compress=False
    )
    assert s.files == [
        f"{archive_hour_dir(str(tmp_path), SOURCE, hour)}/part-{i:04d}.jsonl" for i in range(2)
    ]
    rc = Recount(s.files)
    for path in s.files:
        with open(path, "rb") as f:
            head = f.read(2)
        assert head[:1] in (b"{", b"[")
    assert rc.lines == s.lines == 300
    assert s.valid_messages + s.duplicate_lines + s.malformed_lines == s.lines
    assert not [n for n in os.listdir(os.path.dirname(s.files[0])) if n.startswith(".")]


def test_uri_root_goes_through_pyarrow(tmp_path):
    hour = ArchiveHour.parse("2026-11-21T10")
    root = f"file://{tmp_path}"
    s = generate_archive(root, SOURCE, [hour], events_per_hour=200, files_per_hour=1)
    assert s.files == [f"{root}/{SOURCE}/day=2026-11-21/hr=10/part-0000.jsonl.gz"]
    local = f"{tmp_path}/{SOURCE}/day=2026-11-21/hr=10"
    assert os.listdir(local) == ["part-0000.jsonl.gz"]
    assert len(read_lines(f"{local}/part-0000.jsonl.gz")) == 200


def test_small_hours_and_bad_arguments(tmp_path):
    hour = ArchiveHour.parse("2026-11-21T10")
    s = generate_archive(str(tmp_path), SOURCE, [hour], events_per_hour=2, files_per_hour=5)
    assert len(s.files) == 2 and s.lines == 2
    with pytest.raises(ValueError):
        generate_archive(str(tmp_path), SOURCE, [hour], events_per_hour=0)
    with pytest.raises(ValueError):
        generate_archive(str(tmp_path), SOURCE, [hour, hour])
    with pytest.raises(ValueError):
        generate_archive(str(tmp_path), SOURCE, [hour], duplicate_rate=1.5)
