"""The lake's storage functions on Azure: URI rules and credentials (pure), then every
function the sync, collector, importer and sensors use, against Azurite (``az://``)."""

from __future__ import annotations

import gzip

import pyarrow.fs as pafs
import pytest

from datalake_assets.lake import azure, storage
from datalake_assets.settings.fields import SettingsError, resolve_root
from datalake_assets.spec import azure_uri

HNS = "abfss://lake@acct1.dfs.core.windows.net/prod/data"


# ------------------------------------------------------------------------ URIs (pure rules)


def test_uris_parse_and_round_trip():
    u = azure_uri.parse(HNS)
    assert (u.hns, u.container, u.account, u.path, u.fs_path) == (
        True,
        "lake",
        "acct1",
        "prod/data",
        "lake/prod/data",
    )
    assert u.location_of("lake/prod/data/x.parquet") == f"{HNS}/x.parquet"
    b = azure_uri.parse("az://lake/raw")
    assert (b.hns, b.container, b.account, b.fs_path) == (False, "lake", "", "lake/raw")
    assert b.location_of("lake") == "az://lake"
    with pytest.raises(ValueError, match="not in container"):
        b.location_of("other/x")
    assert azure_uri.parse("abfss://lake@acct1.dfs.core.chinacloudapi.cn").path == ""


@pytest.mark.parametrize(
    "uri, why",
    [
        ("abfss://lake@acct1.blob.core.windows.net/x", "dfs.core.windows.net"),
        ("abfss://lake@acct1.dfs.core.example.com/x", "must end in"),
        ("abfss://lake/x", "expected abfss://"),
        ("abfss://Lake@acct1.dfs.core.windows.net/x", "expected abfss://"),
        ("abfss://la@acct1.dfs.core.windows.net/x", "expected abfss://"),
        ("abfss://a--b@acct1.dfs.core.windows.net/x", "expected abfss://"),
        ("abfss://lake:secret@acct1.dfs.core.windows.net/x", "credentials never go into the URI"),
        ("abfss://lake@acct1.dfs.core.windows.net/x?sv=2024&sig=abc", "SAS token"),
        ("az://lake@acct1/x", "AZURE_STORAGE_ACCOUNT_NAME"),
        ("az://lake/a//b", "empty segments"),
        ("az://lake/a/../b", "'..'"),
        ("abfs://lake@acct1.dfs.core.windows.net/x", "use abfss://"),
        ("wasbs://lake@acct1.blob.core.windows.net/x", "use az://"),
    ],
)
def test_malformed_uris_fail_with_what_to_write(uri, why):
    with pytest.raises(ValueError, match=why):
        azure_uri.parse(uri)
    with pytest.raises(SettingsError, match="invalid Azure URI") as e:
        resolve_root(uri, "/base")
    assert "sig=abc" not in str(e.value)  # a SAS token is never echoed


def test_settings_keep_azure_roots_as_written():
    assert resolve_root(HNS + "/", "/base") == HNS
    assert resolve_root("az://lake/raw", "/base") == "az://lake/raw"


# --------------------------------------------------------------- credentials (no network)


def test_credentials_come_from_the_environment_in_order():
    uri = azure_uri.parse(HNS)
    key = {"AZURE_STORAGE_ACCOUNT_KEY": "k"}
    sp = {"AZURE_CLIENT_ID": "c", "AZURE_TENANT_ID": "t", "AZURE_CLIENT_SECRET": "s"}
    assert azure.endpoint(uri, {}).credential == "default"
    assert azure.endpoint(uri, {"AZURE_CLIENT_ID": "mi"}).credential == "default"  # managed id
    assert azure.endpoint(uri, sp).credential == "service_principal"
    assert azure.endpoint(uri, {**sp, **key}).credential == "key"
    assert azure.endpoint(uri, {"AZURE_STORAGE_SAS_TOKEN": "?sv=1"}).credential == "sas"
    with pytest.raises(azure.AzureConfigError, match="not both"):
        azure.endpoint(uri, {**key, "AZURE_STORAGE_SAS_TOKEN": "x"})
    with pytest.raises(azure.AzureConfigError, match="missing: AZURE_TENANT_ID") as e:
        azure.endpoint(uri, {"AZURE_CLIENT_ID": "c", "AZURE_CLIENT_SECRET": "hush"})
    assert "hush" not in str(e.value)  # names variables, never values


