"""Two independent A2A implementations on PyPI through a real mitmdump with the addon: fasta2a 2.1.1 (pydantic's)
and python-a2a 0.5.10, each agent in its own process on 127.0.0.1 (tests/integration/independent_agents.py), driven
by its own client and by the official a2a-sdk client. What each client received is the ground truth the rows are
checked against; the flow file mitmdump saved of the same traffic says what only the wire shows.

- fasta2a's own client speaks v0.3 method names and gets v1.0's wrapper shapes back (said, once per exchange); the
  a2a-sdk 1.x client's v1.0 SendMessage is answered, and the client refuses the reply over its status timestamp, a
  local time without zone (said, and the reply still recorded).
- python-a2a's client calls `tasks/send` (A2A before v0.2) at `/tasks/send`: recorded as SendMessage of the agent at
  the base URL, both departures said. Its agent is put behind mitmdump in reverse-proxy mode, as its clients have no
  proxy setting. The a2a-sdk client, told by its card that it speaks v0.3 JSON-RPC at the base URL, gets HTTP 500."""

from __future__ import annotations

import asyncio
import json
import re
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pytest
from mitmproxy import io as mitmio
from mitmproxy.http import HTTPFlow

from converse_tap.a2a.constants import CONVERSE_URI
from converse_tap.store.reader import load
from tests.integration.independent_agents import BOOKED, CARD_PARAMS, QUESTION, envelope
from tests.integration.procs import Proc, mitmdump

pytestmark = pytest.mark.integration

READY = re.compile(r"^READY (http://127\.0\.0\.1:\d+)$")
FINAL = ("input-required", "completed", "failed", "canceled")


@contextmanager
def agent(which: str) -> Iterator[str]:
    proc = Proc([sys.executable, "-m", "tests.integration.independent_agents", which])
    try:
        yield proc.wait_for(READY).group(1)
    finally:
        proc.stop()


@dataclass
class Recorded:
    calls: list[dict[str, Any]]  # what each client call received, in order (the card fetches included)
    exchanges: pd.DataFrame  # in the order the calls were made
    messages: pd.DataFrame
    cards: pd.DataFrame
    flows: list[HTTPFlow]


def _read(out: Path, flows: Path, calls: list[dict[str, Any]]) -> Recorded:
    with flows.open("rb") as f:
        saved = [fl for fl in mitmio.FlowReader(f).stream() if isinstance(fl, HTTPFlow)]
    exchanges = load(out, "exchanges").sort_values("ts_start").reset_index(drop=True)
    return Recorded(calls, exchanges, load(out, "messages"), load(out, "agent_cards"), saved)


def _seen(obj: dict[str, Any], into: dict[str, Any]) -> None:
    """What a fasta2a client call received (its parsed result: a task or a stream response, snake_case keys)."""
    task = obj.get("task", obj if "status" in obj else None)
    for update in (task, obj.get("status_update")):
        if update is not None:
            into["state"] = update["status"]["state"]
            if "message" in update["status"]:
                into["sightings"].append((update["status"]["message"]["message_id"], "agent"))
    for m in (task or {}).get("history", []):
        into["sightings"].append((m["message_id"], m["role"]))
    artifacts = list((task or {}).get("artifacts", []))
    if "artifact_update" in obj:
        artifacts.append(obj["artifact_update"]["artifact"])
    for a in artifacts:
        into["sightings"].append((a["artifact_id"], None))


async def _fasta2a_client(base: str, proxy: str, calls: list[dict[str, Any]]) -> None:
    from fasta2a.client import A2AClient
    from fasta2a.schema import Message, agent_card_ta

    async with httpx.AsyncClient(proxy=proxy, timeout=30, headers={"A2A-Extensions": CONVERSE_URI}) as http:
        card = agent_card_ta.validate_python((await http.get(base + "/.well-known/agent-card.json")).json())
        calls.append({"raw": "GetAgentCard", "sent": None, "sightings": [], "state": None})
        client = A2AClient(card, http_client=http)
        context = None
        for text in ("A table tonight", "For 4 people"):  # unary: send, then poll until the task settles
            msg = Message(role="user", parts=[{"text": text}], message_id=str(uuid.uuid4()))
            if context is not None:
                msg["context_id"] = context
            call: dict[str, Any] = {"raw": "message/send", "sent": msg["message_id"], "sightings": []}
            task = (await client.send_message(msg))["result"]["task"]
            _seen({"task": task}, call)
            calls.append(call)
            context = task["context_id"]
            while call["state"] not in FINAL:
                call = {"raw": "tasks/get", "sent": None, "sightings": []}
                _seen((await client.get_task(task["id"]))["result"], call)
                calls.append(call)
        for text in ("A table", "For 4 people"):  # streamed
            msg = Message(role="user", parts=[{"text": text}], message_id=str(uuid.uuid4()), context_id=context)
            call = {"raw": "message/stream", "sent": msg["message_id"], "sightings": [], "events": 0}
            async for event in client.stream_message(msg):
                call["events"] += 1
                _seen(event["result"], call)
            calls.append(call)


