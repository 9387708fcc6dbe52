"""gRPC as other implementations and attackers send it: messages that decode to nothing, a unary success
without its message, odd `grpc-message` bytes, framing split every way, both packages, every content type,
credentials in metadata. Frames are built by hand from the a2a-sdk's protobuf classes; flows via mitmproxy's
`tflow` where the header path matters."""

from __future__ import annotations

import base64
import gzip
import json
from typing import Any

import pytest
from a2a.compat.v0_3 import a2a_v0_3_pb2 as v03
from a2a.types import a2a_pb2 as pb
from google.protobuf import any_pb2, json_format
from google.rpc import error_details_pb2, status_pb2
from hypothesis import given, settings
from hypothesis import strategies as st
from mitmproxy import http

from converse_tap.a2a.exchange import HttpExchange
from converse_tap.a2a.extract import extract
from converse_tap.a2a.grpc_status import grpc_status
from converse_tap.a2a.grpc_utf8 import mend_utf8
from converse_tap.a2a.headers import Headers
from converse_tap.a2a.redact import TextPolicy
from converse_tap.a2a.rows import Extraction
from converse_tap.addon.flows import exchange_from_flow
from tests.a2a.grpc_helpers import BASE, GRPC_HEADERS, V1, frame, grpc_exchange
from tests.factories import EXT, envelope, grpc_flow

SECRET = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"


def _reply(mid: str = "a-1", text: str = "Open 12-15.") -> pb.Message:
    msg = pb.Message(message_id=mid, context_id="c-1", role=pb.ROLE_AGENT, parts=[pb.Part(text=text)])
    msg.extensions.append(EXT)
    msg.metadata.update({EXT: envelope()})
    return msg


SEND = pb.SendMessageRequest(
    message=pb.Message(message_id="u-1", context_id="c-1", role=pb.ROLE_USER, parts=[pb.Part(text="hi")])
).SerializeToString()
REPLY = pb.SendMessageResponse(message=_reply()).SerializeToString()


def _event(**kw: object) -> bytes:
    return frame(pb.StreamResponse(**kw).SerializeToString())  # type: ignore[arg-type]


def _stream() -> bytes:
    """A task, a status update with a message, an artifact update, a message, the final status: one of each."""
    art = pb.Artifact(artifact_id="ar-1", name="answer", parts=[pb.Part(text="art text")], extensions=[EXT])
    art.metadata.update({EXT: envelope()})
    working = pb.TaskStatus(state=pb.TASK_STATE_WORKING, message=_reply("a-0", "thinking"))
    return (
        _event(task=pb.Task(id="t-1", context_id="c-1", status=pb.TaskStatus(state=pb.TASK_STATE_SUBMITTED)))
        + _event(status_update=pb.TaskStatusUpdateEvent(task_id="t-1", context_id="c-1", status=working))
        + _event(artifact_update=pb.TaskArtifactUpdateEvent(task_id="t-1", context_id="c-1", artifact=art))
        + _event(message=_reply("a-2", "final"))
        + _event(
            status_update=pb.TaskStatusUpdateEvent(
                task_id="t-1", context_id="c-1", status=pb.TaskStatus(state=pb.TASK_STATE_COMPLETED)
            )
        )
    )


def _run(ex: HttpExchange) -> Extraction:
    out = extract(ex, TextPolicy())
    assert out is not None
    return out


def _replies(out: Extraction) -> list[str]:
    return [m["text"] for m in out.messages if m["direction"] == "response"]


# --- messages that decode to nothing, a success without its message ------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        frame(b""),  # a zero-length message
        frame(b"\x10\x05"),  # `message` (field 2) sent as a varint: the runtime keeps it as an unknown field
        frame(b"\xf8\x07\x01"),  # only a field this version does not know
    ],
)
def test_a_send_message_response_without_its_payload_is_said(body: bytes) -> None:
    """It used to be a success with no reply and no note: the reply was lost in silence."""
    out = _run(grpc_exchange("SendMessage", SEND, body))
    row = out.exchange
    assert (row["anomalies"], row["replies"], row["complete"], row["error_code"]) == (
        ["grpc_message_empty"],
        0,
        True,
        None,
    )


