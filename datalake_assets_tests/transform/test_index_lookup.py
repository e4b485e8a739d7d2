"""``prior_ids``: the batch's ids that the lookback window's id index holds, on the driver."""

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from datalake_assets.spec.id_index import id_hashes, index_table
from datalake_assets.transform.index_lookup import prior_ids


def write(directory, name, table):
    os.makedirs(directory, exist_ok=True)
    location = os.path.join(directory, name)
    pq.write_table(table, location, compression="zstd")
    return location


def old_format(ids):
    """An index file as versions before ``id_hash`` wrote it: the sorted ids only."""
    return pa.table({"message_id": sorted(ids)})


def test_ids_held_by_hashed_old_and_empty_files_are_found_exactly(tmp_path):
    files = [
        write(tmp_path / "hour=2026112108", "a.parquet", index_table(pa.array(["a", "b", "x"]))),
        write(tmp_path / "hour=2026112109", "b.parquet", old_format(["c", "y"])),  # old lake
        write(tmp_path / "hour=2026112109", "c.parquet", index_table(pa.array(["b", "d"]))),
        write(tmp_path / "hour=2026112110", "d.parquet", index_table(pa.array([], pa.string()))),
        write(tmp_path / "hour=2026112111", "e.parquet", old_format([])),
    ]
    batch = pa.chunked_array([["a", "b", "c", "new", None], ["b", "new2"]])
    assert sorted(prior_ids(files, batch).to_pylist()) == ["a", "b", "c"]
    assert prior_ids(files, pa.array([], pa.string())).to_pylist() == []
    assert prior_ids([], batch).to_pylist() == []
    assert prior_ids(files[1:2], pa.array(["y", "z"])).to_pylist() == ["y"]


def test_a_hash_hit_that_is_not_the_same_id_is_not_held(tmp_path):
    # "other" is written with the hash of "mine": the hash column says held, the id says not
    forged = pa.table(
        {
            "message_id": ["other", "zz"],
            "id_hash": pa.concat_arrays(
                [id_hashes(pa.array(["mine"])), id_hashes(pa.array(["zz"]))]
            ),
        }
    )
    files = [write(tmp_path / "hour=2026112108", "f.parquet", forged)]
    assert prior_ids(files, pa.array(["mine", "zz"])).to_pylist() == ["zz"]
    assert prior_ids(files, pa.array(["mine"])).to_pylist() == []


def test_many_files_and_a_big_batch(tmp_path):
    files = [
        write(
            tmp_path / f"hour=20261121{h:02d}",
            "p.parquet",
            index_table(pa.array([f"{h}-{i}" for i in range(5000)])),
        )
        for h in range(24)
    ]
    batch = pa.array(
        [f"{h}-{i}" for h in (3, 17) for i in range(0, 5000, 7)]
        + [f"new-{i}" for i in range(50_000)]
    )
    got = prior_ids(files, batch).to_pylist()
    assert sorted(got) == sorted(f"{h}-{i}" for h in (3, 17) for i in range(0, 5000, 7))


@pytest.mark.usefixtures("moto_endpoint")
def test_an_s3_lake(moto_bucket):
    client, bucket = moto_bucket
    put = {
        "k/hour=2026112108/a.parquet": index_table(pa.array(["a", "b"])),
        "k/hour=2026112109/b.parquet": old_format(["c"]),
    }
    for key, table in put.items():
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink)
        client.put_object(Bucket=bucket, Key=key, Body=sink.getvalue().to_pybytes())
    files = [f"s3://{bucket}/{key}" for key in put]
    assert sorted(prior_ids(files, pa.array(["a", "c", "d"])).to_pylist()) == ["a", "c"]