async def _sdk_client(base: str, proxy: str) -> str:
    """The a2a-sdk 1.x client's SendMessage to the agent its card names; the error it raised."""
    from a2a.client import ClientCallContext, ClientConfig, ClientFactory
    from a2a.client.card_resolver import A2ACardResolver
    from a2a.client.service_parameters import ServiceParametersFactory, with_a2a_extensions
    from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest

    ctx = ClientCallContext(service_parameters=ServiceParametersFactory.create([with_a2a_extensions([CONVERSE_URI])]))
    async with httpx.AsyncClient(proxy=proxy, timeout=30) as http:
        card = await A2ACardResolver(http, base).get_agent_card()
        client = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)
        msg = Message(message_id="sdk-1", role=Role.ROLE_USER, parts=[Part(text="A table")])
        with pytest.raises(Exception) as raised:
            async for _ in client.send_message(SendMessageRequest(message=msg), context=ctx):
                pass
        await client.close()
    return f"{type(raised.value).__name__}: {raised.value}"


@pytest.fixture(scope="module")
def fasta2a_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Recorded, str]:
    tmp = tmp_path_factory.mktemp("fasta2a")
    out, flows, calls = tmp / "live", tmp / "flows.mitm", []
    opts = ("-w", str(flows), "--set", "store_streamed_bodies=true")
    with agent("fasta2a") as base, mitmdump(out, *opts) as (proxy, proc):
        asyncio.run(_fasta2a_client(base, proxy, calls))
        sdk_error = asyncio.run(_sdk_client(base, proxy))
    assert proc.popen.returncode == 0, proc.output
    calls += [{"raw": "GetAgentCard", "sightings": [], "state": None}, {"raw": "SendMessage"}]
    return _read(out, flows, calls), sdk_error


def _state(wire: str | None) -> str | None:
    return None if wire is None else "TASK_STATE_" + wire.upper().replace("-", "_")


def test_fasta2a_every_call_recorded_once_with_its_method_and_dialect(fasta2a_run: tuple[Recorded, str]) -> None:
    rec, _ = fasta2a_run
    assert sorted(rec.exchanges["exchange_id"]) == sorted(f.id for f in rec.flows)  # each exchange, once
    raw = [c["raw"] for c in rec.calls]
    assert rec.exchanges["method_raw"].tolist() == raw
    canonical = {"message/send": "SendMessage", "tasks/get": "GetTask", "message/stream": "SendStreamingMessage"}
    assert rec.exchanges["method"].tolist() == [canonical.get(r, r) for r in raw]
    dialect = ["v0.3" if "/" in r else "v1.0" for r in raw]  # (a card names no dialect: v1.0, its default)
    assert rec.exchanges["dialect"].tolist() == dialect
    assert rec.exchanges["binding"].tolist() == ["card" if r == "GetAgentCard" else "jsonrpc" for r in raw]
    calls = rec.exchanges[rec.exchanges["binding"] == "jsonrpc"]
    assert calls["converse_requested"].all() and calls["converse_echoed"].all()  # fasta2a echoes A2A-Extensions
    assert calls["complete"].all() and (calls["status_code"] == 200).all()
    polls = rec.exchanges[rec.exchanges["method_raw"] == "tasks/get"]
    assert polls["jsonrpc_id"].isna().all()  # fasta2a's client polls with `"id": null`, recorded as none


def test_fasta2a_rows_hold_what_its_client_received(fasta2a_run: tuple[Recorded, str]) -> None:
    rec, _ = fasta2a_run
    for call, (_, ex) in zip(rec.calls[:-2], rec.exchanges.iloc[:-2].iterrows(), strict=True):
        rows = rec.messages[rec.messages["exchange_id"] == ex["exchange_id"]]
        roles = [None if pd.isna(r) else r for r in rows["role"]]
        got = sorted(zip(rows["message_id"], roles, strict=True), key=str)
        sent = [] if call["sent"] is None else [(call["sent"], "user")]
        assert got == sorted(sent + call["sightings"], key=str), call["raw"]
        assert (None if pd.isna(ex["task_state"]) else ex["task_state"]) == _state(call["state"]), call["raw"]
        if call["raw"] == "message/stream":
            assert ex["sse_events"] == call["events"] and ex["streamed"]


