"""Hostile traffic through a real mitmdump with the addon: the proxy never dies, stalls, grows or alters a byte,
and a bad value costs only its own row. A canary request every 100 ms must keep being answered throughout."""

from __future__ import annotations

import gzip
import json
import threading
import time
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import brotli
import pytest

from converse_tap.a2a.inflate import zstd
from converse_tap.store.reader import load
from tests.integration.hostile import Hostile, chunks_of, cpu_seconds, family, post, raw_request, status_kib
from tests.integration.procs import REPLY_BYTES, mitmdump
from tests.integration.test_proxy import BODY, HEADERS, STREAM_BODY

pytestmark = pytest.mark.integration
BOMB = 256 * 1024 * 1024
MIB = 1024 * 1024
PASSTHROUGH = str(Path(__file__).parents[2] / "benchmarks" / "passthrough.py")


@cache
def bomb(encoding: str, request: bool = False) -> bytes:
    """256 MiB once decoded; as a request, a JSON-RPC SendMessage whose text is most of it."""
    data = b"\0" * BOMB
    if request:
        head = b'{"jsonrpc": "2.0", "id": "b", "method": "SendMessage", "params": {"message": {"text": "'
        data = head + b"a" * (BOMB - len(head) - 4) + b'"}}}'
    if encoding == "gzip":
        return gzip.compress(data, compresslevel=1, mtime=0)
    if encoding == "br":
        return brotli.compress(data, quality=1)
    return zstd.compress(data)


def _sse(events: Iterator[bytes]) -> tuple[int, list[tuple[str, str]], Iterator[bytes]]:
    return 200, [("content-type", "text/event-stream")], events


def _reply(doc: dict | bytes) -> tuple[int, list[tuple[str, str]], bytes]:
    body = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    return 200, [("content-type", "application/json")], body


def _bomb_reply(encoding: str):
    return lambda body: (200, [("content-type", "application/json"), ("content-encoding", encoding)], bomb(encoding))


ROUTES = {
    "/a2a": lambda body: _reply(REPLY_BYTES),
    **{f"/bomb-{e}/a2a": _bomb_reply(e) for e in ("gzip", "br", "zstd")},
}


def warm_up(proxy: str, base: str, out: Path) -> None:
    """One ordinary exchange, journaled: the worker has imported and allocated what it needs from now on."""
    post(proxy, base + "/a2a", BODY, HEADERS)
    deadline = time.monotonic() + 60
    while not list(out.rglob("exchanges-*.arrows")):
        assert time.monotonic() < deadline, "the warm-up exchange was never journaled"
        time.sleep(0.05)


class Canary:
    """An ordinary A2A call through the proxy every 100 ms, timing each answer."""

    def __init__(self, proxy: str, base: str) -> None:
        self.proxy, self.base = proxy, base
        self.latencies: list[float] = []
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            t0 = time.monotonic()
            try:
                status, body = post(self.proxy, self.base + "/a2a", BODY, HEADERS, timeout=30)
                if status != 200 or body != REPLY_BYTES:
                    self.failures.append(f"status {status}")
            except OSError as e:
                self.failures.append(repr(e))
            self.latencies.append(time.monotonic() - t0)

    def __enter__(self) -> Canary:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)

    def check(self) -> None:
        assert not self.failures, self.failures
        assert self.latencies, "the canary never ran"
        # "promptly": answered while the hostile traffic ran, never held behind it (generous: a shared machine)
        assert max(self.latencies) < 10, sorted(self.latencies)[-5:]


def test_compression_bombs_cost_bounded_memory_and_pass_untouched(tmp_path: Path) -> None:
    out = tmp_path / "data"
    with Hostile(ROUTES) as up, mitmdump(out, "--set", "converse_tap_summary=off") as (proxy, proc):
        warm_up(proxy, up.base, out)
        pids = family(proc.popen.pid)
        assert len(pids) == 2, "mitmdump and its recording worker"
        before = {pid: status_kib(pid, "VmRSS") for pid in pids}
        with Canary(proxy, up.base) as canary:
            for e in ("gzip", "br", "zstd"):
                status, body = post(proxy, up.base + f"/bomb-{e}/a2a", BODY, HEADERS)
                assert status == 200 and body == bomb(e), "the bomb reaches the client byte for byte"
                # the same bomb as a request body
                status, body = post(proxy, up.base + "/a2a", bomb(e, True), {**HEADERS, "content-encoding": e})
                assert status == 200 and body == REPLY_BYTES
        growth = {pid: status_kib(pid, "VmHWM") - before[pid] for pid in pids}
        proc.stop()
    canary.check()
    print(f"bombs: peak RSS growth KiB, proxy {growth[pids[0]]}, worker {growth[pids[1]]}")
    assert growth[pids[0]] < 128 * 1024, growth
    assert growth[pids[1]] < 128 * 1024, growth
    ex = load(out, "exchanges")
    bombs = ex[ex["url"].str.contains("/bomb-")]
    assert len(bombs) == 3
    for anomalies in bombs["anomalies"]:
        assert any(a.startswith("response_body_too_large_decoded:") for a in anomalies), anomalies
    requests = ex[ex["anomalies"].map(lambda a: any(x.startswith("request_body_too_large_decoded:") for x in a))]
    assert len(requests) == 3  # recognised from the decoded start of their body
    assert set(requests["method"]) == {"SendMessage"}
