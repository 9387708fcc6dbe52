import gzip
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from converse_tap.a2a.extract import Extraction, agent_of, extract
from converse_tap.a2a.redact import TextPolicy
from converse_tap.addon.flows import exchange_from_flow
from tests.factories import (
    EXT,
    a2a_flow,
    agent_message,
    envelope,
    jsonrpc_request,
    jsonrpc_result,
    sse_body,
    user_message,
)


def run(flow, policy: TextPolicy | None = None) -> Extraction:
    out = extract(exchange_from_flow(flow), policy or TextPolicy())
    assert out is not None
    return out


def replies(out: Extraction) -> list[dict[str, Any]]:
    return [m for m in out.messages if m["direction"] == "response" and m["role"] == "agent"]


def test_v1_jsonrpc_message_reply_with_full_envelope() -> None:
    out = run(a2a_flow(response=jsonrpc_result({"message": agent_message()})))
    ex = out.exchange
    assert (ex["binding"], ex["dialect"], ex["method"], ex["jsonrpc_id"]) == (
        "jsonrpc",
        "v1.0",
        "SendMessage",
        "r-1",
    )
    assert ex["converse_requested"] is True and ex["extensions_requested"] == [EXT]
    assert (ex["messages"], ex["replies"], ex["anomalies"], ex["complete"]) == (2, 1, [], True)
    user, reply = out.messages
    assert (user["direction"], user["role"], user["location"], user["has_envelope"]) == (
        "request",
        "user",
        "request.message",
        False,
    )
    assert reply["location"] == "result.message"
    assert {
        k: reply[k]
        for k in (
            "author",
            "coverage_availability",
            "coverage",
            "coverage_reason",
            "originating_turn_id",
            "ownership_state",
            "ownership_suppressed",
            "citation_count",
            "text",
            "text_length",
            "part_kinds",
        )
    } == {
        "author": "agent",
        "coverage_availability": "assessed",
        "coverage": "answered",
        "coverage_reason": "sufficient_evidence",
        "originating_turn_id": "turn-1",
        "ownership_state": "ai_owned",
        "ownership_suppressed": False,
        "citation_count": 1,
        "text": "You can return it within 30 days.",
        "text_length": 33,
        "part_kinds": ["text"],
    }
    assert reply["citations"] == [
        {"document_id": "doc-1", "chunk_id": "c-1", "title": "Returns policy", "source_url": None}
    ]
    assert json.loads(reply["envelope_json"]) == envelope()


def test_task_in_input_required_with_routine_and_history() -> None:
    routine = {
        "toolName": "book_table",
        "name": "Book a table",
        "status": "waiting_for_input",
        "pendingInput": [
            {"key": "date", "type": "string", "required": True, "description": "Which day?"},
            {"key": "notes", "type": "string", "required": False, "description": "Anything else?"},
        ],
    }
    task = {
        "id": "t-1",
        "contextId": "ctx-1",
        "status": {
            "state": "TASK_STATE_INPUT_REQUIRED",
            "message": agent_message("m-q", "Which day?", env=envelope(routine=routine), taskId="t-1"),
        },
        "history": [user_message("m-u", contextId="ctx-1", taskId="t-1")],
    }
    out = run(a2a_flow(response=jsonrpc_result({"task": task})))
    assert (out.exchange["task_id"], out.exchange["task_state"], out.exchange["context_id"]) == (
        "t-1",
        "TASK_STATE_INPUT_REQUIRED",
        "ctx-1",
    )
    q = replies(out)[0]
    assert q["location"] == "result.task.status.message"
    assert (q["routine_tool_name"], q["routine_name"], q["routine_status"], q["pending_required_open"]) == (
        "book_table",
        "Book a table",
        "waiting_for_input",
        1,
    )
    assert [s["key"] for s in q["pending_input"]] == ["date", "notes"]
    assert q["task_state"] == "TASK_STATE_INPUT_REQUIRED"
    hist = [m for m in out.messages if ".history[" in m["location"]]
    assert [m["message_id"] for m in hist] == ["m-u"]


