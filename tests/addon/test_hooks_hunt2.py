"""Defects found by red-teaming the live recorder, each a test of its fix at the hooks (tflow, taddons)."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

from converse_tap.addon import worker as worker_module
from converse_tap.store.reader import load
from tests.factories import a2a_flow, agent_message, jsonrpc_request, jsonrpc_result, sse_body


def _streamed_by_mitmproxy(addon, flow, body: bytes, piece: int = 1000) -> bytes:
    """What mitmproxy does with `stream_large_bodies`: `stream = True` before the responseheaders hook, the body
    relayed chunk by chunk through whatever `stream` is then, `b""` at its end, no body kept."""
    addon.request(flow)
    flow.response.stream = True
    addon.responseheaders(flow)
    stream = flow.response.stream
    chunks = [body[i : i + piece] for i in range(0, len(body), piece)]
    relayed = [stream(c) if callable(stream) else c for c in chunks]
    if callable(stream):
        assert stream(b"") == b""
    flow.response.data.content = None
    addon.response(flow)
    return b"".join(relayed)


def test_a_reply_mitmproxy_streams_is_still_read(tap) -> None:
    """`--set stream_large_bodies=100k` and a 300 KB JSON reply with a Content-Length: mitmproxy streams it before
    our hook sees it, and the row had no reply, no size and no anomaly. It is relayed unchanged and read whole."""
    addon, _, out = tap
    reply = jsonrpc_result({"message": agent_message(text="x" * 300_000)})
    flow = a2a_flow(body=jsonrpc_request(), response=b"")
    assert _streamed_by_mitmproxy(addon, flow, reply) == reply
    addon.done()
    ex = load(out, "exchanges").iloc[0]
    assert (ex["replies"], ex["bytes_out"], list(ex["anomalies"])) == (1, len(reply), [])
    texts = load(out, "messages").query("direction == 'response'")["text_length"].tolist()
    assert texts == [300_000]


def test_a_stream_mitmproxy_streams_is_still_tapped(tap) -> None:
    """The same for SSE with a Content-Length past the limit: it was recorded as a stream of no events."""
    addon, _, out = tap
    body = sse_body(
        {"result": {"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}}}},
        {"result": {"message": agent_message()}},
    )
    flow = a2a_flow(body=jsonrpc_request("SendStreamingMessage"), response=b"", content_type="text/event-stream")
    assert _streamed_by_mitmproxy(addon, flow, body, piece=7) == body
    addon.done()
    ex = load(out, "exchanges").iloc[0]
    assert (ex["streamed"], ex["sse_events"], ex["replies"], list(ex["anomalies"])) == (True, 2, 1, [])


def test_a_streamed_reply_larger_than_max_body_is_counted_not_gathered(tap) -> None:
    addon, tctx, out = tap
    tctx.configure(addon, converse_tap_max_body=4096)
    reply = jsonrpc_result({"message": agent_message(text="y" * 20_000)})
    flow = a2a_flow(body=jsonrpc_request(), response=b"")
    sent = addon.channel.stats.records
    assert _streamed_by_mitmproxy(addon, flow, reply, piece=1000) == reply
    assert addon.channel.stats.records - sent <= 2 + 4096 // 1000  # start, chunks up to max_body, end
    addon.done()
    ex = load(out, "exchanges").iloc[0]
    assert (ex["bytes_out"], list(ex["anomalies"])) == (len(reply), [f"response_body_too_large:{len(reply)}"])


def test_a_body_another_addon_streamed_is_said_not_stored(tap) -> None:
    """A body streamed past our hooks (another addon's `stream` callable, or mitmproxy switching to streaming in the
    middle of a body without a length): the row said nothing of it, as if the reply had been empty."""
    addon, _, out = tap
    flow = a2a_flow(body=jsonrpc_request(), response=b"")
    addon.request(flow)
    flow.response.stream = lambda chunk: chunk  # not ours: left alone
    addon.responseheaders(flow)
    assert flow.response.stream.__name__ == "<lambda>"
    flow.response.data.content = None
    addon.response(flow)
    addon.done()
    ex = load(out, "exchanges").iloc[0]
    assert "response_body_not_stored" in list(ex["anomalies"])


def test_a_stream_an_addon_after_ours_took_over_is_said_incomplete(tap) -> None:
    """mitmproxy's advice for SSE is an addon that sets `flow.response.stream = True`: loaded after ours, it
    replaced our tap and the stream was recorded as one of no events, complete. Now the row says why."""
    addon, _, out = tap
    flow = a2a_flow(body=jsonrpc_request("SendStreamingMessage"), response=b"", content_type="text/event-stream")
    addon.request(flow)
    addon.responseheaders(flow)
    flow.response.stream = True  # the other addon's responseheaders, after ours
    flow.response.data.content = None
    addon.response(flow)
    addon.done()
    ex = load(out, "exchanges").iloc[0]
    assert list(ex["anomalies"]) == ["capture_incomplete:stream_replaced"]


def test_gathered_bodies_count_in_the_workers_budget(tmp_path: Path, monkeypatch) -> None:
    """Bodies gathered for reading whole are held until their end: past the worker's budget the largest let go,
    and their rows say so; the worker holds nothing once they end."""
    from tests.addon.test_worker import HEADERS, _req, _worker

    monkeypatch.setattr(worker_module, "MAX_HELD", 64 * 1024)
    w = _worker(tmp_path)
    reply = jsonrpc_result({"message": agent_message(text="z" * 30_000)})
    for i in range(4):
        w.handle(("w", f"f{i}", _req(jsonrpc_request()), (200, HEADERS, 2.0)))
        w.handle(("c", f"f{i}", 2.1, reply))
        assert w.held <= worker_module.MAX_HELD
    for i in range(4):
        w.handle(("e", f"f{i}", (3.0, None), None, False, len(reply)))
    assert w.held == 0 and not w.bodies
    w.close()
    ex = load(tmp_path, "exchanges")
    shed = ex["anomalies"].map(lambda a: "response_body_not_kept:worker_buffer_full" in a)
    assert (shed.sum(), ex[~shed]["replies"].tolist()) == (2, [1, 1]), ex["anomalies"].tolist()


def test_streams_open_when_the_worker_dies_are_counted_as_lost(tap) -> None:
    """The worker killed while streams are open: their rows die with it, and the worker that replaces it never
    saw them open. Nothing said so (the new worker only counted them in a metric); each is a `worker_died`
    record in `capture_gaps` now, and its chunks are not sent to a worker that cannot use them."""
    addon, _, out = tap
    events = sse_body({"result": {"message": agent_message()}})
    streams = [
        a2a_flow(body=jsonrpc_request("SendStreamingMessage"), response=b"", content_type="text/event-stream")
        for _ in range(3)
    ]
    for flow in streams:
        addon.request(flow)
        addon.responseheaders(flow)
        flow.response.stream(events[:10])
    channel = addon.channel
    assert channel is not None and channel._proc is not None
    os.kill(channel._proc.pid, signal.SIGKILL)
    channel._proc.wait()
    unary = a2a_flow(body=jsonrpc_request(), response=jsonrpc_result({"message": agent_message("after")}))
    addon.request(unary)
    addon.response(unary)  # its record finds the worker dead: lost, and said (worker_died)
    channel._down_until = 0.0  # the back-off is over: the next record starts a new worker
    for flow in streams:
        sent = channel.stats.records
        assert flow.response.stream(events[10:]) == events[10:]  # relayed all the same
        assert channel.stats.records - sent <= 1  # (the first starts the new worker; no chunk goes to it)
        flow.response.data.content = None
        addon.response(flow)
    addon.done()
    gaps = load(out, "capture_gaps")
    died = gaps[gaps["reason"] == "worker_died"]["records"].sum()
    assert died == 1 + len(streams), gaps[["reason", "records"]].to_dict("records")


def test_done_while_mitmproxy_serves_never_waits_for_the_worker(tmp_path: Path) -> None:
    """mitmproxy calls `done` when the script file changes (it reloads it) or is removed, while it serves on: the
    event loop waited there for the worker to write its files, 70 s for a worker stopped or stuck, with every
    flow of the proxy held. (At shutdown it still waits: the files must be written before the process exits.)"""
    import asyncio
    import threading

    from mitmproxy.test import taddons

    from converse_tap.addon.tap import ConverseTap

    async def reload() -> tuple[bool, int]:
        addon = ConverseTap()
        with taddons.context(addon) as tctx:
            tctx.configure(addon, converse_tap_dir=str(tmp_path / "data"), converse_tap_flush_interval="0.05")
            channel = addon.channel
            assert channel is not None and channel._proc is not None
            proc = channel._proc
            os.kill(proc.pid, signal.SIGSTOP)
            resume = threading.Timer(5, os.kill, (proc.pid, signal.SIGCONT))  # had `done` waited, it goes on
            resume.start()
            try:
                addon.done()
                returned_first = proc.poll() is None  # the worker, stopped, has not finished
            finally:
                resume.cancel()
                with contextlib.suppress(ProcessLookupError):  # (gone: it finished while `done` waited)
                    os.kill(proc.pid, signal.SIGCONT)
            return returned_first, proc.wait(60)

    assert asyncio.run(reload()) == (True, 0)  # done returned at once; the worker then finished its files


def test_requests_waiting_when_the_recorder_stops_are_said_lost(tap) -> None:
    """Ctrl-C (or a script reload) while A2A requests wait for their response: their rows were lost without a
    trace (the streams open then are recorded, cut short, by the worker). Each is a `recorder_stopped` record."""
    addon, _, out = tap
    for _ in range(2):
        addon.request(a2a_flow(body=jsonrpc_request(), response=b""))
    stream = a2a_flow(body=jsonrpc_request("SendStreamingMessage"), response=b"", content_type="text/event-stream")
    addon.request(stream)
    addon.responseheaders(stream)
    stream.response.stream(sse_body({"result": {"message": agent_message()}}))
    addon.done()
    gaps = load(out, "capture_gaps")
    assert gaps[["reason", "records"]].astype({"reason": str}).values.tolist() == [["recorder_stopped", 2]]
    ex = load(out, "exchanges").iloc[0]
    assert (ex["replies"], ex["error"]) == (1, "recorder stopped before the stream ended")
