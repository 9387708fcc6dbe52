"""Proxy overhead at saturation: bare mitmdump vs mitmdump with the converse-tap addon, interleaved.

    python -m benchmarks.bench_proxy [--rounds 7] [--seconds 6] [--connections 16] [--threads 2] [--streams 10]
                                     [--client auto|wrk|own] [--candidate SCRIPT] [--exports] [--pin]

Unary: JSON-RPC SendMessage calls (with the converse extension header; a ~2 KB envelope reply) from wrk with 16
keep-alive connections for 6 s per run, so that the proxy, not the client, is what runs out of CPU (install wrk
with `apt-get install wrk`; without it a small asyncio client in this process generates the load, and says so).
Each round runs every path once, in a rotating order: direct to the upstream, bare `mitmdump` (with a pass-through
stream callable, benchmarks/passthrough.py), `mitmdump -s ADDON`, and `mitmdump -w flows.mitm` (mitmproxy's own
raw recording, for comparison). Per path: requests/s, p50/p99 latency, and CPU per request of the proxy's whole
process tree (the addon's recording worker included), counted until deferred work has finished. Ratios are the
medians of the per-round ratios. Direct throughput beside proxied throughput shows the proxy is the bottleneck.
`--candidate SCRIPT` adds a path: the addon plus SCRIPT loaded after it (e.g. one that patches a method), to
measure a change side by side with the addon as it is.
`--exports` adds a path: the addon with both live exports on, OTLP spans to a real receiver on loopback (in this
process, decoding every request with opentelemetry-proto, as tests/export does) and Prometheus /metrics served
(scraped once at the end), and prints exports against the addon without them.
`--pin` (2+ cores): every proxy's mitmdump process runs on core 0 and everything else (wrk, the upstream, this
process, the addon's recording worker) on core 1, so that a proxy's CPU per request is not also a measure of where
the scheduler put it beside the load generator; the worker still counts in the addon's CPU per request.

Streams: SSE replies of 20 events 50 ms apart, unloaded: time to the first event and the mean per-event delay.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

from benchmarks import load
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
PATHS = ("direct", "bare", "addon", "record")
TARGETS = {"rps": 0.95, "cpu": 1.10, "p99": 10.0, "first": 2.0}
_METRICS = re.compile(r"metrics at (http://127\.0\.0\.1:\d+)/metrics")
_DONE = re.compile(r"(\d+) A2A requests seen, (\d+) capture records, (\d+) dropped.*?(\d+) worker restarts")


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


def med(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} [{min(values):.3f}-{max(values):.3f}]"


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def target(path: str, values: list[float], metric: str) -> str:
    """The addon's target for a metric, and whether the median meets it; nothing for other paths."""
    if path != "addon":
        return ""
    m, t = statistics.median(values), TARGETS[metric]
    if metric == "rps":
        return f" (target >= {t:g}: {verdict(m >= t)})"
    if metric == "cpu":
        return f" (target <= {t:g}: {verdict(m <= t)})"
    return f" (target <= +{t:g} ms: {verdict(m <= t)})"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=7, help="interleaved rounds (each runs every path once)")
    p.add_argument("--seconds", type=float, default=6.0, help="length of each load run")
    p.add_argument("--connections", type=int, default=16)
    p.add_argument("--threads", type=int, default=2, help="wrk threads")
    p.add_argument("--streams", type=int, default=10, help="SSE streams per path")
    p.add_argument("--client", choices=["auto", "wrk", "own"], default="auto")
    p.add_argument("--candidate", type=Path, help="a path 'candidate': the addon plus this mitmdump script")
    p.add_argument("--summary", default="off", help="the addon's converse_tap_summary (off: like flow_detail=0)")
    p.add_argument("--exports", action="store_true", help="a path 'exports': the addon with spans and /metrics on")
    p.add_argument("--pin", action="store_true", help="mitmdump on core 0, everything else on core 1")
    a = p.parse_args()
    client = a.client
    if client in ("auto", "wrk") and load.wrk_path() is None:
        if client == "wrk":
            sys.exit("bench_proxy: wrk is not installed; install it with `apt-get install wrk` or use --client own")
        print(
            "wrk not found (install it with `apt-get install wrk`): using this benchmark's own asyncio client, which "
            "shares the CPU with the proxy, so throughput figures are lower than wrk's",
            file=sys.stderr,
        )
        client = "own"
    elif client == "auto":
        client = "wrk"

    tmp_dir = tempfile.TemporaryDirectory(prefix="bench_proxy-")
    tmp = Path(tmp_dir.name)
    paths = PATHS + (("candidate",) if a.candidate else ()) + (("exports",) if a.exports else ())
    metrics = ("rps", "p50", "p99", "cpu", "main", "cores", "up_cores", "others", "errors", "first", "gap")
    res: dict[str, dict[str, list[float]]] = {k: {m: [] for m in metrics} for k in paths}
    load_before = os.getloadavg()
    if a.pin:
        if (os.cpu_count() or 1) < 2:
            sys.exit("bench_proxy: --pin needs two cores")
        os.sched_setaffinity(0, {1})  # inherited by the upstream, wrk and (until pinned below) the proxies
    with contextlib.ExitStack() as stack:
        stack.callback(tmp_dir.cleanup)
        up = Proc([sys.executable, "-m", "benchmarks.upstream"])
        stack.callback(up.stop, signal.SIGTERM)
        port = up.wait_for(re.compile(r"listening on (\d+)")).group(1)
        base = f"http://127.0.0.1:{port}"
        common = ["--set", "flow_detail=0", "--set", f"confdir={tmp / 'conf'}"]
        bare_url, bare = stack.enter_context(mitmdump(None, *common, "-s", str(HERE / "passthrough.py")))
        tap = [*common, "--set", f"converse_tap_summary={a.summary}", "--set", "converse_tap_flush_interval=1"]
        addon_url, addon = stack.enter_context(mitmdump(tmp / "data", *tap))  # flush interval: the default
        record_url, record = stack.enter_context(mitmdump(None, *common, "-w", str(tmp / "flows.mitm")))
        procs = {"direct": up, "bare": bare, "addon": addon, "record": record}
        urls: dict[str, str | None] = {"direct": None, "bare": bare_url, "addon": addon_url, "record": record_url}
        if a.candidate:
            urls["candidate"], procs["candidate"] = stack.enter_context(
                mitmdump(tmp / "data-candidate", *tap, "-s", str(a.candidate.resolve()))
            )
        collector = stack.enter_context(Collector()) if a.exports else None
        if collector is not None:
            exports = ["--set", f"converse_tap_otlp_endpoint={collector.url}"]
            exports += ["--set", "converse_tap_metrics_listen=127.0.0.1:0"]
            urls["exports"], procs["exports"] = stack.enter_context(mitmdump(tmp / "data-exports", *tap, *exports))
        all_pids = [pr.popen.pid for pr in procs.values()]
        if a.pin:  # each proxy's threads on core 0; their children (the addon's worker) stay on core 1
            for name in procs.keys() - {"direct"}:
                load.pin(procs[name].popen.pid, {0})

        def run(name: str, seconds: float) -> load.Load:
            connect = (urls[name] or base).split("//", 1)[1]
            if client == "wrk":
                return load.run_wrk(
                    connect, base + "/a2a", BODY, HEADERS, connections=a.connections, threads=a.threads, seconds=seconds
                )
            return load.run_own(connect, base + "/a2a", BODY, HEADERS, connections=a.connections, seconds=seconds)

        for name in paths:  # warm-up: connections, imports, the worker's first flush
            run(name, 3.0)
        if a.pin:  # threads started since, and the recording worker
            for name in procs.keys() - {"direct"}:
                pid = procs[name].popen.pid
                load.pin(pid, {0})
                for child in load.descendants(pid):
                    load.pin(child, {1})
        for i in range(a.rounds):  # interleaved, rotating, so drift and position hit every path alike
            for name in paths[i % len(paths) :] + paths[: i % len(paths)]:
                load.settle(all_pids)
                pid = procs[name].popen.pid
                cpu0, busy0, own0 = load.tree_cpu(*all_pids), load.machine_busy(), load.own_cpu()
                main0 = load.proc_cpu(pid)
                r = run(name, a.seconds)
                cpu1, busy1, own1 = load.tree_cpu(*all_pids), load.machine_busy(), load.own_cpu()
                load.settle([pid])
                (after,) = load.tree_cpu(pid)
                main1 = load.proc_cpu(pid)
                ours = sum(cpu1) - sum(cpu0) + own1 - own0
                rr = res[name]
                rr["rps"].append(r.rps)
                rr["p50"].append(r.p50)
                rr["p99"].append(r.p99)
                rr["errors"].append(r.errors)
                rr["cpu"].append((after - cpu0[all_pids.index(pid)]) / r.requests * 1e3)
                rr["main"].append((main1 - main0) / r.requests * 1e3)
                rr["cores"].append((cpu1[all_pids.index(pid)] - cpu0[all_pids.index(pid)]) / r.seconds)
                rr["up_cores"].append((cpu1[0] - cpu0[0]) / r.seconds)
                rr["others"].append(max(0.0, busy1 - busy0 - ours) / r.seconds)
            print(f"round {i + 1}/{a.rounds}: " + ", ".join(f"{k} {res[k]['rps'][-1]:.0f}" for k in paths) + " req/s")

        for _ in range(a.streams):
            for name in ("direct", "bare", "addon", *paths[len(PATHS) :]):
                first, arrivals = asyncio.run(stream(base + "/stream", urls[name]))
                res[name]["first"].append(first * 1e3)
                res[name]["gap"].append(statistics.mean(t - 0.05 * i for i, t in enumerate(arrivals)) * 1e3)
        scraped = _scrape(procs["exports"]) if collector is not None else ""
    done = _DONE.search(addon.output)

    pinned = "; mitmdump on core 0, the rest on core 1" if a.pin else ""
    how = f"{load.wrk_version()}, {a.threads} threads" if client == "wrk" else "own asyncio client (no wrk)"
    print(
        f"\nunary: POST SendMessage, {len(BODY)}-byte request, ~2 KB envelope reply; {how}, {a.connections} "
        f"connections, {a.seconds:g} s runs, {a.rounds} interleaved rounds{pinned}; load average {load_before[0]:.1f} "
        f"before, {os.getloadavg()[0]:.1f} after"
    )
    print(
        "medians [min-max] over the rounds. CPU ms/req: the path's whole process tree, deferred work included; "
        "main: of which its main process (mitmdump itself; the upstream for direct); cores: the tree's CPU use "
        "during the run; other procs: the rest of the machine (other users), in cores"
    )
    print(f"{'path':9} {'req/s':>22} {'p50 ms':>8} {'p99 ms':>8} {'CPU ms/req':>11} {'main':>6} {'cores':>6} "
          f"{'upstream cores':>15} {'other procs':>12} {'errors':>7}")  # fmt: skip
    for k in paths:
        m = {x: statistics.median(v) for x, v in res[k].items() if v}
        rps = f"{m['rps']:.0f} [{min(res[k]['rps']):.0f}-{max(res[k]['rps']):.0f}]"
        print(
            f"{k:9} {rps:>22} {m['p50']:8.2f} {m['p99']:8.2f} {m['cpu']:11.3f} {m['main']:6.3f} {m['cores']:6.2f} "
            f"{m['up_cores']:15.2f} {m['others']:12.2f} {sum(res[k]['errors']):7.0f}"
        )

    def ratios(x: str, y: str, metric: str) -> list[float]:
        return [u / v for u, v in zip(res[x][metric], res[y][metric], strict=True)]

    def diffs(x: str, y: str, metric: str) -> list[float]:
        return [u - v for u, v in zip(res[x][metric], res[y][metric], strict=True)]

    for x in ("addon", "record", *paths[len(PATHS) :]):
        rps, cpu, p99 = ratios(x, "bare", "rps"), ratios(x, "bare", "cpu"), diffs(x, "bare", "p99")
        line = f"{x}/bare: req/s {med(rps)}{target(x, rps, 'rps')}, CPU/req {med(cpu)}{target(x, cpu, 'cpu')}, "
        print(
            line + f"p99 {statistics.median(p99):+.1f} ms [{min(p99):+.1f} to {max(p99):+.1f}]{target(x, p99, 'p99')}"
        )
    for x in ("addon", *paths[len(PATHS) :]):
        main = ratios(x, "bare", "main")
        worker = [(t - m) * 1e3 for t, m in zip(res[x]["cpu"], res[x]["main"], strict=True)]
        print(f"{x}: mitmdump's own CPU/req vs bare {med(main)}; its worker {statistics.median(worker):.0f} us/req")
    headroom = ratios("direct", "bare", "rps")
    print(
        f"direct/bare req/s {statistics.median(headroom):.1f}x [{min(headroom):.1f}-{max(headroom):.1f}]: the "
        f"upstream and {'wrk' if client == 'wrk' else 'the client'} serve that many times the proxy's rate, so the "
        f"proxy is the bottleneck (during bare runs the upstream used {statistics.median(res['bare']['up_cores']):.2f} "
        f"cores, mitmdump {statistics.median(res['bare']['cores']):.2f})"
    )
    if collector is not None:
        cpu, main_cpu, p99 = (
            ratios("exports", "addon", "cpu"),
            ratios("exports", "addon", "main"),
            diffs("exports", "addon", "p99"),
        )
        print(
            f"exports/addon: req/s {med(ratios('exports', 'addon', 'rps'))}, CPU/req (tree) {med(cpu)}, mitmdump's "
            f"own CPU/req {med(main_cpu)} (target <= 1.05: {verdict(statistics.median(main_cpu) <= 1.05)}), p99 "
            f"{statistics.median(p99):+.1f} ms [{min(p99):+.1f} to {max(p99):+.1f}]; {len(collector.spans())} spans "
            f"received; /metrics scraped: {scraped}"
        )
    if any(sum(res[k]["errors"]) for k in paths):
        print("WARNING: some requests failed (errors column); their runs' figures are not comparable")
    if done:
        seen, records, dropped, restarts = (int(g) for g in done.groups())
        print(f"addon: {seen} A2A requests seen, {records} capture records, {dropped} dropped, {restarts} restarts")
        if dropped or restarts:
            print("WARNING: the addon did not record everything; its CPU per request is understated")
    else:
        print("WARNING: no summary line from the addon at exit; whether it recorded everything is unknown")

    print(f"\nstreams: {a.streams} x 20 SSE events 50 ms apart, one at a time; medians")
    print(f"{'path':9} {'first event ms':>15} {'mean event offset ms':>21}")
    for k in ("direct", "bare", "addon", *paths[len(PATHS) :]):
        print(f"{k:9} {statistics.median(res[k]['first']):15.2f} {statistics.median(res[k]['gap']):21.2f}")
    first = statistics.median(res["addon"]["first"]) - statistics.median(res["bare"]["first"])
    print(f"addon - bare first event: {first:+.2f} ms{target('addon', [first], 'first')}")


def _scrape(proc: Proc) -> str:
    """The exports path's /metrics, scraped once: how many samples it serves (that it serves at all)."""
    found = _METRICS.search(proc.output)
    if found is None:
        return "its address was not logged"
    text = httpx.get(f"{found.group(1)}/metrics", timeout=10).text
    return f"{sum(1 for line in text.splitlines() if line and not line.startswith('#'))} samples"


if __name__ == "__main__":
    main()