def test_v03_jsonrpc_kind_objects_and_lowercase_enums() -> None:
    task = {
        "kind": "task",
        "id": "t-9",
        "contextId": "c-9",
        "status": {"state": "input-required", "message": agent_message("m-9", "Which city?", v03=True)},
    }
    flow = a2a_flow(
        body=jsonrpc_request("message/send", {"message": user_message(v03=True)}),
        headers={"a2a-version": "0.3"},
        response=jsonrpc_result(task),
    )
    out = run(flow)
    assert (out.exchange["dialect"], out.exchange["method"], out.exchange["method_raw"]) == (
        "v0.3",
        "SendMessage",
        "message/send",
    )
    assert out.exchange["task_state"] == "TASK_STATE_INPUT_REQUIRED"
    r = replies(out)[0]
    assert (r["role"], r["text"], r["part_kinds"], r["coverage"]) == (
        "agent",
        "Which city?",
        ["text"],
        "answered",
    )


def test_v03_rest_parts_under_content_and_x_a2a_extensions() -> None:
    reply = {
        "messageId": "m-r",
        "role": "ROLE_AGENT",
        "content": [{"text": "Hi"}],
        "metadata": {EXT: envelope()},
        "extensions": [EXT],
    }
    flow = a2a_flow(
        path="/v1/message:send",
        extensions=False,
        headers={"a2a-version": "0.3", "x-a2a-extensions": EXT},
        body=json.dumps({"message": {"messageId": "u", "role": "ROLE_USER", "content": [{"text": "yo"}]}}).encode(),
        response=json.dumps({"message": reply}).encode(),
    )
    out = run(flow)
    assert (out.exchange["binding"], out.exchange["dialect"], out.exchange["agent_url"]) == (
        "rest",
        "v0.3",
        "http://agent.test:9000",
    )
    assert out.exchange["converse_requested"] is True
    assert [m["text"] for m in out.messages] == ["yo", "Hi"]


def test_sse_stream_rows_carry_event_index_and_final_state() -> None:
    events = [
        {
            "result": {
                "task": {
                    "id": "t",
                    "contextId": "c",
                    "status": {"state": "TASK_STATE_SUBMITTED"},
                    "history": [user_message(contextId="c", taskId="t")],
                }
            },
            "id": "r-1",
            "jsonrpc": "2.0",
        },
        {
            "result": {"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}}},
            "id": "r-1",
            "jsonrpc": "2.0",
        },
        {
            "result": {
                "artifactUpdate": {
                    "taskId": "t",
                    "contextId": "c",
                    "artifact": {
                        "artifactId": "a-1",
                        "name": "booking",
                        "parts": [{"data": {"seats": 2.0}}],
                        "metadata": {EXT: envelope()},
                        "extensions": [EXT],
                    },
                }
            },
            "id": "r-1",
            "jsonrpc": "2.0",
        },
        {
            "result": {
                "statusUpdate": {
                    "taskId": "t",
                    "contextId": "c",
                    "status": {"state": "TASK_STATE_COMPLETED", "message": agent_message("m-done", "Done")},
                }
            },
            "id": "r-1",
            "jsonrpc": "2.0",
        },
    ]
    flow = a2a_flow(
        body=jsonrpc_request("SendStreamingMessage"),
        response=sse_body(*events),
        content_type="text/event-stream; charset=utf-8",
    )
    out = run(flow)
    ex = out.exchange
    assert (ex["streamed"], ex["sse_events"], ex["task_state"], ex["task_id"], ex["replies"]) == (
        True,
        4,
        "TASK_STATE_COMPLETED",
        "t",
        1,
    )
    resp = [m for m in out.messages if m["direction"] == "response"]
    assert [(m["event_index"], m["object_kind"], m["event_kind"]) for m in resp] == [
        (0, "message", "task"),
        (2, "artifact", "artifactUpdate"),
        (3, "message", "statusUpdate"),
    ]
    art = resp[1]
    assert (art["message_id"], art["artifact_name"], art["role"], art["part_kinds"], art["has_envelope"]) == (
        "a-1",
        "booking",
        None,
        ["data"],
        True,
    )
    assert resp[2]["task_id"] == "t"  # inherited from the status update
    assert ex["anomalies"] == []


def test_rest_sse_bare_stream_responses() -> None:
    flow = a2a_flow(
        path="/message:stream",
        body=json.dumps({"message": user_message()}).encode(),
        response=sse_body({"message": agent_message()}),
        content_type="text/event-stream",
    )
    out = run(flow)
    assert (out.exchange["binding"], out.exchange["sse_events"], len(replies(out))) == ("rest", 1, 1)


def test_error_event_mid_stream() -> None:
    body = sse_body({"result": {"statusUpdate": {"taskId": "t", "status": {"state": "TASK_STATE_WORKING"}}}})
    body += (
        b'event: error\r\ndata: {"error": {"code": -32603, "message": "boom"}, "id": "r-1", "jsonrpc": "2.0"}\r\n\r\n'
    )
    out = run(a2a_flow(body=jsonrpc_request("SendStreamingMessage"), response=body, content_type="text/event-stream"))
    assert (out.exchange["error_code"], out.exchange["error_message"]) == (-32603, "boom")


def test_jsonrpc_error_at_http_200() -> None:
    err = {
        "jsonrpc": "2.0",
        "id": "r-1",
        "error": {
            "code": -32001,
            "message": "Task not found",
            "data": [
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "TASK_NOT_FOUND",
                    "domain": "a2a-protocol.org",
                }
            ],
        },
    }
    out = run(a2a_flow(body=jsonrpc_request("GetTask", {"id": "nope"}), response=json.dumps(err).encode()))
    ex = out.exchange
    assert (ex["status_code"], ex["error_code"], ex["error_message"], ex["error_reason"], ex["task_id"]) == (
        200,
        -32001,
        "Task not found",
        "TASK_NOT_FOUND",
        "nope",
    )