def test_fasta2a_envelopes_read_as_sent(fasta2a_run: tuple[Recorded, str]) -> None:
    rec, _ = fasta2a_run
    enveloped = rec.messages[rec.messages["has_envelope"]]
    assert set(enveloped["text"]) == {QUESTION, BOOKED}
    for _, m in enveloped.iterrows():
        status = "waiting_for_input" if m["text"] == QUESTION else "completed"
        assert m["envelope_json"] == json.dumps(envelope(status), sort_keys=True, separators=(",", ":"))
        assert (m["author"], m["coverage"], m["routine_status"], m["ownership_state"]) == (
            "agent", "answered", status, "ai_owned"
        )  # fmt: skip
        role = None if pd.isna(m["role"]) else m["role"]  # (the answer is an artifact: no role)
        assert (role, m["object_kind"]) == (
            ("agent", "message") if status == "waiting_for_input" else (None, "artifact")
        )
        assert list(m["extensions"]) == [CONVERSE_URI] and not len(m["anomalies"])
        if status == "waiting_for_input":
            assert [p["key"] for p in m["pending_input"]] == ["partySize"] and m["pending_required_open"] == 1
    assert not rec.messages["anomalies"].apply(len).any()


def test_fasta2a_departures_said_precisely_and_nothing_else(fasta2a_run: tuple[Recorded, str]) -> None:
    rec, sdk_error = fasta2a_run
    expected = {
        "GetAgentCard": [],
        "tasks/get": [],  # a bare task, as v0.3 and v1.0 GetTask answer
        "message/send": ["v1.0_shape_in_v0.3:result.task"],
        "message/stream": ["v1.0_shape_in_v0.3:event[0].result.task"],
        # the a2a-sdk client refused this reply: "ParseError ... Failed to parse timestamp field"
        "SendMessage": ["timestamp_without_zone:result.task.status.timestamp"],
    }
    for _, ex in rec.exchanges.iterrows():
        assert list(ex["anomalies"]) == expected[ex["method_raw"]], ex["method_raw"]
    assert "ParseError" in sdk_error and "timestamp" in sdk_error
    sdk = rec.exchanges.iloc[-1]
    assert (sdk["task_state"], sdk["messages"], sdk["a2a_version"]) == ("TASK_STATE_SUBMITTED", 2, "1.0")


def test_fasta2a_card_read_as_served(fasta2a_run: tuple[Recorded, str]) -> None:
    rec, _ = fasta2a_run
    card_flow = next(f for f in rec.flows if f.request.path.endswith("/agent-card.json"))
    served = json.loads(card_flow.response.content or b"")
    assert len(rec.cards) == 2
    for _, c in rec.cards.iterrows():
        assert (c["name"], c["version"], c["source"]) == ("Trattoria", "1.0.0", "well-known")
        assert pd.isna(c["protocol_version"])  # a v1.0 card: versions are its interfaces'
        want = [{"url": i["url"], "binding": i["protocolBinding"], "protocol_version": i["protocolVersion"]}
                for i in served["supportedInterfaces"]]  # fmt: skip
        assert [dict(i) for i in c["interfaces"]] == want
        assert (c["converse_declared"], c["converse_required"], list(c["skill_ids"])) == (True, False, ["book_table"])
        assert c["mcp_url"] == CARD_PARAMS["mcp"]["url"] and c["tools_match_skills"]
        assert [t["tool_name"] for t in c["tools"]] == ["book_table"] and not len(c["anomalies"])


# -- python-a2a -----------------------------------------------------------------------------------------------------


def _python_a2a_client(proxy: str) -> list[str]:
    from python_a2a import A2AClient, Message, MessageRole, TextContent

    client = A2AClient(proxy)  # (mitmdump in reverse mode: the agent's URL for the client)
    texts = []
    for text in ("A table tonight", "For 4 people"):
        reply = client.send_message(Message(content=TextContent(text=text), role=MessageRole.USER))
        texts.append(reply.content.text)
    return texts


@pytest.fixture(scope="module")
def python_a2a_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Recorded, list[str], str, list[bytes]]:
    tmp = tmp_path_factory.mktemp("python-a2a")
    out, flows = tmp / "live", tmp / "flows.mitm"
    with agent("python-a2a") as base:
        opts = ("--mode", f"reverse:{base}", "-w", str(flows), "--set", "store_streamed_bodies=true")
        with mitmdump(out, *opts) as (proxy, proc):
            texts = _python_a2a_client(proxy)
            # its server's stream, as a client of A2A's first drafts asks for it (python-a2a's own streaming
            # client posts no JSON-RPC there, and the server refuses it)
            message = {"role": "user", "parts": [{"type": "text", "text": "For 4 people"}]}
            params = {"id": "t-9", "sessionId": "s-9", "message": message}
            body = {"jsonrpc": "2.0", "id": 7, "method": "tasks/sendSubscribe", "params": params}
            with httpx.stream("POST", f"{proxy}/a2a/tasks/stream", json=body, timeout=30) as r:
                events = [line.encode() for line in r.iter_lines() if line.startswith("data: ")]
            sdk_error = asyncio.run(_sdk_client_v03(proxy))
    assert proc.popen.returncode == 0, proc.output
    return _read(out, flows, []), texts, sdk_error, events