def test_an_empty_event_in_a_stream_is_said_with_its_index() -> None:
    body = _stream()
    cut = len(_event(task=pb.Task(id="t-1", context_id="c-1", status=pb.TaskStatus(state=pb.TASK_STATE_SUBMITTED))))
    out = _run(grpc_exchange("SendStreamingMessage", SEND, body[:cut] + frame(b"") + body[cut:]))
    row = out.exchange
    assert row["anomalies"] == ["grpc_message_empty:1"]
    assert (row["sse_events"], row["replies"], row["task_state"]) == (6, 2, "TASK_STATE_COMPLETED")


@pytest.mark.parametrize(
    ("method", "request_"),
    [
        ("DeleteTaskPushNotificationConfig", pb.DeleteTaskPushNotificationConfigRequest(id="p-1", task_id="t-1")),
        ("ListTasks", pb.ListTasksRequest()),
    ],
)
def test_an_empty_message_that_says_all_there_is_is_not_noted(method: str, request_: object) -> None:
    """`google.protobuf.Empty`, or a list with no item: zero bytes on the wire, and nothing lost."""
    out = _run(grpc_exchange(method, request_.SerializeToString(), frame(b"")))  # type: ignore[attr-defined]
    assert out.exchange["anomalies"] == [] and out.exchange["complete"]


@pytest.mark.parametrize(
    ("body", "trailers", "headers"),
    [
        (b"", [("grpc-status", "0")], GRPC_HEADERS),  # DATA-less, trailers say OK
        (b"", [], [*GRPC_HEADERS, ("grpc-status", "0")]),  # trailers-only OK
    ],
)
def test_a_unary_success_without_a_message_is_said(body: bytes, trailers: list, headers: list) -> None:
    """gRPC clients fail such a call (no message for a unary RPC); the row said nothing."""
    for method, request in (("SendMessage", SEND), ("GetTask", pb.GetTaskRequest(id="t-1").SerializeToString())):
        out = _run(grpc_exchange(method, request, body, trailers, headers))
        assert out.exchange["anomalies"] == ["grpc_unary_messages:0"], method
        assert out.exchange["complete"] and out.exchange["error_code"] is None


def test_a_message_less_answer_already_explained_is_not_noted_twice() -> None:
    """An error status, a stream, framing that failed, a body not stored: each says why there is no message."""
    error = _run(grpc_exchange("SendMessage", SEND, b"", [("grpc-status", "5")]))
    assert error.exchange["anomalies"] == [] and error.exchange["error_status"] == "NOT_FOUND"
    stream = _run(grpc_exchange("SendStreamingMessage", SEND, b""))
    assert stream.exchange["anomalies"] == [] and stream.exchange["sse_events"] == 0
    malformed = _run(grpc_exchange("SendMessage", SEND, b"\x40" + REPLY))
    assert [a.split(":")[0] for a in malformed.exchange["anomalies"]] == ["grpc_frame_malformed"]
    cut = _run(grpc_exchange("SendMessage", SEND, frame(REPLY)[:9]))
    assert cut.exchange["anomalies"] == ["grpc_frame_truncated:9"]
    unstored = _run(grpc_exchange("SendMessage", SEND, None))
    assert unstored.exchange["anomalies"] == ["grpc_body_not_stored"]


# --- framing, as the tap meets it --------------------------------------------------------------------------


def test_a_4gib_length_prefix_is_skipped_and_the_cut_said() -> None:
    out = _run(grpc_exchange("SendMessage", SEND, b"\x00\xff\xff\xff\xff" + REPLY, trailers=[], error="reset"))
    # the bytes of the cut message that came, as for any cut message (it said the 4 GiB still due)
    assert out.exchange["anomalies"] == [f"grpc_frame_truncated:{5 + len(REPLY)}", "grpc_message_too_large"]
    assert out.exchange["complete"] is False and _replies(out) == []