def test_rest_error_status() -> None:
    err = {
        "error": {
            "code": 404,
            "status": "NOT_FOUND",
            "message": "Task not found",
            "details": [
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "TASK_NOT_FOUND",
                    "domain": "a2a-protocol.org",
                }
            ],
        }
    }
    out = run(a2a_flow(method="GET", path="/tasks/x", status=404, response=json.dumps(err).encode()))
    ex = out.exchange
    assert (ex["method"], ex["error_code"], ex["error_status"], ex["error_reason"]) == (
        "GetTask",
        404,
        "NOT_FOUND",
        "TASK_NOT_FOUND",
    )


def test_streaming_call_answered_with_plain_json() -> None:
    err = {"jsonrpc": "2.0", "id": "r-1", "error": {"code": -32009, "message": "version"}}
    out = run(a2a_flow(body=jsonrpc_request("SendStreamingMessage"), response=json.dumps(err).encode()))
    assert (out.exchange["streamed"], out.exchange["error_code"]) == (False, -32009)


def test_unknown_enums_are_kept_verbatim_and_noted() -> None:
    env = envelope(author="robot", answerCoverage={"availability": "assessed", "coverage": "mostly", "reason": "vibes"})
    out = run(a2a_flow(response=jsonrpc_result({"message": agent_message(env=env)})))
    r = replies(out)[0]
    assert (r["author"], r["coverage"], r["coverage_reason"]) == ("robot", "mostly", "vibes")
    assert r["anomalies"] == [
        "unknown_enum:author=robot",
        "unknown_enum:answerCoverage.coverage=mostly",
        "unknown_enum:answerCoverage.reason=vibes",
    ]


def test_wrong_types_become_anomalies_not_crashes() -> None:
    env = {
        "author": 3,
        "answerCoverage": "yes",
        "ownership": {"state": "ai_owned", "suppressed": "false"},
        "routine": {"name": "r", "status": "active", "pendingInput": [{"key": "k", "required": True}, "x"]},
        "citations": {"documentId": "d"},
    }
    r = replies(run(a2a_flow(response=jsonrpc_result({"message": agent_message(env=env)}))))[0]
    assert r["ownership_suppressed"] is False
    assert r["pending_required_open"] == 1
    assert set(r["anomalies"]) == {
        "wrong_type:author=int",
        "wrong_type:answerCoverage=str",
        "wrong_type:ownership.suppressed=str",
        "wrong_type:routine.pendingInput[]=str",
        "wrong_type:citations=dict",
    }


