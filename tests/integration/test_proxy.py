"""A real mitmdump with the addon, between real clients and real servers on loopback."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.client.card_resolver import A2ACardResolver
from click.testing import CliRunner

from converse_tap.a2a.constants import CONVERSE_URI
from converse_tap.a2a.redact import TextPolicy
from converse_tap.cli import cli
from converse_tap.ingest import ingest
from converse_tap.store.reader import load
from tests.integration.procs import REPLY_BYTES, SSE_BYTES, Canned, demo_agent, mitmdump
from tests.integration.script import book_a_table

pytestmark = pytest.mark.integration

HEADERS = {"content-type": "application/json", "a2a-version": "1.0", "a2a-extensions": CONVERSE_URI}
BODY = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": "r-1",
        "method": "SendMessage",
        "params": {"message": {"messageId": "u-1", "role": "ROLE_USER", "parts": [{"text": "When are you open?"}]}},
    }
).encode()
STREAM_BODY = BODY.replace(b'"SendMessage"', b'"SendStreamingMessage"')


async def _conversation(agent: str, proxy: str, binding: str, streaming: bool) -> list[str]:
    """Book a table in three turns, ask a question, poll the task; returns the reply texts the client saw."""
    async with httpx.AsyncClient(proxy=proxy, timeout=30) as http:
        card = await A2ACardResolver(http, f"{agent}/agents/ag_trattoria01").get_agent_card()
        keep = [i for i in card.supported_interfaces if i.protocol_version == "1.0" and i.protocol_binding == binding]
        del card.supported_interfaces[:]
        card.supported_interfaces.extend(keep)
        client = ClientFactory(
            ClientConfig(httpx_client=http, streaming=streaming, supported_protocol_bindings=[binding])
        ).create(card)
        texts = await book_a_table(client)
        await client.close()
    return texts


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
@pytest.mark.parametrize("streaming", [False, True], ids=["unary", "streaming"])
def test_a2a_sdk_conversation_lands_in_parquet(tmp_path: Path, binding: str, streaming: bool) -> None:
    out = tmp_path / "data"
    with demo_agent() as agent, mitmdump(out) as (proxy, proc):
        texts = asyncio.run(_conversation(agent, proxy, binding, streaming))
    assert proc.popen.returncode == 0, proc.output
    assert texts[-1].startswith("There is no private parking")
    ex = load(out, "exchanges")
    calls = ex[ex["binding"] != "card"].sort_values("ts_start")
    send = "SendStreamingMessage" if streaming else "SendMessage"
    assert calls["method"].tolist() == [send, send, send, "GetTask", send]
    assert set(calls["binding"]) == {"jsonrpc" if binding == "JSONRPC" else "rest"}
    assert calls["streamed"].tolist() == [streaming, streaming, streaming, False, streaming]
    assert calls["converse_requested"].all() and calls["converse_echoed"].all()
    assert calls["complete"].all() and not calls["anomalies"].apply(len).any()
    assert calls["task_state"].tolist()[:3] == ["TASK_STATE_INPUT_REQUIRED"] * 2 + ["TASK_STATE_COMPLETED"]
    assert set(calls["agent_id"]) == {"ag_trattoria01"}
    if streaming:
        assert (calls[calls["method"] == send]["sse_events"] >= 1).all()
    msgs = load(out, "messages")
    replies = msgs[(msgs["role"] == "agent") & msgs["has_envelope"]].drop_duplicates("message_id")
    assert replies.sort_values("ts")["routine_status"].tolist()[:3] == [
        "waiting_for_input",
        "waiting_for_input",
        "completed",
    ]
    assert replies["pending_input"].dropna().apply(lambda s: [x["key"] for x in s]).tolist()[:2] == [
        ["date", "partySize", "notes"],
        ["partySize", "notes"],
    ]
    artifacts = msgs[msgs["object_kind"] == "artifact"]
    assert set(artifacts["artifact_name"]) == {"booking"} and artifacts["has_envelope"].all()
    assert len(load(out, "agent_cards")) == 1
    assert not list(out.rglob("*.arrows")) and not list(out.rglob(".*.tmp"))


def _fetch(url: str, body: bytes | None, proxy: str | None) -> tuple[int, bytes, str]:
    with httpx.Client(proxy=proxy, timeout=30) as client:
        method = "POST" if body is not None else "GET"
        with client.stream(method, url, content=body, headers=HEADERS) as r:
            raw = b"".join(r.iter_raw())  # as on the wire: still compressed
            return r.status_code, raw, r.headers.get("content-encoding", "")


def test_bodies_are_byte_identical_with_and_without_the_proxy(tmp_path: Path) -> None:
    out = tmp_path / "data"
    cases = [
        ("/a2a", BODY),
        ("/gz/a2a", BODY),
        ("/br/a2a", BODY),
        ("/sse/a2a", STREAM_BODY),
        ("/err/a2a", BODY),
        ("/rest/tasks/x", None),
        ("/index.html", None),
    ]
    with Canned() as up, mitmdump(out) as (proxy, _):
        for path, body in cases:
            direct = _fetch(up.base + path, body, None)
            proxied = _fetch(up.base + path, body, proxy)
            assert proxied == direct, path
        assert _fetch(up.base + "/a2a", BODY, proxy)[1] == REPLY_BYTES
        assert _fetch(up.base + "/sse/a2a", STREAM_BODY, proxy)[1] == SSE_BYTES
    ex = load(out, "exchanges").set_index("url")
    # every proxied A2A exchange once, the HTML page not at all
    assert sorted(ex.index.str.replace(up.base, "")) == [
        "/a2a",
        "/a2a",
        "/br/a2a",
        "/err/a2a",
        "/gz/a2a",
        "/rest/tasks/x",
        "/sse/a2a",
        "/sse/a2a",
    ]
    assert ex.loc[up.base + "/sse/a2a", "sse_events"].tolist() == [2, 2]
    assert ex.loc[up.base + "/err/a2a", "error_code"] == -32001
    assert ex.loc[up.base + "/gz/a2a", "replies"] == ex.loc[up.base + "/br/a2a", "replies"] == 1
    assert ex.loc[up.base + "/rest/tasks/x", "error_code"] == 404


def test_first_event_reaches_the_client_while_the_stream_is_open(tmp_path: Path) -> None:
    """The upstream holds the stream after event 1 until the client asks for the rest: a buffering proxy
    would never deliver event 1, and the read below would time out."""
    out = tmp_path / "data"
    with Canned() as up, mitmdump(out) as (proxy, _), httpx.Client(proxy=proxy, timeout=10) as client:
        with client.stream("POST", up.base + "/held/a2a", content=STREAM_BODY, headers=HEADERS) as r:
            chunks = r.iter_raw()
            first = b""
            while b"\r\n\r\n" not in first:
                first += next(chunks)
            assert first == SSE_BYTES.split(b"\r\n\r\n", 1)[0] + b"\r\n\r\n"
            httpx.get(up.base + "/release", timeout=10)
            rest = b"".join(chunks)
        assert first + rest == SSE_BYTES
    assert load(out, "exchanges")["sse_events"].tolist() == [2]


def test_live_dataset_equals_ingest_of_the_saved_flows(tmp_path: Path) -> None:
    live, offline, flows = tmp_path / "live", tmp_path / "offline", tmp_path / "flows.mitm"
    with (
        demo_agent() as agent,
        mitmdump(live, "-w", str(flows), "--set", "store_streamed_bodies=true") as (proxy, _),
    ):
        asyncio.run(_conversation(agent, proxy, "JSONRPC", streaming=True))
        asyncio.run(_conversation(agent, proxy, "HTTP+JSON", streaming=False))
    result = ingest([flows], offline, TextPolicy())
    assert result.errors == []
    for table, key in (("exchanges", ["exchange_id"]), ("messages", ["exchange_id", "seq"])):
        a = load(live, table).sort_values(key).reset_index(drop=True)
        b = load(offline, table).sort_values(key).reset_index(drop=True)
        drop = ["source", "ts", "date", "sse_events", "bytes_out"]  # live taps see per-event times
        a, b = a.drop(columns=[c for c in drop if c in a]), b.drop(columns=[c for c in drop if c in b])
        assert a.astype(str).equals(b.astype(str)), table


def test_converse_tap_record_runs_the_proxy_and_writes_the_dataset(tmp_path: Path) -> None:
    import signal
    import sys

    from tests.integration.procs import LISTENING, Proc

    out = tmp_path / "data"
    with Canned() as up:
        proc = Proc([sys.executable, "-m", "converse_tap", "record", "--out", str(out), "--listen-port", "0",
                     "--text", "drop", "--set", "connection_strategy=lazy"])  # fmt: skip
        try:
            proxy = f"http://127.0.0.1:{proc.wait_for(LISTENING).group(1)}"
            with httpx.Client(proxy=proxy, timeout=10) as client:
                assert client.post(up.base + "/a2a", content=BODY, headers=HEADERS).content == REPLY_BYTES
        finally:
            assert proc.stop(signal.SIGTERM) == 0, proc.output
    msgs = load(out, "messages")
    assert msgs["role"].tolist() == ["user", "agent"] and msgs["text"].isna().all()  # --text drop
    assert "converse-tap: 1 A2A exchanges" in proc.output


def test_live_dataset_equals_ingest_of_mitmproxys_own_har_export(tmp_path: Path) -> None:
    """mitmproxy's HAR export (`hardump`) of the same traffic: another exporter, the same rows."""
    from tests.integration.test_playwright_har import _rows

    live, har = tmp_path / "live", tmp_path / "dump.har"
    with (
        demo_agent() as agent,
        mitmdump(live, "--set", f"hardump={har}", "--set", "store_streamed_bodies=true") as (proxy, _),
    ):
        asyncio.run(_conversation(agent, proxy, "JSONRPC", streaming=True))
        asyncio.run(_conversation(agent, proxy, "HTTP+JSON", streaming=False))
    r = CliRunner().invoke(cli, ["ingest", str(har), "--out", str(tmp_path / "offline")])
    assert r.exit_code == 0, r.stderr
    for table in ("messages", "exchanges"):
        expected = _rows(live, table)
        assert len(expected) >= 10 and json.dumps(_rows(tmp_path / "offline", table), indent=0) == json.dumps(
            expected, indent=0
        ), table
