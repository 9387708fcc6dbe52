import base64
import gzip
import zlib

import pytest
from a2a.compat.v0_3 import a2a_v0_3_pb2 as v03
from a2a.types import a2a_pb2 as pb
from google.rpc import error_details_pb2, status_pb2
from hypothesis import given, settings
from hypothesis import strategies as st

from converse_tap.a2a.classify import classify
from converse_tap.a2a.extract import extract
from converse_tap.a2a.grpc import classify_grpc, decode, grpc_status, is_grpc, request_params
from converse_tap.a2a.grpc_frames import GrpcFrameParser, parse_frames
from converse_tap.a2a.headers import Headers
from converse_tap.a2a.redact import TextPolicy
from tests.a2a.grpc_helpers import BASE, GRPC_HEADERS, V1, frame, grpc_exchange
from tests.factories import EXT, envelope

V03 = f"{BASE}/a2a.v1.A2AService"


MESSAGES = [b"", b"x", b"\x00" * 4, b"\x01\x00\x00\x00\x05hello", bytes(range(256)) * 3]
BODY = b"".join(frame(m) for m in MESSAGES)


def _split(body: bytes, cuts: list[int], max_bytes: int = 1 << 20, encoding: str = "") -> tuple[list, GrpcFrameParser]:
    parser = GrpcFrameParser(max_bytes, encoding)
    points = sorted({c % (len(body) + 1) for c in cuts})
    frames, last = [], 0
    for p in [*points, len(body)]:
        frames += parser.feed(body[last:p])
        last = p
    return frames, parser


@settings(deadline=None)  # correctness, not speed: a loaded machine must not fail it
@given(st.lists(st.integers(min_value=0, max_value=10_000), max_size=40))
def test_any_chunking_gives_the_same_messages(cuts: list[int]) -> None:
    frames, parser = _split(BODY, cuts)
    assert [f.data for f in frames] == MESSAGES
    assert parser.pending() == 0 and parser.malformed is None and parser.bytes == len(BODY)


@settings(deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=10_000), max_size=20))
def test_oversize_messages_are_skipped_whatever_the_chunking(cuts: list[int]) -> None:
    body = frame(b"a" * 10) + frame(b"b" * 100) + frame(b"c" * 10)
    frames, parser = _split(body, cuts, max_bytes=50)
    assert [(f.data, f.oversize, f.length) for f in frames] == [
        (b"a" * 10, False, 10),
        (b"", True, 100),
        (b"c" * 10, False, 10),
    ]
    assert parser.pending() == 0
    assert len(parser._buf) <= 50 + 5  # the oversize message was never held


def test_a_cut_stream_and_a_malformed_prefix_are_reported() -> None:
    frames, notes = parse_frames(BODY[:-7])
    assert len(frames) == len(MESSAGES) - 1 and notes == ["grpc_frame_truncated:766"]
    frames, notes = parse_frames(frame(b"ok") + b"\x07\x00\x00\x00\x01z" + frame(b"never"))
    assert [f.data for f in frames] == [b"ok"] and notes == ["grpc_frame_malformed:flag=7@7"]


@pytest.mark.parametrize(
    ("encoding", "compress"),
    [("gzip", lambda b: gzip.compress(b, mtime=0)), ("deflate", zlib.compress), ("identity", None), ("", None)],
)
def test_compressed_messages_are_inflated_with_the_grpc_encoding(encoding: str, compress) -> None:
    data = b"hello " * 100
    if compress is None:  # the flag set without an encoding that says how
        frames, _ = parse_frames(frame(data, compressed=True), encoding=encoding)
        assert frames[0].data == b"" and frames[0].error == "compressed_without_grpc_encoding"
        return
    frames, notes = parse_frames(frame(compress(data), compressed=True) + frame(b"plain"), encoding=encoding)
    assert [f.data for f in frames] == [data, b"plain"] and notes == []
    bomb, _ = parse_frames(
        frame(compress(b"\x00" * 100_000), compressed=True), max_message_bytes=1000, encoding=encoding
    )
    assert bomb[0].oversize and bomb[0].data == b""


