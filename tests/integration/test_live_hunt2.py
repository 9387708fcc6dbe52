"""Defects found by red-teaming the live recorder in a real mitmdump, each a test of its fix."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from converse_tap.addon import mitmdump_script
from converse_tap.store.reader import load
from tests.integration.hostile import Hostile, post
from tests.integration.procs import LISTENING, MITMDUMP, REPLY, SSE_BYTES, Canned, Proc, mitmdump
from tests.integration.test_proxy import BODY, HEADERS, STREAM_BODY
from tests.integration.test_reliability import _children, _wait_gone

pytestmark = pytest.mark.integration

BIG = json.loads(json.dumps(REPLY))
BIG["result"]["message"]["parts"] = [{"text": "x" * 300_000}]
BIG_BYTES = json.dumps(BIG).encode()
LAST_EVENT = json.dumps({"jsonrpc": "2.0", "id": "r-1", "result": BIG["result"]}).encode()
SSE_LONG = SSE_BYTES + b"data: " + LAST_EVENT + b"\n\n"


def _json(body: bytes, chunked: bool = False):
    def route(_: bytes) -> tuple[int, list[tuple[str, str]], Any]:
        return 200, [("content-type", "application/json")], iter([body[:100_000], body[100_000:]]) if chunked else body

    return route


ROUTES = {
    "/big/a2a": _json(BIG_BYTES),  # with a Content-Length past stream_large_bodies: streamed from its headers on
    "/late/a2a": _json(BIG_BYTES, chunked=True),  # without: mitmproxy switches to streaming in the middle
    "/sse/a2a": lambda _: (200, [("content-type", "text/event-stream")], SSE_LONG),
}


def test_bodies_mitmproxy_streams_are_recorded_or_said_not_stored(tmp_path: Path) -> None:
    """`--set stream_large_bodies=100k`, a mitmproxy option a user sets to keep large bodies out of its memory:
    a 300 KB JSON reply with a Content-Length was recorded without its reply, its size or any anomaly, and an SSE
    stream with a Content-Length as a stream of no events. Both are tapped and read now, relayed byte for byte;
    a body mitmproxy only starts streaming in its middle (no length) is said not stored."""
    out = tmp_path / "data"
    with Hostile(ROUTES) as up:
        paths = {"/big/a2a": BODY, "/late/a2a": BODY, "/sse/a2a": STREAM_BODY}
        direct = {p: post(up.base, up.base + p, b, HEADERS) for p, b in paths.items()}
        with mitmdump(out, "--set", "stream_large_bodies=100k") as (proxy, proc):
            for path, body in paths.items():
                assert post(proxy, up.base + path, body, HEADERS) == direct[path] != (200, b""), path
            assert proc.stop() == 0
    assert "Traceback" not in proc.output, proc.output
    ex = load(out, "exchanges").set_index("url")
    big, late, sse = (ex.loc[up.base + p] for p in ("/big/a2a", "/late/a2a", "/sse/a2a"))
    assert (big["replies"], big["bytes_out"], list(big["anomalies"])) == (1, len(BIG_BYTES), [])
    assert (sse["sse_events"], sse["replies"], sse["bytes_out"]) == (3, 2, len(SSE_LONG)), list(sse["anomalies"])
    assert "response_body_not_stored" in list(late["anomalies"])


def _answered(proxy: str, base: str) -> None:
    with httpx.Client(proxy=proxy, timeout=20) as client:  # (a reload held every flow 70 s)
        assert client.post(base + "/a2a", content=BODY, headers=HEADERS).status_code == 200


def _wait_lines(proc: Proc, text: str, count: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    with proc._cond:
        while sum(text in line for line in proc.lines) < count:
            assert proc.popen.poll() is None and time.monotonic() < deadline, proc.output
            proc._cond.wait(1)


def test_a_script_reload_never_holds_traffic_for_the_old_worker(tmp_path: Path) -> None:
    """mitmproxy reloads a `-s` script whose file changes, calling the old instance's `done` on its event loop.
    That waited for the old worker to write its files: with the worker stopped (SIGSTOP, or stuck in I/O) every
    flow of the proxy waited 70 s. The old worker finishes in a thread now; the new instance records at once,
    and the old one's rows still land."""
    script = tmp_path / "tap_script.py"
    shutil.copy(mitmdump_script.__file__, script)
    out = tmp_path / "data"
    args = [str(MITMDUMP), "--listen-host", "127.0.0.1", "--listen-port", "0", "-s", str(script)]
    proc = Proc([*args, "--set", f"converse_tap_dir={out}", "--set", "converse_tap_flush_interval=0.2"])
    try:
        proxy = f"http://127.0.0.1:{proc.wait_for(LISTENING).group(1)}"
        with Canned() as up:
            _answered(proxy, up.base)
            (old,) = _children(proc.popen.pid)
            os.kill(old, signal.SIGSTOP)
            try:
                later = time.time() + 60
                os.utime(script, (later, later))  # mitmproxy looks at the file's time every second
                _wait_lines(proc, "recording A2A traffic into", 2)
                _answered(proxy, up.base)  # served, and recorded by the new worker
            finally:
                os.kill(old, signal.SIGCONT)
        assert proc.stop() == 0
    finally:
        proc.stop()
    assert "Traceback" not in proc.output, proc.output
    assert len(load(out, "exchanges")) == 2  # the old worker's row, the new one's


def test_streams_open_when_the_worker_dies_are_counted_as_lost(tmp_path: Path) -> None:
    """The worker SIGKILLed while five streams are open: the streams go on, byte for byte, and so does all other
    traffic; their rows died with the worker. `capture_gaps` said so for the one record queued at the death only;
    the five streams, whose ends reached the new worker, which never saw them open, were counted nowhere."""
    out = tmp_path / "data"
    streams = 5
    opened = threading.Barrier(streams + 1)
    got: dict[int, bytes] = {}
    with Canned() as up, mitmdump(out, "--set", "flow_detail=0") as (proxy, proc):

        def stream(i: int) -> None:
            with (
                httpx.Client(proxy=proxy, timeout=60) as client,
                client.stream("POST", up.base + "/held/a2a", content=STREAM_BODY, headers=HEADERS) as r,
            ):
                chunks = r.iter_raw()
                first = next(chunks)
                opened.wait(30)
                got[i] = first + b"".join(chunks)

        threads = [threading.Thread(target=stream, args=(i,)) for i in range(streams)]
        for t in threads:
            t.start()
        opened.wait(30)
        (worker,) = _children(proc.popen.pid)
        os.kill(worker, signal.SIGKILL)
        _wait_gone(worker)
        with httpx.Client(proxy=proxy, timeout=10) as client:
            deadline = time.monotonic() + 30
            while not [c for c in _children(proc.popen.pid) if c != worker]:  # a new worker, after its back-off
                assert time.monotonic() < deadline, "no new worker was started"
                assert client.post(up.base + "/a2a", content=BODY, headers=HEADERS).status_code == 200
                time.sleep(0.05)
            httpx.get(up.base + "/release", timeout=10)
            for t in threads:
                t.join(60)
        assert proc.stop() == 0
    assert got == dict.fromkeys(range(streams), SSE_BYTES)
    gaps = load(out, "capture_gaps")
    died = int(gaps[gaps["reason"] == "worker_died"]["records"].sum())
    # the record that found the worker dead, and each stream
    assert died == 1 + streams, gaps[["reason", "records"]].to_dict("records")
    assert not re.search(r"Traceback|hook failed", proc.output), proc.output