@pytest.mark.parametrize(
    ("encoding", "read"),
    [
        ("gzip", True),
        ("GZIP", True),  # codings are case-insensitive
        (" gzip ", True),
        ("x-gzip", True),
        ("gzip;q=1", False),  # gRPC names one coding, with no parameters
        ("gzip, identity", False),
        ("identity", False),  # a compressed flag with identity: nothing to decode it with
        ("", False),
        ("snappy", False),
    ],
)
def test_the_compressed_flag_under_each_grpc_encoding(encoding: str, read: bool) -> None:
    headers = [*GRPC_HEADERS, *([("grpc-encoding", encoding)] if encoding else [])]
    out = _run(grpc_exchange("SendMessage", SEND, frame(gzip.compress(REPLY), True), response_headers=headers))
    assert _replies(out) == (["Open 12-15."] if read else [])
    notes = out.exchange["anomalies"]
    assert (
        notes == []
        if read
        else len(notes) == 1
        and notes[0].split(":")[0]
        in (
            "grpc_encoding_invalid",
            "compressed_without_grpc_encoding",
        )
    )


def test_an_uncompressed_message_under_a_grpc_encoding_is_read() -> None:
    """The flag, not the header, says whether a message is compressed: a server may leave small ones plain."""
    headers = [*GRPC_HEADERS, ("grpc-encoding", "gzip")]
    body = frame(REPLY) + frame(gzip.compress(REPLY), True)
    out = _run(grpc_exchange("SendMessage", SEND, body, response_headers=headers))
    assert _replies(out) == ["Open 12-15.", "Open 12-15."] and out.exchange["anomalies"] == ["grpc_unary_messages:2"]


def test_every_event_kind_of_a_v03_task_subscription() -> None:
    m = v03.Message(message_id="a-1", context_id="c-1", role=v03.ROLE_AGENT, content=[v03.Part(text="Hi")])
    m.extensions.append(EXT)
    m.metadata.update({EXT: envelope()})
    art = v03.Artifact(artifact_id="ar-1", parts=[v03.Part(text="art")], extensions=[EXT])
    art.metadata.update({EXT: envelope()})
    events = [
        v03.StreamResponse(
            task=v03.Task(id="t-9", context_id="c-1", status=v03.TaskStatus(state=v03.TASK_STATE_WORKING))
        ),
        v03.StreamResponse(
            status_update=v03.TaskStatusUpdateEvent(
                task_id="t-9", status=v03.TaskStatus(state=v03.TASK_STATE_WORKING, update=m)
            )
        ),
        v03.StreamResponse(artifact_update=v03.TaskArtifactUpdateEvent(task_id="t-9", artifact=art)),
        v03.StreamResponse(msg=m),
        v03.StreamResponse(
            status_update=v03.TaskStatusUpdateEvent(
                task_id="t-9", status=v03.TaskStatus(state=v03.TASK_STATE_COMPLETED), final=True
            )
        ),
    ]
    ex = grpc_exchange("x", b"", b"".join(frame(e.SerializeToString()) for e in events))
    ex.url = f"{BASE}/a2a.v1.A2AService/TaskSubscription"
    ex.request_body = frame(v03.TaskSubscriptionRequest(name="tasks/t-9").SerializeToString())
    out = _run(ex)
    row = out.exchange
    assert (row["method"], row["dialect"], row["task_id"], row["sse_events"], row["anomalies"]) == (
        "SubscribeToTask",
        "v0.3",
        "t-9",
        5,
        [],
    )
    assert [(m["location"], m["has_envelope"]) for m in out.messages] == [
        ("event[1].statusUpdate.status.message", True),
        ("event[2].artifactUpdate.artifact", True),
        ("event[3].message", True),
    ]
    assert row["task_state"] == "TASK_STATE_COMPLETED" and row["complete"]