def test_unsupported_and_corrupt_compression_are_errors_not_exceptions() -> None:
    assert parse_frames(frame(b"xx", True), encoding="snappy")[0][0].error == "grpc_encoding_invalid:snappy"
    assert parse_frames(frame(b"not gzip", True), encoding="gzip")[0][0].error == "inflate_failed"


def test_content_types() -> None:
    assert is_grpc("application/grpc") and is_grpc("application/grpc+proto; charset=x")
    assert not is_grpc("application/grpc-web") and not is_grpc("application/grpc+json") and not is_grpc(None)


def _send_request(tenant: str = "") -> bytes:
    msg = pb.Message(message_id="u-1", context_id="c-1", role=pb.ROLE_USER, parts=[pb.Part(text="When are you open?")])
    return pb.SendMessageRequest(message=msg, tenant=tenant).SerializeToString()


def _agent_message(mid: str = "a-1", env: dict | None = None) -> pb.Message:
    msg = pb.Message(message_id=mid, context_id="c-1", role=pb.ROLE_AGENT, parts=[pb.Part(text="Open 12-15.")])
    msg.extensions.append(EXT)
    msg.metadata.update({EXT: env or envelope()})
    return msg


def test_decode_gives_the_json_bindings_shape() -> None:
    doc, note = decode(
        "v1.0", "SendMessage", "response", pb.SendMessageResponse(message=_agent_message()).SerializeToString()
    )
    assert note is None
    assert doc["message"]["messageId"] == "a-1" and doc["message"]["role"] == "ROLE_AGENT"
    assert doc["message"]["metadata"][EXT]["answerCoverage"]["coverage"] == "answered"
    assert decode("v1.0", "SendMessage", "response", b"\x0a\x05ab") == (None, "grpc_message_undecodable:DecodeError")
    assert decode("v1.0", "Frobnicate", "response", b"") == (None, "grpc_not_decoded:unknown_method")


def test_classify_v1_and_v03_calls() -> None:
    req = classify("POST", f"{V1}/SendMessage", Headers(GRPC_HEADERS), frame(_send_request("ag_trattoria01")))
    assert req is not None
    assert (req.binding, req.method, req.dialect, req.agent_url) == (
        "grpc",
        "SendMessage",
        "v1.0",
        f"{BASE}/ag_trattoria01",
    )
    assert request_params(req)["message"]["parts"] == [{"text": "When are you open?"}] and req.anomalies == []

    sub = v03.TaskSubscriptionRequest(name="tasks/t-7").SerializeToString()
    req = classify_grpc(f"{V03}/TaskSubscription", Headers(GRPC_HEADERS), frame(sub))
    assert req is not None and (req.method, req.dialect, req.task_id, req.streaming) == (
        "SubscribeToTask",
        "v0.3",
        "t-7",
        True,
    )

    req = classify_grpc(f"{V1}/Frobnicate", Headers(GRPC_HEADERS), frame(b""))
    assert req is not None and req.anomalies == ["unknown_method:Frobnicate"]
    req = classify_grpc(
        f"{BASE}/acme.A2AService/GetTask", Headers(GRPC_HEADERS), frame(pb.GetTaskRequest(id="t-1").SerializeToString())
    )
    assert req is not None and req.task_id == "t-1" and req.anomalies == ["grpc_unknown_service:acme.A2AService"]
    # not gRPC: another content type, or another service
    assert classify("POST", f"{V1}/SendMessage", Headers([("content-type", "application/json")]), b"{}") is None
    assert classify("POST", f"{BASE}/acme.Other/SendMessage", Headers(GRPC_HEADERS), frame(b"")) is None


