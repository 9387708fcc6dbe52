"""The recording worker's CPU per exchange, alone: the part of the addon's CPU per request that bench_proxy counts
in the process tree beside mitmdump.

    python -m benchmarks.bench_worker [--exchanges 2000] [--reps 7]
    python -m benchmarks.bench_worker --piped 400 [--seconds 5] [--reps 5]

`--piped RATE`: the same records sent through the addon's own `Channel` (a pipe to a real worker process) at RATE
exchanges per second, one at a time as a proxy sends them, with the worker gathering records after each read for
as long as it does by default (a fifth of the 1 s flush interval), for 10 ms, and not at all, interleaved: the
worker process's CPU per exchange, wake-ups included, which the in-process figures leave out.

Capture records are built by the addon's own code (`ConverseTap._request`, `_response_head`) from a flow that
carries bench_proxy's request and the benchmark upstream's ~2 KB envelope reply, pickled as the channel sends
them, and handed to a `Worker` writing a real dataset in a temporary directory. Per rep: unpickling, `handle`
(decoding, classification, extraction, rows) and the flush that journals the rows (Arrow, IPC, fsync), as CPU
microseconds per exchange; medians and ranges over the reps. Much less noisy than a saturated proxy on a shared
machine, so a change to the worker can be measured here first.
"""

from __future__ import annotations

import argparse
import os
import pickle
import statistics
import tempfile
import time
from typing import Any

from benchmarks.bench_proxy import BODY, HEADERS
from benchmarks.upstream import REPLY
from converse_tap import gcpolicy
from converse_tap.addon.channel import Channel
from converse_tap.addon.tap import ConverseTap, _response_head
from converse_tap.addon.worker import Worker
from converse_tap.addon.workerproc import gather_for
from tests.factories import a2a_flow


def records(n: int) -> list[bytes]:
    tap = ConverseTap()
    out = []
    for i in range(n):
        flow = a2a_flow(path="/a2a", body=BODY, headers=HEADERS, response=REPLY)
        flow.id = f"flow-{i}"
        resp = flow.response
        assert resp is not None
        response = (*_response_head(resp), resp.timestamp_end, resp.raw_content, len(resp.raw_content or b""))
        out.append(pickle.dumps(("x", flow.id, tap._request(flow), response, None), protocol=5))
    return out


def _config(root: str) -> dict[str, Any]:
    return {
        "dir": root, "text": "keep", "salt": "", "flush_interval": 1.0, "rollover_rows": 250_000,
        "rollover_seconds": 300.0, "max_body": 16 << 20, "max_events": 10_000, "summary": "off",
    }  # fmt: skip


def _cpu(pid: int) -> float:
    """utime + stime of one process, in seconds (/proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _piped_run(recs: list[tuple[Any, ...]], rate: float, seconds: float, gather: float) -> tuple[float, int]:
    """CPU seconds one worker process spends on `rate` exchanges/s for `seconds` (after a warm-up, until it has
    been quiet for longer than its flush interval), and the exchange rows it wrote."""
    with tempfile.TemporaryDirectory() as tmp:
        channel = Channel({**_config(tmp), "gather": gather})
        channel.start()
        assert channel.pid is not None
        warm = 200
        for rec in recs[:warm]:  # imports, pandas, the first files
            channel.send(rec)
        _quiet(channel.pid)
        cpu0 = _cpu(channel.pid)
        n = int(rate * seconds)
        t0 = time.monotonic()
        for i in range(n):
            delay = t0 + i / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)  # pacing the sender, as traffic arrives; no result depends on it
            channel.send(recs[warm + i])
        _quiet(channel.pid)
        cpu = _cpu(channel.pid) - cpu0
        channel.close()
        from converse_tap.store.reader import load

        rows = len(load(tmp, "exchanges")) - warm
    return cpu, rows


def _quiet(pid: int) -> None:
    """Until the process has used no CPU for 1.5 s (more than its 1 s flush interval)."""
    last, since = _cpu(pid), time.monotonic()
    while time.monotonic() - since < 1.5:
        time.sleep(0.25)
        now = _cpu(pid)
        if now != last:
            last, since = now, time.monotonic()


def piped(a: argparse.Namespace) -> None:
    recs = [pickle.loads(b) for b in records(200 + int(a.piped * a.seconds))]
    default = gather_for(_config("")["flush_interval"])
    variants = {f"gather {default * 1000:g} ms": default, "gather 10 ms": 0.01, "gather 0": 0.0}
    res: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(a.reps):
        for name, gather in variants.items():
            cpu, rows = _piped_run(recs, a.piped, a.seconds, gather)
            if rows != int(a.piped * a.seconds):
                raise SystemExit(f"bench_worker: {rows} exchange rows written for {int(a.piped * a.seconds)} sent")
            res[name].append(cpu / rows * 1e6)
    print(
        f"{a.piped:g} unary exchanges/s for {a.seconds:g} s through the channel x {a.reps} interleaved reps; the "
        "worker process's CPU microseconds per exchange (after a warm-up; wake-ups and flushes included): "
        "median [min-max]"
    )
    for name, values in res.items():
        print(f"  {name:14} {statistics.median(values):7.1f} [{min(values):.1f}-{max(values):.1f}]")
    names = list(res)
    for other in names[1:]:
        ratio = statistics.median(res[names[0]]) / statistics.median(res[other])
        print(f"  {names[0]} / {other}: {ratio:.2f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--exchanges", type=int, default=2000)
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--piped", type=float, metavar="RATE", help="exchanges/s through a real worker process")
    p.add_argument("--seconds", type=float, default=5.0)
    a = p.parse_args()
    if a.piped:
        piped(a)
        return
    with tempfile.TemporaryDirectory() as tmp:
        worker = Worker(_config(tmp))
        blobs = records(a.exchanges)
        for blob in blobs[:200]:  # warm-up: lazy imports (pandas, on the first Arrow conversion), first files
            worker.handle(pickle.loads(blob))
        worker.writer._flush_and_roll()
        gcpolicy.for_process()  # as the worker process does once it has started
        res: dict[str, list[float]] = {"unpickle": [], "handle": [], "flush": []}
        for _ in range(a.reps):
            t0 = time.process_time()
            recs = [pickle.loads(b) for b in blobs]
            t1 = time.process_time()
            for rec in recs:
                worker.handle(rec)
            t2 = time.process_time()
            worker.writer._flush_and_roll()
            t3 = time.process_time()
            for key, secs in (("unpickle", t1 - t0), ("handle", t2 - t1), ("flush", t3 - t2)):
                res[key].append(secs / a.exchanges * 1e6)
        worker.close()
    totals = [sum(v) for v in zip(*res.values(), strict=True)]
    rows = worker.writer.stats.rows_written
    if not rows.get("exchanges"):
        raise SystemExit("bench_worker: the worker wrote no exchange rows; nothing was measured")
    print(f"{a.exchanges} unary exchanges x {a.reps} reps; CPU microseconds per exchange: median [min-max]")
    for key, values in [*res.items(), ("total", totals)]:
        print(f"  {key:9} {statistics.median(values):7.1f} [{min(values):.1f}-{max(values):.1f}]")
    print(f"rows written: {dict(rows)}")


if __name__ == "__main__":
    main()