# --- status: hostile grpc-message, details, HTTP statuses ---------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "text", "notes"),
    [
        ("no%20way", "no way", []),
        ("caf%C3%A9 100%", "café 100%", []),  # a lone `%` is kept, as gRPC clients keep it
        ("%FF%FEok", "\ufffd\ufffdok", ["grpc_message_not_utf8"]),  # percent-encoded bytes that are not UTF-8
        ("bad \udcff raw", "bad \ufffd raw", ["grpc_message_not_utf8"]),  # a raw byte, as mitmproxy keeps it
        ("x \ud800", "x \ufffd\ufffd\ufffd", ["grpc_message_not_utf8"]),  # a surrogate no byte gives
    ],
)
def test_grpc_message_that_is_not_utf8_is_replaced_and_said(raw: str, text: str, notes: list[str]) -> None:
    """It became U+FFFD in silence (percent-encoded), or a lone surrogate no column stores (raw)."""
    status, got = grpc_status(Headers(), Headers([("grpc-status", "13"), ("grpc-message", raw)]))
    assert status is not None and (status.message, got) == (text, notes)


def test_a_raw_byte_in_a_grpc_web_trailers_frame_is_said_as_in_http2_trailers() -> None:
    """The trailers frame's values are read as mitmproxy reads a header: the odd byte reaches the status reader,
    which says so, where it used to be replaced before anyone looked."""
    block = b"grpc-status: 13\r\ngrpc-message: bad \xff byte\r\n"
    body = b"\x80" + len(block).to_bytes(4, "big") + block
    headers = [("content-type", "application/grpc-web"), ("a2a-extensions", EXT)]
    ex = grpc_exchange("SendMessage", SEND, body, trailers=[], response_headers=headers)
    ex.response_trailers = None
    out = _run(ex)
    assert (out.exchange["error_code"], out.exchange["error_message"]) == (13, "bad \ufffd byte")
    assert out.exchange["anomalies"] == ["grpc_message_not_utf8"]


def test_a_unary_message_under_an_error_status_is_recorded_and_said() -> None:
    """The agent sent a reply and then failed the call: a gRPC client raises the status and never sees the reply,
    so a reply row alone would count an answer nobody got. A stream's messages before its error were delivered."""
    unary = _run(grpc_exchange("SendMessage", SEND, frame(REPLY), [("grpc-status", "13"), ("grpc-message", "boom")]))
    row = unary.exchange
    assert (row["error_code"], row["error_message"], row["replies"]) == (13, "boom", 1)
    assert row["anomalies"] == ["grpc_message_with_error_status"]
    stream = _run(grpc_exchange("SendStreamingMessage", SEND, _stream(), [("grpc-status", "13")]))
    assert stream.exchange["anomalies"] == [] and stream.exchange["error_code"] == 13


def test_terminal_escapes_in_grpc_message_are_kept_as_data() -> None:
    """Stored as sent (a column holds data; printing it safely is the reader's concern, as for JSON-RPC errors)."""
    out = _run(grpc_exchange("SendMessage", SEND, b"", [("grpc-status", "13"), ("grpc-message", "%1B%5B2Jx")]))
    assert out.exchange["error_message"] == "\x1b[2Jx" and out.exchange["anomalies"] == []


def test_a_status_reason_and_message_holding_credentials_are_redacted() -> None:
    details = status_pb2.Status(code=16, message="bad key " + SECRET)
    packed = any_pb2.Any()
    packed.Pack(error_details_pb2.ErrorInfo(reason=SECRET, domain="a2a", metadata={"token": JWT}))
    details.details.append(packed)
    trailers = [
        ("grpc-status", "16"),
        ("grpc-message", "denied%20Bearer%20" + JWT),
        ("grpc-status-details-bin", base64.b64encode(details.SerializeToString()).decode()),
    ]
    out = _run(grpc_exchange("SendMessage", SEND, b"", trailers))
    assert out.exchange["error_status"] == "UNAUTHENTICATED"
    stored = json.dumps([out.exchange, out.messages], default=str)
    assert SECRET not in stored and JWT not in stored and SECRET[8:24] not in stored


