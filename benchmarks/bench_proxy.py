"""Proxy overhead: direct vs bare mitmdump vs mitmdump with the converse-tap addon (exports off, and with both
exports on: spans to a loopback OTLP receiver and /metrics served), interleaved.

    python -m benchmarks.bench_proxy [--requests 1500] [--concurrency 8] [--reps 7] [--streams 10]

Unary: a fixed number of JSON-RPC SendMessage calls at fixed concurrency (httpx, one process): requests/s,
p50/p99 latency, and the proxy's CPU time per request (utime+stime from /proc). Streams: SSE replies of 20 events
50 ms apart: time to first event and the mean per-event delay against the direct path. The bare mitmdump runs
a pass-through stream callable (benchmarks/passthrough.py) so that it streams SSE too; without one it holds
every event until the stream ends.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

from tests.export.collector import Collector
from tests.integration.procs import Proc, mitmdump

HERE = Path(__file__).parent
BODY = (
    b'{"jsonrpc":"2.0","id":"r-1","method":"SendMessage","params":{"message":{"messageId":"u","role":"ROLE_USER",'
    b'"parts":[{"text":"When are you open?"}]}}}'
)
HEADERS = {
    "content-type": "application/json",
    "a2a-version": "1.0",
    "a2a-extensions": "https://docs.radioso.ai/reference/a2a-converse-extension/v1",
}


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def worker_cpu_seconds(pid: int) -> float:
    """CPU of the proxy's child processes (the recording worker)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return sum(cpu_seconds(int(c)) for c in children)


async def unary(url: str, proxy: str | None, n: int, concurrency: int) -> tuple[float, list[float]]:
    latencies: list[float] = []
    async with httpx.AsyncClient(proxy=proxy, timeout=30, limits=httpx.Limits(max_connections=concurrency)) as c:

        async def worker(k: int) -> None:
            for _ in range(k):
                t0 = time.perf_counter()
                r = await c.post(url, content=BODY, headers=HEADERS)
                r.raise_for_status()
                latencies.append(time.perf_counter() - t0)

        await c.post(url, content=BODY, headers=HEADERS)  # warm the connection pool
        t0 = time.perf_counter()
        await asyncio.gather(*(worker(n // concurrency) for _ in range(concurrency)))
        return time.perf_counter() - t0, latencies


async def stream(url: str, proxy: str | None) -> tuple[float, list[float]]:
    async with httpx.AsyncClient(proxy=proxy, timeout=30) as c:
        t0 = time.perf_counter()
        arrivals = []
        async with c.stream(
            "POST", url, content=BODY.replace(b"SendMessage", b"SendStreamingMessage"), headers=HEADERS
        ) as r:
            buf = b""
            async for chunk in r.aiter_raw():
                buf += chunk
                while b"\r\n\r\n" in buf:
                    _, buf = buf.split(b"\r\n\r\n", 1)
                    arrivals.append(time.perf_counter() - t0)
        return arrivals[0], arrivals


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=1500)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--streams", type=int, default=10)
    a = p.parse_args()
    tmp = Path(tempfile.mkdtemp())
    res: dict[str, dict[str, list[float]]] = {
        k: {"rps": [], "p50": [], "p99": [], "cpu": [], "wcpu": [], "first": [], "gap": []}
        for k in ("direct", "bare", "addon", "exports")
    }
    with contextlib.ExitStack() as stack:
        up = Proc([sys.executable, "-m", "benchmarks.upstream"])
        stack.callback(up.stop)
        port = up.wait_for(re.compile(r"listening on (\d+)")).group(1)
        base = f"http://127.0.0.1:{port}"
        common = ["--set", "flow_detail=0", "--set", f"confdir={tmp / 'conf'}"]
        bare_url, bare = stack.enter_context(mitmdump(None, *common, "-s", str(HERE / "passthrough.py")))
        addon_url, addon = stack.enter_context(
            mitmdump(tmp / "data", *common, "--set", "converse_tap_summary=off",
                     "--set", "converse_tap_flush_interval=1")  # the default, as a user runs it
        )  # fmt: skip
        collector = stack.enter_context(Collector())
        exports_url, exports = stack.enter_context(
            mitmdump(tmp / "data-exports", *common, "--set", "converse_tap_summary=off",
                     "--set", "converse_tap_flush_interval=1", "--set", f"converse_tap_otlp_endpoint={collector.url}",
                     "--set", "converse_tap_metrics_listen=127.0.0.1:0")
        )  # fmt: skip
        proxies = {"bare": bare, "addon": addon, "exports": exports}
        paths: dict[str, str | None] = {"direct": None, "bare": bare_url, "addon": addon_url, "exports": exports_url}
        for _ in range(a.reps):  # interleaved, so drift hits every path alike
            for name, proxy in paths.items():
                pid = proxies[name].popen.pid if name in proxies else 0
                before = cpu_seconds(pid) if pid else 0.0
                wbefore = worker_cpu_seconds(pid) if pid else 0.0
                secs, lat = asyncio.run(unary(base + "/a2a", proxy, a.requests, a.concurrency))
                n = len(lat)
                if pid:
                    res[name]["cpu"].append((cpu_seconds(pid) - before) / n * 1e3)
                    res[name]["wcpu"].append((worker_cpu_seconds(pid) - wbefore) / n * 1e3)
                lat.sort()
                res[name]["rps"].append(n / secs)
                res[name]["p50"].append(lat[n // 2] * 1e3)
                res[name]["p99"].append(lat[int(n * 0.99)] * 1e3)
        for _ in range(a.streams):
            for name, proxy in paths.items():
                first, arrivals = asyncio.run(stream(base + "/stream", proxy))
                res[name]["first"].append(first * 1e3)
                res[name]["gap"].append(statistics.mean(t - 0.05 * i for i, t in enumerate(arrivals)) * 1e3)

    med = {k: {m: statistics.median(v) if v else float("nan") for m, v in d.items()} for k, d in res.items()}
    print(f"unary: {a.requests} SendMessage calls x {a.reps} reps, concurrency {a.concurrency}; medians")
    print(f"{'path':8} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'proxy CPU ms/req':>17} {'worker CPU ms/req':>18}")
    for k, m in med.items():
        print(f"{k:8} {m['rps']:8.0f} {m['p50']:8.2f} {m['p99']:8.2f} {m['cpu']:17.3f} {m['wcpu']:18.3f}")
    print(
        f"addon/bare: req/s {med['addon']['rps'] / med['bare']['rps']:.3f} (target >= 0.95), "
        f"CPU/req {med['addon']['cpu'] / med['bare']['cpu']:.3f} (target <= 1.05)"
    )
    ex, ad = med["exports"], med["addon"]
    print(
        f"exports/addon: req/s {ex['rps'] / ad['rps']:.3f}, proxy CPU/req {ex['cpu'] / ad['cpu']:.3f} "
        f"(target <= 1.05), p99 {ex['p99'] / ad['p99']:.3f}, worker CPU/req {ex['wcpu'] / ad['wcpu']:.3f}; "
        f"spans received {len(collector.spans())}"
    )
    print(f"streams: {a.streams} x 20 SSE events 50 ms apart; medians")
    print(f"{'path':8} {'first event ms':>15} {'mean event offset ms':>21}")
    for k, m in med.items():
        print(f"{k:8} {m['first']:15.2f} {m['gap']:21.2f}")
    print(f"addon - bare first event: {med['addon']['first'] - med['bare']['first']:+.2f} ms (target within 2 ms)")


if __name__ == "__main__":
    main()
