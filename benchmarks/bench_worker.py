"""The recording worker's CPU per exchange, alone: the part of the addon's CPU per request that bench_proxy counts
in the process tree beside mitmdump.

    python -m benchmarks.bench_worker [--exchanges 2000] [--reps 7]

Capture records are built by the addon's own code (`ConverseTap._request`, `_response_head`) from a flow that
carries bench_proxy's request and the benchmark upstream's ~2 KB envelope reply, pickled as the channel sends
them, and handed to a `Worker` writing a real dataset in a temporary directory. Per rep: unpickling, `handle`
(decoding, classification, extraction, rows) and the flush that journals the rows (Arrow, IPC, fsync), as CPU
microseconds per exchange; medians and ranges over the reps. Much less noisy than a saturated proxy on a shared
machine, so a change to the worker can be measured here first.
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import tempfile
import time
from typing import Any

from benchmarks.bench_proxy import BODY, HEADERS
from benchmarks.upstream import REPLY
from converse_tap.addon.tap import ConverseTap, _response_head
from converse_tap.addon.worker import Worker
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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--exchanges", type=int, default=2000)
    p.add_argument("--reps", type=int, default=7)
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        config: dict[str, Any] = {
            "dir": tmp, "text": "keep", "salt": "", "flush_interval": 1.0, "rollover_rows": 250_000,
            "rollover_seconds": 300.0, "max_body": 16 << 20, "max_events": 10_000, "summary": "off",
        }  # fmt: skip
        worker = Worker(config)
        blobs = records(a.exchanges)
        for blob in blobs[:200]:  # warm-up: lazy imports (pandas, on the first Arrow conversion), first files
            worker.handle(pickle.loads(blob))
        worker.writer._flush_and_roll()
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
