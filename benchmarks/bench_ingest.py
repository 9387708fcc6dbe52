"""Ingest: flows per second from a large mitmproxy flow file into a dataset.

    python -m benchmarks.bench_ingest [--flows 20000]

The file mixes unary SendMessage replies, SSE streams (stored bodies) and agent cards, as `mitmdump -w` saves
them; the figure is the whole `ingest()` call: reading, extraction and writing Parquet.
"""

from __future__ import annotations

import argparse
import json
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
    n = p.parse_args().flows
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "flows.mitm"
        with open(path, "wb") as f:
            w = io.FlowWriter(f)
            for flow in flows(n):
                w.add(flow)
        t0 = time.perf_counter()
        result = ingest([path], Path(tmp) / "out", TextPolicy())
        secs = time.perf_counter() - t0
    print(
        f"{result.flows} flows -> {result.exchanges} "
        f"exchanges in {secs:.2f}s: {result.flows / secs:,.0f} flows/s (target >= 5,000)"
    )


if __name__ == "__main__":
    main()
