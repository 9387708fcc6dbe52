"""The wire of two independent A2A implementations on PyPI, as recorded through mitmdump (ids shortened): fasta2a
2.1.1 (pydantic's) and python-a2a 0.5.10. Where they depart from A2A the rows say so precisely; what they send
within it stays without a note (tests/integration/test_independent_sdks.py drives the real libraries).

- fasta2a stamps a task's status with `datetime.now().isoformat()`: a local time without the zone that a ProtoJSON
  Timestamp requires, so the a2a-sdk 1.x client refuses its v1.0 replies (`ParseError ... status.timestamp`). It
  answers v0.3 method names (`message/send`) with v1.0's wrapper shapes (`{"task": {...}}`, `{"statusUpdate": ...}`,
  no `kind`).
- python-a2a calls `tasks/send` (the name A2A used before v0.2) at `POST /tasks/send`, the method in the path; its
  task echoes the user's message under a stray `message` member, and its artifacts have no `artifactId`."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mitmproxy import http
from mitmproxy.test import tflow, tutils

from converse_tap.a2a.constants import CONVERSE_URI
from converse_tap.a2a.extract import Extraction, extract
from converse_tap.a2a.firstlook import maybe_a2a
from converse_tap.a2a.headers import Headers
from converse_tap.a2a.redact import TextPolicy
from converse_tap.addon.flows import exchange_from_flow

ENV = {
    "author": "agent",
    "answerCoverage": {"availability": "assessed", "coverage": "answered", "reason": "sufficient_evidence"},
    "routine": {"toolName": "book_table", "name": "Book a table", "status": "waiting_for_input"},
}


def _flow(path: str, body: Any, response: bytes, headers: dict[str, str], content_type: str) -> http.HTTPFlow:
    req = tutils.treq(
        method=b"POST",
        scheme=b"http",
        host="127.0.0.1",
        port=8000,
        path=path.encode(),
        headers=http.Headers(
            **{k.replace("-", "_"): v for k, v in {"content-type": "application/json", **headers}.items()}
        ),
        content=json.dumps(body, separators=(",", ":")).encode(),
    )
    resp = tutils.tresp(status_code=200, headers=http.Headers(content_type=content_type), content=response)
    return tflow.tflow(req=req, resp=resp)


def _run(path: str, body: Any, response: bytes, headers: dict[str, str] | None = None, sse: bool = False) -> Extraction:
    content_type = "text/event-stream; charset=utf-8" if sse else "application/json"
    out = extract(exchange_from_flow(_flow(path, body, response, headers or {}, content_type)), TextPolicy())
    assert out is not None
    return out


def _task(state: str, timestamp: str | None, role: str = "user") -> dict[str, Any]:
    status: dict[str, Any] = {"state": state}
    if timestamp is not None:
        status["timestamp"] = timestamp
    user = {"role": role, "parts": [{"text": "A table"}], "messageId": "u-1", "taskId": "t-1", "contextId": "c-1"}
    return {"id": "t-1", "contextId": "c-1", "status": status, "history": [user]}


def _send(method: str, role: str) -> dict[str, Any]:
    message = {"messageId": "u-1", "role": role, "parts": [{"text": "A table"}]}
    return {"jsonrpc": "2.0", "id": "r-1", "method": method, "params": {"message": message}}


V1 = {"a2a-version": "1.0", "a2a-extensions": CONVERSE_URI}


def test_fasta2a_v1_reply_with_a_naive_timestamp_is_said_and_still_recorded() -> None:
    """The a2a-sdk client's SendMessage to fasta2a: the reply is v1.0 but for the timestamp, which the client
    refuses; the row keeps the task and says which field departs."""
    reply = {
        "jsonrpc": "2.0",
        "id": "r-1",
        "result": {"task": _task("TASK_STATE_SUBMITTED", "2026-12-07T05:44:40.213224", "ROLE_USER")},
    }
    out = _run("/", _send("SendMessage", "ROLE_USER"), json.dumps(reply).encode(), V1)
    ex = out.exchange
    assert (ex["dialect"], ex["method"], ex["task_state"], ex["task_id"]) == (
        "v1.0",
        "SendMessage",
        "TASK_STATE_SUBMITTED",
        "t-1",
    )
    assert ex["anomalies"] == ["timestamp_without_zone:result.task.status.timestamp"]
    assert [(m["location"], m["role"]) for m in out.messages] == [
        ("request.message", "user"),
        ("result.task.history[0]", "user"),
    ]


@pytest.mark.parametrize(
    ("timestamp", "said"),
    [
        ("2026-12-07T05:44:40.213224Z", None),
        ("2026-12-07T05:44:40+01:00", None),
        ("2026-12-07T05:44:40Z", None),
        ("2026-12-07T05:44:40", "timestamp_without_zone"),
        ("2026-12-07 05:44:40Z", "timestamp_invalid"),  # a space for `T`: the protobuf runtime refuses it
        ("2026-12-07T05:44:40.1234567891Z", "timestamp_invalid"),  # ten fractional digits
        ("yesterday", "timestamp_invalid"),
        (1765086280, "wrong_type"),
    ],
)
def test_a_status_timestamp_is_said_when_no_protojson_reader_takes_it(timestamp: Any, said: str | None) -> None:
    reply = {"jsonrpc": "2.0", "id": "r-1", "result": _task("TASK_STATE_WORKING", timestamp, "ROLE_USER")}
    out = _run(
        "/",
        {"jsonrpc": "2.0", "id": "r-1", "method": "GetTask", "params": {"id": "t-1"}},
        json.dumps(reply).encode(),
        V1,
    )
    where = "result.status.timestamp"
    expected = [] if said is None else [f"{said}:{where}" + ("=int" if said == "wrong_type" else "")]
    assert out.exchange["anomalies"] == expected
    assert out.exchange["task_state"] == "TASK_STATE_WORKING"


def test_a_naive_timestamp_in_v03_jsonrpc_is_iso_8601_and_not_said() -> None:
    """v0.3's JSON-RPC schema calls the timestamp an ISO 8601 string: a local time is one."""
    task = {**_task("submitted", "2026-12-07T05:44:39.753699"), "kind": "task"}
    out = _run("/", _send("message/send", "user"), json.dumps({"jsonrpc": "2.0", "id": "r-1", "result": task}).encode())
    assert out.exchange["anomalies"] == [] and out.exchange["task_state"] == "TASK_STATE_SUBMITTED"


