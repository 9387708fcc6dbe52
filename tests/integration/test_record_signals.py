"""`converse-tap record` told to stop by SIGHUP (its terminal closed, `kill -HUP`), as by SIGINT or SIGTERM: an
orderly stop, every row written, the requests still waiting said lost, the shutdown line printed, exit 0. Its
default action killed the proxy on the spot (exit -1): the worker wrote what it had, the rest went unsaid."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import httpx
import pytest

from converse_tap.store.reader import load
from tests.integration.procs import LISTENING, Canned, Proc, hangup
from tests.integration.test_proxy import BODY, HEADERS, STREAM_BODY

pytestmark = pytest.mark.integration

CONVERSE_TAP = Path(sys.executable).with_name("converse-tap")


def test_sighup_stops_the_recorder_in_order(tmp_path: Path) -> None:
    out = tmp_path / "data"
    with hangup():  # (not ignored, as under `nohup`, which this recorder would then respect)
        proc = Proc([str(CONVERSE_TAP), "record", "--out", str(out), "--listen-port", "0", "--flush-interval", "60"])
    try:
        proxy = f"http://127.0.0.1:{proc.wait_for(LISTENING).group(1)}"
        with Canned() as up, httpx.Client(proxy=proxy, timeout=30) as client:
            for _ in range(5):
                client.post(up.base + "/a2a", content=BODY, headers=HEADERS).raise_for_status()
            with client.stream("POST", up.base + "/held/a2a", content=STREAM_BODY, headers=HEADERS) as held:
                next(held.iter_bytes())  # the first event is through; the agent holds the rest
                rc = proc.stop(signal.SIGHUP)
    finally:
        proc.stop()
    assert rc == 0, proc.output
    assert "A2A requests seen" in proc.output  # the shutdown line
    exchanges = load(out, "exchanges")
    assert len(exchanges) == 6  # the five, and the stream, cut short
    assert not (out / "_journal").exists()
