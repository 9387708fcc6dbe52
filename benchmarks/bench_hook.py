"""Hook cost: CPU time our code spends per flow on mitmproxy's event loop, and extraction in the recording worker.

    python -m benchmarks.bench_hook [--flows 5000] [--reps 7]

Flows are built with mitmproxy's own test helpers (a JSON-RPC SendMessage with a converse reply; an SSE stream
of 4 events delivered in 7 chunks; the same two as gRPC calls, the stream's 4 messages in 7 chunks). "loop" is
request + responseheaders + stream callable + response, the work that delays traffic, including pickling each
record into the pipe's backlog (the pipe write itself is left out: it happens once per loop turn for all
records); "worker" is the parsing (JSON, or protobuf decoding) and row building the recording worker process
does afterwards.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from mitmproxy import http
from mitmproxy.test import taddons

from converse_tap.a2a.extract import extract
from converse_tap.a2a.redact import TextPolicy
from converse_tap.addon.flows import exchange_from_flow
from converse_tap.addon.tap import ConverseTap
from tests.factories import (
    a2a_flow,
    agent_message,
    envelope,
    grpc_flow,
    grpc_frame,
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


def _grpc_message(pb):  # the converse reply of `unary()` as a protobuf Message
    from google.protobuf import json_format

    return json_format.ParseDict(agent_message(env=envelope(routine=ROUTINE)), pb.Message(), ignore_unknown_fields=True)


def grpc_unary():
    from a2a.types import a2a_pb2 as pb

    request = pb.SendMessageRequest(message=pb.Message(message_id="u-1", role=pb.ROLE_USER, parts=[pb.Part(text="Hi")]))
    f = grpc_flow("SendMessage", request)
    f.response.trailers = http.Headers(grpc_status="0")
    return f, [grpc_frame(pb.SendMessageResponse(message=_grpc_message(pb)))]  # gRPC replies go through the tap


def grpc_streamed():
    from a2a.types import a2a_pb2 as pb

    states = [pb.TASK_STATE_SUBMITTED, pb.TASK_STATE_WORKING, pb.TASK_STATE_WORKING, pb.TASK_STATE_INPUT_REQUIRED]
    body = b""
    for i, state in enumerate(states):
        status = pb.TaskStatus(state=state)
        if i == 3:
            status.message.CopyFrom(_grpc_message(pb))
        event = pb.TaskStatusUpdateEvent(task_id="t-1", context_id="c-1", status=status)
        body += grpc_frame(pb.StreamResponse(status_update=event))
    request = pb.SendMessageRequest(message=pb.Message(message_id="u-1", role=pb.ROLE_USER, parts=[pb.Part(text="Hi")]))
    f = grpc_flow("SendStreamingMessage", request)
    f.response.trailers = http.Headers(grpc_status="0")
    return f, [body[i : i + len(body) // 7 + 1] for i in range(0, len(body), len(body) // 7 + 1)]


FLOWS = {"unary": unary, "streamed": streamed, "grpc_unary": grpc_unary, "grpc_streamed": grpc_streamed}


def run(n: int, reps: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tap = ConverseTap()
        with taddons.context(tap) as tctx:
            tctx.configure(tap, converse_tap_dir=str(Path(tmp) / "d"), converse_tap_summary="off")
            channel = tap.channel
            assert channel is not None
            channel._schedule = lambda: None  # type: ignore[method-assign]  # records stay in the backlog
            channel.max_backlog = 1 << 40
            results: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in FLOWS}
            for _ in range(reps):  # interleaved repetitions; one pass of process_time is too noisy to publish
                for name, (loop, writer) in results.items():
                    loop_us, ex_us = _once(tap, name, n)
                    channel._buf.clear()
                    channel._backlog = 0
                    loop.append(loop_us)
                    writer.append(ex_us)
            tap.done()
    print(f"{n} flows x {reps} reps each; CPU microseconds per flow: median (min-max) over the reps")
    print(f"{'flow':14} {'event loop':>20} {'worker':>20}")
    for name, (loop, writer) in results.items():
        print(f"{name:14} {_spread(loop):>20} {_spread(writer):>20}")
    for binding in ("unary", "streamed"):
        json_loop, grpc_loop = (statistics.median(results[k][0]) for k in (binding, f"grpc_{binding}"))
        json_ex, grpc_ex = (statistics.median(results[k][1]) for k in (binding, f"grpc_{binding}"))
        print(f"gRPC / JSON {binding}: event loop x{grpc_loop / json_loop:.2f}, writer thread x{grpc_ex / json_ex:.2f}")
    print("target: event-loop work <= 50 us per unary flow")


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def _once(tap: ConverseTap, name: str, n: int) -> tuple[float, float]:
    flows = [FLOWS[name]() for _ in range(n)]
    t0 = time.process_time()
    for item in flows:
        f, chunks = item if isinstance(item, tuple) else (item, None)
        tap.request(f)
        tap.responseheaders(f)
        if chunks is not None:
            for c in chunks:
                f.response.stream(c)
            f.response.stream(b"")
            f.response.data.content = None
        tap.response(f)
    loop_us = (time.process_time() - t0) / n * 1e6
    exes = [exchange_from_flow(f[0] if isinstance(f, tuple) else f) for f in flows[:2000]]
    policy = TextPolicy()
    t0 = time.process_time()
    for ex in exes:
        extract(ex, policy)
    return loop_us, (time.process_time() - t0) / len(exes) * 1e6


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--flows", type=int, default=5000)
    p.add_argument("--reps", type=int, default=7)
    args = p.parse_args()
    run(args.flows, args.reps)
