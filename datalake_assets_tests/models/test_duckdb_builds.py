"""The DuckDB engine's builds of one source take turns on one database file (so that dbt's
rendered profile, and with it its saved parse, is the same every build); other sources' builds
do not wait."""

import threading
import time

from datalake_assets.models.engines.duckdb_engine import _builds_take_turns, build_database
from datalake_assets_tests.support.settings_files import load_lake_toml

SOURCES = '[[sources]]\nid = "web"\nstart = "2026-11-20-00:00"\n' + (
    '[[sources]]\nid = "app"\nstart = "2026-11-20-00:00"\n'
)


def test_builds_of_a_source_take_turns_other_sources_do_not_wait(tmp_path):
    settings = load_lake_toml(tmp_path, SOURCES)
    web, app = (build_database(settings, s) for s in settings.sources)
    assert web != app and web == build_database(settings, settings.sources[0])
    events: list[str] = []
    first_in = threading.Event()

    def build(path: str, name: str, hold_s: float) -> None:
        with _builds_take_turns(path, name):
            events.append(f"{name} in")
            first_in.set()
            time.sleep(hold_s)
            events.append(f"{name} out")

    first = threading.Thread(target=build, args=(web, "web-1", 0.5))
    first.start()
    assert first_in.wait(10)
    second = threading.Thread(target=build, args=(web, "web-2", 0))
    other = threading.Thread(target=build, args=(app, "app", 0))
    second.start()
    other.start()
    other.join(10)
    assert "app out" in events and "web-1 out" not in events  # another source: no waiting
    first.join(10)
    second.join(10)
    web_events = [e for e in events if e.startswith("web")]
    assert web_events == ["web-1 in", "web-1 out", "web-2 in", "web-2 out"]