FASTA2A_STREAM = (
    b'data: {"jsonrpc":"2.0","id":"r-1","result":{"task":{"id":"t-1","contextId":"c-1","status":{"state":"submitted",'
    b'"timestamp":"2026-12-07T05:44:39.947783"},"history":[{"role":"user","parts":[{"text":"A table"}],'
    b'"messageId":"u-1","taskId":"t-1","contextId":"c-1"}]}}}\n\n'
    b'data: {"jsonrpc":"2.0","id":"r-1","result":{"statusUpdate":{"taskId":"t-1","contextId":"c-1",'
    b'"status":{"state":"working"}}}}\n\n'
    b'data: {"jsonrpc":"2.0","id":"r-1","result":{"statusUpdate":{"taskId":"t-1","contextId":"c-1","status":'
    b'{"state":"input-required","message":{"role":"agent","parts":[{"text":"For how many people?"}],"messageId":"a-1",'
    b'"metadata":{"'
    + CONVERSE_URI.encode()
    + b'":'
    + json.dumps(ENV).encode()
    + b'},"extensions":["'
    + CONVERSE_URI.encode()
    + b'"],"taskId":"t-1","contextId":"c-1"}}}}}\n\n'
    b'data: {"jsonrpc":"2.0","id":"r-1","result":{"statusUpdate":{"taskId":"t-1","contextId":"c-1",'
    b'"status":{"state":"input-required"}}}}\n\n'
)