def test_endpoints_public_sovereign_and_emulator():
    pub = azure.endpoint(azure_uri.parse(HNS), {})
    assert (pub.account, pub.blob_authority, pub.dfs_authority, pub.scheme) == (
        "acct1",
        ".blob.core.windows.net",
        ".dfs.core.windows.net",
        "https",
    )
    assert pub.blob_account_url == "https://acct1.blob.core.windows.net"
    cn = azure.endpoint(azure_uri.parse("abfss://lake@acct1.dfs.core.chinacloudapi.cn/x"), {})
    assert cn.blob_authority == ".blob.core.chinacloudapi.cn"
    emu = azure.endpoint(
        azure_uri.parse("az://lake/x"),
        {
            "AZURE_STORAGE_ACCOUNT_NAME": "devstoreaccount1",
            "DATALAKE_AZURE_BLOB_ENDPOINT": "http://127.0.0.1:10000/",
        },
    )
    assert (emu.blob_authority, emu.dfs_authority, emu.scheme) == (
        "127.0.0.1:10000",
        "127.0.0.1:10000",
        "http",
    )
    assert emu.blob_account_url == "http://127.0.0.1:10000/devstoreaccount1"
    with pytest.raises(azure.AzureConfigError, match="AZURE_STORAGE_ACCOUNT_NAME"):
        azure.endpoint(azure_uri.parse("az://lake/x"), {})
    with pytest.raises(azure.AzureConfigError, match="http"):
        azure.endpoint(azure_uri.parse(HNS), {"DATALAKE_AZURE_BLOB_ENDPOINT": "127.0.0.1:1"})


# ------------------------------------------------------------------------- on Azurite


@pytest.mark.slow
def test_files_round_trip_and_list(container):
    root = f"az://{container}/lake"
    storage.write_bytes_atomic(f"{root}/a/one.json", b"{}")
    storage.write_bytes_atomic(f"{root}/a/b/two.jsonl.gz", gzip.compress(b'{"x":1}\n{"x":2}'))
    storage.write_bytes_atomic(f"{root}/a/one.json", b'{"v":2}')  # replaced whole
    assert storage.read_bytes(f"{root}/a/one.json") == b'{"v":2}'
    assert storage.list_files(f"{root}/a") == [(f"{root}/a/one.json", 7)]
    deep = storage.list_files(f"{root}/a", recursive=True)
    assert [loc for loc, _ in deep] == [f"{root}/a/b/two.jsonl.gz", f"{root}/a/one.json"]
    assert storage.list_files(f"{root}/nothing") == []
    size = deep[0][1]
    assert list(storage.iter_lines(deep[0][0], expected_size=size)) == [b'{"x":1}', b'{"x":2}']
    with pytest.raises(storage.ShortRead):
        list(storage.iter_lines(deep[0][0], expected_size=size + 1))
    assert storage.exists(f"{root}/a/b") and not storage.exists(f"{root}/a/c")
    assert storage.delete_file(f"{root}/a/one.json") and not storage.delete_file(
        f"{root}/a/one.json"
    )
    storage.delete_dir(f"{root}/a")
    storage.delete_dir(f"{root}/a")  # gone: nothing to do
    assert storage.list_files(root, recursive=True) == []


def test_a_file_appears_whole_never_empty_or_partial(container, monkeypatch):
    """pyarrow's Azure output stream creates an empty blob when opened and commits blocks as
    it flushes: the final name must only ever hold a complete file."""
    root = f"az://{container}/raw"
    seen: list[list[tuple[str, int]]] = []
    real = storage.publish

    def spy(fs, hidden, path, location):
        seen.append(storage.list_files(root, recursive=True))  # just before it appears
        real(fs, hidden, path, location)

    monkeypatch.setattr(storage, "publish", spy)
    storage.write_bytes_atomic(f"{root}/x.json", b"1" * 1000)
    staged = storage.StagedFile(f"{root}/y.jsonl.gz")
    staged.write(b"2" * 3000)
    staged.commit()
    visible = [
        [
            rel
            for rel in (loc[len(root) + 1 :] for loc, _ in s)
            if not any(p.startswith(".") for p in rel.split("/"))
        ]
        for s in seen
    ]  # hidden names (.tmp-) are skipped by every reader
    assert visible == [[], ["x.json"]]
    assert storage.list_files(root) == [(f"{root}/x.json", 1000), (f"{root}/y.jsonl.gz", 3000)]
    fs, path = storage.resolve(root)
    names = [i.base_name for i in fs.get_file_info(pafs.FileSelector(path, recursive=True))]
    assert not [n for n in names if n.startswith(".tmp-")]  # the hidden copies are gone

    aborted = storage.StagedFile(f"{root}/z.json")
    aborted.write(b"3")
    aborted.abort()
    assert not storage.exists(f"{root}/z.json")


@pytest.mark.slow
def test_abfss_on_a_blob_only_account_fails_clearly_at_the_first_rename(container):
    """Azurite is blob-only: an abfss:// root pointed at it fails at its first rename (a write
    is published by one), saying what to write instead."""
    root = f"abfss://{container}@devstoreaccount1.dfs.core.windows.net/lake"
    with pytest.raises(RuntimeError, match="hierarchical namespace.*az://"):
        storage.write_bytes_atomic(f"{root}/a.json", b"{}")
    assert storage.list_files(root) == []  # the hidden copy is removed too
