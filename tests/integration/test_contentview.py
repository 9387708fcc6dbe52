"""The A2A content view, rendering real flows captured from the demo agent through mitmdump."""

from __future__ import annotations

import asyncio

import pytest
from mitmproxy import contentviews, http, io
from mitmproxy.test import taddons

from converse_tap.addon.contentview import A2AContentview
from tests.integration.procs import demo_agent, mitmdump
from tests.integration.test_proxy import _conversation

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> list[http.HTTPFlow]:
    tmp = tmp_path_factory.mktemp("cv")
    flows = tmp / "flows.mitm"
    with (
        demo_agent() as agent,
        mitmdump(tmp / "data", "-w", str(flows), "--set", "store_streamed_bodies=true") as (
            proxy,
            _,
        ),
    ):
        asyncio.run(_conversation(agent, proxy, "JSONRPC", streaming=True))
        asyncio.run(_conversation(agent, proxy, "HTTP+JSON", streaming=False))
    with open(flows, "rb") as f:
        return [fl for fl in io.FlowReader(f).stream() if isinstance(fl, http.HTTPFlow)]


contentviews.add(A2AContentview())  # as the mitmdump script does; the registry keeps one view per name


def _render(flow: http.HTTPFlow, message: http.Message) -> contentviews.ContentviewResult:
    with taddons.context():  # content views read mitmproxy's options
        return contentviews.prettify_message(message, flow)


def test_chosen_automatically_for_a2a_and_not_for_cards(captured: list[http.HTTPFlow]) -> None:
    names = {(f.request.path.split("/")[-1], _render(f, f.response).view_name) for f in captured}
    assert ("agent-card.json", "A2A converse") not in names
    assert {n for p, n in names if p != "agent-card.json"} == {"A2A converse"}


def test_streamed_response_shows_each_event_with_its_envelope(captured: list[http.HTTPFlow]) -> None:
    streamed = [f for f in captured if f.response.headers.get("content-type", "").startswith("text/event-stream")]
    text = _render(streamed[0], streamed[0].response).text
    assert "event 0: task task" in text and "[input_required]" in text
    assert "Which day (YYYY-MM-DD)? How many people?" in text
    assert "converse: author agent | coverage – (not_recorded) | ownership ai_owned" in text
    assert "routine Book a table: waiting_for_input" in text
    assert "pending date (string, required): Which day (YYYY-MM-DD)?" in text


def test_request_and_answered_reply_with_citations(captured: list[http.HTTPFlow]) -> None:
    last_rest = [f for f in captured if f.request.path.endswith("message:send")][-1]
    assert "user message" in _render(last_rest, last_rest.request).text
    text = _render(last_rest, last_rest.response).text
    assert "coverage answered (sufficient_evidence, assessed)" in text
    assert "cites doc-parking Parking" in text


def test_grpc_messages_are_shown_decoded(tmp_path) -> None:
    import grpc

    from converse_tap.a2a.constants import CONVERSE_URI
    from tests.integration.grpc_procs import REQUEST, SERVICE, CannedGrpc, channel, proxy_options, raw_call

    flows, conf = tmp_path / "flows.mitm", tmp_path / "conf"
    ext = (("a2a-extensions", CONVERSE_URI),)

    async def calls(up: CannedGrpc, proxy: str, ca: bytes) -> None:
        chan = channel(up.target, ca, proxy)
        try:
            await raw_call(chan, "SendMessage", REQUEST, ext)
            up.release.set()
            stream = chan.unary_stream(f"/{SERVICE}/SendStreamingMessage")(REQUEST, metadata=ext)
            assert len([m async for m in stream]) == 2 and await stream.code() == grpc.StatusCode.OK
            await raw_call(chan, "GetTask", b"", ext)
        finally:
            await chan.close()

    with (
        CannedGrpc() as up,
        mitmdump(tmp_path / "data", "-w", str(flows), "--set", "store_streamed_bodies=true", *proxy_options(conf)) as (
            proxy,
            _,
        ),
    ):
        asyncio.run(calls(up, proxy, (conf / "mitmproxy-ca-cert.pem").read_bytes()))
    with open(flows, "rb") as f:
        captured = {
            fl.request.path.rsplit("/", 1)[-1]: fl for fl in io.FlowReader(f).stream() if isinstance(fl, http.HTTPFlow)
        }
    unary = captured["SendMessage"]
    request = _render(unary, unary.request)
    assert request.view_name == "A2A converse"
    assert "gRPC v1.0 SendMessage: 1 message(s)" in request.text and "user message u-1" in request.text
    text = _render(unary, unary.response).text
    assert (
        "agent message a-1" in text and "Open 12-15." in text and "converse: author agent | coverage answered" in text
    )
    assert "grpc-status 0" in text
    streamed = captured["SendStreamingMessage"]
    text = _render(streamed, streamed.response).text
    assert "message 0: statusUpdate task t-1 working" in text and "message 1: statusUpdate task t-1 completed" in text
    failed = captured["GetTask"]  # a trailers-only answer: no body for a view to show, the status in the headers
    assert failed.response.raw_content == b"" and failed.response.headers["grpc-status"] == "5"
