"""MCP beside A2A through a real mitmdump with the addon: the converse card names each agent's MCP endpoint, so
MCP's traffic crosses the same proxy. The official MCP Python SDK (mcp 2.3.0): its server over Streamable HTTP in
its own process (tests/integration/mcp_server.py, one endpoint answering JSON, one answering SSE), driven by its own
client: initialize, tools/list, tools/call, and MCP 2025-11-25's tasks/get, tasks/list, tasks/result and
tasks/cancel, three of them names A2A v0.3 uses too. In the same proxy session the a2a-sdk client books a table
with the demo agent.

The MCP client gets what it gets without the proxy; no MCP call leaves a row; the A2A conversation is recorded as
it always is; and the flow file mitmdump writes (`-w`) holds every MCP reply with its body: the first look leaves
MCP's calls to mitmproxy, its SSE replies included (docs/operations.md)."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import httpx2
import mcp_types as types
import pandas as pd
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.client.card_resolver import A2ACardResolver
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mitmproxy import io as mitmio
from mitmproxy.http import HTTPFlow

from converse_tap.store.reader import load
from tests.integration.procs import Proc, demo_agent, mitmdump
from tests.integration.script import book_a_table

pytestmark = pytest.mark.integration

READY = re.compile(r"^READY (http://127\.0\.0\.1:\d+)$")
ENDPOINTS = ("json", "sse")  # the server's replies: application/json, text/event-stream
# the JSON-RPC methods the client sends, in order (notifications/initialized has no id, and no reply body)
CALLS = [
    "initialize",
    "tools/list",
    "tools/call",
    "tools/call",
    "tools/call",
    "tasks/get",
    "tasks/list",
    "tasks/result",
    "tasks/cancel",
]


async def _mcp(url: str, proxy: str | None) -> list[Any]:
    """What the SDK's client received for each call of CALLS, as JSON."""
    got: list[Any] = []
    async with (
        httpx2.AsyncClient(proxy=proxy, timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        got.append(await session.initialize())
        got.append(await session.list_tools())
        got.append(await session.call_tool("add", {"a": 2, "b": 3}))
        got.append(await session.call_tool("echo", {"text": "a table for 4"}))
        booked = await session.call_tool("book", {"party": 4})
        got.append(booked)
        assert isinstance(booked.content[0], types.TextContent)
        task_id = booked.content[0].text
        get = types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task_id))
        got.append(await session.send_request(get, types.GetTaskResult))
        got.append(await session.send_request(types.ListTasksRequest(), types.ListTasksResult))
        result = types.GetTaskPayloadRequest(params=types.GetTaskPayloadRequestParams(task_id=task_id))
        got.append(await session.send_request(result, types.CallToolResult))
        cancel = types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task_id))
        got.append(await session.send_request(cancel, types.CancelTaskResult))
    return [g.model_dump(mode="json") for g in got]


async def _a2a(agent: str, proxy: str) -> list[str]:
    """The a2a-sdk client books a table (JSON-RPC, unary); the reply texts it saw."""
    async with httpx.AsyncClient(proxy=proxy, timeout=30) as http:
        card = await A2ACardResolver(http, f"{agent}/agents/ag_trattoria01").get_agent_card()
        keep = [i for i in card.supported_interfaces if i.protocol_version == "1.0" and i.protocol_binding == "JSONRPC"]
        del card.supported_interfaces[:]
        card.supported_interfaces.extend(keep)
        config = ClientConfig(httpx_client=http, streaming=False, supported_protocol_bindings=["JSONRPC"])
        client = ClientFactory(config).create(card)
        texts = await book_a_table(client)
        await client.close()
    return texts