def test_status_from_trailers_or_trailers_only_headers() -> None:
    details = status_pb2.Status(code=5, message="Task not found")
    details.details.add().Pack(error_details_pb2.ErrorInfo(reason="TASK_NOT_FOUND", domain="a2a-protocol.org"))
    b64 = base64.b64encode(details.SerializeToString()).decode().rstrip("=")  # gRPC sends it unpadded
    trailers = Headers([("grpc-status", "5"), ("grpc-message", "Task%20not%20found"), ("grpc-status-details-bin", b64)])
    status, notes = grpc_status(Headers(), trailers)
    assert status is not None and notes == []
    assert (status.code, status.name, status.message, status.reason) == (
        5,
        "NOT_FOUND",
        "Task not found",
        "TASK_NOT_FOUND",
    )
    status, _ = grpc_status(Headers([("grpc-status", "0")]), None)
    assert status is not None and status.code == 0
    assert grpc_status(Headers(), Headers()) == (None, [])
    status, notes = grpc_status(Headers(), Headers([("grpc-status", "x"), ("grpc-status-details-bin", "!!")]))
    assert (
        status is not None
        and status.code == 2
        and notes == ["grpc_status_invalid:x", "grpc_status_details_undecodable"]
    )


def _stream_body() -> bytes:
    working = pb.StreamResponse(
        status_update=pb.TaskStatusUpdateEvent(
            task_id="t-1", context_id="c-1", status=pb.TaskStatus(state=pb.TASK_STATE_WORKING)
        )
    )
    done = pb.StreamResponse(
        status_update=pb.TaskStatusUpdateEvent(
            task_id="t-1",
            context_id="c-1",
            status=pb.TaskStatus(state=pb.TASK_STATE_COMPLETED, message=_agent_message()),
        )
    )
    return frame(working.SerializeToString()) + frame(done.SerializeToString())


def test_a_stream_from_a_flow_body_gives_one_sighting_per_message() -> None:
    out = extract(grpc_exchange("SendStreamingMessage", _send_request(), _stream_body()), TextPolicy())
    assert out is not None
    row = out.exchange
    assert (row["binding"], row["method"], row["streamed"], row["sse_events"], row["complete"]) == (
        "grpc",
        "SendStreamingMessage",
        True,
        2,
        True,
    )
    assert (row["task_state"], row["replies"], row["converse_echoed"], row["anomalies"]) == (
        "TASK_STATE_COMPLETED",
        1,
        True,
        [],
    )
    assert [(m["direction"], m["location"], m["event_index"]) for m in out.messages] == [
        ("request", "request.message", None),
        ("response", "event[1].statusUpdate.status.message", 1),
    ]
    assert out.messages[1]["coverage"] == "answered" and out.messages[1]["has_envelope"]


def test_a_stream_cut_mid_way_is_incomplete() -> None:
    body = _stream_body()
    out = extract(
        grpc_exchange("SendStreamingMessage", _send_request(), body[:-3], trailers=[], error="peer closed"),
        TextPolicy(),
    )
    assert out is not None
    assert out.exchange["complete"] is False and out.exchange["sse_events"] == 1
    assert any(a.startswith("grpc_frame_truncated:") for a in out.exchange["anomalies"])
    out = extract(grpc_exchange("SendStreamingMessage", _send_request(), body, trailers=[]), TextPolicy())
    assert out is not None and out.exchange["complete"] is False and "grpc_status_missing" in out.exchange["anomalies"]


def test_an_error_status_is_recorded_as_an_error() -> None:
    ex = grpc_exchange(
        "GetTask",
        pb.GetTaskRequest(id="t-9").SerializeToString(),
        b"",
        trailers=[("grpc-status", "5"), ("grpc-message", "Task not found")],
    )
    out = extract(ex, TextPolicy())
    assert out is not None
    row = out.exchange
    assert (row["error_code"], row["error_status"], row["error_message"], row["task_id"], row["complete"]) == (
        5,
        "NOT_FOUND",
        "Task not found",
        "t-9",
        True,
    )


