"""A stop signal sent to the proxy's whole process group (`systemctl stop`, `kill -- -PGID`, a closed terminal)
reaches the recording worker at the same moment as the proxy: the worker waits for the proxy to close its pipe,
so every exchange answered is a row. Told to stop alone, the worker stops on its own after its grace, its rows
written, and a new one records what follows."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import httpx
import pytest

from converse_tap.addon.workerproc import TERM_GRACE
from converse_tap.store.reader import load
from tests.integration.procs import Canned, hangup, mitmdump
from tests.integration.test_proxy import BODY, HEADERS
from tests.integration.test_reliability import _children, _wait_gone

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_stop_signal_to_the_group_loses_no_row(tmp_path: Path, sig: signal.Signals) -> None:
    out = tmp_path / "data"
    with Canned() as up, hangup(), mitmdump(out, "--set", "converse_tap_flush_interval=60") as (proxy, proc):
        with httpx.Client(proxy=proxy, timeout=5) as client:
            for _ in range(25):
                client.post(up.base + "/a2a", content=BODY, headers=HEADERS).raise_for_status()
        (worker,) = _children(proc.popen.pid)
        os.kill(worker, sig)  # the worker first: it must not die before the proxy has handed it everything
        proc.popen.send_signal(sig)
        proc.popen.wait(60)
        _wait_gone(worker)
    assert len(load(out, "exchanges")) == 25
    assert not list(out.rglob("*.arrows")) and not (out / "_journal").exists()


def test_a_worker_told_to_stop_alone_writes_its_rows_and_is_replaced(tmp_path: Path) -> None:
    out = tmp_path / "data"
    with (
        Canned() as up,
        mitmdump(out, "--set", "converse_tap_flush_interval=60", "--set", "flow_detail=0") as (
            proxy,
            proc,
        ),
    ):
        with httpx.Client(proxy=proxy, timeout=5) as client:
            for _ in range(20):
                client.post(up.base + "/a2a", content=BODY, headers=HEADERS).raise_for_status()
            (worker,) = _children(proc.popen.pid)
            told = time.monotonic()
            os.kill(worker, signal.SIGTERM)
            _wait_gone(worker, timeout=TERM_GRACE + 30)
            waited = time.monotonic() - told
            assert waited >= TERM_GRACE - 0.5, waited  # it waited for a pipe the proxy kept open
            parquet = [p for p in out.rglob("*.parquet") if "exchanges" in p.parts]
            assert parquet, "the worker rolled its rows into Parquet before it left"
            assert len(load(out, "exchanges")) == 20
            deadline = time.monotonic() + 30
            answered = 0
            while time.monotonic() < deadline:  # the next A2A exchanges start a new worker (after a back-off)
                client.post(up.base + "/a2a", content=BODY, headers=HEADERS).raise_for_status()
                answered += 1
                if [c for c in _children(proc.popen.pid) if c != worker] and answered >= 20:
                    break
                time.sleep(0.05)
            for _ in range(10):
                client.post(up.base + "/a2a", content=BODY, headers=HEADERS).raise_for_status()
        assert proc.stop() == 0
    assert "told to stop" in proc.output
    assert len(load(out, "exchanges")) >= 30  # the first twenty, and at least the last ten


def test_under_nohup_a_hangup_stops_neither_proxy_nor_worker(tmp_path: Path) -> None:
    """Started with SIGHUP ignored (`nohup mitmdump …`), the proxy goes on after a hangup: so does its worker,
    past its grace, recording what follows."""
    out = tmp_path / "data"
    with (
        Canned() as up,
        hangup(signal.SIG_IGN),
        mitmdump(out, "--set", "converse_tap_flush_interval=60") as (
            proxy,
            proc,
        ),
    ):
        with httpx.Client(proxy=proxy, timeout=5) as client:
            for _ in range(10):
                client.post(up.base + "/a2a", content=BODY, headers=HEADERS).raise_for_status()
            (worker,) = _children(proc.popen.pid)
            os.kill(worker, signal.SIGHUP)
            proc.popen.send_signal(signal.SIGHUP)
            time.sleep(TERM_GRACE + 1)  # past the grace a worker told to stop would take
            assert proc.popen.poll() is None and _children(proc.popen.pid) == [worker]
            for _ in range(10):
                client.post(up.base + "/a2a", content=BODY, headers=HEADERS).raise_for_status()
        assert proc.stop() == 0
    assert len(load(out, "exchanges")) == 20
    assert "told to stop" not in proc.output
