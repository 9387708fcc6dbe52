"""Datasets on S3-compatible object storage, against a real S3 endpoint: moto's standalone server on loopback
(started on port 0, ready when it says where it listens, stopped by PID). Ingest, record (a real mitmdump), two
recorders into one prefix, report/check/agents over s3://, and recover after a kill while the endpoint is down."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import threading
import time
import uuid
from pathlib import Path

import httpx
import pyarrow.fs as pafs
import pytest

from converse_tap.store import objstore
from converse_tap.store.reader import read_journals, read_table, table_files
from converse_tap.store.writer import DatasetWriter
from tests.captures import write_capture
from tests.cli_helpers import invoke
from tests.integration.procs import Canned, Proc, mitmdump
from tests.integration.test_proxy import BODY, HEADERS
from tests.store.test_writer import extraction

pytestmark = pytest.mark.integration
MOTO = Path(sys.executable).with_name("moto_server")
RUNNING = re.compile(r"Running on http://127\.0\.0\.1:(\d+)")


class Moto:
    """moto's S3 server in its own process; `restart` brings it back on the same port, empty (moto keeps its
    objects in memory), as a storage service that was down and came back would be reached at the same address."""

    def __init__(self) -> None:
        self.port = 0
        self.proc: Proc | None = None

    def start(self) -> Moto:
        self.proc = Proc([str(MOTO), "-H", "127.0.0.1", "-p", str(self.port)])
        self.port = int(self.proc.wait_for(RUNNING, timeout=30).group(1))
        return self

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop(signal.SIGTERM)
            self.proc = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def make_bucket(self, name: str) -> None:
        fs = pafs.S3FileSystem(
            endpoint_override=f"127.0.0.1:{self.port}",
            scheme="http",
            region="us-east-1",
            access_key="test",
            secret_key="test",
            allow_bucket_creation=True,
        )
        fs.create_dir(name)


def _aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, server: Moto) -> None:
    """The standard AWS variables, pointed at the loopback server; inherited by the processes a test starts."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", server.endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # the default journal folder, inside the test


