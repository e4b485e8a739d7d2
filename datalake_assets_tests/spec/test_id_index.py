import hashlib

import pyarrow as pa

from datalake_assets.spec.id_index import INDEX_SCHEMA, has_hash, id_hashes, index_table


def test_the_hash_is_blake2b_8_bytes_little_endian_signed():
    ids = pa.array(["a", "é-ü", "", None, "4b8f0c1e-5f1d-4a57-9a1c-2f3f6a0e9d11"])
    got = id_hashes(ids).to_pylist()
    for value, h in zip(ids.to_pylist(), got):
        if value is None:
            assert h is None
            continue
        digest = hashlib.blake2b(value.encode(), digest_size=8).digest()
        assert h == int.from_bytes(digest, "little", signed=True)
    # part of the lake's format: pinned, so a change to the function is seen
    assert got[0] == int.from_bytes(bytes.fromhex("40f89e395b66422f"), "little", signed=True)


def test_an_index_table_is_sorted_and_hashed():
    t = index_table(pa.chunked_array([["c", "a"], ["b"]]))
    assert t.schema == INDEX_SCHEMA and has_hash(t.schema)
    assert t.column("message_id").to_pylist() == ["a", "b", "c"]
    assert t.column("id_hash").to_pylist() == id_hashes(pa.array(["a", "b", "c"])).to_pylist()
    assert not has_hash(pa.schema([("message_id", pa.string())]))