def test_fasta2a_answers_v03_names_in_v1_shapes_said_once_rows_read() -> None:
    out = _run("/", _send("message/stream", "user"), FASTA2A_STREAM, {"a2a-extensions": CONVERSE_URI}, sse=True)
    ex = out.exchange
    assert (ex["dialect"], ex["method"], ex["sse_events"], ex["task_state"]) == (
        "v0.3", "SendStreamingMessage", 4, "TASK_STATE_INPUT_REQUIRED"
    )  # fmt: skip
    assert ex["anomalies"] == ["v1.0_shape_in_v0.3:event[0].result.task"]  # (not the timestamp: v0.3's is ISO 8601)
    (reply,) = [m for m in out.messages if m["role"] == "agent"]
    assert (reply["location"], reply["task_state"], reply["has_envelope"], reply["routine_status"]) == (
        "event[2].result.statusUpdate.status.message", "TASK_STATE_INPUT_REQUIRED", True, "waiting_for_input"
    )  # fmt: skip
    assert (ex["replies"], ex["complete"]) == (1, True)


def test_a_v03_result_named_by_kind_is_not_said() -> None:
    msg = {"kind": "message", "role": "agent", "parts": [{"kind": "text", "text": "Hi"}], "messageId": "a-1"}
    out = _run("/", _send("message/send", "user"), json.dumps({"jsonrpc": "2.0", "id": "r-1", "result": msg}).encode())
    assert out.exchange["anomalies"] == [] and out.messages[-1]["text"] == "Hi"


PY_A2A_SEND = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tasks/send",
    "params": {
        "id": "t-1",
        "sessionId": "s-1",
        "status": {"state": "submitted", "timestamp": "2026-12-07T05:45:16.933478"},
        "message": {"content": {"text": "A table tonight", "type": "text"}, "role": "user", "message_id": "u-1"},
    },
}
PY_A2A_REPLY = (
    b'{"id":1,"jsonrpc":"2.0","result":{"artifacts":[{"parts":[{"text":"For how many people?","type":"text"}]}],'
    b'"id":"t-1","message":{"metadata":{"message_id":"u-1"},"parts":[{"text":"A table tonight","type":"text"}],'
    b'"role":"user"},"sessionId":"s-1","status":{"state":"completed","timestamp":"2026-12-07T05:45:16.942918"}}}'
)


def test_python_a2a_tasks_send_is_recorded_with_its_departures_named() -> None:
    out = _run("/tasks/send", PY_A2A_SEND, PY_A2A_REPLY)  # (python-a2a's client sends no A2A header)
    ex = out.exchange
    assert (ex["binding"], ex["dialect"], ex["method"], ex["method_raw"]) == (
        "jsonrpc",
        "v0.3",
        "SendMessage",
        "tasks/send",
    )
    assert (ex["agent_url"], ex["agent"], ex["url"]) == (
        "http://127.0.0.1:8000", "127.0.0.1:8000", "http://127.0.0.1:8000/tasks/send"
    )  # fmt: skip
    assert ex["anomalies"] == ["method_before_v0.2:tasks/send", "method_in_path:tasks/send"]
    assert (ex["task_id"], ex["task_state"], ex["messages"]) == ("t-1", "TASK_STATE_COMPLETED", 2)
    user, artifact = out.messages
    assert (user["message_id"], user["role"], user["text"], user["anomalies"]) == (
        "u-1",
        "user",
        None,
        ["wrong_type:content=dict"],
    )
    # the task is read as a task: its stray `message` (the user's, echoed) is no reply, its artifact is the answer
    assert (artifact["location"], artifact["object_kind"], artifact["text"], artifact["task_id"]) == (
        "result.artifacts[0]", "artifact", "For how many people?", "t-1"
    )  # fmt: skip
    assert artifact["anomalies"] == ["missing:artifactId"]


def test_python_a2a_tasks_get_in_its_path_is_the_agent_at_the_base() -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "t-1", "historyLength": 0}}
    reply = b'{"id":1,"jsonrpc":"2.0","result":{"id":"t-1","sessionId":"s-1","status":{"state":"completed"}}}'
    ex = _run("/a2a/tasks/get", body, reply).exchange
    assert (ex["method"], ex["agent_url"], ex["anomalies"]) == (
        "GetTask",
        "http://127.0.0.1:8000/a2a",
        ["method_in_path:tasks/get"],
    )
    assert ex["task_state"] == "TASK_STATE_COMPLETED"


