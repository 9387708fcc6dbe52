"""JSON-RPC and HTTP+JSON over HTTP/2: the a2a-sdk client speaks h2 (TLS, mitmproxy's CA) to a real mitmdump."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.client.card_resolver import A2ACardResolver
from hypercorn.asyncio import serve

from converse_tap.demo.agent import build_app
from converse_tap.store.reader import load
from tests.integration.grpc_procs import proxy_options
from tests.integration.procs import mitmdump, tls_listener
from tests.integration.script import book_a_table

pytestmark = pytest.mark.integration


class H2Agent:
    """The demo agents' ASGI app on hypercorn, over TLS with a self-signed certificate: HTTP/2 by ALPN."""

    def __init__(self, tmp: Path) -> None:
        self.base, self.config = tls_listener(tmp)
        self.stop = asyncio.Event()

    async def serve(self) -> None:
        await serve(build_app(self.base), self.config, shutdown_trigger=self.stop.wait)  # type: ignore[arg-type]


async def _conversation(proxy: str, ca: Path, tmp: Path, binding: str) -> tuple[list[str], set[str]]:
    """The script through the proxy to the agent over HTTP/2; returns the replies and the HTTP versions seen."""
    agent = H2Agent(tmp)
    server = asyncio.create_task(agent.serve())
    versions: set[str] = set()

    async def seen(response: httpx.Response) -> None:
        versions.add(response.http_version)

    try:
        tls = ssl.create_default_context(cafile=str(ca))
        hooks = {"response": [seen]}
        async with httpx.AsyncClient(proxy=proxy, http2=True, verify=tls, timeout=30, event_hooks=hooks) as http:
            card = await A2ACardResolver(http, f"{agent.base}/agents/ag_trattoria01").get_agent_card()
            keep = [
                i for i in card.supported_interfaces if i.protocol_version == "1.0" and i.protocol_binding == binding
            ]
            del card.supported_interfaces[:]
            card.supported_interfaces.extend(keep)
            config = ClientConfig(httpx_client=http, streaming=True, supported_protocol_bindings=[binding])
            client = ClientFactory(config).create(card)
            try:
                texts = await book_a_table(client)
            finally:
                await client.close()
    finally:
        agent.stop.set()
        await server
    return texts, versions


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
def test_a2a_over_http2_lands_in_parquet(tmp_path: Path, binding: str) -> None:
    out, conf = tmp_path / "data", tmp_path / "conf"
    with mitmdump(out, *proxy_options(conf)) as (proxy, proc):
        texts, versions = asyncio.run(_conversation(proxy, conf / "mitmproxy-ca-cert.pem", tmp_path, binding))
    assert versions == {"HTTP/2"}  # the client spoke HTTP/2 to the proxy (which mirrors the agent's ALPN)
    assert proc.popen.returncode == 0, proc.output
    assert texts[-1].startswith("There is no private parking")
    ex = load(out, "exchanges").sort_values("ts_start")
    calls = ex[ex["binding"] != "card"]
    send = "SendStreamingMessage"
    assert calls["method"].tolist() == [send, send, send, "GetTask", send]
    assert set(ex["http_version"]) == {"HTTP/2.0"}
    assert set(calls["binding"]) == {"jsonrpc" if binding == "JSONRPC" else "rest"}
    assert calls["streamed"].tolist() == [True, True, True, False, True]
    assert calls["complete"].all() and not calls["anomalies"].apply(len).any(), calls["anomalies"].tolist()
    assert calls["converse_echoed"].all()
    assert calls["task_state"].tolist()[:3] == ["TASK_STATE_INPUT_REQUIRED"] * 2 + ["TASK_STATE_COMPLETED"]
    msgs = load(out, "messages")
    assert (msgs[(msgs["role"] == "agent")]["has_envelope"]).any()
    assert len(load(out, "agent_cards")) == 1