def test_bad_messages_become_anomalies() -> None:
    ex = grpc_exchange("SendMessage", _send_request(), frame(b"\x0a\x05ab") + frame(b"") + b"\x09\x00\x00\x00\x00")
    out = extract(ex, TextPolicy())
    assert out is not None
    assert out.exchange["anomalies"] == [
        "grpc_frame_malformed:flag=9@14",
        "grpc_unary_messages:2",
        "grpc_message_undecodable:DecodeError",
        "grpc_message_empty",  # the second, zero-length: a SendMessage response without its payload
    ]


def test_v03_messages_and_echo_in_trailers() -> None:
    msg = v03.Message(
        message_id="a-1", context_id="c-1", role=v03.ROLE_AGENT, content=[v03.Part(text="Hi")], extensions=[EXT]
    )
    msg.metadata.update({EXT: envelope()})
    ex = grpc_exchange("SendMessage", b"", frame(v03.SendMessageResponse(msg=msg).SerializeToString()))
    ex.url = f"{V03}/SendMessage"
    ex.request_body = frame(
        v03.SendMessageRequest(
            request=v03.Message(message_id="u-1", role=v03.ROLE_USER, content=[v03.Part(text="Hello")])
        ).SerializeToString()
    )
    ex.response_headers = Headers([("content-type", "application/grpc")])
    ex.response_trailers = Headers([("grpc-status", "0"), ("a2a-extensions", EXT)])
    out = extract(ex, TextPolicy())
    assert out is not None
    assert out.exchange["dialect"] == "v0.3" and out.exchange["converse_echoed"] and out.exchange["anomalies"] == []
    assert [(m["role"], m["text"], m["location"]) for m in out.messages] == [
        ("user", "Hello", "request.message"),
        ("agent", "Hi", "body.message"),
    ]
    assert out.messages[1]["has_envelope"]


def test_a_non_grpc_answer_to_a_grpc_call_is_an_error_not_frames() -> None:
    ex = grpc_exchange("SendMessage", _send_request(), b"<html>Bad gateway</html>", trailers=[])
    ex.status, ex.response_headers = 502, Headers([("content-type", "text/html; charset=utf-8")])
    out = extract(ex, TextPolicy())
    assert out is not None
    row = out.exchange
    assert (row["error_code"], row["complete"], row["replies"]) == (502, False, 0)
    assert row["anomalies"] == ["grpc_response_not_grpc:text/html"]


def test_a_flow_saved_without_its_streamed_body_says_so() -> None:
    out = extract(grpc_exchange("SendMessage", _send_request(), None), TextPolicy())
    assert out is not None
    assert out.exchange["anomalies"] == ["grpc_body_not_stored"] and out.exchange["complete"]
    assert [m["direction"] for m in out.messages] == ["request"]


def test_a_stream_the_client_cancelled_after_its_final_message_is_complete() -> None:
    """The a2a-sdk client stops reading once a Message arrives and cancels the call: if its RST_STREAM reaches the
    proxy before the agent's trailers, the flow ends in an error, but nothing of the exchange is missing."""
    error = "client cancelled the stream"
    reply = frame(pb.StreamResponse(message=_agent_message()).SerializeToString())
    ex = grpc_exchange("SendStreamingMessage", _send_request(), reply, trailers=[], error=error)
    out = extract(ex, TextPolicy())
    assert out is not None and out.exchange["complete"] and out.exchange["error"] == error
    assert out.exchange["anomalies"] == [] and out.exchange["replies"] == 1
    body = _stream_body()  # working, then completed: cut after `working`, the exchange is not whole
    working = body[: 5 + int.from_bytes(body[1:5], "big")]
    out = extract(
        grpc_exchange("SendStreamingMessage", _send_request(), working, trailers=[], error=error), TextPolicy()
    )
    assert out is not None and out.exchange["complete"] is False and out.exchange["sse_events"] == 1


