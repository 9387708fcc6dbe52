"""Hook cost: CPU time our code spends per flow on mitmproxy's event loop, and extraction on the writer thread.

    python -m benchmarks.bench_hook [--flows 20000]

Flows are built with mitmproxy's own test helpers (a JSON-RPC SendMessage with a converse reply; an SSE stream
of 4 events delivered in 7 chunks). "loop" is request + responseheaders + stream callable + response, the work
that delays traffic; "extract" is the JSON parsing and row building the writer thread does afterwards.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from mitmproxy.test import taddons

from converse_tap.a2a.extract import extract
from converse_tap.a2a.redact import TextPolicy
from converse_tap.addon.flows import exchange_from_flow
from converse_tap.addon.tap import ConverseTap
from tests.factories import (
    a2a_flow,
    agent_message,
    envelope,
    jsonrpc_request,
    jsonrpc_result,
    sse_body,
    status_event,
)

ROUTINE = {
    "toolName": "book_table",
    "name": "Book a table",
    "status": "waiting_for_input",
    "pendingInput": [{"key": "date", "type": "string", "required": True, "description": "Which day?"}],
}


def unary():
    return a2a_flow(response=jsonrpc_result({"message": agent_message(env=envelope(routine=ROUTINE))}))


def streamed():
    states = ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_WORKING", "TASK_STATE_INPUT_REQUIRED"]
    events = [
        status_event(s, agent_message(env=envelope(routine=ROUTINE)) if i == 3 else None) for i, s in enumerate(states)
    ]
    body = sse_body(*events)
    f = a2a_flow(body=jsonrpc_request("SendStreamingMessage"), response=b"", content_type="text/event-stream")
    return f, [body[i : i + len(body) // 7 + 1] for i in range(0, len(body), len(body) // 7 + 1)]


def run(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tap = ConverseTap()
        with taddons.context(tap) as tctx:
            tctx.configure(tap, converse_tap_dir=str(Path(tmp) / "d"), converse_tap_summary="off")
            tap.writer.submit = lambda job: None  # measure the hooks alone; extraction is timed below
            results = {}
            for name in ("unary", "streamed"):
                flows = [unary() if name == "unary" else streamed() for _ in range(n)]
                t0 = time.process_time()
                for item in flows:
                    f, chunks = (item, None) if name == "unary" else item
                    tap.request(f)
                    tap.responseheaders(f)
                    if chunks is not None:
                        for c in chunks:
                            f.response.stream(c)
                        f.response.stream(b"")
                        f.response.data.content = None
                    tap.response(f)
                loop_us = (time.process_time() - t0) / n * 1e6
                exes = [exchange_from_flow(f if name == "unary" else f[0]) for f in flows[:2000]]
                policy = TextPolicy()
                t0 = time.process_time()
                for ex in exes:
                    extract(ex, policy)
                results[name] = (loop_us, (time.process_time() - t0) / len(exes) * 1e6)
            tap.done()
    print(f"{n} flows each; CPU microseconds per flow (process time over all flows)")
    print(f"{'flow':10} {'event loop':>12} {'writer thread':>14}")
    for name, (loop_us, ex_us) in results.items():
        print(f"{name:10} {loop_us:12.1f} {ex_us:14.1f}")
    print("target: event-loop work <= 50 us per unary flow")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--flows", type=int, default=20000)
    run(p.parse_args().flows)
