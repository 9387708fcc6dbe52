"""A recording worker that died while idle (the OOM killer picks the larger process; `kill -9`) is found by no
failed write, and no record came to start another. A graceful stop left its journals behind: out of every report
until someone ran `converse-tap recover`, and what it lost was never written down. The stop now starts a last
worker, which recovers them (as every worker does at its start) and writes the losses into `capture_gaps`."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from converse_tap.addon.channel import Channel
from converse_tap.store.reader import load
from tests.factories import a2a_flow, agent_message, jsonrpc_request, jsonrpc_result, sse_body


def _journaled(out: Path, timeout: float = 60) -> None:
    """Until a journal of exchanges holds rows (the worker flushes every 0.05 s)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(p.stat().st_size > 0 for p in out.glob("_journal/*/exchanges-*.arrows")):
            return
        time.sleep(0.05)
    raise TimeoutError("no journal of exchanges")


def test_a_worker_dead_when_the_recorder_stops_has_its_journals_recovered(tap) -> None:
    addon, _, out = tap
    for i in range(3):
        flow = a2a_flow(body=jsonrpc_request(), response=jsonrpc_result({"message": agent_message(f"r{i}")}))
        addon.request(flow)
        addon.response(flow)
    stream = a2a_flow(body=jsonrpc_request("SendStreamingMessage"), response=b"", content_type="text/event-stream")
    addon.request(stream)
    addon.responseheaders(stream)
    stream.response.stream(sse_body({"result": {"message": agent_message()}})[:10])  # open in the worker
    _journaled(out)
    channel = addon.channel
    assert channel is not None and channel._proc is not None
    os.kill(channel._proc.pid, signal.SIGKILL)
    channel._proc.wait()
    addon.done()
    assert len(load(out, "exchanges")) == 3
    assert not (out / "_journal").exists()
    gaps = load(out, "capture_gaps")
    assert gaps[gaps["reason"] == "worker_died"]["records"].sum() == 1  # the stream it had open


def test_close_after_a_death_found_by_a_write_recovers_too(tmp_path: Path) -> None:
    """The death found by a write, during the back-off: no worker runs, and `close` returned at once."""
    out = tmp_path / "data"
    config = {
        **{"dir": str(out), "text": "keep", "salt": "", "summary": "off"},
        **{"flush_interval": 0.05, "rollover_rows": 1000, "rollover_seconds": 300.0},
        **{"max_body": 1 << 20, "max_events": 100},
    }
    channel = Channel(config)
    channel.start()
    proc = channel._proc
    assert proc is not None
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    record = ("e", "nobody", (None, None), None, False)  # a stream end the worker never saw open: no rows
    assert channel.send(record)  # queued, then found dead on the write
    assert channel._proc is None
    assert channel.close() == 0  # a last worker, which writes down the loss
    gaps = load(out, "capture_gaps")
    assert gaps["reason"].astype(str).tolist() == ["worker_died"]
    assert not (out / "_journal").exists()


def test_close_of_a_channel_never_started_starts_nothing(tmp_path: Path) -> None:
    channel = Channel({"dir": str(tmp_path / "data")})
    assert channel.close() is None
    assert not (tmp_path / "data").exists()
