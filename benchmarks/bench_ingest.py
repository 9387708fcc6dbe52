"""Ingest: flows per second from a large mitmproxy flow file into a dataset.

    python -m benchmarks.bench_ingest [--flows 20000] [--reps 3]

The file mixes unary SendMessage replies, SSE streams (stored bodies) and agent cards, as `mitmdump -w` saves
them; the figure is the whole `ingest()` call: reading, extraction and writing Parquet, in one process (`jobs=1`) and
with the file cut into parts for one process per core (what `converse-tap ingest` does), interleaved.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from mitmproxy import io

from converse_tap.a2a.redact import TextPolicy
from converse_tap.ingest import ingest
from tests.factories import (
    a2a_flow,
    agent_message,
    envelope,
    jsonrpc_request,
    jsonrpc_result,
    sse_body,
    status_event,
)


def flows(n: int):
    card = json.dumps({"name": "A", "skills": [{"id": "x"}], "capabilities": {}}).encode()
    events = [status_event("TASK_STATE_COMPLETED", agent_message(f"s{i}", env=envelope())) for i in range(3)]
    for i in range(n):
        if i % 10 == 0:
            yield a2a_flow(method="GET", path="/.well-known/agent-card.json", response=card)
        elif i % 3 == 0:
            yield a2a_flow(
                body=jsonrpc_request("SendStreamingMessage"),
                response=sse_body(*events),
                content_type="text/event-stream",
            )
        else:
            yield a2a_flow(response=jsonrpc_result({"message": agent_message(f"m{i}", env=envelope())}))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--flows", type=int, default=20000)
    p.add_argument("--reps", type=int, default=3)
    args = p.parse_args()
    jobs_auto = min(os.cpu_count() or 1, 8)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "flows.mitm"
        with open(path, "wb") as f:
            w = io.FlowWriter(f)
            for flow in flows(args.flows):
                w.add(flow)
        size = path.stat().st_size
        print(f"{args.flows} flows, {size / 2**20:.1f} MiB; median of {args.reps} interleaved reps")
        rates: dict[int, list[float]] = {1: [], jobs_auto: []}
        for rep in range(args.reps):
            for jobs in rates:
                out = Path(tmp) / f"out-{jobs}-{rep}"
                t0 = time.perf_counter()
                result = ingest([path], out, TextPolicy(), jobs=jobs)
                secs = time.perf_counter() - t0
                assert result.exchanges == args.flows and not result.errors
                rates[jobs].append(result.flows / secs)
                shutil.rmtree(out)
    for jobs, r in rates.items():
        print(f"  jobs={jobs}: {statistics.median(r):7,.0f} flows/s (range {min(r):,.0f}-{max(r):,.0f})")
    ratio = statistics.median(rates[jobs_auto]) / statistics.median(rates[1])
    print(f"  target >= 5,000 flows/s; parallel/single {ratio:.2f}")


if __name__ == "__main__":
    main()
