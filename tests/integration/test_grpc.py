"""gRPC through a real mitmdump with the addon: the a2a-sdk's gRPC server and client, and a canned A2AService."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.client.card_resolver import A2ACardResolver

from converse_tap.a2a.constants import CONVERSE_URI
from converse_tap.analysis import Engine, build_report
from converse_tap.demo.agent import AgentServer
from converse_tap.demo.grpc_agent import GrpcAgentServer
from converse_tap.store.reader import load
from tests.integration.grpc_procs import (
    REPLY,
    REQUEST,
    SERVICE,
    STREAM,
    TASK_REQUEST,
    CannedGrpc,
    channel,
    proxy_options,
    raw_call,
)
from tests.integration.procs import mitmdump
from tests.integration.script import book_a_table

pytestmark = pytest.mark.integration


async def _conversation(proxy: str, ca: bytes, binding: str, streaming: bool, dialect: str = "1.0") -> list[str]:
    """The demo agent over HTTP (its card) and gRPC, both in this loop; the script through the proxy in `binding`."""
    grpc_agent = GrpcAgentServer()
    await grpc_agent.start()
    http_agent = AgentServer(grpc_targets={grpc_agent.agent_id: grpc_agent.target})
    await http_agent.start()
    try:
        async with httpx.AsyncClient(proxy=proxy, timeout=30) as http:
            card = await A2ACardResolver(http, f"{http_agent.base}/agents/ag_trattoria01").get_agent_card()
            keep = [
                i for i in card.supported_interfaces if i.protocol_version == dialect and i.protocol_binding == binding
            ]
            del card.supported_interfaces[:]
            card.supported_interfaces.extend(keep)
            config = ClientConfig(
                httpx_client=http,
                grpc_channel_factory=lambda target: channel(target, ca, proxy),
                streaming=streaming,
                supported_protocol_bindings=[binding],
            )
            factory = ClientFactory(config)
            if binding == "GRPC" and dialect == "0.3":
                # the SDK's factory may have lost its v0.3 gRPC transport to a circular import (a2a-sdk 1.3: it
                # depends on which a2a module was imported first, e.g. by an earlier test): name it explicitly
                from a2a.compat.v0_3.grpc_transport import CompatGrpcTransport

                factory.register("GRPC", CompatGrpcTransport.create)
            client = factory.create(card)
            try:
                return await book_a_table(client)
            finally:
                await client.close()
    finally:
        await http_agent.stop()
        await grpc_agent.stop()


def _record(tmp_path: Path, name: str, binding: str, streaming: bool, dialect: str) -> tuple[Path, list[str]]:
    out, conf = tmp_path / name, tmp_path / "conf"
    with mitmdump(out, *proxy_options(conf)) as (proxy, proc):
        ca = (conf / "mitmproxy-ca-cert.pem").read_bytes()
        texts = asyncio.run(_conversation(proxy, ca, binding, streaming, dialect))
    assert proc.popen.returncode == 0, proc.output
    return out, texts


def _comparable(report: Any, also: frozenset[str] = frozenset()) -> Any:
    """A report without what differs between two recordings of the same script: where and when."""
    if isinstance(report, dict):
        drop = {"path", "first_seen", "last_seen", "median_seconds", "mcp_url", *also}  # mcp_url: the agent's port
        return {k: _comparable(v, also) for k, v in report.items() if k not in drop}
    if isinstance(report, list):
        return [_comparable(v, also) for v in report]
    return report


@pytest.mark.parametrize("dialect", ["1.0", "0.3"])
@pytest.mark.parametrize("streaming", [False, True], ids=["unary", "streaming"])
def test_a2a_sdk_grpc_conversation_lands_in_parquet_as_over_jsonrpc(
    tmp_path: Path, streaming: bool, dialect: str
) -> None:
    out, texts = _record(tmp_path, "grpc", "GRPC", streaming, dialect)
    rpc_out, rpc_texts = _record(tmp_path, "jsonrpc", "JSONRPC", streaming, dialect)
    assert texts == rpc_texts and texts[-1].startswith("There is no private parking")

    ex = load(out, "exchanges")
    calls = ex[ex["binding"] != "card"].sort_values("ts_start")
    send = "SendStreamingMessage" if streaming else "SendMessage"
    assert calls["method"].tolist() == [send, send, send, "GetTask", send]
    assert set(calls["binding"]) == {"grpc"} and set(calls["dialect"]) == {f"v{dialect}"}
    assert set(calls["http_version"]) == {"HTTP/2.0"} and set(calls["content_type"]) == {"application/grpc"}
    package = "lf.a2a.v1" if dialect == "1.0" else "a2a.v1"
    assert calls["method_raw"].iloc[3] == f"/{package}.A2AService/GetTask"
    assert calls["streamed"].tolist() == [streaming, streaming, streaming, False, streaming]
    assert calls["converse_requested"].all() and calls["converse_echoed"].all()
    assert calls["complete"].all() and not calls["anomalies"].apply(len).any(), calls["anomalies"].tolist()
    assert calls["error_code"].isna().all()
    assert calls["task_state"].tolist()[:3] == ["TASK_STATE_INPUT_REQUIRED"] * 2 + ["TASK_STATE_COMPLETED"]
    # v1.0 requests name the agent in `tenant`; v0.3 ones have only the server's address
    agent = "ag_trattoria01" if dialect == "1.0" else calls["server_addr"].iloc[0]
    assert set(calls["agent"]) == {agent}
    if streaming:
        assert (calls[calls["method"] == send]["sse_events"] >= 1).all()
    cards = load(out, "agent_cards")
    assert len(cards) == 1 and "GRPC" in [i["binding"] for i in cards["interfaces"].iloc[0]]

    msgs, rpc_msgs = load(out, "messages"), load(rpc_out, "messages")
    assert not msgs["anomalies"].apply(len).any()
    cols = ["direction", "event_index", "event_kind", "location", "object_kind", "role", "task_state", "text"]
    cols += ["has_envelope", "routine_status", "coverage", "author"]
    seen = msgs.sort_values(["ts", "seq"])[cols].reset_index(drop=True).astype(str)
    rpc_seen = rpc_msgs.sort_values(["ts", "seq"])[cols].reset_index(drop=True).astype(str)
    for frame in (seen, rpc_seen):
        # JSON-RPC places objects in `result`, gRPC (like REST) in the body itself; v0.3 JSON tells an object's
        # kind by its `kind` member, v0.3 protobuf (like v1.0) by the wrapper it sits in
        loc = frame["location"].str.replace(r"\b(?:result|body)\.?", "", regex=True)
        wrapper = r"^(event\[\d+\]\.)?(?:task|message|statusUpdate|artifactUpdate)(?:\.|$)"
        loc = loc.str.replace(wrapper, r"\1", regex=True)
        frame["location"] = loc.str.rstrip(".")
    assert seen.to_dict("records") == rpc_seen.to_dict("records")  # the same sightings, in the same places

    # v0.3: the calls' agent (the server's address) is not the card's (its path): two agents, not one
    by, also = (("agent",), frozenset()) if dialect == "1.0" else ((), frozenset({"agents"}))
    report = build_report(Engine.over_dataset(out), by=by)
    assert report["dataset"]["replies"] >= 4 and report["dataset"]["exchanges"] == 6
    assert sorted(report["dataset"]["agents"]) == sorted({agent, "ag_trattoria01"})
    assert _comparable(report, also) == _comparable(build_report(Engine.over_dataset(rpc_out), by=by), also)


def test_grpc_bytes_are_identical_and_streams_are_relayed_message_by_message(tmp_path: Path) -> None:
    out, conf = tmp_path / "data", tmp_path / "conf"
    ext = (("a2a-extensions", CONVERSE_URI),)

    async def scenario(up: CannedGrpc, proxy: str, ca: bytes) -> None:
        direct, proxied = channel(up.target, up.cert), channel(up.target, ca, proxy)
        try:
            for method, request, kw in (
                ("SendMessage", REQUEST, {}),
                ("SendMessage", REQUEST, {"compression": grpc.Compression.Gzip}),
                ("GetTask", TASK_REQUEST, {}),
                ("CancelTask", TASK_REQUEST, {}),
                ("Frobnicate", REQUEST, {}),
            ):
                md = ext + ((("x-compress", "1"),) if kw else ())
                a = await raw_call(direct, method, request, md, **kw)
                b = await raw_call(proxied, method, request, md, **kw)
                assert a == b, method
            assert (await raw_call(proxied, "SendMessage", REQUEST, ext))[0] == REPLY

            call = proxied.unary_stream(f"/{SERVICE}/SendStreamingMessage")(REQUEST, metadata=ext)
            stream = call.__aiter__()
            # the agent holds the stream after its first message: a buffering proxy never delivers it
            first = await asyncio.wait_for(stream.__anext__(), timeout=20)
            assert first == STREAM[0] and not up.release.is_set()
            up.release.set()
            rest = [m async for m in stream]
            assert [first, *rest] == STREAM
            assert await call.code() == grpc.StatusCode.OK
        finally:
            await direct.close()
            await proxied.close()

    with CannedGrpc() as up, mitmdump(out, *proxy_options(conf)) as (proxy, proc):
        asyncio.run(scenario(up, proxy, (conf / "mitmproxy-ca-cert.pem").read_bytes()))
    assert proc.popen.returncode == 0, proc.output
    ex = load(out, "exchanges").sort_values("ts_start").set_index("method")
    assert ex.index.tolist() == [
        "SendMessage",
        "SendMessage",
        "GetTask",
        "CancelTask",
        "Frobnicate",
        "SendMessage",
        "SendStreamingMessage",
    ]
    sends = ex.loc["SendMessage"]
    assert sends["replies"].tolist() == [1, 1, 1] and sends["converse_echoed"].all()
    assert not sends["anomalies"].apply(len).any(), sends["anomalies"].tolist()
    get = ex.loc["GetTask"]
    assert (get["error_code"], get["error_status"], get["error_message"], get["error_reason"]) == (
        5,
        "NOT_FOUND",
        "Task not found",
        "TASK_NOT_FOUND",
    )
    assert get["task_id"] == "t-9" and get["complete"]
    assert "grpc_message_undecodable:DecodeError" in ex.loc["CancelTask", "anomalies"]
    assert "unknown_method:Frobnicate" in ex.loc["Frobnicate", "anomalies"]
    stream = ex.loc["SendStreamingMessage"]
    assert stream["streamed"] and stream["sse_events"] == 2 and stream["replies"] == 1 and stream["complete"]
    assert stream["task_state"] == "TASK_STATE_COMPLETED"
    msgs = load(out, "messages")
    streamed = msgs[msgs["method"] == "SendStreamingMessage"].sort_values("seq")
    assert streamed["location"].tolist() == ["request.message", "event[1].statusUpdate.status.message"]


def test_grpc_through_a_reverse_proxy(tmp_path: Path) -> None:
    out, conf = tmp_path / "data", tmp_path / "conf"

    async def call(front: str, ca: bytes) -> tuple[Any, ...]:
        chan = channel(front, ca)
        try:
            return await raw_call(chan, "SendMessage", REQUEST, (("a2a-extensions", CONVERSE_URI),))
        finally:
            await chan.close()

    with (
        CannedGrpc() as up,
        mitmdump(out, "--mode", f"reverse:https://{up.target}", *proxy_options(conf)) as (
            proxy,
            _,
        ),
    ):
        reply = asyncio.run(call(proxy.removeprefix("http://"), (conf / "mitmproxy-ca-cert.pem").read_bytes()))
    assert reply[0] == REPLY
    ex = load(out, "exchanges")
    assert ex["binding"].tolist() == ["grpc"] and ex["replies"].tolist() == [1]
    assert ex["url"].tolist() == [f"https://{up.target}/{SERVICE}/SendMessage"]


def test_live_grpc_dataset_equals_ingest_of_the_saved_flows(tmp_path: Path) -> None:
    from converse_tap.a2a.redact import TextPolicy
    from converse_tap.ingest import ingest

    live, offline, flows, conf = tmp_path / "live", tmp_path / "offline", tmp_path / "flows.mitm", tmp_path / "conf"
    ext = (("a2a-extensions", CONVERSE_URI),)

    async def calls(up: CannedGrpc, proxy: str, ca: bytes) -> None:
        chan = channel(up.target, ca, proxy)
        try:
            await raw_call(chan, "SendMessage", REQUEST, ext, compression=grpc.Compression.Gzip)
            await raw_call(chan, "GetTask", TASK_REQUEST, ext)
            up.release.set()
            stream = chan.unary_stream(f"/{SERVICE}/SendStreamingMessage")(REQUEST, metadata=ext)
            assert [m async for m in stream] == STREAM
        finally:
            await chan.close()

    opts = ("-w", str(flows), "--set", "store_streamed_bodies=true", *proxy_options(conf))
    with CannedGrpc() as up, mitmdump(live, *opts) as (proxy, _):
        asyncio.run(calls(up, proxy, (conf / "mitmproxy-ca-cert.pem").read_bytes()))
    result = ingest([flows], offline, TextPolicy())
    assert result.errors == []
    for table, key in (("exchanges", ["exchange_id"]), ("messages", ["exchange_id", "seq"])):
        a = load(live, table).sort_values(key).reset_index(drop=True)
        b = load(offline, table).sort_values(key).reset_index(drop=True)
        assert len(a) == (3 if table == "exchanges" else 4)
        drop = ["source", "ts", "date"]  # live taps see per-message times
        a, b = a.drop(columns=[c for c in drop if c in a]), b.drop(columns=[c for c in drop if c in b])
        assert a.astype(str).equals(b.astype(str)), table