@pytest.mark.parametrize(
    ("status", "required", "flagged"),
    [
        ("waiting_for_input", True, False),
        ("active", True, False),  # the spec lists open slots under any status
        ("waiting_for_approval", True, False),
        ("abandoned", True, False),  # the slot it was abandoned at: the report's abandoned-at figure
        ("completed", False, False),
        ("completed", True, True),  # a completed routine cannot still wait for required input
    ],
)
def test_open_slots_are_an_anomaly_only_for_a_completed_routine(status: str, required: bool, flagged: bool) -> None:
    env = {"routine": {"name": "r", "status": status, "pendingInput": [{"key": "k", "required": required}]}}
    r = replies(run(a2a_flow(response=jsonrpc_result({"message": agent_message(env=env)}))))[0]
    assert ("pending_input_not_waiting:completed" in r["anomalies"]) is flagged, r["anomalies"]
    assert not [a for a in r["anomalies"] if a.startswith("pending_input_not_waiting:") and not flagged]


def test_envelope_not_an_object() -> None:
    r = replies(run(a2a_flow(response=jsonrpc_result({"message": agent_message(env=["x"])}))))[0]
    assert (r["has_envelope"], r["author"], r["anomalies"]) == (True, None, ["envelope_not_object:list"])


def test_conformance_requested_but_missing_and_present_unrequested() -> None:
    out = run(a2a_flow(response=jsonrpc_result({"message": agent_message(env=None)})))
    assert out.exchange["anomalies"] == ["converse_requested_no_envelope"]
    assert replies(out)[0]["anomalies"] == ["envelope_missing"]
    out = run(a2a_flow(extensions=False, response=jsonrpc_result({"message": agent_message()})))
    assert out.exchange["anomalies"] == ["envelope_not_requested"]


def test_metadata_keyed_by_uri_without_uri_in_extensions() -> None:
    msg = agent_message()
    del msg["extensions"]
    assert replies(run(a2a_flow(response=jsonrpc_result({"message": msg}))))[0]["anomalies"] == [
        "envelope_uri_not_in_extensions"
    ]


def test_text_policies() -> None:
    flow = a2a_flow(response=jsonrpc_result({"message": agent_message(text="secret plan")}))
    assert replies(run(flow, TextPolicy("drop")))[0]["text"] is None
    h1 = replies(run(flow, TextPolicy("hash", b"salt-a")))[0]["text"]
    h2 = replies(run(flow, TextPolicy("hash", b"salt-b")))[0]["text"]
    assert h1.startswith("sha256:") and h1 != h2 and "secret" not in h1
    assert replies(run(flow, TextPolicy("hash", b"salt-a")))[0]["text_length"] == len("secret plan")


def test_gzip_response_is_decoded() -> None:
    flow = a2a_flow(
        response=gzip.compress(jsonrpc_result({"message": agent_message()})),
        response_headers={"content-encoding": "gzip"},
    )
    assert len(replies(run(flow))) == 1


def test_agent_card_v1_with_converse_declaration() -> None:
    card = {
        "name": "Support",
        "version": "1.2",
        "supportedInterfaces": [
            {
                "url": "http://agent.test:9000/a2a/ag_7Qb3nT1xK9wZs2Pv0Lm4Rd",
                "protocolBinding": "JSONRPC",
                "protocolVersion": "1.0",
            }
        ],
        "capabilities": {
            "extensions": [
                {
                    "uri": EXT,
                    "required": False,
                    "params": {
                        "mcp": {
                            "url": "https://mcp.test/mcp/a/ag_1",
                            "serverCardUrl": "https://mcp.test/mcp/a/ag_1/server-card",
                        },
                        "tools": [
                            {
                                "toolName": "book_table",
                                "description": "Book",
                                "inputSchema": {"type": "object", "required": ["date", "partySize"]},
                            },
                            {"toolName": "ghost"},
                        ],
                    },
                }
            ]
        },
        "skills": [{"id": "book_table"}, {"id": "ask_agent"}],
    }
    out = run(a2a_flow(method="GET", path="/.well-known/agent-card.json", response=json.dumps(card).encode()))
    (c,) = out.agent_cards
    assert (c["name"], c["converse_declared"], c["converse_required"], c["mcp_url"]) == (
        "Support",
        True,
        False,
        "https://mcp.test/mcp/a/ag_1",
    )
    assert [t["tool_name"] for t in c["tools"]] == ["book_table", "ghost"]
    assert c["tools"][0]["required_fields"] == ["date", "partySize"]
    assert (c["tools_match_skills"], c["unmatched_tools"], c["anomalies"]) == (
        False,
        ["ghost"],
        ["card_tool_schema_missing:ghost", "card_tool_without_skill:ghost"],
    )
    assert c["interfaces"][0]["binding"] == "JSONRPC"


