"""The collector's settings: defaults, the file, write keys, validation."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import datalake_assets
from datalake_assets import settings as st
from datalake_assets.settings import LakeSettings, SourceSettings, load_settings
from datalake_assets.settings.fields import SettingsError
from datalake_assets.settings.ingest_section import CollectorSettings
from datalake_assets_tests.support.settings_files import write_lake_toml


def test_collector_settings_defaults_and_file(tmp_path):
    env = {"DATALAKE_HOME": str(tmp_path / "home")}
    defaults = load_settings(env=env).collector
    assert defaults == CollectorSettings(spool_dir=str(tmp_path / "home" / "spool"))
    assert (defaults.host, defaults.port, defaults.max_message_bytes, defaults.max_batch_bytes) == (
        "127.0.0.1",
        8088,
        32768,
        512000,
    )
    s = load_settings(
        write_lake_toml(
            tmp_path,
            """
        [collector]
        host = "0.0.0.0"
        port = 9000
        spool_dir = "var/spool"
        segment_max_bytes = 1048576
        segment_max_age_seconds = 30
        max_message_bytes = 16384
        max_batch_bytes = 256000
        workers = 2
        [[sources]]
        id = "Web-Prod"
        write_keys = ["abc123", "def456"]
        [[sources]]
        id = "ios"
        """,
        ),
        env=env,
    )
    assert s.collector == CollectorSettings(
        "0.0.0.0", 9000, str(tmp_path / "var" / "spool"), 1048576, 30, 16384, 256000, 2
    )
    assert s.sources[0].write_keys == ("abc123", "def456") and s.sources[1].write_keys == ()
    assert {k: v.id for k, v in s.write_key_sources().items()} == {
        "abc123": "Web-Prod",
        "def456": "Web-Prod",
    }


def test_shipped_lake_toml_documents_the_collector():
    text = Path(datalake_assets.__file__).with_name("lake.toml").read_text(encoding="utf-8")
    assert "[collector]" in text
    for key in st._COLLECTOR_KEYS:
        assert re.search(rf"^{key} = ", text, re.MULTILINE), key
    assert re.search(r"^# write_keys = \[\]", text, re.MULTILINE)
    assert "DATALAKE_WRITE_KEYS" in text


@pytest.mark.parametrize(
    "text, key, fragment",
    [
        ("[collector]\nport = 70000\n", "collector.port", "from 0 to 65535"),
        ('[collector]\nport = "80"\n', "collector.port", "integer"),
        ('[collector]\nhost = "my host"\n', "collector.host", "invalid host"),
        ('[collector]\nspool_dir = "s3://b/spool"\n', "collector.spool_dir", "local folder"),
        ('[collector]\nspool_dir = ""\n', "collector.spool_dir", "must not be empty"),
        ("[collector]\nsegment_max_bytes = 10\n", "collector.segment_max_bytes", "65536"),
        ("[collector]\nsegment_max_age_seconds = 0\n", "collector.segment_max_age_seconds", "1 to"),
        ("[collector]\nmax_message_bytes = 600000\n", "collector.max_message_bytes", "512000"),
        ('[collector]\nspool = "x"\n', "collector.spool", "did you mean 'spool_dir'"),
        ("[collector]\nworkers = 0\n", "collector.workers", "from 1 to 64"),
        ('[[sources]]\nid = "a"\nwrite_keys = "k1"\n', "sources[0].write_keys", "array"),
        ('[[sources]]\nid = "a"\nwrite_keys = [1]\n', "sources[0].write_keys[0]", "string"),
        (
            '[[sources]]\nid = "a"\nwrite_keys = ["k1", "k1"]\n',
            "sources[0].write_keys[1]",
            "duplicate write key",
        ),
        (
            (
                '[[sources]]\nid = "a"\nwrite_keys = ["k1"]\n'
                '[[sources]]\nid = "b"\nwrite_keys = ["k2", "k1"]\n'
            ),
            "sources[1].write_keys[1]",
            "sources[0].write_keys[0]",
        ),
    ],
)
def test_invalid_collector_settings(tmp_path, text, key, fragment):
    path = write_lake_toml(tmp_path, text)
    with pytest.raises(SettingsError) as e:
        load_settings(path, env={})
    assert e.value.key == key and fragment in str(e.value)
    assert f"settings file {path}" in str(e.value)


@pytest.mark.parametrize("secret", ["sec:ret-1", "has space", "k" * 300])
def test_write_keys_never_appear_in_errors_or_reprs(tmp_path, secret):
    path = write_lake_toml(tmp_path, f'[[sources]]\nid = "a"\nwrite_keys = ["{secret}"]\n')
    with pytest.raises(SettingsError) as e:
        load_settings(path, env={})
    assert e.value.key == "sources[0].write_keys[0]" and secret not in str(e.value)
    good = SourceSettings("a", write_keys=("TopSecret123",))
    assert "TopSecret123" not in repr(good)
    assert "TopSecret123" not in repr(LakeSettings("/a", "/l", (good,)))
    with pytest.raises(SettingsError) as e:
        load_settings(env={"DATALAKE_WRITE_KEYS": f"{secret}=nosuch"})
    assert secret not in str(e.value)


def test_write_keys_from_the_environment_replace_the_file(tmp_path):
    path = write_lake_toml(
        tmp_path,
        """
        [[sources]]
        id = "web"
        write_keys = ["from-file"]
        [[sources]]
        id = "Mobile-App"
        """,
    )
    s = load_settings(path, env={"DATALAKE_WRITE_KEYS": " k1=web, k2=mobile_app ,k3=web,"})
    assert [src.write_keys for src in s.sources] == [("k1", "k3"), ("k2",)]
    assert load_settings(path, env={"DATALAKE_WRITE_KEYS": ""}).sources[0].write_keys == (
        "from-file",
    )
    for value, fragment in [
        ("k1", "expected 'key=source'"),
        ("k1=nosuch", "unknown source"),
        ("k1=web,k1=web", "duplicate write key"),
        ("bad key=web", "invalid write key"),
    ]:
        with pytest.raises(SettingsError) as e:
            load_settings(path, env={"DATALAKE_WRITE_KEYS": value})
        assert e.value.key == "DATALAKE_WRITE_KEYS" and e.value.origin == "environment"
        assert fragment in str(e.value), (value, str(e.value))


def test_direct_construction_validates_collector_settings():
    with pytest.raises(SettingsError, match="max_batch_bytes"):
        CollectorSettings(max_batch_bytes=100)
    with pytest.raises(SettingsError, match="collector"):
        LakeSettings("/a", "/l", (SourceSettings("a"),), collector="x")  # type: ignore[arg-type]
    for bad in (-1, 301, 1.5):  # whole seconds, 0 to 300
        with pytest.raises(SettingsError, match="drain_seconds"):
            CollectorSettings(drain_seconds=bad)  # type: ignore[arg-type]
    assert CollectorSettings().drain_seconds == 0  # a stop waits for nothing by default
    assert CollectorSettings().spool_path("/h") == "/h/spool"


def test_cors_origins_and_public_url(tmp_path):
    path = write_lake_toml(
        tmp_path,
        """
        [collector]
        public_url = "https://collect.example.com/seg/"
        max_pending_requests = 64
        drain_seconds = 15
        [[sources]]
        id = "web"
        cors_origins = ["https://shop.example.com", "https://*.example.com:8443"]
        [[sources]]
        id = "app"
        """,
    )
    s = load_settings(path)
    assert s.sources[0].cors_origins == ("https://shop.example.com", "https://*.example.com:8443")
    assert s.sources[1].cors_origins == ("*",)  # the default: any origin
    assert s.collector.public_url == "https://collect.example.com/seg"
    assert s.collector.max_pending_requests == 64
    assert s.collector.drain_seconds == 15
    for bad in (
        ["https://shop.example.com/"],
        ["shop.example.com"],
        ["https://Shop.com"],
        "https://a.com",
        ["ftp://a.com"],
    ):
        with pytest.raises(SettingsError) as e:
            SourceSettings("web", cors_origins=bad)  # type: ignore[arg-type]
        assert "cors_origins" in str(e.value)
    with pytest.raises(SettingsError, match="public_url"):
        CollectorSettings(public_url="collect.example.com")
