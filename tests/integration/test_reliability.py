"""Faults on a real mitmdump with the addon: hard kill under load, graceful stops, a soak of concurrent streams."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from converse_tap.cli import cli
from converse_tap.store.reader import load
from tests.integration.procs import Canned, mitmdump
from tests.integration.test_proxy import BODY, HEADERS, STREAM_BODY

pytestmark = pytest.mark.integration
FLUSH = 0.2
LAG = 0.3  # seconds the recording worker may trail the proxy on a busy 2-core machine


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def _children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


@pytest.mark.parametrize("victims", ["proxy", "proxy-and-worker"])
def test_hard_kill_loses_at_most_the_last_flush_interval(tmp_path: Path, victims: str) -> None:
    """SIGKILL of the proxy alone: its recording worker sees the pipe close and finishes its files, so nothing
    handed over is lost. SIGKILL of both (the OOM killer, kill -9 of the group): the journals stay behind and
    `recover` keeps all but the last flush interval."""
    out = tmp_path / "data"
    seen: list[float] = []  # when the client got each response
    enough = threading.Event()
    stop = threading.Event()
    with (
        Canned() as up,
        mitmdump(out, "--set", f"converse_tap_flush_interval={FLUSH}", "--set", "flow_detail=0") as (
            proxy,
            proc,
        ),
    ):

        def load_loop() -> None:
            with httpx.Client(proxy=proxy, timeout=5) as client:
                while not stop.is_set():
                    try:
                        client.post(up.base + "/a2a", content=BODY, headers=HEADERS).raise_for_status()
                    except httpx.HTTPError:
                        return  # the proxy is gone
                    seen.append(time.monotonic())
                    if len(seen) >= 300:
                        enough.set()

        worker = threading.Thread(target=load_loop)
        worker.start()
        assert enough.wait(60)
        (worker_pid,) = _children(proc.popen.pid)
        killed_at = time.monotonic()
        if victims == "proxy-and-worker":
            os.kill(worker_pid, signal.SIGKILL)
        proc.popen.send_signal(signal.SIGKILL)
        proc.popen.wait()
        stop.set()
        worker.join()
        _wait_gone(worker_pid)
    if victims == "proxy-and-worker":
        assert list(out.rglob("*.arrows")), "a killed worker should leave journals behind"
    else:
        assert not list(out.rglob("*.arrows")), "a worker whose proxy died finishes its files"
    r = CliRunner().invoke(cli, ["recover", str(out)])
    assert r.exit_code == 0
    rows = len(load(out, "exchanges"))
    completed = [t for t in seen if t <= killed_at]
    # the worker journals what it has decoded every FLUSH seconds; what it had not yet read from the pipe (its
    # lag, which grows on a loaded machine) dies with it too: allow the last interval plus LAG of responses
    recent = [t for t in completed if t > killed_at - FLUSH - LAG]
    lost = len(completed) - rows
    print(f"hard kill: {len(completed)} responses seen, {rows} rows kept, {lost} lost, {len(recent)} in the last flush")
    # a request in flight at the kill may be recorded although its client never saw the answer: lost can be -1
    if victims == "proxy":
        assert -2 <= lost <= 2, (len(completed), rows)  # in the hand-off when killed
    else:
        assert -2 <= lost <= len(recent) + 2, (len(completed), rows, len(recent))
    assert not list(out.rglob("*.arrows"))


def _wait_gone(pid: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return  # a zombie: it has finished, its parent is gone
        except OSError:
            return
        time.sleep(0.05)
    assert not Path(f"/proc/{pid}").exists() or time.monotonic() < deadline, f"worker {pid} still running"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_graceful_stop_loses_nothing_and_leaves_no_journal(tmp_path: Path, sig: signal.Signals) -> None:
    out = tmp_path / "data"
    with Canned() as up, mitmdump(out, "--set", "converse_tap_flush_interval=60") as (proxy, proc):
        with httpx.Client(proxy=proxy, timeout=5) as client:
            for _ in range(40):
                client.post(up.base + "/a2a", content=BODY, headers=HEADERS).raise_for_status()
        assert proc.stop(sig) == 0
    assert len(load(out, "exchanges")) == 40
    assert not list(out.rglob("*.arrows")) and not list(out.rglob(".*.tmp")) and not (out / "_journal").exists()


def test_soak_concurrent_streams_memory_flat_and_every_row_present(tmp_path: Path) -> None:
    out = tmp_path / "data"
    rounds, per_round, concurrency = 4, 300, 20

    async def streams(proxy: str, base: str, n: int) -> int:
        sem = asyncio.Semaphore(concurrency)
        async with httpx.AsyncClient(proxy=proxy, timeout=30, limits=httpx.Limits(max_connections=concurrency)) as c:

            async def one() -> int:
                async with sem, c.stream("POST", base + "/sse/a2a", content=STREAM_BODY, headers=HEADERS) as r:
                    return len(b"".join([chunk async for chunk in r.aiter_raw()]))

            sizes = await asyncio.gather(*(one() for _ in range(n)))
        return sum(1 for s in sizes if s > 0)

    rss = []
    with Canned() as up, mitmdump(out, "--set", "flow_detail=0", "--set", "converse_tap_summary=off") as (proxy, proc):
        for _ in range(rounds):
            assert asyncio.run(streams(proxy, up.base, per_round)) == per_round
            rss.append(_rss_kib(proc.popen.pid))
    ex = load(out, "exchanges")
    odd = ex[(ex["sse_events"] != 2) | ~ex["complete"].astype(bool)]
    shown = ["exchange_id", "status_code", "sse_events", "complete", "error", "anomalies", "ts_start", "ts_end"]
    detail = odd[shown].head(5).to_dict("records")
    assert len(ex) == rounds * per_round and odd.empty, (len(ex), len(odd), detail)
    # after the first round has warmed caches, memory stays flat: no per-flow state is kept
    print(f"soak: mitmdump RSS after each round of {per_round} streams (KiB): {rss}")
    assert rss[-1] - rss[1] < 20 * 1024, rss


def test_a_dead_worker_costs_no_traffic_and_is_replaced(tmp_path: Path) -> None:
    """The recording worker killed mid-run: every request is still answered, a new worker starts on the next
    A2A exchange (after a short back-off), recovers the dead one's journals, and records what follows."""
    out = tmp_path / "data"
    with Canned() as up, mitmdump(out, "--set", "flow_detail=0") as (proxy, proc):
        with httpx.Client(proxy=proxy, timeout=5) as client:
            for _ in range(20):
                client.post(up.base + "/a2a", content=BODY, headers=HEADERS).raise_for_status()
            deadline = time.monotonic() + 30
            while not list(out.rglob("exchanges-*.arrows")):  # the first twenty are journaled
                assert time.monotonic() < deadline
                time.sleep(0.05)
            (worker,) = _children(proc.popen.pid)
            os.kill(worker, signal.SIGKILL)
            _wait_gone(worker)
            answered = 0
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                client.post(up.base + "/a2a", content=BODY, headers=HEADERS).raise_for_status()
                answered += 1
                replacement = [c for c in _children(proc.popen.pid) if c != worker]
                if replacement and answered >= 40:
                    break
                time.sleep(0.05)
            assert replacement, "a new worker was started"
            for _ in range(20):
                client.post(up.base + "/a2a", content=BODY, headers=HEADERS).raise_for_status()
        assert proc.stop() == 0
    assert "the recording worker stopped" in proc.output
    rows = len(load(out, "exchanges"))
    # the first twenty (recovered from the dead worker's journals) and the last twenty at least
    assert rows >= 40, rows
    assert not list(out.rglob("*.arrows"))


def test_the_recording_worker_keeps_pandas_out(tmp_path: Path) -> None:
    """pyarrow imports pandas the first time it converts Python rows (1.5 s of CPU, ~40 MiB), only to ask whether
    a value is a pandas object: the worker has converted rows, and pandas is not among its mapped files."""
    out = tmp_path / "data"
    with Canned() as up, mitmdump(out) as (proxy, proc):
        with httpx.Client(proxy=proxy, timeout=5) as client:
            for _ in range(5):
                client.post(up.base + "/a2a", content=BODY, headers=HEADERS).raise_for_status()
        (worker_pid,) = _children(proc.popen.pid)
        deadline = time.monotonic() + 30
        while not [p for p in out.rglob("exchanges-*.arrows") if p.stat().st_size] and time.monotonic() < deadline:
            time.sleep(0.05)
        maps = Path(f"/proc/{worker_pid}/maps").read_text()
        assert "pyarrow" in maps and "/pandas/" not in maps
    assert len(load(out, "exchanges")) == 5