@dataclass
class Run:
    direct: dict[str, list[Any]]  # what the MCP client received without the proxy, by endpoint
    proxied: dict[str, list[Any]]  # and through it
    texts: list[str]  # the A2A replies the a2a-sdk client saw
    mcp_base: str
    exchanges: pd.DataFrame
    messages: pd.DataFrame
    flows: list[HTTPFlow]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    tmp = tmp_path_factory.mktemp("mcp")
    out, flow_file = tmp / "data", tmp / "flows.mitm"
    server = Proc([sys.executable, "-m", "tests.integration.mcp_server"])
    try:
        base = server.wait_for(READY).group(1)
        direct = {e: asyncio.run(_mcp(f"{base}/{e}/mcp", None)) for e in ENDPOINTS}
        with demo_agent() as agent, mitmdump(out, "-w", str(flow_file)) as (proxy, proc):
            proxied = {e: asyncio.run(_mcp(f"{base}/{e}/mcp", proxy)) for e in ENDPOINTS}
            texts = asyncio.run(_a2a(agent, proxy))
        assert proc.popen.returncode == 0, proc.output
    finally:
        server.stop(signal.SIGTERM)
    with flow_file.open("rb") as f:
        flows = [fl for fl in mitmio.FlowReader(f).stream() if isinstance(fl, HTTPFlow)]
    yield Run(direct, proxied, texts, base, load(out, "exchanges"), load(out, "messages"), flows)


def test_the_mcp_client_gets_what_it_gets_without_the_proxy(run: Run) -> None:
    for endpoint in ENDPOINTS:
        assert len(run.proxied[endpoint]) == len(CALLS)
        assert run.proxied[endpoint] == run.direct[endpoint], endpoint
    tasks = run.proxied["sse"][CALLS.index("tasks/list")]["tasks"]
    assert [(t["task_id"], t["status"]) for t in tasks] == [("t-1", "working")]
    assert run.proxied["sse"][CALLS.index("tasks/cancel")]["status"] == "cancelled"


def test_no_mcp_call_leaves_a_row_and_the_a2a_conversation_is_recorded(run: Run) -> None:
    assert run.texts[-1].startswith("There is no private parking")
    ex = run.exchanges
    assert not ex["url"].fillna("").str.startswith(run.mcp_base).any()
    assert not ex["agent_url"].str.startswith(run.mcp_base).any()
    assert not run.messages["agent_url"].str.startswith(run.mcp_base).any()
    calls = ex[ex["binding"] != "card"].sort_values("ts_start")
    assert calls["method"].tolist() == ["SendMessage"] * 3 + ["GetTask", "SendMessage"]
    assert set(calls["binding"]) == {"jsonrpc"} and set(calls["agent_id"]) == {"ag_trattoria01"}
    assert calls["complete"].all() and not calls["anomalies"].apply(len).any()
    assert calls["task_state"].tolist()[:3] == ["TASK_STATE_INPUT_REQUIRED"] * 2 + ["TASK_STATE_COMPLETED"]
    assert set(run.messages["exchange_id"]) <= set(ex["exchange_id"]) and not run.messages.empty


def _reply(flow: HTTPFlow) -> Any:
    """The JSON-RPC reply a flow's saved response holds: its JSON body, or the one `data:` line of its SSE."""
    assert flow.response is not None
    body = flow.response.content or b""
    if flow.response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:] for line in body.splitlines() if line.startswith(b"data:")]
        assert len(data) == 1, body
        body = data[0]
    return json.loads(body)


def test_mitmdumps_flow_file_holds_every_mcp_reply_with_its_body(run: Run) -> None:
    for endpoint in ENDPOINTS:
        path = f"/{endpoint}/mcp"
        posts = [f for f in run.flows if f.request.path == path and f.request.method == "POST"]
        sent = [json.loads(f.request.content or b"") for f in posts]
        assert [s["method"] for s in sent if "id" in s] == CALLS, endpoint
        for flow, call in zip(posts, sent, strict=True):
            if "id" not in call:  # notifications/initialized: 202, no body
                assert flow.response is not None and flow.response.status_code == 202
                continue
            want = "text/event-stream" if endpoint == "sse" else "application/json"
            assert flow.response is not None and flow.response.headers["content-type"] == want
            reply = _reply(flow)
            assert reply["id"] == call["id"] and "result" in reply, (endpoint, call["method"])
        shared = [f for f, s in zip(posts, sent, strict=True) if s["method"] in ("tasks/get", "tasks/cancel")]
        assert [_reply(f)["result"]["taskId"] for f in shared] == ["t-1", "t-1"]
        assert all(f.request.headers.get("mcp-protocol-version") == "2025-11-25" for f in shared)