def test_agent_card_v03_shape_and_extended_card_over_jsonrpc() -> None:
    card = {
        "name": "Old",
        "url": "http://agent.test:9000/a2a",
        "preferredTransport": "JSONRPC",
        "protocolVersion": "0.3.0",
        "additionalInterfaces": [{"url": "http://agent.test:9000/rest", "transport": "HTTP+JSON"}],
        "capabilities": {},
        "skills": [],
    }
    out = run(a2a_flow(body=jsonrpc_request("agent/getAuthenticatedExtendedCard", {}), response=jsonrpc_result(card)))
    (c,) = out.agent_cards
    assert (c["source"], c["converse_declared"], [i["binding"] for i in c["interfaces"]]) == (
        "extended",
        False,
        ["JSONRPC", "HTTP+JSON"],
    )


def test_list_tasks_sightings() -> None:
    tasks = {
        "tasks": [
            {
                "id": f"t{i}",
                "contextId": "c",
                "status": {"state": "TASK_STATE_COMPLETED", "message": agent_message(f"m{i}")},
            }
            for i in range(3)
        ]
    }
    out = run(a2a_flow(method="GET", path="/tasks", response=json.dumps(tasks).encode()))
    assert [m["message_id"] for m in out.messages] == ["m0", "m1", "m2"]
    assert [m["task_id"] for m in out.messages] == ["t0", "t1", "t2"]


def test_generic_path_without_a2a_shape_is_not_recorded() -> None:
    flow = a2a_flow(
        method="GET",
        path="/todo/tasks/1",
        extensions=False,
        headers={"a2a-version": ""},
        response=b'{"title": "buy milk"}',
    )
    assert extract(exchange_from_flow(flow), TextPolicy()) is None


def test_credentials_in_url_are_redacted() -> None:
    flow = a2a_flow(
        path="/a2a?api_key=SEKRIT&tenant=t1&access_token=TOK",
        response=jsonrpc_result({"message": agent_message()}),
    )
    url = run(flow).exchange["url"]
    assert "SEKRIT" not in url and "TOK" not in url and "tenant=t1" in url


def test_no_response_and_connection_error() -> None:
    out = run(a2a_flow(response=None, err=True))
    assert (out.exchange["complete"], out.exchange["status_code"], out.exchange["error"]) == (
        False,
        None,
        "error",
    )


def test_agent_id_from_url() -> None:
    assert agent_of("https://api.radioso.ai/a2a/ag_7Qb3nT1xK9wZs2Pv0Lm4Rd") == (
        "ag_7Qb3nT1xK9wZs2Pv0Lm4Rd",
        "ag_7Qb3nT1xK9wZs2Pv0Lm4Rd",
    )
    assert agent_of("http://127.0.0.1:9/a2a/jsonrpc") == ("127.0.0.1:9/a2a/jsonrpc", None)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
    max_leaves=20,
)


@settings(max_examples=200)
@given(env=json_values, result=json_values)
def test_arbitrary_json_never_raises(env: Any, result: Any) -> None:
    msg = agent_message(env=env)
    for doc in ({"message": msg}, result, {"task": result}, {"statusUpdate": result}):
        extract(exchange_from_flow(a2a_flow(response=jsonrpc_result(doc))), TextPolicy())


@given(body=st.binary(max_size=300))
def test_arbitrary_bytes_never_raise(body: bytes) -> None:
    for ct in ("application/json", "text/event-stream"):
        out = extract(exchange_from_flow(a2a_flow(response=body, content_type=ct)), TextPolicy())
        assert out is not None  # a JSON-RPC call to a known method is recorded whatever comes back


def test_deeply_nested_json_is_an_anomaly() -> None:
    body = b'{"jsonrpc":"2.0","id":"r-1","result":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    out = run(a2a_flow(response=body))
    assert out.exchange["anomalies"] == ["json_too_deep"]


