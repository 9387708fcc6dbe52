"""The A2A content view on documents of hostile size: it runs in the proxy's process when a flow is shown."""

from __future__ import annotations

import pytest
from mitmproxy import contentviews
from mitmproxy.http import Headers
from mitmproxy.test import taddons

from converse_tap.a2a.fastjson import MAX_VALUES
from converse_tap.addon.contentview import MAX_EVENTS, MAX_LINE, MAX_OBJECTS, MAX_TEXT_LINES, A2AContentview
from tests.factories import a2a_flow, agent_message, jsonrpc_result

contentviews.add(A2AContentview())  # as the mitmdump script does; the registry keeps one view per name


def _shown(body: bytes) -> contentviews.ContentviewResult:
    flow = a2a_flow(response=body)
    with taddons.context():  # content views read mitmproxy's options
        return contentviews.prettify_message(flow.response, flow)


def test_a_task_of_thousands_of_messages_shows_the_first_ones_and_counts_the_rest() -> None:
    """Every object and every line of its text were laid out: a task with a long history, each message with a
    long text, was hundreds of thousands of lines (and a list of every line of each text) on the event loop."""
    text = "\n".join(["line " + "x" * 300] * 12)
    history = [agent_message(f"m{i}", text=text) for i in range(1_000)]
    task = {"id": "t", "status": {"state": "TASK_STATE_COMPLETED"}, "history": history}
    shown = _shown(jsonrpc_result({"task": task}))
    assert shown.view_name == "A2A converse"
    lines = shown.text.splitlines()
    assert len(lines) < MAX_OBJECTS * (MAX_TEXT_LINES + 4)
    assert f"  … {1_000 - MAX_OBJECTS} more objects" in lines
    assert max(map(len, lines)) <= MAX_LINE + 10


def test_a_document_of_millions_of_values_is_not_parsed_by_the_view() -> None:
    flood = b",".join([b"{}"] * (MAX_VALUES // 2 + 1))
    with pytest.raises(ValueError):
        A2AContentview().prettify(b'{"jsonrpc":"2.0","id":"r-1","result":[' + flood + b"]}", _metadata())
    assert _shown(b'{"jsonrpc":"2.0","id":"r-1","result":[' + flood + b"]}").view_name != "A2A converse"


def _metadata() -> contentviews.Metadata:
    flow = a2a_flow(response=b"{}")
    return contentviews.Metadata(flow=flow, http_message=flow.response, content_type="application/json")


def test_a_success_with_a_null_error_is_shown_as_its_result() -> None:
    """Serialisers that keep nil fields send `"error": null` beside the result: the reply, not an error."""
    import json

    doc = json.loads(jsonrpc_result({"message": agent_message("m1", text="hello")}))
    doc["error"] = None
    text = _shown(json.dumps(doc).encode()).text
    assert "JSON-RPC error" not in text and "hello" in text, text
    doc["error"], doc["result"] = {"code": -32001, "message": "Task not found"}, None
    assert "JSON-RPC error -32001 Task not found" in _shown(json.dumps(doc).encode()).text


def test_a_stream_of_thousands_of_events_shows_the_first_ones_and_counts_the_rest() -> None:
    """Every event of a stored stream was parsed and laid out at once: a long stream was a list of every event
    and hundreds of thousands of lines on the event loop."""
    event = b"data: " + jsonrpc_result({"message": agent_message("m", text="hi")}) + b"\n\n"
    flow = a2a_flow(response=event * 5_000, content_type="text/event-stream")
    with taddons.context():
        shown = contentviews.prettify_message(flow.response, flow)
    assert shown.view_name == "A2A converse"
    lines = shown.text.splitlines()
    assert sum(line.startswith("event ") for line in lines) == MAX_EVENTS
    assert lines[-1] == f"… {5_000 - MAX_EVENTS} more events"


def test_a_grpc_stream_of_thousands_of_messages_shows_the_first_ones_and_counts_the_rest() -> None:
    from a2a.types import a2a_pb2 as pb
    from mitmproxy.test import tflow, tutils

    from tests.a2a.grpc_helpers import GRPC_HEADERS, V1, frame

    msg = pb.Message(message_id="a-1", context_id="c-1", role=pb.ROLE_AGENT, parts=[pb.Part(text="hi")])
    one = frame(pb.StreamResponse(message=msg).SerializeToString())
    request = frame(pb.SendMessageRequest(message=msg).SerializeToString())
    req = tutils.treq(method=b"POST", path=b"/lf.a2a.v1.A2AService/SendStreamingMessage", content=request)
    grpc_headers = Headers([(k.encode(), v.encode()) for k, v in GRPC_HEADERS])
    req.url, req.headers = f"{V1}/SendStreamingMessage", grpc_headers
    flow = tflow.tflow(req=req, resp=tutils.tresp(headers=grpc_headers.copy(), content=one * 3_000 + one[:7]))
    with taddons.context():
        shown = contentviews.prettify_message(flow.response, flow)
    assert shown.view_name == "A2A converse", shown.text[:500]
    lines = shown.text.splitlines()
    assert lines[0] == "gRPC v1.0 SendStreamingMessage: 3001 message(s)"  # the last one cut short
    assert sum(line.startswith("message ") for line in lines) == MAX_EVENTS
    assert f"… {3_001 - MAX_EVENTS} more messages" in lines
    assert any(line.startswith("! grpc_frame_truncated") for line in lines)