def test_method_names_from_the_wire_are_not_cached() -> None:
    """Message classes are cached by descriptor (the SDK's few dozen), never by the method name a request names:
    a flood of distinct unknown methods cannot grow the recorder's memory."""
    import tracemalloc

    assert decode("v1.0", "SendMessage", "request", _send_request())[0] is not None
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(2000):
            name = f"Frobnicate{i:04d}" + "x" * 500
            assert decode("v1.0", name, "request", b"")[1] == "grpc_not_decoded:unknown_method"
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 200_000  # 2,000 names of 500+ characters held would be over 1 MB


def test_shed_drops_the_message_being_read_and_the_stream_goes_on() -> None:
    from converse_tap.a2a.grpc_frames import GrpcFrameParser

    first, second = b"\0" + (10).to_bytes(4, "big") + b"0123456789", b"\0" + (3).to_bytes(4, "big") + b"abc"
    p = GrpcFrameParser()
    assert p.feed(first[:8]) == [] and p.held == 3
    assert p.shed() and p.held == 0
    assert [f.data for f in p.feed(first[8:] + second[:2])] == []
    assert not p.shed()  # between messages: a part of the next prefix is kept
    assert [f.data for f in p.feed(second[2:])] == [b"abc"]


def test_a_status_message_and_echoed_extensions_are_redacted() -> None:
    """grpc-message quotes what the agent was sent (URLs with userinfo, tokens); trailers echo extension URIs."""
    ex = grpc_exchange(
        "GetTask",
        pb.GetTaskRequest(id="t-9").SerializeToString(),
        b"",
        trailers=[
            ("grpc-status", "16"),
            ("grpc-message", "token%20sk-abcdefghijklmnopGRPC1%20for%20https://u:GRPCPW2@h.test/x"),
            ("a2a-extensions", "https://ext.test/e?token=GRPCTOK3"),
        ],
    )
    out = extract(ex, TextPolicy())
    assert out is not None
    row = out.exchange
    assert row["error_message"] == "token [REDACTED] for https://h.test/x"
    assert "https://ext.test/e?token=[REDACTED]" in row["extensions_echoed"]


def test_push_config_calls_are_attributed_to_their_task() -> None:
    """v1.0 push-config requests name the task `task_id` (their `id` is the config's); v0.3 names it in `name` or
    `parent` (`tasks/{id}/pushNotificationConfigs/…`)."""
    calls = [
        (f"{V1}/GetTaskPushNotificationConfig", pb.GetTaskPushNotificationConfigRequest(task_id="t-1", id="c-1")),
        (f"{V1}/DeleteTaskPushNotificationConfig", pb.DeleteTaskPushNotificationConfigRequest(task_id="t-1", id="c")),
        (f"{V1}/ListTaskPushNotificationConfigs", pb.ListTaskPushNotificationConfigsRequest(task_id="t-1")),
        (f"{V1}/CreateTaskPushNotificationConfig", pb.TaskPushNotificationConfig(task_id="t-1", id="c-1")),
        (f"{V1}/GetTaskPushNotificationConfig", pb.GetTaskPushNotificationConfigRequest(id="c-1")),
        (
            f"{V03}/GetTaskPushNotificationConfig",
            v03.GetTaskPushNotificationConfigRequest(name="tasks/t-1/pushNotificationConfigs/c-1"),
        ),
        (f"{V03}/ListTaskPushNotificationConfig", v03.ListTaskPushNotificationConfigRequest(parent="tasks/t-1")),
    ]
    got = []
    for url, message in calls:
        req = classify_grpc(url, Headers(GRPC_HEADERS), frame(message.SerializeToString()))
        assert req is not None and req.anomalies == []
        got.append(req.task_id)
    assert got == ["t-1", "t-1", "t-1", "t-1", None, "t-1", "t-1"]