def test_message_rows_per_exchange_are_bounded() -> None:
    """Every object in a task's history is a message row (some forty columns): a body of `{},{},…` made three
    bytes of JSON into a row, so a 16 MiB response was 5.6 million rows, gigabytes in the worker. Past
    MAX_SIGHTINGS an exchange's further messages and artifacts are counted, not recorded."""
    from converse_tap.a2a.objects import MAX_SIGHTINGS

    n = MAX_SIGHTINGS + 5_000
    history = b",".join([b"{}"] * n)
    artifacts = b",".join([b'{"artifactId": "a"}'] * 10)
    body = b'{"jsonrpc": "2.0", "id": "r-1", "result": {"task": {"id": "t", "status": {"state": "TASK_STATE_COMPLETED"}'
    body += b', "history": [' + history + b'], "artifacts": [' + artifacts + b"]}}}"
    ext = extract(exchange_from_flow(a2a_flow(response=body)), TextPolicy())
    assert ext is not None
    assert len(ext.messages) == MAX_SIGHTINGS + 1  # the request's message, and the first of the response's
    assert ext.exchange["messages"] == MAX_SIGHTINGS + 1
    assert f"messages_not_recorded_past:{MAX_SIGHTINGS}:{n - MAX_SIGHTINGS + 10}" in ext.exchange["anomalies"]
    assert ext.exchange["task_state"] == "TASK_STATE_COMPLETED"


