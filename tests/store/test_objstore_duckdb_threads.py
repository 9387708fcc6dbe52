"""DuckDB reads objects from several threads through one Python file handle per object: a positional read arrives as
`seek` then `read`, so threads sharing one position read each other's bytes. Before `objstore.PositionalFile`, a
report over object storage failed now and then ("TProtocolException: Invalid data", "Snappy decompression failure")
or, worse, returned wrong sums. Here: the interleaving made deterministic, then DuckDB itself against moto."""

from __future__ import annotations

import io
import os
import threading
import uuid
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from converse_tap.store import objstore
from tests.integration.test_objstore import Moto, _aws_env

DATA = bytes(range(256)) * 64


def test_each_thread_reads_at_its_own_position() -> None:
    f = objstore.PositionalFile(pa.BufferReader(DATA))
    got: dict[str, bytes] = {}
    a_sought, b_sought = threading.Event(), threading.Event()

    def a() -> None:
        f.seek(10)
        a_sought.set()
        b_sought.wait(5)  # the other thread has moved "the" position since
        got["a"] = f.read(4)

    def b() -> None:
        a_sought.wait(5)
        f.seek(200)
        b_sought.set()
        got["b"] = f.read(4)

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert got == {"a": DATA[10:14], "b": DATA[200:204]}


def test_seek_read_and_tell_behave_as_a_file_does() -> None:
    f = objstore.PositionalFile(pa.BufferReader(DATA))
    ref = io.BytesIO(DATA)
    for op in [(0, os.SEEK_END), (-5, os.SEEK_END), (3, os.SEEK_SET), (7, os.SEEK_CUR), (len(DATA) + 9, os.SEEK_SET)]:
        assert f.seek(*op) == ref.seek(*op)
        assert f.read(6) == ref.read(6)
        assert f.tell() == ref.tell()
    f.seek(100)
    assert f.read() == DATA[100:]
    assert f.read(-1) == b"" and f.size == len(DATA)
    with pytest.raises(ValueError, match="negative"):
        f.seek(-1)
    with f:
        assert not f.closed
    assert f.closed


@pytest.mark.integration
def test_duckdb_over_object_storage_sums_exactly_under_many_threads(
    moto: Moto, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _aws_env(monkeypatch, tmp_path, moto)
    bucket = f"t-{uuid.uuid4().hex[:12]}"
    moto.make_bucket(bucket)
    fs = objstore.parse(f"s3://{bucket}/p").fs
    names, total = [], 0
    for i in range(6):  # many small row groups per file: many positional reads per handle, from every thread
        values = list(range(i * 20_000, (i + 1) * 20_000))
        total += sum(values)
        buf = io.BytesIO()
        pq.write_table(pa.table({"a": values, "s": [f"x{v}" * 4 for v in values]}), buf, row_group_size=1_000)
        with fs.open_output_stream(f"{bucket}/p/f{i}.parquet") as out:
            out.write(buf.getvalue())
        names.append(objstore.duckdb_path(f"{bucket}/p/f{i}.parquet"))
    for _ in range(12):  # before the fix, about one read in five of these went wrong
        con = duckdb.connect()
        con.execute("SET threads=4")
        objstore.register_duckdb(con)
        got = con.execute(f"SELECT count(*), sum(a), sum(length(s)) FROM read_parquet({names!r})").fetchone()
        con.close()
        assert got == (120_000, total, sum(len(f"x{v}" * 4) for v in range(120_000)))
