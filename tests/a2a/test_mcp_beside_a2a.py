"""MCP's tasks (2025-11-25) call `tasks/get`, `tasks/list` and `tasks/cancel`, names A2A v0.3 uses too; the
converse card names each agent's MCP endpoint, so MCP calls cross the same proxy. An MCP call (MCP's transport
header, no A2A header, MCP's params) is not recorded as A2A; a header alone decides nothing, or an A2A call could
carry one and go unrecorded."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mitmproxy import http
from mitmproxy.test import tflow, tutils

from converse_tap.a2a.classify import classify
from converse_tap.a2a.extract import extract
from converse_tap.a2a.firstlook import maybe_a2a
from converse_tap.a2a.headers import Headers
from converse_tap.a2a.redact import TextPolicy
from converse_tap.addon.flows import exchange_from_flow
from converse_tap.store.reader import load

MCP = {"content-type": "application/json", "mcp-protocol-version": "2025-11-25", "mcp-session-id": "s-1"}


def _call(method: str, params: Any) -> bytes:
    doc: dict[str, Any] = {"jsonrpc": "2.0", "id": 7, "method": method}
    if params is not None:
        doc["params"] = params
    return json.dumps(doc).encode()


def _classify(method: str, params: Any, headers: dict[str, str]) -> Any:
    return classify("POST", "http://agent.test:9000/mcp", Headers(list(headers.items())), _call(method, params))


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("tasks/get", {"taskId": "786512e2"}),
        ("tasks/cancel", {"taskId": "786512e2", "_meta": {"progressToken": 1}}),
        ("tasks/list", None),
        ("tasks/list", {"cursor": "eyJwYWdlIjogM30="}),
    ],
)
def test_mcps_own_task_calls_are_not_recorded(method: str, params: Any) -> None:
    assert _classify(method, params, MCP) is None
    one_header = {k: v for k, v in MCP.items() if k != "mcp-session-id"}  # either of MCP's headers says it
    assert _classify(method, params, one_header) is None


@pytest.mark.parametrize(
    ("method", "params", "headers", "why"),
    [
        ("tasks/get", {"id": "t-1"}, MCP, "A2A's params: an A2A call that carries an MCP header is still recorded"),
        ("tasks/get", {"id": "t-1", "taskId": "t-1"}, MCP, "an `id` as A2A needs it"),
        ("tasks/list", {"contextId": "c-1", "pageSize": 5}, MCP, "A2A's list params"),
        ("tasks/get", {"taskId": "t-1"}, {**MCP, "a2a-version": "0.3"}, "an A2A header"),
        ("tasks/get", {"taskId": "t-1"}, {"content-type": "application/json"}, "no MCP header: nothing says MCP"),
        ("tasks/cancel", ["t-1"], MCP, "params of neither protocol"),
    ],
)
def test_a_call_that_may_be_a2a_is_recorded(method: str, params: Any, headers: dict[str, str], why: str) -> None:
    req = _classify(method, params, headers)
    assert req is not None, why
    assert req.binding == "jsonrpc" and req.dialect == "v0.3"
    assert maybe_a2a("POST", "/mcp", Headers(list(headers.items())), _call(method, params)), why  # (sent on)


def _flow(body: bytes, reply: dict[str, Any]) -> http.HTTPFlow:
    req = tutils.treq(
        method=b"POST",
        scheme=b"http",
        host="agent.test",
        port=9000,
        path=b"/mcp",
        headers=_wire_headers(MCP),
        content=body,
    )
    resp = tutils.tresp(headers=http.Headers(content_type="application/json"), content=json.dumps(reply).encode())
    return tflow.tflow(req=req, resp=resp)


def test_an_mcp_task_poll_leaves_no_row_while_the_a2a_call_beside_it_does() -> None:
    mcp_reply = {"jsonrpc": "2.0", "id": 7, "result": {"taskId": "786512e2", "status": "working", "ttl": 60000}}
    poll = _flow(_call("tasks/get", {"taskId": "786512e2"}), mcp_reply)
    assert not maybe_a2a("POST", "/mcp", poll.request.headers, poll.request.raw_content)  # left to mitmproxy
    assert extract(exchange_from_flow(poll), TextPolicy()) is None

    task = {"kind": "task", "id": "t-1", "contextId": "c-1", "status": {"state": "working"}}
    a2a = _flow(_call("tasks/get", {"id": "t-1"}), {"jsonrpc": "2.0", "id": 7, "result": task})
    out = extract(exchange_from_flow(a2a), TextPolicy())
    assert out is not None
    assert out.exchange["method"] == "GetTask" and out.exchange["task_state"] == "TASK_STATE_WORKING"


# As the official MCP Python SDK (mcp 2.3.0, Streamable HTTP) sends them after initialising, byte for byte
# (tests/integration/test_mcp_live.py); its server answers each with SSE (`event: message`) or JSON
SDK_HEADERS = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
    "mcp-session-id": "909c5ddad7ff4c08a215f4d145145910",
    "mcp-protocol-version": "2025-11-25",
}
SDK_CALLS = [
    b'{"jsonrpc":"2.0","id":6,"method":"tasks/get","params":{"taskId":"t-3"}}',
    b'{"jsonrpc":"2.0","id":7,"method":"tasks/list"}',
    b'{"jsonrpc":"2.0","id":9,"method":"tasks/cancel","params":{"taskId":"t-3"}}',
]


def _wire_headers(headers: dict[str, str]) -> http.Headers:
    return http.Headers([(k.encode(), v.encode()) for k, v in headers.items()])


@pytest.mark.parametrize("body", SDK_CALLS, ids=["get", "list", "cancel"])
def test_the_sdks_task_calls_keep_mitmproxys_own_handling_of_their_sse_reply(tap: Any, body: bytes) -> None:
    """The first look refuses MCP's own tasks/* call (as `classify` does), so its SSE reply is not streamed by the
    addon and mitmproxy keeps its body (the flow file `-w` writes holds it); no row. The same call with A2A's
    params, or an A2A header, beside MCP's headers is sent on and recorded."""
    addon, _, out = tap
    headers = _wire_headers(SDK_HEADERS)
    assert not maybe_a2a("POST", "/sse/mcp", headers, body)
    reply = b'event: message\r\ndata: {"jsonrpc":"2.0","id":6,"result":{"taskId":"t-3","status":"working"}}\r\n\r\n'
    req = tutils.treq(method=b"POST", host="127.0.0.1", port=9000, path=b"/sse/mcp", headers=headers, content=body)
    resp = tutils.tresp(headers=http.Headers(content_type="text/event-stream"), content=reply)
    flow = tflow.tflow(req=req, resp=resp)
    addon.request(flow)
    addon.responseheaders(flow)
    addon.response(flow)
    assert flow.response is not None and flow.response.stream is False and flow.response.content == reply
    a2a_params = (
        body.replace(b'"taskId"', b'"id"') if b"taskId" in body else body.replace(b"}", b',"params":{"pageSize":5}}')
    )
    assert maybe_a2a("POST", "/sse/mcp", headers, a2a_params)
    with_a2a_header = _wire_headers({**SDK_HEADERS, "a2a-version": "0.3"})
    assert maybe_a2a("POST", "/sse/mcp", with_a2a_header, body)
    addon.done()
    assert load(out, "exchanges").empty