def test_a_body_of_too_many_values_is_an_anomaly_and_the_exchange_is_recorded() -> None:
    from converse_tap.a2a.fastjson import MAX_VALUES

    flood = b",".join([b"{}"] * (MAX_VALUES // 2 + 1))
    body = b'{"jsonrpc":"2.0","id":"r-1","result":{"task":{"id":"t","history":[' + flood + b"]}}}"
    out = run(a2a_flow(response=body))
    assert out.exchange["anomalies"] == [f"json_too_many_values:{MAX_VALUES}"]
    assert out.exchange["method"] == "SendMessage"
    assert [m["role"] for m in out.messages] == ["user"]  # the request's message is still a row


def test_a_call_nested_too_deep_is_recorded_with_its_reply() -> None:
    deep = b'{"jsonrpc": "2.0", "id": "r-1", "method": "SendMessage", "params": '
    deep += b"[" * 100_000 + b"]" * 100_000 + b"}"
    reply = jsonrpc_result(agent_message("a2", "ok", envelope()))
    out = run(a2a_flow(body=deep, response=reply))
    assert out.exchange["anomalies"] == ["request_not_parsed:json_too_deep"]  # not also request_without_message
    assert out.exchange["method"] == "SendMessage"
    assert [m["role"] for m in out.messages] == ["agent"]


@pytest.mark.parametrize("body", [b"garbage, no framing", b"<html>oops</html>\n\n", b": keep-alive\n\n", b""])
def test_a_stream_of_no_events_is_not_a_silent_success(body: bytes) -> None:
    flow = a2a_flow(body=jsonrpc_request("SendStreamingMessage"), response=body, content_type="text/event-stream")
    row = run(flow).exchange
    assert (row["sse_events"], row["anomalies"]) == (0, ["sse_no_events"])


def test_a_stream_whose_events_are_explained_gets_no_second_anomaly() -> None:
    flow = a2a_flow(
        body=jsonrpc_request("SendStreamingMessage"), response=b"", content_type="text/event-stream", status=503
    )
    assert "sse_no_events" not in run(flow).exchange["anomalies"]  # an error status says it


def test_an_empty_card_and_a_huge_unknown_method_are_noted_in_a_few_characters() -> None:
    card = run(a2a_flow(method="GET", path="/.well-known/agent-card.json", response=b"\n"))
    assert (card.exchange["anomalies"], card.agent_cards) == (["empty_body"], [])  # it said nothing, silently
    out = run(a2a_flow(body=jsonrpc_request("m" * 1_000_000, {}), response=jsonrpc_result({})))
    assert out.exchange["anomalies"][0] == "unknown_method:" + "m" * 100 + f"…+{1_000_000 - 100}"
    body = json.dumps({"jsonrpc": ["x"] * 100_000, "id": 1, "method": "SendMessage", "params": {}}).encode()
    assert len(run(a2a_flow(body=body, response=jsonrpc_result({}))).exchange["anomalies"][0]) < 200


def _task_reply(task_id: str, history: int, method: str = "SendMessage", path: str = "/a2a") -> Extraction:
    task = {
        "id": task_id,
        "contextId": "c1",
        "status": {"state": "completed"},
        "history": [{"role": "agent", "messageId": f"m{i}", "parts": [{"text": "hi"}]} for i in range(history)],
    }
    return run(
        a2a_flow(path=path, body=jsonrpc_request(method, {"message": user_message()}), response=jsonrpc_result(task))
    )


def test_a_long_value_every_row_repeats_is_stored_bounded_and_still_distinct() -> None:
    """A 1 MB task id in a task of 1,000 history messages was 1 GB of rows (every sighting inherits it), an agent
    path of 1 MB 2 GB: such a value is stored as its beginning and the SHA-256 of the whole, in every row alike."""
    from converse_tap.a2a.rows import MAX_KEY

    long_id = "t" * 1_000_000
    out = _task_reply(long_id, 1000)
    stored = {m["task_id"] for m in out.messages if m["direction"] == "response"}
    assert len(stored) == 1 and out.exchange["task_id"] in stored  # one value: the joins hold
    (value,) = stored
    assert len(value) == MAX_KEY and value.startswith("t" * 900) and "sha256:" in value
    assert "value_clipped:task_id" in out.exchange["anomalies"]
    assert all("value_clipped:task_id" in m["anomalies"] for m in out.messages if m["direction"] == "response")
    other = _task_reply(long_id[:-1] + "u", 1)  # the same beginning, another id
    assert other.exchange["task_id"] != value and len(other.exchange["task_id"]) == MAX_KEY
    assert _task_reply("t" * MAX_KEY, 1).exchange["task_id"] == "t" * MAX_KEY  # at the bound: kept whole

    out = _task_reply("t1", 1000, path="/a2a/" + "p" * 1_000_000)
    urls = {len(m["agent_url"]) for m in out.messages} | {len(m["agent"]) for m in out.messages}
    assert urls == {MAX_KEY} and len(out.exchange["agent_url"]) == MAX_KEY


def test_a_long_unknown_method_is_redacted_once_not_once_per_row() -> None:
    """A 1 MB unknown method (A2A headers) in a reply of 1,000 sightings was redacted as free text in each row:
    40 s of the worker's CPU for one request."""
    from tests.children import finishes_within

    code = """
import json
from converse_tap.a2a.extract import extract
from converse_tap.a2a.redact import TextPolicy
from converse_tap.addon.flows import exchange_from_flow
from tests.factories import a2a_flow, jsonrpc_request, jsonrpc_result, user_message
task = {"id": "t1", "contextId": "c1", "status": {"state": "completed"},
        "history": [{"role": "agent", "messageId": f"m{i}", "parts": [{"text": "hi"}]} for i in range(1000)]}
flow = a2a_flow(body=jsonrpc_request("x" * 1_000_000, {"message": user_message()}), response=jsonrpc_result(task))
out = extract(exchange_from_flow(flow), TextPolicy())
assert len(out.messages) >= 1000 and {len(m["method"]) for m in out.messages} == {1024}
print("done")
"""
    finishes_within(code, 15, "a 1 MB method in 1,000 rows")


def test_a_jsonrpc_call_met_with_no_content_is_noted_and_a_notification_is_not() -> None:
    """A JSON-RPC call with an id must be answered with a response object: 204 No Content to it was recorded as a
    plain success, without an anomaly. A notification (no id) has no answer: 204 is its right reply."""
    call = run(a2a_flow(body=jsonrpc_request("SendMessage"), response=b"", status=204)).exchange
    assert (call["status_code"], call["anomalies"]) == (204, ["empty_body"])
    note = json.dumps({"jsonrpc": "2.0", "method": "SendMessage", "params": {"message": user_message()}}).encode()
    notified = run(a2a_flow(body=note, response=b"", status=204)).exchange
    assert (notified["status_code"], notified["anomalies"]) == (204, [])
    rest = run(a2a_flow(method="DELETE", path="/v1/tasks/t-1/pushNotificationConfigs/c-1", response=b"", status=204))
    assert "empty_body" not in rest.exchange["anomalies"]  # an HTTP+JSON delete says nothing, rightly
