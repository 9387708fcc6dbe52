"""Wire shapes that A2A servers and clients send on which the extracted rows were wrong (protocol hunt).

Each test asserts what the A2A specs (or the converse extension spec) require; the first six are the defects the
hunt found, the rest the general rules their fixes follow."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from a2a.types import a2a_pb2 as pb

from converse_tap.a2a.extract import Extraction, extract
from converse_tap.a2a.grpc import classify_grpc
from converse_tap.a2a.headers import Headers
from converse_tap.a2a.redact import TextPolicy
from converse_tap.addon.flows import exchange_from_flow
from converse_tap.store.reader import load
from tests.addon.test_worker import _req, _worker
from tests.factories import (
    EXT,
    a2a_flow,
    agent_message,
    grpc_frame,
    jsonrpc_request,
    jsonrpc_result,
    sse_body,
    status_event,
)


def run(flow: Any) -> Extraction:
    out = extract(exchange_from_flow(flow), TextPolicy())
    assert out is not None
    return out


def test_a_result_beside_a_null_error_is_still_the_reply() -> None:
    """A JSON-RPC success that also carries `"error": null` (Go/Java serialisers that keep nil fields) is the
    reply, not an error."""
    body = json.dumps({"jsonrpc": "2.0", "id": "r-1", "result": {"message": agent_message()}, "error": None})
    out = run(a2a_flow(response=body.encode()))
    replies = [m for m in out.messages if m["direction"] == "response"]
    assert [(m["message_id"], m["has_envelope"], m["coverage"]) for m in replies] == [("m-agent", True, "answered")]
    assert (out.exchange["replies"], out.exchange["error_code"]) == (1, None)


def test_a_crlf_stream_whose_last_lf_is_a_chunk_of_its_own_is_complete(tmp_path: Path) -> None:
    """A CRLF stream whose last LF came in a chunk of its own holds nothing (`SseParser.pending`): a client that
    leaves after the final event leaves the exchange complete."""
    w = _worker(tmp_path)
    done = sse_body(status_event("TASK_STATE_WORKING"), status_event("TASK_STATE_COMPLETED", agent_message()))
    assert done.endswith(b"\r\n\r\n")
    head = (200, [(b"content-type", b"text/event-stream")], 1.1)
    for fid, chunks in {"whole": [done], "split": [done[:-1], done[-1:]]}.items():
        w.handle(("o", fid, _req(jsonrpc_request("SendStreamingMessage")), head))
        for chunk in chunks:
            w.handle(("c", fid, 1.2, chunk))
        w.handle(("e", fid, (None, None), ("Client disconnected.", 1.3), False))
    w.close()
    ex = load(tmp_path, "exchanges").set_index("exchange_id")
    assert ex["complete"].to_dict() == {"whole": True, "split": True}


def test_v1_push_config_calls_are_attributed_to_their_task() -> None:
    """v1.0 Get/Delete/ListTaskPushNotificationConfig(s) name the task `taskId` and the config `id` (JSON-RPC
    and gRPC)."""
    got = {}
    for method, params in (
        ("GetTaskPushNotificationConfig", {"taskId": "task-1", "id": "cfg-1"}),
        ("DeleteTaskPushNotificationConfig", {"taskId": "task-1", "id": "cfg-1"}),
        ("ListTaskPushNotificationConfigs", {"taskId": "task-1"}),
    ):
        out = run(a2a_flow(body=jsonrpc_request(method, params), response=b'{"jsonrpc":"2.0","id":"r-1","result":{}}'))
        got[method] = out.exchange["task_id"]
    grpc = classify_grpc(
        "https://agent.test/lf.a2a.v1.A2AService/GetTaskPushNotificationConfig",
        Headers([("content-type", "application/grpc")]),
        grpc_frame(pb.GetTaskPushNotificationConfigRequest(task_id="task-1", id="cfg-1")),
    )
    assert grpc is not None
    got["grpc"] = grpc.task_id
    assert got == {
        "GetTaskPushNotificationConfig": "task-1",
        "DeleteTaskPushNotificationConfig": "task-1",
        "ListTaskPushNotificationConfigs": "task-1",
        "grpc": "task-1",
    }


def test_a_v03_card_keeps_every_transport_of_its_main_url() -> None:
    """v0.3 interfaces are url and transport pairs: JSON-RPC and HTTP+JSON served from one base URL are two."""
    card = {
        "name": "A",
        "version": "1",
        "protocolVersion": "0.3.0",
        "url": "https://agent.test/a2a",
        "preferredTransport": "JSONRPC",
        "additionalInterfaces": [
            {"url": "https://agent.test/a2a", "transport": "JSONRPC"},
            {"url": "https://agent.test/a2a", "transport": "HTTP+JSON"},
        ],
        "capabilities": {"extensions": [{"uri": EXT, "required": False, "params": {"tools": []}}]},
        "skills": [],
    }
    out = run(a2a_flow(method="GET", path="/.well-known/agent-card.json", body=b"", response=json.dumps(card).encode()))
    (row,) = out.agent_cards
    assert [(i["url"], i["binding"]) for i in row["interfaces"]] == [
        ("https://agent.test/a2a", "JSONRPC"),
        ("https://agent.test/a2a", "HTTP+JSON"),
    ]


def test_v03_push_config_results_of_their_spec_shape_are_no_anomaly() -> None:
    """v0.3 `tasks/pushNotificationConfig/delete` answers `result: null` and `.../list` an array, as the v0.3
    schema says: no `result_not_object`."""
    cases = {
        "tasks/pushNotificationConfig/delete": ({"id": "t1", "pushNotificationConfigId": "c1"}, None),
        "tasks/pushNotificationConfig/list": (
            {"id": "t1"},
            [{"taskId": "t1", "pushNotificationConfig": {"id": "c1", "url": "https://client.test/hook"}}],
        ),
    }
    got = {}
    for method, (params, result) in cases.items():
        body = json.dumps({"jsonrpc": "2.0", "id": "r-1", "result": result}).encode()
        out = run(a2a_flow(body=jsonrpc_request(method, params), response=body, headers={"a2a-version": "0.3"}))
        got[method] = out.exchange["anomalies"]
    assert got == {method: [] for method in cases}


def test_get_task_of_a_task_id_with_a_colon_is_recorded() -> None:
    """Task ids are opaque and may hold `:` (the a2a-sdk client puts them in the path unquoted and its server
    routes `/tasks/{id}` on them): `GET /tasks/task:42` is GetTask."""
    task = {
        "id": "task:42",
        "contextId": "ctx-1",
        "status": {"state": "TASK_STATE_INPUT_REQUIRED", "message": agent_message("m-q")},
    }
    flow = a2a_flow(
        method="GET",
        path="/a2a/rest/tasks/task:42",
        body=b"",
        response=json.dumps(task).encode(),
        content_type="application/a2a+json",
    )
    out = extract(exchange_from_flow(flow), TextPolicy())
    assert out is not None
    assert (out.exchange["method"], out.exchange["task_id"], out.exchange["replies"]) == ("GetTask", "task:42", 1)


# the general rules behind the fixes above, beyond the shape each hunt test found


def test_a_null_error_is_no_error_anywhere_and_a_real_one_still_is() -> None:
    """An `error` member that is null is absent: in a JSON-RPC SSE event and in a REST body too. One that is not
    null is the error, whatever `result` says."""
    event = {**status_event("TASK_STATE_COMPLETED", agent_message()), "error": None}
    stream = run(a2a_flow(body=jsonrpc_request("SendStreamingMessage"), response=sse_body(event),
                          content_type="text/event-stream"))  # fmt: skip
    rest = run(a2a_flow(path="/a2a/rest/message:send", body=json.dumps({"message": agent_message("m-u")}).encode(),
                        response=json.dumps({"message": agent_message(), "error": None}).encode()))  # fmt: skip
    failed = json.dumps({"jsonrpc": "2.0", "id": "r-1", "result": None, "error": {"code": -32001, "message": "gone"}})
    error = run(a2a_flow(response=failed.encode()))
    got = [(o.exchange["replies"], o.exchange["error_code"], o.exchange["anomalies"]) for o in (stream, rest, error)]
    assert got == [(1, None, []), (1, None, []), (0, -32001, [])]


def test_a_v1_push_config_delete_answered_null_is_still_flagged() -> None:
    """v1.0 answers DeleteTaskPushNotificationConfig with `{}` (google.protobuf.Empty): only v0.3 answers null."""
    body = jsonrpc_request("DeleteTaskPushNotificationConfig", {"taskId": "t1", "id": "c1"})
    out = run(a2a_flow(body=body, response=b'{"jsonrpc":"2.0","id":"r-1","result":null}'))
    assert out.exchange["anomalies"] == ["result_not_object:result"]


def test_a_v03_card_lists_each_url_and_transport_pair_once() -> None:
    card = {
        "name": "A",
        "protocolVersion": "0.3.0",
        "url": "https://agent.test/a2a",
        "additionalInterfaces": [
            {"url": "https://agent.test/rest", "transport": "HTTP+JSON"},
            {"url": "https://agent.test/a2a", "transport": "JSONRPC"},  # the main pair, repeated as the spec asks
            {"url": "https://agent.test/rest", "transport": "HTTP+JSON"},
            {"url": "https://agent.test/rest", "transport": "GRPC"},
        ],
    }
    out = run(a2a_flow(method="GET", path="/.well-known/agent-card.json", body=b"", response=json.dumps(card).encode()))
    (row,) = out.agent_cards
    assert [(i["url"], i["binding"]) for i in row["interfaces"]] == [
        ("https://agent.test/a2a", "JSONRPC"),
        ("https://agent.test/rest", "HTTP+JSON"),
        ("https://agent.test/rest", "GRPC"),
    ]


def test_the_exchange_context_is_the_request_messages_else_the_responses() -> None:
    """schema.md: `context_id` is the context of the request message, else the response's; each message row keeps
    its own."""
    mine = {"message": {**agent_message("m-u", role="ROLE_USER", env=None), "contextId": "c-client"}}
    sent = run(
        a2a_flow(body=jsonrpc_request("SendMessage", mine), response=jsonrpc_result({"message": agent_message()}))
    )
    bare = run(a2a_flow(response=jsonrpc_result({"message": agent_message()})))  # the request names no context
    assert (sent.exchange["context_id"], bare.exchange["context_id"]) == ("c-client", "ctx-1")
    assert [m["context_id"] for m in sent.messages] == ["c-client", "ctx-1"]


def test_a_rest_task_id_is_stored_decoded() -> None:
    """`/tasks/t%201` is task `t 1` to the agent (its router decodes the path), answered or not."""
    got = []
    for status, response in ((200, {"id": "t 1", "status": {"state": "TASK_STATE_WORKING"}}), (404, {})):
        flow = a2a_flow(method="GET", path="/a2a/rest/tasks/t%201", body=b"", status=status,
                        response=json.dumps(response).encode())  # fmt: skip
        got.append(run(flow).exchange["task_id"])
    assert got == ["t 1", "t 1"]


@pytest.mark.parametrize(
    ("sent", "answered", "mismatch"),
    [("r-1", "r-1", False), (1, 1, False), (1.0, 1, False), (10**20, 1e20, False), (1, "1", True), ("1", 1, True)],
)
def test_a_jsonrpc_reply_repeats_the_request_id_of_its_type(sent: Any, answered: Any, mismatch: bool) -> None:
    """JSON-RPC 2.0: the response's id is the request's. `1.0` echoed as `1` (JS servers) is the same number;
    `1` answered with `"1"` is another id."""
    body = json.dumps({"jsonrpc": "2.0", "id": answered, "result": {"message": agent_message()}}).encode()
    out = run(a2a_flow(body=jsonrpc_request(rid=sent), response=body))
    assert ("jsonrpc_id_mismatch" in out.exchange["anomalies"]) is mismatch