@pytest.mark.parametrize(
    "name", ["tasks/send", "tasks/sendSubscribe", "tasks/pushNotification/set", "tasks/pushNotification/get"]
)
def test_the_proxy_first_look_sends_pre_v02_calls_on(name: str) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": name, "params": {"id": "t-1"}}).encode()
    assert maybe_a2a("POST", "/tasks/send", Headers([("content-type", "application/json")]), body)
    assert not maybe_a2a(
        "POST", "/mcp", Headers([("content-type", "application/json")]), body.replace(name.encode(), b"tools/call")
    )


PY_A2A_STREAM = (
    b'event: update\nid: 7\ndata: {"id": "t-9", "sessionId": "s-9", "status": {"state": "submitted", "timestamp": '
    b'"2026-12-07T06:00:37.943552"}, "message": {"role": "user", "parts": [{"type": "text", "text": "4 people"}]}}\n\n'
    b'event: complete\nid: 7\ndata: {"id": "t-9", "sessionId": "s-9", "status": {"state": "completed", "timestamp": '
    b'"2026-12-07T06:00:37.945131"}, "message": {"role": "user", "parts": [{"type": "text", "text": "4 people"}]}, '
    b'"artifacts": [{"parts": [{"type": "text", "text": "Booked for 4."}]}]}\n\n'
)


def test_python_a2a_streams_bare_tasks_said_per_event_and_read() -> None:
    """python-a2a's `tasks/sendSubscribe` events are its tasks, with no JSON-RPC response around them."""
    body = {"jsonrpc": "2.0", "id": 7, "method": "tasks/sendSubscribe", "params": {"id": "t-9", "sessionId": "s-9"}}
    out = _run("/a2a/tasks/stream", body, PY_A2A_STREAM, sse=True)
    ex = out.exchange
    assert (ex["method"], ex["agent_url"], ex["sse_events"], ex["task_state"]) == (
        "SendStreamingMessage", "http://127.0.0.1:8000/a2a/tasks/stream", 2, "TASK_STATE_COMPLETED"
    )  # fmt: skip
    assert ex["anomalies"] == [
        "method_before_v0.2:tasks/sendSubscribe",
        "request_without_message",
        "jsonrpc_without_result:event[0]",
        "jsonrpc_without_result:event[1]",
    ]
    (artifact,) = out.messages
    assert (artifact["location"], artifact["text"], artifact["event_index"]) == (
        "event[1].artifacts[0]",
        "Booked for 4.",
        1,
    )
    assert ex["complete"] is True


def test_a_jsonrpc_response_without_result_stays_unread() -> None:
    reply = b'{"jsonrpc":"2.0","id":"r-1","task":{"id":"t-1","status":{"state":"completed"}}}'
    out = _run("/", _send("SendMessage", "ROLE_USER"), reply, V1)
    assert out.exchange["anomalies"] == ["jsonrpc_without_result"] and out.exchange["task_state"] is None


@pytest.mark.parametrize(
    ("content_type", "body", "said"),
    [
        ("text/plain; charset=utf-8", b"Internal Server Error", "response_not_json:text/plain"),  # fasta2a's 500
        ("text/html", b"<html>oops</html>", "response_not_json:text/html"),
        ("application/json", b'{"jsonrpc": "2.0", "id": "r-1", "result": ', "invalid_json:JSONDecodeError"),
        ("", b"Internal Server Error", "invalid_json:JSONDecodeError"),  # (no type said: read as the JSON it should be)
    ],
)
def test_a_reply_that_is_no_json_says_whether_it_claimed_to_be(content_type: str, body: bytes, said: str) -> None:
    """fasta2a answers a conformant v0.3 `message/send` (its message with `kind`) with `500 Internal Server Error`."""
    flow = _flow("/", _send("message/send", "user"), body, {}, content_type)
    assert flow.response is not None
    flow.response.status_code = 500
    if not content_type:
        del flow.response.headers["content-type"]
    out = extract(exchange_from_flow(flow), TextPolicy())
    assert out is not None
    assert out.exchange["anomalies"] == [said] and out.exchange["error_code"] == 500
