"""Defects found by driving a real mitmdump with the addon, each a test of its fix."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest

from converse_tap.store.reader import load
from tests.integration.procs import REPLY_BYTES, Canned, mitmdump
from tests.integration.test_proxy import BODY, HEADERS, STREAM_BODY

pytestmark = pytest.mark.integration


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def _children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


async def _streams(proxy: str, url: str, body: bytes, n: int, concurrency: int = 8) -> None:
    sem = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(proxy=proxy, timeout=30, limits=httpx.Limits(max_connections=concurrency)) as c:

        async def one() -> None:
            async with sem:
                r = await c.post(url, content=body, headers=HEADERS)
                assert r.status_code == 200

        await asyncio.gather(*(one() for _ in range(n)))


def test_a_stopped_worker_does_not_grow_the_proxy_past_its_backlog(tmp_path: Path) -> None:
    """The worker hung (SIGSTOP: alive, not reading its pipe). Traffic flows, as promised, but the proxy's
    backlog is `converse_tap_backlog` (1 MiB here): 800 A2A streams whose requests carry 60 KB each must not
    grow mitmdump by much more than that (they grew it by ~50 MB, one request body per stream, without bound)."""
    doc = json.loads(STREAM_BODY)
    doc["params"]["metadata"] = {"pad": "x" * 60_000}  # pickled start record just under FORCED_MAX
    body = json.dumps(doc).encode()
    out = tmp_path / "data"
    with (
        Canned() as up,
        mitmdump(
            out,
            "--set",
            "converse_tap_backlog=1048576",
            "--set",
            "flow_detail=0",
            "--set",
            "converse_tap_summary=off",
        ) as (proxy, proc),
    ):
        asyncio.run(_streams(proxy, up.base + "/sse/a2a", body, 50))  # warm up: caches, allocator arenas
        time.sleep(1)
        (worker,) = _children(proc.popen.pid)
        before = _rss_mib(proc.popen.pid)
        os.kill(worker, signal.SIGSTOP)
        try:
            asyncio.run(_streams(proxy, up.base + "/sse/a2a", body, 800))  # traffic keeps flowing
            grown = _rss_mib(proc.popen.pid) - before
        finally:
            os.kill(worker, signal.SIGCONT)
    print(f"mitmdump grew {grown:.1f} MiB over 800 streams with its worker stopped (backlog 1 MiB)")
    assert grown < 16, grown


OK = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"


class _RawUpstream:
    """Answers every request with fixed bytes, whatever its request line, and closes: a thread on loopback."""

    def __init__(self, response: bytes = OK) -> None:
        self.response = response
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            seen = bytearray()
            start = 0
            while (end := seen.find(b"\r\n\r\n", start)) < 0:
                start = max(0, len(seen) - 3)  # search only what arrives: an 18 MB request line is read in pieces
                data = conn.recv(1 << 20)
                if not data:
                    return
                seen += data
            length = 0
            for line in bytes(seen[max(0, end - 65536) : end]).split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            while len(seen) < end + 4 + length:  # the whole body, so that closing sends no reset
                data = conn.recv(1 << 20)
                if not data:
                    return
                seen += data
            conn.sendall(self.response)

    def close(self) -> None:
        self.sock.close()


def _via_proxy(port: int, raw: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
        s.sendall(raw)
        out = b""
        while data := s.recv(65536):
            out += data
    return out


MCP_CALL = json.dumps(
    {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 2}}}
).encode()
MCP_EVENT = (
    b'event: message\r\ndata: {"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"3"}]}}\r\n\r\n'
)


def test_a_non_a2a_stream_keeps_mitmproxys_own_behaviour(tmp_path: Path) -> None:
    """An MCP `tools/call` (JSON-RPC 2.0, no A2A header, not recorded) answered with SSE, through a mitmdump that
    also saves flows (`-w`): without the addon mitmproxy buffers the response and the flow file holds its body
    ("non-A2A traffic ... mitmproxy's own behaviour applies to it"); with the addon it held none."""
    from mitmproxy import io

    up = _RawUpstream(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
        % len(MCP_EVENT)
        + MCP_EVENT
    )
    saved = tmp_path / "flows.mitm"
    out = tmp_path / "data"
    request = (
        f"POST http://127.0.0.1:{up.port}/mcp HTTP/1.1\r\nHost: 127.0.0.1:{up.port}\r\n"
        f"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        f"Content-Length: {len(MCP_CALL)}\r\nConnection: close\r\n\r\n"
    ).encode() + MCP_CALL
    try:
        with mitmdump(out, "-w", str(saved)) as (proxy, _proc):
            got = _via_proxy(int(proxy.rsplit(":", 1)[1]), request)
    finally:
        up.close()
    assert got.endswith(MCP_EVENT)  # the client is served either way
    assert not list(out.rglob("*.parquet"))  # and nothing is recorded: it is not A2A
    with saved.open("rb") as f:
        (flow,) = list(io.FlowReader(f).stream())
    assert flow.response is not None
    assert flow.response.raw_content == MCP_EVENT, flow.response.raw_content


def test_a_call_mitmproxy_streams_is_still_recorded(tmp_path: Path) -> None:
    """`--set stream_large_bodies=100k` (mitmproxy's own way to keep large bodies out of its memory): a JSON-RPC
    SendMessage with A2A-Version and A2A-Extensions headers and a 200 KB request body passes, answered, and
    leaves no row, no anomaly, no dropped count and no capture gap; the same call under 100 KB is recorded."""
    doc = json.loads(BODY)
    doc["params"]["metadata"] = {"attachment": "x" * 200_000}
    big = json.dumps(doc).encode()
    out = tmp_path / "data"
    with (
        Canned() as up,
        mitmdump(out, "--set", "stream_large_bodies=100k") as (proxy, _proc),
        httpx.Client(proxy=proxy, timeout=10) as client,
    ):
        assert client.post(up.base + "/a2a", content=BODY, headers=HEADERS).content == REPLY_BYTES
        assert client.post(up.base + "/a2a", content=big, headers=HEADERS).content == REPLY_BYTES
    ex = load(out, "exchanges").sort_values("ts_start")
    assert len(ex) == 2, ex[["url", "method", "anomalies"]].to_dict("records")
    assert list(ex["method"]) == ["SendMessage", "unknown"]  # the call itself was never seen, and says so
    assert "request_not_parsed:not_seen" in list(ex["anomalies"].iloc[1])
    replies = load(out, "messages").query("direction == 'response'")
    assert replies.groupby("exchange_id").size().to_dict() == dict.fromkeys(ex["exchange_id"], 1)