@pytest.fixture
def s3(moto: Moto, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """A fresh bucket; the dataset address under it."""
    _aws_env(monkeypatch, tmp_path, moto)
    bucket = f"t-{uuid.uuid4().hex[:12]}"
    moto.make_bucket(bucket)
    return f"s3://{bucket}/fleet/data"


def _parquet_keys(url: str) -> list[str]:
    remote = objstore.parse(url)
    return [i.path for i in objstore.list_files(remote, "") if i.path.endswith(".parquet")]


def _without_location(report: dict) -> dict:
    report = dict(report)
    report.pop("dataset", None)
    return report


def test_ingest_into_s3_reads_back_as_the_local_dataset(s3: str, tmp_path: Path) -> None:
    """The same capture ingested into s3:// and into a directory: report, check and agents say the same; a second
    ingest adds nothing; no journal is left on local disk; nothing is written outside the prefix."""
    capture = write_capture(tmp_path / "cap.mitm", 60)
    local = tmp_path / "local"
    assert invoke("ingest", str(capture), "--out", str(local), "--jobs", "1").exit_code == 0
    r = invoke("ingest", str(capture), "--out", s3, "--jobs", "1")
    assert r.exit_code == 0, r.output
    keys = _parquet_keys(s3)
    prefix = objstore.parse(s3).path()
    assert keys and all(k.startswith(prefix + "/") for k in keys)
    assert {k.removeprefix(prefix + "/").split("/")[0] for k in keys} == {"exchanges", "messages", "agent_cards"}
    assert all(re.search(r"/date=\d{4}-\d\d-\d\d/part-\d+-[\w-]+-\d+-[0-9a-f]{8}-\d+\.parquet$", k) for k in keys)
    assert not list((tmp_path / "cache").rglob("*.arrows"))
    assert objstore.read_text(objstore.parse(s3), "_text_policy") == "keep\n"

    again = invoke("ingest", str(capture), "--out", s3, "--jobs", "1")
    assert again.exit_code == 0 and _parquet_keys(s3) == keys  # every exchange already there: no new file

    on_s3 = invoke("report", s3, "--format", "json")
    on_disk = invoke("report", str(local), "--format", "json")
    assert on_s3.exit_code == 0, on_s3.output
    assert _without_location(json.loads(on_s3.stdout)) == _without_location(json.loads(on_disk.stdout))

    q = "SELECT agent, count(*) AS n FROM exchanges GROUP BY agent ORDER BY agent"
    for args in (
        ["agents", "--format", "json"],
        ["check", "--max-unanswered-share", "0.99", "--format", "json"],
        ["sql", q, "--format", "json"],
    ):
        a = invoke(args[0], s3, *args[1:])
        b = invoke(args[0], str(local), *args[1:])
        assert a.exit_code == b.exit_code and json.loads(a.stdout), (args, a.output)
        assert a.stdout.replace(s3, "D") == b.stdout.replace(str(local), "D")


def test_a_missing_bucket_or_a_bad_address_is_a_clear_error(s3: str) -> None:
    gone = "s3://no-such-bucket-" + uuid.uuid4().hex[:8] + "/x"
    r = invoke("report", gone)
    assert r.exit_code == 2 and "bucket" in r.stderr and "does not exist" in r.stderr, r.output
    for bad in ("s3:///nobucket", "s3://[bucket/x"):  # (the second said only "Invalid IPv6 URL")
        r = invoke("report", bad)
        assert r.exit_code == 2 and "is not an s3://BUCKET/PREFIX address" in r.stderr, r.output
    r = invoke("report", s3)  # the bucket exists, the prefix holds nothing yet
    assert r.exit_code == 2 and "is not a converse-tap dataset" in r.stderr
    r = invoke("record", "--out", gone, "--listen-port", "0")
    assert r.exit_code == 2 and "cannot write the dataset to --out" in r.stderr and "Traceback" not in r.output
    r = invoke("ingest", __file__, "--out", "s3://b/a/../c")
    assert r.exit_code == 2 and "'..' segment" in r.stderr


def _post(proxy: str, url: str, n: int) -> None:
    with httpx.Client(proxy=proxy, timeout=10) as client:
        for _ in range(n):
            client.post(url, content=BODY, headers=HEADERS).raise_for_status()


def test_two_recorders_into_one_prefix_lose_and_double_nothing(s3: str, tmp_path: Path) -> None:
    """Two real mitmdumps with the addon, each journaling on its own local disk, rolling into the same prefix
    every second while traffic flows: every exchange is there once, in files of both writers."""
    per = 40
    roll = ("--set", "converse_tap_rollover_seconds=1")
    with (
        Canned() as up,
        mitmdump(s3, *roll, "--set", f"converse_tap_journal_dir={tmp_path / 'j1'}") as (p1, proc1),
        mitmdump(s3, *roll, "--set", f"converse_tap_journal_dir={tmp_path / 'j2'}") as (p2, proc2),
    ):
        threads = [threading.Thread(target=_post, args=(p, up.base + "/a2a", per)) for p in (p1, p2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert proc1.stop() == 0 and proc2.stop() == 0, proc1.output + proc2.output
    exchanges = read_table(s3, "exchanges", columns=["exchange_id"])["exchange_id"].to_pylist()
    assert len(exchanges) == 2 * per and len(set(exchanges)) == 2 * per
    writers = {re.search(r"part-\d+-(.+)-\d+\.parquet$", k).group(1) for k in _parquet_keys(s3)}  # type: ignore[union-attr]
    assert len(writers) == 2
    # the report over a table of many files (each writer rolled over every second), through DuckDB's reads
    report = invoke("report", s3, "--format", "json")
    assert report.exit_code == 0, report.output
    assert json.loads(report.stdout)["dataset"]["exchanges"] == 2 * per
    assert not list(tmp_path.glob("j*/**/*.arrows"))


def _journaled(journal_dir: Path) -> int:
    return sum(t.num_rows for t in read_journals(journal_dir).tables["exchanges"])


def _kill_tree(pid: int) -> None:
    children = [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    os.kill(pid, signal.SIGKILL)
    for child in children:  # the recording worker
        os.kill(child, signal.SIGKILL)
    for child in children:
        while Path(f"/proc/{child}").exists() and "zombie" not in Path(f"/proc/{child}/status").read_text():
            time.sleep(0.05)


def test_recover_after_a_kill_while_the_endpoint_is_down(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The recorder killed (proxy and worker) while the storage is unreachable: its rows wait in the local
    journals; `recover` says it cannot upload them and keeps them; once the endpoint is back, `recover` uploads
    every row, once."""
    server = Moto().start()
    try:
        _aws_env(monkeypatch, tmp_path, server)
        server.make_bucket("fleet")
        url, journals, n = "s3://fleet/rec", tmp_path / "journals", 25
        with Canned() as up, mitmdump(url, "--set", f"converse_tap_journal_dir={journals}") as (proxy, proc):
            _post(proxy, up.base + "/a2a", n)
            deadline = time.monotonic() + 30
            while _journaled(journals) < n and time.monotonic() < deadline:
                time.sleep(0.05)  # polling the journals the recorder fsyncs every 0.2 s
            assert _journaled(journals) == n
            server.stop()
            _kill_tree(proc.popen.pid)
        assert _journaled(journals) == n  # nothing was uploaded, nothing is lost

        down = invoke("recover", url, "--journal-dir", str(journals))
        assert down.exit_code == 1 and "not recovered" in down.stderr and "Traceback" not in down.output
        assert _journaled(journals) == n

        server.start()  # the same address, empty again
        server.make_bucket("fleet")
        back = invoke("recover", url, "--journal-dir", str(journals))
        assert back.exit_code == 0, back.output
        assert not list(journals.rglob("*.arrows"))
        ids = read_table(url, "exchanges", columns=["exchange_id"])["exchange_id"].to_pylist()
        assert len(ids) == n == len(set(ids))
        assert table_files(url, "exchanges").files and not table_files(url, "exchanges").foreign
    finally:
        server.stop()


def test_a_failed_upload_waits_in_its_journals_and_is_retried_with_backoff(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The writer's roll-over while the endpoint is down keeps the journals and retries on its own once the
    endpoint answers again: every row uploaded once, the journals then removed."""
    server = Moto().start()
    try:
        _aws_env(monkeypatch, tmp_path, server)
        server.make_bucket("retry")
        url, journals = "s3://retry/d", tmp_path / "journals"
        w = DatasetWriter(url, flush_interval=0.01, rollover_rows=4, journal_dir=journals)
        w.start(thread=False)
        server.stop()
        day1, day2 = 1_795_000_000.0, 1_795_000_000.0 + 86_400  # two date partitions: two objects per table
        for i in range(6):
            w.write(extraction(i, ts=day1 if i < 3 else day2))
        deadline = time.monotonic() + 10
        while w.stats.roll_failures == 0 and time.monotonic() < deadline:
            w.poll()
            time.sleep(0.01)
        assert w.stats.roll_failures > 0 and w.stats.files == 0
        assert _journaled(journals) == 6  # the rows wait
        server.start()
        server.make_bucket("retry")
        while w.stats.rows_rolled["exchanges"] < 6 and time.monotonic() < deadline + 10:
            w.poll()  # the retry comes 1 s after the failure
            time.sleep(0.02)
        assert w.stats.rows_rolled["exchanges"] == 6
        w.write(extraction(6, ts=day2))
        w.close()
        ids = read_table(url, "exchanges", columns=["exchange_id"])["exchange_id"].to_pylist()
        assert len(ids) == 7 == len(set(ids)) and w.stats.rows_dropped == 0
        assert not list(journals.rglob("*.arrows"))
    finally:
        server.stop()