def test_credentials_in_grpc_metadata_never_reach_a_row() -> None:
    """authorization, x-api-key, a `-bin` header holding a token, a token in an extension URI's query: the tap
    stores no header but the extension lists (redacted)."""
    f = grpc_flow("SendMessage", pb.SendMessageRequest.FromString(SEND), frame(REPLY))
    f.request.headers["authorization"] = "Bearer " + JWT
    f.request.headers["x-api-key"] = SECRET
    f.request.headers["x-token-bin"] = base64.b64encode(SECRET.encode()).decode()
    f.request.headers["a2a-extensions"] = f"{EXT}, https://x.test/ext?api_key={SECRET}"
    assert f.response is not None
    f.response.headers["a2a-extensions"] = EXT
    f.response.trailers = http.Headers(grpc_status="0", x_session_token=JWT)
    out = _run(exchange_from_flow(f))
    stored = json.dumps([out.exchange, out.messages], default=str)
    for secret in (SECRET, JWT, base64.b64encode(SECRET.encode()).decode(), SECRET[8:24]):
        assert secret not in stored
    assert out.exchange["converse_requested"] and out.exchange["converse_echoed"] and _replies(out)


# --- protobuf oddities ------------------------------------------------------------------------------------


def test_a_field_given_twice_is_merged_as_every_protobuf_reader_merges_it() -> None:
    """Two `message` fields: the runtime merges them (repeated parts appended, scalars last-wins), as the
    client did; the row is what the client saw."""
    first = pb.Message(message_id="a-1", parts=[pb.Part(text="first")]).SerializeToString()
    second = pb.Message(message_id="a-2", parts=[pb.Part(text="second")]).SerializeToString()
    body = b"".join(b"\x12" + bytes([len(m)]) + m for m in (first, second))
    out = _run(grpc_exchange("SendMessage", SEND, frame(body)))
    assert [(m["message_id"], m["text"]) for m in out.messages if m["direction"] == "response"] == [
        ("a-2", "first\nsecond")
    ]


def test_envelope_values_of_the_wrong_type_in_a_struct_cost_their_field() -> None:
    """A Struct turns every number into a double: `coverage: 3` arrives as 3.0, read back as the 3 a JSON binding
    sends (`grpc_codecs.message_to_dict`); the wrong types are said on the message row and the rest of the
    envelope is read."""
    msg = _reply()
    env = envelope()
    env["answerCoverage"]["coverage"] = 3
    env["author"] = ["agent"]
    msg.metadata.update({EXT: env})
    out = _run(grpc_exchange("SendMessage", SEND, frame(pb.SendMessageResponse(message=msg).SerializeToString())))
    reply = out.messages[-1]
    assert reply["has_envelope"] and reply["coverage_availability"] == "assessed" and reply["author"] is None
    assert reply["anomalies"] == ["wrong_type:author=list", "wrong_type:answerCoverage.coverage=int"]


def _odd_bytes(message: object, marker: bytes = b"QQQQ") -> bytes:
    """`message` serialised with the marker in one of its strings replaced, length kept, by bytes not UTF-8."""
    raw = message.SerializeToString()  # type: ignore[attr-defined]
    assert raw.count(marker) == 1
    return raw.replace(marker, b"Q\xff\xfeQ")


def test_a_string_that_is_not_utf8_costs_its_odd_bytes_not_the_message() -> None:
    """proto3 strings must be UTF-8 and the runtime refused the whole message: a Task of three history messages
    was lost for two odd bytes in one part."""
    task = pb.Task(id="t-1", context_id="c-1", status=pb.TaskStatus(state=pb.TASK_STATE_COMPLETED))
    task.history.extend([_reply("h-0", "first"), _reply("h-1", "QQQQ"), _reply("h-2", "third")])
    out = _run(grpc_exchange("GetTask", pb.GetTaskRequest(id="t-1").SerializeToString(), frame(_odd_bytes(task))))
    assert out.exchange["anomalies"] == ["grpc_string_not_utf8"] and out.exchange["task_id"] == "t-1"
    assert _replies(out) == ["first", "Q\ufffd\ufffdQ", "third"]