@pytest.mark.parametrize(
    "body",
    [
        b'[{"jsonrpc":"2.0","id":6,"method":"tasks/get","params":{"taskId":"t-3"}}]',  # a batch: sent on
        b'{"jsonrpc":"2.0","id":6,"method":"tasks/get","params":{"taskId":"t-3"},"params":{"id":"t-3"}}',
        b'{"jsonrpc":"2.0","id":6,"method":"tasks/get","params":{"taskId":"t-3"}',  # no parser takes it
        b'{"jsonrpc":"2.0","id":6,"method":"tasks/get","params":{"taskId":"t-3","id":"t-3"}}',
    ],
)
def test_the_first_look_sends_on_what_it_cannot_say_is_mcps(body: bytes) -> None:
    """Only a body parsed as `classify` parses it, and read as MCP's own call, is refused: a batch, repeated
    `params` (the last is read: A2A's `id`), a body no parser takes, both `taskId` and `id` go on to the worker."""
    headers = Headers(list(SDK_HEADERS.items()))
    assert maybe_a2a("POST", "/mcp", headers, body)
    req = classify("POST", "http://127.0.0.1:9000/mcp", headers, body)
    if body.startswith(b"{") and b'"id":"t-3"' in body:
        assert req is not None and req.method == "GetTask"
