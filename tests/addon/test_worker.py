"""The recording worker, driven in-process with the records the proxy sends it."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from converse_tap.a2a import extract as extract_module
from converse_tap.a2a.exchange import HttpExchange
from converse_tap.a2a.exchange_row import EXCHANGE_COLUMNS
from converse_tap.a2a.extract import extract
from converse_tap.a2a.headers import Headers
from converse_tap.a2a.redact import TextPolicy
from converse_tap.addon.worker import Worker
from converse_tap.store.reader import load
from converse_tap.store.schema import EXCHANGES
from tests.factories import BASE, agent_message, jsonrpc_request, jsonrpc_result, sse_body, status_event
from tests.memory import retained

HEADERS = [(b"content-type", b"application/json"), (b"a2a-version", b"1.0")]


def _worker(root: Path) -> Worker:
    config = {
        "dir": str(root),
        "text": "keep",
        "salt": "",
        "flush_interval": 0.05,
        "rollover_rows": 1000,
        "rollover_seconds": 300.0,
        "max_body": 1 << 20,
        "max_events": 3,
        "summary": "off",
    }
    return Worker(config)


def _req(body: bytes, path: str = "/a2a/jsonrpc") -> tuple:
    url = (b"http", "agent.test", 9000, path.encode())
    return (b"POST", url, b"HTTP/1.1", HEADERS, body, len(body), 1.0, ("127.0.0.1", 5000), ("agent.test", 9000), False)


def test_exchange_columns_match_the_schema() -> None:
    assert tuple(EXCHANGES.names) == EXCHANGE_COLUMNS


def test_an_extraction_failure_is_an_anomaly_on_its_own_row(tmp_path: Path, monkeypatch, caplog) -> None:
    w = _worker(tmp_path)

    def broken(*args, **kwargs):
        raise RuntimeError("bug")

    ok = (
        "x",
        "ok",
        _req(jsonrpc_request()),
        (200, HEADERS, 1.1, 1.2, jsonrpc_result({"message": agent_message()}), 9),
        None,
    )
    w.handle(ok)
    monkeypatch.setattr(extract_module.Ctx, "payload", broken)
    caplog.set_level(logging.ERROR)
    for i in range(3):
        w.handle(("x", f"bad-{i}", *ok[2:]))
    w.close()
    ex = load(tmp_path, "exchanges").set_index("exchange_id")
    assert len(ex) == 4 and ex.loc["ok", "method"] == "SendMessage"
    assert all("extraction_failed:RuntimeError" in list(ex.loc[f"bad-{i}", "anomalies"]) for i in range(3))
    assert sum("extraction failed" in r.message for r in caplog.records) == 1  # logged once, no traceback spam


def test_a_stream_past_max_events_is_counted_not_parsed(tmp_path: Path) -> None:
    w = _worker(tmp_path)
    events = [status_event("TASK_STATE_WORKING")] * 5 + [status_event("TASK_STATE_COMPLETED", agent_message())]
    body = sse_body(*events)
    w.handle(
        ("o", "s", _req(jsonrpc_request("SendStreamingMessage")), (200, [(b"content-type", b"text/event-stream")], 1.1))
    )
    for i in range(0, len(body), 50):
        w.handle(("c", "s", 1.2, body[i : i + 50]))
    w.handle(("e", "s", (1.3, None), None, False))
    w.handle(("e", "never-opened", (1.3, None), None, False))
    # a stream the proxy's first look sent on that is not A2A (a JSON-RPC method of another protocol): its end
    # is not a stream lost
    mcp = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {}}'
    other = (b"POST", (b"http", "agent.test", 9000, b"/mcp"), b"HTTP/1.1", [(b"content-type", b"application/json")])
    other += (mcp, len(mcp), 1.0, ("127.0.0.1", 5000), ("agent.test", 9000), False)
    w.handle(("o", "other", other, (200, [(b"content-type", b"text/event-stream")], 1.1)))
    w.handle(("c", "other", 1.2, b"data: {}\n\n"))
    w.handle(("e", "other", (1.3, None), None, False))
    w.close()
    ex = load(tmp_path, "exchanges").iloc[0]
    assert ex["sse_events"] == 6 and ex["bytes_out"] == len(body)
    assert "sse_events_not_parsed_past:3" in list(ex["anomalies"])
    assert w.lost_streams == 1


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=5),
    max_leaves=30,
)
KEYS = st.sampled_from(["result", "message", "task", "statusUpdate", "metadata", "parts", "status", "error", "id"])
A2A_ISH = st.recursive(
    st.none() | st.integers() | st.text(max_size=8) | st.floats(),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(KEYS, children, max_size=4),
    max_leaves=25,
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(doc=st.one_of(JSON, A2A_ISH), streamed=st.booleans(), status=st.sampled_from([200, 400, 500]))
def test_the_extractor_never_raises_on_any_json(doc, streamed: bool, status: int) -> None:
    from converse_tap.a2a.sse import parse_sse

    body = json.dumps(doc).encode()
    ex = HttpExchange(
        id="f",
        method="POST",
        url=BASE + "/a2a",
        request_headers=Headers([("content-type", "application/json")]),
        request_body=jsonrpc_request("SendStreamingMessage" if streamed else "SendMessage"),
        status=status,
        response_headers=Headers([("content-type", "text/event-stream" if streamed else "application/json")]),
    )
    if streamed:
        ex.sse_events, _ = parse_sse(sse_body(doc, doc))
    else:
        ex.response_body = body
    out = extract(ex, TextPolicy())
    assert out is None or out.exchange["exchange_id"] == "f"


@pytest.mark.parametrize("policy", ["keep", "hash", "drop"])
def test_worker_text_policy(tmp_path: Path, policy: str) -> None:
    w = _worker(tmp_path)
    w.policy = TextPolicy(policy, b"salt")
    w.handle(
        (
            "x",
            "p",
            _req(jsonrpc_request()),
            (200, HEADERS, 1.1, 1.2, jsonrpc_result({"message": agent_message(text="secret words")}), 9),
            None,
        )
    )
    w.close()
    texts = load(tmp_path, "messages")["text"].tolist()
    assert ("secret words" in texts) == (policy == "keep")


def test_a_stream_whose_final_event_arrived_is_complete_though_the_client_left(tmp_path: Path) -> None:
    """The a2a-sdk client closes the connection right after the final event: nothing was missed. A client that
    leaves before it (or in the middle of the next event) leaves an incomplete stream."""
    w = _worker(tmp_path)
    done = sse_body(status_event("TASK_STATE_WORKING"), status_event("TASK_STATE_COMPLETED", agent_message()))
    open_ = (
        "o",
        None,
        _req(jsonrpc_request("SendStreamingMessage")),
        (200, [(b"content-type", b"text/event-stream")], 1.1),
    )
    cases = {"final": done, "early": done[: done.index(b"\r\n\r\n") + 4], "mid-next": done + b"data: {"}
    for fid, body in cases.items():
        w.handle((open_[0], fid, *open_[2:]))
        w.handle(("c", fid, 1.2, body))
        w.handle(("e", fid, (None, None), ("Client disconnected.", 1.3), False))
    w.close()
    ex = load(tmp_path, "exchanges").set_index("exchange_id")
    assert ex["complete"].to_dict() == {"final": True, "early": False, "mid-next": False}
    assert set(ex["error"]) == {"Client disconnected."}


def test_a_reverse_mode_card_pointing_at_the_agent_is_warned_about_once(tmp_path: Path, caplog) -> None:
    w = _worker(tmp_path)
    card = {"name": "a", "supportedInterfaces": [{"url": BASE + "/a2a/jsonrpc", "protocolBinding": "JSONRPC"}]}
    get = (b"GET", (b"http", "agent.test", 9000, b"/.well-known/agent-card.json"), b"HTTP/1.1", [], b"", 0, 1.0)
    caplog.set_level(logging.WARNING)
    for i, reverse in enumerate([True, True, False]):
        req = (*get, ("127.0.0.1", 5000), ("agent.test", 9000), reverse)
        w.handle(("x", f"card-{i}", req, (200, HEADERS, 1.1, 1.2, json.dumps(card).encode(), 9), None))
    w.close()
    warnings = [r.message for r in caplog.records if "bypass this reverse-mode recorder" in r.message]
    assert len(warnings) == 1 and BASE + "/a2a/jsonrpc" in warnings[0]


def test_a_stream_in_an_encoding_not_decoded_says_so_on_its_row(tmp_path: Path) -> None:
    """The stream is recorded unparsed, and its row names why (the note was added to the exchange after the
    extractor had copied its anomalies, and was lost)."""
    w = _worker(tmp_path)
    head = (200, [(b"content-type", b"text/event-stream"), (b"content-encoding", b"compress")], 1.1)
    w.handle(("o", "s", _req(jsonrpc_request("SendStreamingMessage")), head))
    w.handle(("c", "s", 1.2, b"\x1f\x9d not parsed"))
    w.handle(("e", "s", (1.3, None), None, False))
    w.close()
    ex = load(tmp_path, "exchanges").iloc[0]
    assert "sse_not_parsed:unsupported content-encoding 'compress'" in list(ex["anomalies"])
    assert ex["bytes_out"] == 13 and ex["sse_events"] == 0


def test_a_body_nested_in_a_thousand_content_codings_is_recorded_not_followed(tmp_path: Path) -> None:
    """`Content-Encoding: gzip, gzip, …` (a thousand times, and a body nested as deep: 21 KB) made the decoder
    recurse past Python's limit: the RecursionError escaped the worker's record handling and the exchange was lost.
    Past MAX_CODINGS the body is not decoded, and the exchange is recorded with an anomaly saying so."""
    import gzip

    body = jsonrpc_result({"message": agent_message()})
    nested = body
    for _ in range(1000):
        nested = gzip.compress(nested, mtime=0)
    codings = ", ".join(["gzip"] * 1000).encode()
    headers = [*HEADERS, (b"content-encoding", codings)]
    w = _worker(tmp_path)
    w.handle(("x", "deep", _req(jsonrpc_request()), (200, headers, 1.1, 1.2, nested, len(nested)), None))
    stream_head = (200, [(b"content-type", b"text/event-stream"), (b"content-encoding", codings)], 1.1)
    w.handle(("o", "deep-stream", _req(jsonrpc_request("SendStreamingMessage")), stream_head))
    w.handle(("c", "deep-stream", 1.2, nested))
    w.handle(("e", "deep-stream", (1.3, None), None, False))
    w.close()
    ex = load(tmp_path, "exchanges").set_index("exchange_id")
    assert set(ex.index) == {"deep", "deep-stream"}
    assert any(a.startswith("response_content_encoding_invalid:gzip, gzip") for a in ex.loc["deep", "anomalies"])
    assert any(a.startswith("sse_not_parsed:1000 content-codings") for a in ex.loc["deep-stream", "anomalies"])
    # as many codings as a server would use still decode
    from converse_tap.a2a.inflate import MAX_CODINGS, inflate

    twice = gzip.compress(gzip.compress(body))
    assert inflate(twice, "gzip, gzip", 1 << 20) == body
    assert inflate(twice, ", ".join(["identity", "gzip", "gzip", *["identity"] * 20]), 1 << 20) == body
    with pytest.raises(ValueError, match="content-codings"):
        inflate(body, ", ".join(["gzip"] * (MAX_CODINGS + 1)), 1 << 20)


def test_reverse_mode_streams_that_are_not_a2a_leave_nothing_behind(tmp_path: Path) -> None:
    """A reverse-mode GET that the proxy's first look takes for A2A (`/x#/.well-known/agent-card.json`: the
    fragment hides the card path from the worker's URL parse) answered with an event stream: its id was kept,
    to check a card it would never have, for as long as the worker ran."""
    w = _worker(tmp_path)
    head = (200, [(b"content-type", b"text/event-stream")], 1.1)

    def run(round_: int) -> None:
        for i in range(2000):
            fid = f"flow-{round_}-{i:05d}-" + "x" * 100
            path = b"/x#/.well-known/agent-card.json"
            req = (b"GET", (b"http", "agent.test", 9000, path), b"HTTP/1.1", [], b"", 0, 1.0, None, None, True)
            w.handle(("o", fid, req, head))
            w.handle(("c", fid, 1.2, b"data: {}\n\n"))
            w.handle(("e", fid, (1.3, None), None, False))

    kept = retained(run)
    w.close()
    assert kept < 100_000, kept  # 2,000 ids of 100+ characters held are over 300 KB


def _card_get(fid: str, card: dict, path: bytes = b"/.well-known/agent-card.json") -> tuple:
    get = (b"GET", (b"http", "agent.test", 9000, path), b"HTTP/1.1", [], b"", 0, 1.0)
    req = (*get, ("127.0.0.1", 5000), ("agent.test", 9000), True)
    return ("x", fid, req, (200, HEADERS, 1.1, 1.2, json.dumps(card).encode(), 9), None)


def test_a_reverse_mode_card_with_a_port_out_of_range_is_recorded(tmp_path: Path) -> None:
    """The bypass check read the port of each interface URL the card names; `:99999` raised, and the exchange,
    card and all, was skipped by the writer."""
    w = _worker(tmp_path)
    for port in ("99999", "x1"):
        card = {"name": "a", "supportedInterfaces": [{"url": f"http://agent.test:{port}/a2a", "protocolBinding": "X"}]}
        w.handle(_card_get(f"card-{port}", card))
    w.close()
    assert sorted(load(tmp_path, "agent_cards")["exchange_id"]) == ["card-99999", "card-x1"]
    assert w.writer.stats.extract_failures == 0


def test_reverse_mode_cards_at_ever_new_urls_are_not_remembered_without_bound(tmp_path: Path, caplog) -> None:
    """The bypass warning is given once per card URL and interface: each pair was remembered, so cards fetched at
    ever new URLs (`?v=1`, `?v=2`, … from the client) grew the worker's memory (4 MB per 1,000 URLs of 600
    characters), and its log, without bound. (Counted, not measured: each exchange's rows wait in the writer
    until its next flush, a matter of timing.)"""
    from converse_tap.addon.bypass import MAX_WARNED

    w = _worker(tmp_path)
    card = {"name": "a", "supportedInterfaces": [{"url": BASE + "/a2a/jsonrpc", "protocolBinding": "JSONRPC"}]}
    caplog.set_level(logging.WARNING)
    for i in range(3 * MAX_WARNED):
        path = f"/.well-known/agent-card.json?v={i:05d}-{'x' * 600}".encode()
        w.handle(_card_get(f"card-{i}", card, path))
    w.close()
    assert len(w.bypass.warned) == MAX_WARNED + 1
    warnings = [r.message for r in caplog.records if "reverse-mode recorder" in r.message]
    assert len(warnings) == MAX_WARNED + 1 and "not logged" in warnings[-1]


def test_a_long_grpc_stream_is_parsed_as_it_comes_and_counted_past_max_events(tmp_path: Path) -> None:
    """A gRPC stream's messages were all kept, each with its bytes, until the stream ended, and all parsed then:
    a subscription that streams for days grew the worker's memory by every byte it carried. Messages now go to
    the extractor as they arrive and are not kept; past `max_events` they are counted, not parsed, like SSE."""
    import tracemalloc

    from a2a.types import a2a_pb2 as pb

    from tests.factories import grpc_frame

    def update(i: int) -> bytes:
        text = f"step {i} " + "x" * 1000
        msg = pb.Message(message_id=f"a-{i}", context_id="c", role=pb.ROLE_AGENT, parts=[pb.Part(text=text)])
        status = pb.TaskStatus(state=pb.TASK_STATE_WORKING, message=msg)
        return grpc_frame(pb.StreamResponse(status_update=pb.TaskStatusUpdateEvent(task_id="t", status=status)))

    request = grpc_frame(pb.SendMessageRequest(message=pb.Message(message_id="u-1", role=pb.ROLE_USER)))
    path = b"/lf.a2a.v1.A2AService/SendStreamingMessage"
    grpc_headers = [(b"content-type", b"application/grpc")]
    req = (b"POST", (b"https", "agent.test", 443, path), b"HTTP/2.0", grpc_headers, request, len(request))
    req = (*req, 1.0, ("127.0.0.1", 5000), ("agent.test", 443), False)
    w = _worker(tmp_path)  # max_events 3
    w.handle(("o", "g", req, (200, grpc_headers, 1.1)))
    tracemalloc.start()
    try:
        for i in range(100):
            w.handle(("c", "g", 1.2, update(i)))
        before = tracemalloc.get_traced_memory()[0]
        for i in range(100, 2100):
            w.handle(("c", "g", 1.2, update(i)))
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    w.handle(("e", "g", (1.3, [(b"grpc-status", b"0")]), None, False))
    w.close()
    assert kept < 100_000, kept  # 2,000 messages of 1 KB held are over 2 MB
    ex = load(tmp_path, "exchanges").iloc[0]
    assert (ex["binding"], ex["sse_events"], ex["complete"]) == ("grpc", 2100, True)
    assert "grpc_messages_not_parsed_past:3" in list(ex["anomalies"])
    msgs = load(tmp_path, "messages").sort_values("seq")
    assert msgs["message_id"].tolist() == ["u-1", "a-0", "a-1", "a-2"]


def test_a_grpc_message_whose_extraction_fails_costs_only_itself(tmp_path: Path, monkeypatch) -> None:
    from a2a.types import a2a_pb2 as pb

    from tests.factories import grpc_frame

    def update(i: int) -> bytes:
        msg = pb.Message(message_id=f"a-{i}", context_id="c", role=pb.ROLE_AGENT, parts=[pb.Part(text=f"step {i}")])
        status = pb.TaskStatus(state=pb.TASK_STATE_WORKING, message=msg)
        return grpc_frame(pb.StreamResponse(status_update=pb.TaskStatusUpdateEvent(task_id="t", status=status)))

    payload = extract_module.Ctx.payload

    def broken_at_1(self, doc, walk, index, error_event, ts):
        if index == 1:
            raise RuntimeError("bug")
        return payload(self, doc, walk, index, error_event, ts)

    monkeypatch.setattr(extract_module.Ctx, "payload", broken_at_1)
    request = grpc_frame(pb.SendMessageRequest(message=pb.Message(message_id="u-1", role=pb.ROLE_USER)))
    grpc_headers = [(b"content-type", b"application/grpc")]
    url = (b"https", "agent.test", 443, b"/lf.a2a.v1.A2AService/SendStreamingMessage")
    req = (b"POST", url, b"HTTP/2.0", grpc_headers, request, len(request), 1.0, None, None, False)
    w = _worker(tmp_path)
    w.handle(("o", "g", req, (200, grpc_headers, 1.1)))
    w.handle(("c", "g", 1.2, update(0) + update(1) + update(2)))
    w.handle(("e", "g", (1.3, [(b"grpc-status", b"0")]), None, False))
    w.close()
    ex = load(tmp_path, "exchanges").iloc[0]
    assert ex["sse_events"] == 3 and "grpc_message_failed:1:RuntimeError" in list(ex["anomalies"])
    assert load(tmp_path, "messages").sort_values("seq")["message_id"].tolist() == ["u-1", "a-0", "a-2"]


def test_streams_stalled_mid_event_hold_at_most_the_workers_budget(tmp_path: Path, monkeypatch) -> None:
    """Each open stream's parser may hold an unfinished event of up to max_body (16 MiB): a hundred streams
    stalled mid-event held 1.6 GB in the worker. Past MAX_HELD together, the largest unfinished events are
    dropped (their rows say so) and the streams go on: their later events are parsed."""
    from converse_tap.addon import worker as worker_module

    monkeypatch.setattr(worker_module, "MAX_HELD", 2 * 1024 * 1024)
    w = _worker(tmp_path)  # max_body 1 MiB: each event may hold up to that
    head = (200, [(b"content-type", b"text/event-stream")], 1.1)
    req = _req(jsonrpc_request("SendStreamingMessage"))
    n = 6
    for i in range(n):
        w.handle(("o", f"s{i}", req, head))
    for i in range(n):  # each holds 700 KB of an event not yet ended
        w.handle(("c", f"s{i}", 1.2, b'data: {"pad": "' + b"x" * (700_000 + i)))
        assert w.held <= worker_module.MAX_HELD
    final = sse_body(status_event("TASK_STATE_COMPLETED", agent_message()))
    for i in range(n):
        w.handle(("c", f"s{i}", 1.3, b'"}\n\n' + final))
        w.handle(("e", f"s{i}", (1.4, None), None, False))
    assert w.held == 0 and not w.streams
    w.close()
    ex = load(tmp_path, "exchanges").set_index("exchange_id")
    shed = [i for i in range(n) if any("worker_buffer_full" in a for a in ex.loc[f"s{i}", "anomalies"])]
    # s0-s2 pass the budget: the largest (s2, s1) go until the rest fit in half of it; s3-s4 again, then s5 fits
    assert shed == [1, 2, 3, 4]
    assert (ex["sse_events"] == 2).all()  # every stream's later event is still parsed
    messages = load(tmp_path, "messages")
    assert (messages.groupby("exchange_id").size() >= 1).all() and len(messages.exchange_id.unique()) == n


def test_a_compressed_stream_whose_window_fills_the_budget_is_no_longer_decoded(tmp_path: Path, monkeypatch) -> None:
    """A decoder's window fills as data is decoded (zstd up to 8 MiB, brotli 16 MiB): a few hundred bytes of
    compressed zeros per stream fill one. Over MAX_HELD, the stream holding most is not decoded from there on."""
    from converse_tap.a2a.inflate import zstd
    from converse_tap.addon import worker as worker_module

    monkeypatch.setattr(worker_module, "MAX_HELD", 2 * 1024 * 1024)
    w = _worker(tmp_path)
    c = zstd.ZstdCompressor()
    first = c.compress(b": " + b"\0" * (3 * 1024 * 1024) + b"\n\n", mode=zstd.ZstdCompressor.FLUSH_BLOCK)
    later = c.compress(sse_body(status_event("TASK_STATE_WORKING")), mode=zstd.ZstdCompressor.FLUSH_FRAME)
    head = (200, [(b"content-type", b"text/event-stream"), (b"content-encoding", b"zstd")], 1.1)
    plain = (200, [(b"content-type", b"text/event-stream")], 1.1)
    req = _req(jsonrpc_request("SendStreamingMessage"))
    w.handle(("o", "zipped", req, head))
    w.handle(("o", "plain", req, plain))
    w.handle(("c", "zipped", 1.2, first))  # a few KB that fill 3 MiB of its window
    assert w.held <= worker_module.MAX_HELD
    w.handle(("c", "zipped", 1.2, later))
    w.handle(("c", "plain", 1.2, sse_body(status_event("TASK_STATE_COMPLETED", agent_message()))))
    for fid in ("zipped", "plain"):
        w.handle(("e", fid, (1.3, None), None, False))
    assert w.held == 0
    w.close()
    ex = load(tmp_path, "exchanges").set_index("exchange_id")
    assert any(a.startswith("sse_not_parsed:worker_buffer_full") for a in ex.loc["zipped", "anomalies"])
    assert ex.loc["zipped", "sse_events"] == 0  # its event after the window filled is not decoded
    assert ex.loc["plain", "sse_events"] == 1 and ex.loc["plain", "complete"]


def test_a_long_stream_of_long_texts_keeps_its_rows_within_the_budget(tmp_path: Path, monkeypatch) -> None:
    """A stream's message rows wait for its end: 10,000 events of a 16 MiB text each would have been 160 GB.
    Past MAX_HELD the rows made so far give up their long texts (saying so, `text_length` kept); every row and
    every later text is still there."""
    import tracemalloc

    from converse_tap.addon import worker as worker_module

    monkeypatch.setattr(worker_module, "MAX_HELD", 4 * 1024 * 1024)
    w = _worker(tmp_path)
    w.max_events = 1000
    head = (200, [(b"content-type", b"text/event-stream")], 1.1)
    w.handle(("o", "s", _req(jsonrpc_request("SendStreamingMessage")), head))
    tracemalloc.start()
    try:
        for i in range(100):
            msg = agent_message(f"m{i}", text=f"{i:03d}" + "y" * 200_000)
            w.handle(("c", "s", 1.2, sse_body(status_event("TASK_STATE_WORKING", msg))))
            assert w.held <= worker_module.MAX_HELD
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert held < 3 * worker_module.MAX_HELD, held  # 100 texts of 200 KB kept whole are 20 MB
    w.handle(("e", "s", (1.3, None), None, False))
    w.close()
    m = load(tmp_path, "messages")
    replies = m[m["role"] == "agent"].sort_values("seq")
    assert len(replies) == 100 and (replies["text_length"] == 200_003).all()
    lost = replies["text"].isna()
    assert lost.any() and not lost.iloc[-1]  # earlier texts gave way, the last one is kept
    assert all("text_not_kept:worker_buffer_full" in list(a) for a in replies.loc[lost, "anomalies"])
    assert (replies.loc[~lost, "text"].str.len() == 200_003).all()


def test_the_gather_pause_ends_once_the_pipe_is_half_full() -> None:
    """A flood must not meet a sleeping worker: records gather after a read, but the wait ends as soon as the
    pipe holds half its size (else the proxy's backlog overflows while the worker could have kept up)."""
    import fcntl
    import os
    import threading
    import time

    from converse_tap.addon import workerproc

    r, w = os.pipe()
    try:
        fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, 1 << 20)
        assert workerproc._in_pipe(r) == 0
        os.write(w, b"x" * 1000)
        assert workerproc._in_pipe(r) == 1000
        half = b"y" * (workerproc._READ // 2)
        filler = threading.Timer(0.05, os.write, (w, half))
        filler.start()
        started = time.monotonic()
        workerproc._gather(r, 60.0)  # would take a minute if the pipe's fill were not looked at
        filler.join()
        assert time.monotonic() - started < 30
        assert workerproc._in_pipe(r) == 1000 + len(half)
    finally:
        os.close(r)
        os.close(w)