async def _sdk_client_v03(base: str) -> str:
    """The a2a-sdk client, from python-a2a's card (v0.3 JSON-RPC at the base URL: the client's v0.3 transport)."""
    from a2a.client import ClientConfig, ClientFactory
    from a2a.client.card_resolver import A2ACardResolver
    from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest

    async with httpx.AsyncClient(timeout=30) as http:
        card = await A2ACardResolver(http, base, "/.well-known/agent.json").get_agent_card()
        card.supported_interfaces[0].url = base  # (the card names the agent itself, behind the reverse proxy)
        client = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)
        with pytest.raises(Exception) as raised:
            async for _ in client.send_message(SendMessageRequest(message=Message(
                message_id="sdk-1", role=Role.ROLE_USER, parts=[Part(text="A table")]))):  # fmt: skip
                pass
        await client.close()
    return f"{type(raised.value).__name__}: {raised.value}"


def test_python_a2a_tasks_send_recorded_as_sendmessage_of_its_agent(python_a2a_run: Any) -> None:
    rec, texts, _, _ = python_a2a_run
    assert texts == [QUESTION, BOOKED]
    assert sorted(rec.exchanges["exchange_id"]) == sorted(f.id for f in rec.flows)  # each exchange once
    sends = rec.exchanges[rec.exchanges["method_raw"] == "tasks/send"]
    assert len(sends) == 2
    assert set(sends["method"]) == {"SendMessage"} and set(sends["dialect"]) == {"v0.3"}
    card = rec.exchanges[rec.exchanges["binding"] == "card"].iloc[0]
    assert set(sends["agent"]) == {card["agent"]}  # the agent its card names, not one agent per method path
    for _, ex in sends.iterrows():
        assert list(ex["anomalies"]) == ["method_before_v0.2:tasks/send", "method_in_path:tasks/send"]
        assert ex["task_state"] == "TASK_STATE_COMPLETED" and ex["messages"] == 2
    rows = rec.messages[rec.messages["exchange_id"].isin(sends["exchange_id"])]
    answers = rows[rows["direction"] == "response"]
    assert answers["object_kind"].tolist() == ["artifact"] * 2 and set(answers["text"]) == {QUESTION, BOOKED}
    assert answers["anomalies"].apply(list).tolist() == [["missing:artifactId"]] * 2
    users = rows[rows["direction"] == "request"]
    assert users["anomalies"].apply(list).tolist() == [["wrong_type:content=dict"]] * 2  # its own message shape


def test_python_a2a_stream_of_bare_tasks_read(python_a2a_run: Any) -> None:
    rec, _, _, events = python_a2a_run
    (ex,) = rec.exchanges[rec.exchanges["method_raw"] == "tasks/sendSubscribe"].itertuples()
    assert (ex.method, ex.sse_events, ex.task_state, ex.complete) == (
        "SendStreamingMessage",
        len(events),
        "TASK_STATE_COMPLETED",
        True,
    )
    assert list(ex.anomalies) == ["method_before_v0.2:tasks/sendSubscribe"] + [
        f"jsonrpc_without_result:event[{i}]" for i in range(len(events))
    ]
    rows = rec.messages[rec.messages["exchange_id"] == ex.exchange_id].sort_values("seq")
    assert rows["direction"].tolist() == ["request", "response"] and rows["text"].tolist() == ["For 4 people", BOOKED]
    assert rows["object_kind"].tolist() == ["message", "artifact"]  # the artifact of the last event


def test_python_a2a_card_and_the_official_client(python_a2a_run: Any) -> None:
    rec, _, sdk_error, _ = python_a2a_run
    cards = rec.cards
    assert set(cards["protocol_version"]) == {"0.3.0"} and set(cards["converse_declared"]) == {False}
    for _, c in cards.iterrows():
        assert [i["binding"] for i in c["interfaces"]] == ["JSONRPC"] and not len(c["anomalies"])
    assert "500" in sdk_error  # the card says v0.3 JSON-RPC at its URL; the agent answers `message/send` with 500
    (ex,) = rec.exchanges[rec.exchanges["method_raw"] == "message/send"].itertuples()
    assert (ex.method, ex.dialect, ex.status_code, ex.error_code) == ("SendMessage", "v0.3", 500, 500)
    assert list(ex.anomalies) == ["jsonrpc_without_result"]  # its body is a bare message-like object
