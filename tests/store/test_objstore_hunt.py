"""Datasets on object storage that change, or whose endpoint goes away, while they are read, and prefixes with odd
names; against moto's standalone S3 server on loopback (started as tests/integration/test_objstore.py starts it,
its output drained by a thread so that it never blocks)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pytest

from converse_tap.analysis import sources
from converse_tap.analysis.engine import Engine
from converse_tap.store import objstore
from converse_tap.store.changes import DatasetChanged, StorageLost, settle
from converse_tap.store.reader import TableFiles, table_files
from tests.cli_helpers import invoke
from tests.factories import a2a_flow, agent_message, jsonrpc_result, write_dataset
from tests.integration.test_objstore import Moto, _aws_env
from tests.store.test_dataset_hunt import _racing

pytestmark = pytest.mark.integration


@pytest.fixture
def bucket(moto: Moto, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    _aws_env(monkeypatch, tmp_path, moto)
    name = f"h-{uuid.uuid4().hex[:12]}"
    moto.make_bucket(name)
    return name


def _dataset(root: str, writers: int = 3, per: int = 2, tag: str = "ex") -> str:
    for w in range(writers):
        flows = [a2a_flow(response=jsonrpc_result(agent_message(mid=f"{tag}-m{w}-{i}"))) for i in range(per)]
        write_dataset(root, flows, id_format=f"{tag}-{w}-{{:03d}}")
    return root


def _delete(remote: objstore.Remote, path: str) -> None:
    remote.fs.delete_file(path)


def _shorter(remote: objstore.Remote, path: str) -> None:  # replaced by a shorter object
    with remote.fs.open_input_stream(path) as f:
        head = f.read(64)
    with remote.fs.open_output_stream(path) as f:
        f.write(head)


def _corrupt(remote: objstore.Remote, path: str) -> None:  # the same size, no longer Parquet
    size = remote.fs.get_file_info(path).size
    assert size is not None
    with remote.fs.open_output_stream(path) as f:
        f.write(b"PAR1" + b"\0" * (size - 4))


CHANGES: dict[str, Callable[[objstore.Remote, str], None]] = {
    "deleted": _delete,
    "shorter": _shorter,
    "corrupt": _corrupt,
}


@pytest.mark.parametrize("how", sorted(CHANGES))
def test_an_object_changed_between_listing_and_reading_is_named(
    how: str, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _dataset(f"s3://{bucket}/fleet", writers=5, per=1)  # a file for each change below
    remote = objstore.parse(root)
    hit: list[str] = []
    _racing(monkeypatch, sources, lambda p: CHANGES[how](remote, p), hit, False, str)
    # found on opening when its size or time changed, else (the same size, within the same second) when read:
    # opening no longer reads every file's footer (tests/analysis/test_many_files_scan.py)
    with pytest.raises(DatasetChanged) as e, Engine.over_dataset(root) as engine:
        try:
            engine.dataset_counts()
        except duckdb.Error as failed:
            raise settle(failed, engine.root, engine.listed) from failed
    assert [where for where, _ in e.value.changed] == [objstore.SCHEME + hit[0]]

    # the report reads the dataset again; an object changed every time it is listed makes it give up, and say so
    def only_filled(p: str) -> None:
        if remote.fs.get_file_info(p).size:
            CHANGES[how](remote, p)

    _racing(monkeypatch, sources, only_filled, hit, True, str)
    r = invoke("report", root, "--format", "json")
    assert r.exit_code == 2, r.output
    assert f"{objstore.SCHEME}{hit[-1]} " in r.stderr and "changed while it was being read" in r.stderr
    assert "run the command again" in r.stderr and "Traceback" not in r.output and r.stdout == ""


def test_a_report_reads_again_over_an_object_renamed_once(bucket: str, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _dataset(f"s3://{bucket}/fleet")
    remote = objstore.parse(root)
    hit: list[str] = []
    _racing(monkeypatch, sources, lambda p: remote.fs.move(p, p.replace("/part-", "/part-moved-")), hit, False, str)
    r = invoke("report", root, "--format", "json")
    assert r.exit_code == 0 and hit, r.output
    assert json.loads(r.stdout)["dataset"]["exchanges"] == 6 and "warning" not in r.stderr


def test_an_object_deleted_while_the_queries_run_exits_2(bucket: str, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _dataset(f"s3://{bucket}/fleet")
    remote = objstore.parse(root)
    real = Engine.over_dataset.__func__  # type: ignore[attr-defined]
    gone: list[str] = []

    def built_then_deleted(cls: type[Engine], *args: Any, **kwargs: Any) -> Engine:
        engine = real(cls, *args, **kwargs)
        for f in engine.listed["messages"].files:
            remote.fs.move(f, f.replace("/part-", f"/part-{len(gone)}-"))
            gone.append(f)
        return engine

    monkeypatch.setattr(Engine, "over_dataset", classmethod(built_then_deleted))
    r = invoke("report", root, "--format", "json")
    assert r.exit_code == 2 and gone, r.output
    assert f"{objstore.SCHEME}{gone[-1]} is gone" in r.stderr and "Traceback" not in r.output


@pytest.mark.parametrize("table", ["messages", "capture_gaps"])
def test_the_endpoint_gone_mid_read_is_named_with_what_to_do(
    table: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The endpoint stops after one table was listed (the next listing fails), or after every table was (the
    reading fails): exit 2, the storage named, no traceback, no report over what was read before."""
    server = Moto().start()
    try:
        _aws_env(monkeypatch, tmp_path, server)
        server.make_bucket("gone")
        root = _dataset("s3://gone/fleet")
        real = table_files

        def listing(r: Any, t: str, *args: Any) -> TableFiles:
            out = real(r, t, *args)
            if t == table:
                server.stop()
            return out

        monkeypatch.setattr(sources, "table_files", listing)
        with pytest.raises(StorageLost):
            Engine.over_dataset(root).close()
        server.start()
        server.make_bucket("gone")
        _dataset(root)
        r = invoke("report", root, "--format", "json")
        assert r.exit_code == 2, r.output
        assert "the object storage failed while s3://gone/fleet" in r.stderr and "AWS_ENDPOINT_URL" in r.stderr
        assert "run the command again" in r.stderr and "Traceback" not in r.output and r.stdout == ""
    finally:
        server.stop()


ODD = ["run[1]", "a*b", "q?x#y", "sp ace/ünï", "br{a,b}ce,'q\"", "p%20x", "t~x/y=z"]
DECOYS = {"run[1]": "run1", "a*b": "aXb", "q?x#y": "qZx#y"}


@pytest.mark.parametrize("prefix", ODD)
def test_a_prefix_with_an_odd_name_reads_its_own_objects_only(prefix: str, bucket: str) -> None:
    root = _dataset(f"s3://{bucket}/{prefix}", writers=2, per=2)
    if prefix in DECOYS:  # a copy beside it: the same object names, which the pattern matched too
        remote = objstore.parse(root)
        copy = objstore.Remote(bucket, DECOYS[prefix])
        for info in objstore.list_files(remote, ""):
            remote.fs.copy_file(info.path, copy.path(info.path.removeprefix(remote.path() + "/")))
        _dataset(copy.url, writers=1, per=5, tag="decoy")
    r = invoke("report", root, "--format", "json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["dataset"]["exchanges"] == 4
    q = invoke("sql", root, "SELECT count(*) AS n FROM exchanges", "--format", "csv")
    assert q.exit_code == 0 and q.stdout == "n\n4\n", q.output