def test_odd_bytes_in_a_request_a_stream_and_beside_a_nan() -> None:
    request = pb.SendMessageRequest(message=pb.Message(message_id="u-1", parts=[pb.Part(text="QQQQ")]))
    event = pb.StreamResponse(message=_reply("a-1", "QQQQ"))
    body = _event(message=_reply("a-0", "before")) + frame(_odd_bytes(event))
    out = _run(grpc_exchange("SendStreamingMessage", _odd_bytes(request), body))
    assert out.exchange["anomalies"] == ["request_grpc_string_not_utf8", "grpc_string_not_utf8:1"]
    assert [m["text"] for m in out.messages] == ["Q\ufffd\ufffdQ", "before", "Q\ufffd\ufffdQ"]
    msg = _reply(text="QQQQ")
    msg.metadata.update({"n": float("nan")})
    out = _run(grpc_exchange("SendMessage", SEND, frame(_odd_bytes(pb.SendMessageResponse(message=msg)))))
    assert out.exchange["anomalies"] == ["grpc_string_not_utf8", "grpc_value_dropped:number"]
    assert _replies(out) == ["Q\ufffd\ufffdQ"]


def test_a_message_broken_otherwise_is_still_refused() -> None:
    """Mending strings never makes a message of bytes that are not one: cut, or bad UTF-8 in a cut message."""
    for raw in (b"\x0a\x05ab", _odd_bytes(pb.SendMessageResponse(message=_reply(text="QQQQ")))[:-3]):
        out = _run(grpc_exchange("SendMessage", SEND, frame(raw)))
        assert out.exchange["anomalies"] == ["grpc_message_undecodable:DecodeError"] and not _replies(out)


# --- content types -----------------------------------------------------------------------------------------


def test_grpc_json_in_v03_shape_on_the_v1_service_is_said_not_silent() -> None:
    """A `+json` message whose only member this version does not know (v0.3's `msg`): ignored, as ProtoJSON
    readers ignore unknown members, and the empty response said."""
    ctype = [("content-type", "application/grpc+json")]
    request = json_format.MessageToJson(pb.SendMessageRequest.FromString(SEND)).encode()
    ex = grpc_exchange("SendMessage", b"", frame(b'{"msg": {"messageId": "m", "parts": [{"text": "x"}]}}'), None, ctype)
    ex.request_headers, ex.request_body = Headers(ctype), frame(request)
    assert _run(ex).exchange["anomalies"] == ["grpc_message_empty"]


def test_grpc_web_text_with_padding_inside_a_frame() -> None:
    """A server that base64-encodes each write: padding may fall in the middle of a length-prefixed message."""
    block = b"grpc-status: 0\r\n"
    whole = frame(REPLY)
    pieces = [whole[:7], whole[7:8], whole[8:], b"\x80" + len(block).to_bytes(4, "big") + block]
    body = b"".join(base64.b64encode(p) for p in pieces)
    assert body.count(b"=") >= 2
    headers = [("content-type", "application/grpc-web-text"), ("a2a-extensions", EXT)]
    ex = HttpExchange(
        id="w",
        method="POST",
        url=f"{V1}/SendMessage",
        request_headers=Headers(headers),
        request_body=base64.b64encode(frame(SEND)),
        http_version="HTTP/1.1",
        status=200,
        response_headers=Headers(headers),
        response_body=body,
    )
    out = _run(ex)
    assert (_replies(out), out.exchange["anomalies"], out.exchange["complete"]) == (["Open 12-15."], [], True)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.sampled_from([pb.Task, pb.StreamResponse, pb.SendMessageRequest]))
def test_mending_any_bytes_never_raises_and_gives_a_message_or_nothing(data: bytes, cls: Any) -> None:
    mended = mend_utf8(data, cls.DESCRIPTOR)
    if mended is not None:
        cls.FromString(mended)  # UTF-8 throughout: the runtime takes it
        assert mended != data
