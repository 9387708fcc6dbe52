"""A success that answers a call for an A2A object (SendMessage, GetTask, CancelTask, a stream's event) with an
object holding none is said (`result_without_a2a_object`), not taken for an answer without replies."""

import json

import pytest

from converse_tap.a2a.extract import extract
from converse_tap.a2a.redact import TextPolicy
from converse_tap.addon.flows import exchange_from_flow
from tests.factories import a2a_flow, agent_message, jsonrpc_request, jsonrpc_result, sse_body, user_message


def _anomalies(body: bytes, response: bytes, path: str = "/a2a", **kw) -> list[str]:
    out = extract(exchange_from_flow(a2a_flow(path=path, body=body, response=response, **kw)), TextPolicy())
    assert out is not None
    return out.exchange["anomalies"]


SEND = jsonrpc_request("SendMessage", {"message": user_message()})


@pytest.mark.parametrize("result", [{}, {"ok": True}, {"message": None}])
def test_a_jsonrpc_result_without_a_task_or_message(result: dict) -> None:
    assert "result_without_a2a_object" in _anomalies(SEND, jsonrpc_result(result))


@pytest.mark.parametrize("result", [{"message": agent_message()}, {"task": {"id": "t-1", "status": {}}}])
def test_a_result_with_its_object_is_not_noted(result: dict) -> None:
    assert "result_without_a2a_object" not in _anomalies(SEND, jsonrpc_result(result))


def test_get_task_answered_with_an_empty_object() -> None:
    call = jsonrpc_request("GetTask", {"id": "t-1"})
    assert "result_without_a2a_object" in _anomalies(call, jsonrpc_result({}))
    task = {"id": "t-1", "contextId": "c-1", "status": {"state": "TASK_STATE_COMPLETED"}}
    assert "result_without_a2a_object" not in _anomalies(call, jsonrpc_result(task))


def test_methods_whose_result_is_no_task_are_not_noted() -> None:
    call = jsonrpc_request("ListTasks", {})
    assert "result_without_a2a_object" not in _anomalies(call, jsonrpc_result({"tasks": []}))


def test_a_stream_event_without_an_object_is_named_by_its_index() -> None:
    call = jsonrpc_request("SendStreamingMessage", {"message": user_message()})
    stream = sse_body(json.loads(jsonrpc_result({})), json.loads(jsonrpc_result({"message": agent_message()})))
    anomalies = _anomalies(call, stream, content_type="text/event-stream")
    assert "result_without_a2a_object:event[0]" in anomalies
    assert not [a for a in anomalies if a.startswith("result_without_a2a_object:event[1]")]


def test_an_http_json_reply_without_an_object() -> None:
    body = json.dumps({"message": user_message()}).encode()
    assert "result_without_a2a_object" in _anomalies(body, b"{}", path="/v1/message:send")
    reply = json.dumps({"message": agent_message()}).encode()
    assert "result_without_a2a_object" not in _anomalies(body, reply, path="/v1/message:send")
