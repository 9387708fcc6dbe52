"""gRPC input another implementation or an attacker sends: lying prefixes, damaged compression, floods of tiny
messages, values ProtoJSON cannot print, odd statuses. Valid messages are built with the a2a-sdk's generated
classes and then damaged; each case must end in rows (right, or with an anomaly saying what went wrong)."""

from __future__ import annotations

import base64
import gzip
import tracemalloc
import zlib

import pytest
from a2a.types import a2a_pb2 as pb
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2
from hypothesis import given, settings
from hypothesis import strategies as st

from converse_tap.a2a.exchange import HttpExchange
from converse_tap.a2a.extract import extract
from converse_tap.a2a.grpc import classify_grpc, decode, grpc_status, request_params
from converse_tap.a2a.grpc_frames import GrpcFrameParser, body_frames, first_frame, parse_frames, parser_anomalies
from converse_tap.a2a.headers import Headers
from converse_tap.a2a.redact import TextPolicy
from tests.a2a.grpc_helpers import BASE, GRPC_HEADERS, V1, frame, grpc_exchange
from tests.factories import EXT, envelope


def _reply(mid: str = "a-1") -> pb.Message:
    msg = pb.Message(message_id=mid, context_id="c-1", role=pb.ROLE_AGENT, parts=[pb.Part(text="Open 12-15.")])
    msg.extensions.append(EXT)
    msg.metadata.update({EXT: envelope()})
    return msg


GET_TASK = pb.GetTaskRequest(id="t-1").SerializeToString()


# --- grpc-status-details-bin and grpc-status from another implementation ---------------------------------------


def test_status_details_naming_an_error_info_that_is_not_one_is_an_anomaly() -> None:
    """An Any whose type URL says ErrorInfo but whose bytes do not parse as one raised DecodeError out of the
    extraction: the status is kept, its reason is unknown, and the row says why."""
    details = status_pb2.Status(code=5, message="Task not found")
    details.details.append(any_pb2.Any(type_url="type.googleapis.com/google.rpc.ErrorInfo", value=b"\x0a\x05ab"))
    b64 = base64.b64encode(details.SerializeToString()).decode()
    trailers = [("grpc-status", "5"), ("grpc-status-details-bin", b64)]
    status, notes = grpc_status(Headers(), Headers(trailers))
    assert status is not None and (status.code, status.reason) == (5, None)
    assert notes == ["grpc_status_details_undecodable"]
    out = extract(grpc_exchange("GetTask", GET_TASK, b"", trailers), TextPolicy())
    assert out is not None
    row = out.exchange
    assert (row["error_code"], row["error_status"], row["error_reason"]) == (5, "NOT_FOUND", None)
    assert row["anomalies"] == ["grpc_status_details_undecodable"]


def test_a_later_well_formed_error_info_still_gives_the_reason() -> None:
    details = status_pb2.Status(code=9)
    details.details.add().Pack(error_details_pb2.BadRequest())
    details.details.add().Pack(error_details_pb2.ErrorInfo(reason="TASK_NOT_CANCELABLE", domain="a2a-protocol.org"))
    b64 = base64.b64encode(details.SerializeToString()).decode()
    status, notes = grpc_status(Headers([("grpc-status", "9"), ("grpc-status-details-bin", b64)]), None)
    assert status is not None and status.reason == "TASK_NOT_CANCELABLE" and notes == []


@pytest.mark.parametrize("raw", ["1_0", "٣", "+5", "-1", "99999999999", "", "0x5", "5 5", "５"])
def test_a_status_that_is_not_ascii_digits_is_unknown_and_said(raw: str) -> None:
    """`int()` read "1_0" as 10 (ABORTED), "٣" as 3 and "-1" as -1: grpc-status is 1*DIGIT, anything else is an
    invalid status (UNKNOWN, as gRPC clients read it), named in the row."""
    status, notes = grpc_status(Headers(), Headers([("grpc-status", raw)]))
    assert status is not None and (status.code, status.name) == (2, "UNKNOWN")
    assert notes == [f"grpc_status_invalid:{raw[:20]}"]


@pytest.mark.parametrize(("raw", "code", "name"), [(" 7 ", 7, "PERMISSION_DENIED"), ("16", 16, "UNAUTHENTICATED")])
def test_valid_statuses_and_codes_past_the_known_ones(raw: str, code: int, name: str | None) -> None:
    status, notes = grpc_status(Headers([("grpc-status", raw)]), None)
    assert status is not None and (status.code, status.name) == (code, name) and notes == []
    status, notes = grpc_status(Headers([("grpc-status", "42")]), None)
    assert status is not None and (status.code, status.name) == (42, None) and notes == []


def test_a_trailers_only_error_with_an_invalid_status_is_an_error_row() -> None:
    ex = grpc_exchange(
        "GetTask",
        GET_TASK,
        b"",
        trailers=[],
        response_headers=[("content-type", "application/grpc"), ("grpc-status", "1_6"), ("grpc-message", "x")],
    )
    out = extract(ex, TextPolicy())
    assert out is not None
    row = out.exchange
    assert (row["error_code"], row["error_status"], row["error_message"], row["complete"]) == (2, "UNKNOWN", "x", True)
    assert row["anomalies"] == ["grpc_status_invalid:1_6"]


# --- compressed messages ------------------------------------------------------------------------------------------


def _task_with_history() -> tuple[bytes, bytes]:
    """A Task's bytes cut in two at a field boundary: the first part alone parses as a Task without its history."""
    head = pb.Task(id="t-1", context_id="c-1", status=pb.TaskStatus(state=pb.TASK_STATE_COMPLETED))
    whole = pb.Task()
    whole.CopyFrom(head)
    whole.history.append(_reply())
    full = whole.SerializeToString()
    first = head.SerializeToString()
    assert full.startswith(first)
    return first, full[len(first) :]


def _flushed(first: bytes, rest: bytes, wbits: int) -> tuple[bytes, int]:
    """`first + rest` compressed with a sync flush after `first`: (the stream, where the flush ends). Cut there,
    a decoder yields exactly `first`, without any sign of the cut unless it checks for the stream's end."""
    c = zlib.compressobj(6, zlib.DEFLATED, wbits)
    head = c.compress(first) + c.flush(zlib.Z_SYNC_FLUSH)
    return head + c.compress(rest) + c.flush(), len(head)


@pytest.mark.parametrize(("encoding", "wbits"), [("gzip", 31), ("deflate", 15), ("deflate", -15)])
def test_a_compressed_message_cut_short_is_not_a_shorter_message(encoding: str, wbits: int) -> None:
    """A compressed message whose stream stops early (a sync flush, then the end of the frame) decoded to the
    bytes before the cut: a Task without its history, with no sign of loss. It is now inflate_failed."""
    first, rest = _task_with_history()
    stream, cut = _flushed(first, rest, wbits)
    frames, notes = parse_frames(frame(stream, True), encoding=encoding)
    assert frames[0].data == first + rest and frames[0].error is None and notes == []  # whole: decoded
    frames, notes = parse_frames(frame(stream[:cut], True), encoding=encoding)
    assert (frames[0].data, frames[0].error, notes) == (b"", "inflate_failed", [])
    headers = [("content-type", "application/grpc"), ("grpc-encoding", encoding)]
    out = extract(grpc_exchange("GetTask", GET_TASK, frame(stream[:cut], True), response_headers=headers), TextPolicy())
    assert out is not None
    assert out.exchange["anomalies"] == ["inflate_failed"] and out.exchange["task_state"] is None
    out = extract(grpc_exchange("GetTask", GET_TASK, frame(stream, True), response_headers=headers), TextPolicy())
    assert out is not None and out.exchange["anomalies"] == [] and out.exchange["replies"] == 1


@pytest.mark.parametrize(
    ("encoding", "compress"), [("gzip", lambda b: gzip.compress(b, mtime=0)), ("deflate", zlib.compress)]
)
def test_bytes_after_the_compressed_message_are_an_error(encoding: str, compress) -> None:
    data = _reply().SerializeToString()
    for junk in (b"\x00", b"trailing junk", compress(b"second member")):
        frames, _ = parse_frames(frame(compress(data) + junk, True), encoding=encoding)
        assert (frames[0].data, frames[0].error) == (b"", "inflate_failed")


@pytest.mark.parametrize("encoding", ["gzip, deflate", "gzip,identity", "snappy", "zstd;q=1", "GZIP "])
def test_grpc_encoding_names_one_coding(encoding: str) -> None:
    """grpc-encoding is one coding; a list (which the body inflater would have chained) is not one gRPC knows."""
    data = gzip.compress(b"hello", mtime=0)
    frames, _ = parse_frames(frame(data, True), encoding=encoding)
    if encoding == "GZIP ":  # case and surrounding space do not matter
        assert frames[0].data == b"hello"
    else:
        assert frames[0].error == f"grpc_encoding_invalid:{encoding.strip().lower()}" and frames[0].data == b""


def test_a_decompression_bomb_is_stopped_at_the_limit_in_every_coding() -> None:
    bomb = b"\x00" * 5_000_000
    for encoding, data in (("gzip", gzip.compress(bomb)), ("deflate", zlib.compress(bomb))):
        tracemalloc.start()
        try:
            frames, _ = parse_frames(frame(data, True), max_message_bytes=100_000, encoding=encoding)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert frames[0].oversize and frames[0].data == b"" and frames[0].length == len(data)
        assert peak < 1_000_000  # never decoded past the limit (5 MB would be)


# --- floods of messages -------------------------------------------------------------------------------------------


def test_a_request_of_many_tiny_messages_is_counted_not_held() -> None:
    """A unary request of 100,000 empty messages after the real one held a frame object per message (about 90
    bytes per 5 on the wire, 187 MB for a 10 MB body): the extra messages are now only counted."""
    body = frame(GET_TASK) + b"\x00\x00\x00\x00\x00" * 100_000
    tracemalloc.start()
    try:
        req = classify_grpc(f"{V1}/GetTask", Headers(GRPC_HEADERS), body)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert req is not None and req.task_id == "t-1"
    assert req.anomalies == ["grpc_request_messages:100001"]
    assert peak < len(body)  # not even one copy of the body


def test_extra_request_messages_are_never_decompressed() -> None:
    bomb = frame(zlib.compress(b"\x00" * 1_000_000), True)
    body = frame(GET_TASK) + bomb * 50
    frame0, count, notes = first_frame(body, 2_000_000, "deflate")
    assert frame0 is not None and frame0.data == GET_TASK and (count, notes) == (51, [])


def test_a_request_whose_first_prefix_lies_about_its_length() -> None:
    """4 GiB declared, a few bytes sent: one oversize message, skipped, and the cut is said."""
    body = b"\x00\xff\xff\xff\xff" + GET_TASK
    req = classify_grpc(f"{V1}/GetTask", Headers(GRPC_HEADERS), body)
    assert req is not None and req.params is None
    assert req.anomalies == [
        f"request_grpc_frame_truncated:{5 + len(GET_TASK)}",  # the bytes that came (not the 4 GiB still due)
        "request_grpc_message_too_large",
    ]
    body = b"\x00\x00\x00\x00\x03" + GET_TASK  # shorter than the body: the rest is read as the next prefix
    req = classify_grpc(f"{V1}/GetTask", Headers(GRPC_HEADERS), body)
    assert req is not None and req.task_id is None
    assert req.anomalies == ["request_grpc_frame_truncated:2", "request_grpc_message_undecodable:DecodeError"]


def test_a_whole_body_is_split_as_it_is_decoded_not_all_at_once() -> None:
    body = b"\x00\x00\x00\x00\x00" * 100_000
    frames, parser = body_frames(body)
    tracemalloc.start()
    try:
        n = sum(1 for _ in frames)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert n == 100_000 and parser.messages == n and parser_anomalies(parser) == []
    assert peak < len(body)


def test_a_flow_stream_of_many_messages_counts_them_all() -> None:
    working = pb.StreamResponse(
        status_update=pb.TaskStatusUpdateEvent(task_id="t-1", status=pb.TaskStatus(state=pb.TASK_STATE_WORKING))
    ).SerializeToString()
    done = pb.StreamResponse(message=_reply()).SerializeToString()
    body = frame(working) * 3000 + frame(done) + b"\x00\x00\x00"  # and the start of a prefix
    request = pb.SendMessageRequest(message=pb.Message(message_id="u-1", role=pb.ROLE_USER)).SerializeToString()
    out = extract(grpc_exchange("SendStreamingMessage", request, body), TextPolicy())
    assert out is not None
    row = out.exchange
    assert (row["sse_events"], row["replies"], row["anomalies"]) == (3001, 1, ["grpc_frame_truncated:3"])


@settings(deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=4000), max_size=30), st.integers(min_value=0, max_value=4))
def test_counting_gives_the_same_count_whatever_the_chunking(cuts: list[int], keep: int) -> None:
    sizes = [0, 7, 300, 1, 0, 2000, 3]
    body = b"".join(frame(bytes(n)) for n in sizes) + b"\x00\x00\x00\x10"  # a prefix cut short
    parser = GrpcFrameParser()
    got, last = [], 0
    for p in [*sorted({c % (len(body) + 1) for c in cuts}), len(body)]:
        got += parser.feed(body[last:p])
        last = p
        if len(got) >= keep:
            parser.count_only = True
    assert parser.messages == len(sizes) and parser.pending() == 4 and parser.malformed is None
    assert [len(f.data) for f in got] == sizes[: len(got)] and len(got) >= min(keep, len(sizes))


@pytest.mark.parametrize("flag", [0x02, 0x80, 0x81, 0xFF])
def test_reserved_flag_bits_stop_the_parse_even_when_only_counting(flag: int) -> None:
    body = frame(b"ok") + bytes([flag]) + b"\x00\x00\x00\x01z" + frame(b"never")
    assert parse_frames(body)[1] == [f"grpc_frame_malformed:flag={flag}@7"]
    _, count, notes = first_frame(body)
    assert (count, notes) == (1, [f"grpc_frame_malformed:flag={flag}@7"])


# --- values ProtoJSON cannot print ----------------------------------------------------------------------------


def test_an_out_of_range_timestamp_costs_that_value_not_the_task() -> None:
    """MessageToDict raised SerializeToJsonError (no ValueError) out of the extraction for a status timestamp
    past year 9999; the Task, with its history and the reply's envelope, is now recorded without it."""
    task = pb.Task(id="t-1", context_id="c-1", status=pb.TaskStatus(state=pb.TASK_STATE_COMPLETED))
    task.status.timestamp.seconds = 10**15
    task.history.append(_reply())
    task.history[0].metadata.update({"odd": float("inf")})
    out = extract(grpc_exchange("GetTask", GET_TASK, frame(task.SerializeToString())), TextPolicy())
    assert out is not None
    row = out.exchange
    assert (row["task_state"], row["replies"]) == ("TASK_STATE_COMPLETED", 1)
    assert row["anomalies"] == ["grpc_value_dropped:Timestamp,number"]
    doc, note = decode("v1.0", "GetTask", "response", task.SerializeToString())
    assert "timestamp" not in doc["status"] and doc["history"][0]["metadata"]["odd"] is None
    assert doc["history"][0]["metadata"][EXT]["answerCoverage"]["coverage"] == "answered"
    assert note == "grpc_value_dropped:Timestamp,number"


def test_invalid_timestamps_in_a_stream_and_a_request() -> None:
    bad = pb.TaskStatus(state=pb.TASK_STATE_WORKING)
    bad.timestamp.seconds, bad.timestamp.nanos = 1, -5
    working = pb.StreamResponse(status_update=pb.TaskStatusUpdateEvent(task_id="t-1", status=bad))
    done = pb.StreamResponse(message=_reply())
    body = frame(working.SerializeToString()) + frame(done.SerializeToString())
    msg = pb.Message(message_id="u-1", role=pb.ROLE_USER, parts=[pb.Part(text="hi")])
    msg.metadata.update({"n": float("nan")})
    request = pb.SendMessageRequest(message=msg).SerializeToString()
    out = extract(grpc_exchange("SendStreamingMessage", request, body), TextPolicy())
    assert out is not None
    row = out.exchange
    assert row["anomalies"] == ["request_grpc_value_dropped:number", "grpc_value_dropped:Timestamp:0"]
    assert (row["sse_events"], row["replies"]) == (2, 1)
    assert [m["text"] for m in out.messages if m["direction"] == "request"] == ["hi"]
    req = classify_grpc(f"{V1}/SendMessage", Headers(GRPC_HEADERS), frame(request))
    assert req is not None and request_params(req)["message"]["metadata"] == {"n": None}


def _nested_value(depth: int) -> bytes:
    """A google.protobuf.Value nested `depth` ListValues deep, built as bytes (the runtime refuses to build it)."""
    data = b"\x08\x00"  # null_value
    for _ in range(depth):
        lst = b"\x0a" + _varint(len(data)) + data  # ListValue.values[0]
        data = b"\x32" + _varint(len(lst)) + lst  # Value.list_value
    return data


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


@pytest.mark.parametrize("depth", [20, 5000])
def test_deeply_nested_metadata_is_decoded_or_refused_never_a_crash(depth: int) -> None:
    """The envelope lives in metadata Structs: nesting past the runtime's limit is an undecodable message."""
    entry = b"\x0a\x01k\x12" + _varint(len(_nested_value(depth))) + _nested_value(depth)  # Struct.fields["k"]
    struct = b"\x0a" + _varint(len(entry)) + entry
    msg = pb.Message(message_id="a-1", role=pb.ROLE_AGENT).SerializeToString()
    msg += b"\x32" + _varint(len(struct)) + struct  # Message.metadata (field 6)
    assert pb.Message.DESCRIPTOR.fields_by_name["metadata"].number == 6
    body = frame(b"\x12" + _varint(len(msg)) + msg)  # SendMessageResponse.message (field 2)
    assert pb.SendMessageResponse.DESCRIPTOR.fields_by_name["message"].number == 2
    request = pb.SendMessageRequest(message=pb.Message(message_id="u-1", role=pb.ROLE_USER)).SerializeToString()
    out = extract(grpc_exchange("SendMessage", request, body), TextPolicy())
    assert out is not None
    if depth == 20:
        assert [m["message_id"] for m in out.messages if m["direction"] == "response"] == ["a-1"]
    else:
        assert out.exchange["anomalies"] == ["grpc_message_undecodable:DecodeError"]
        assert not [m for m in out.messages if m["direction"] == "response"]


# --- the other gRPC forms: gRPC-Web (binary and text), the +json codec, codecs nobody decodes ---------------------


def _web_trailers(*lines: str, flag: int = 0x80) -> bytes:
    block = "".join(f"{line}\r\n" for line in lines).encode()
    return bytes([flag]) + len(block).to_bytes(4, "big") + block


def _webgrpc_exchange(ctype: str, request: bytes, body: bytes, method: str = "SendMessage") -> HttpExchange:
    ex = grpc_exchange(method, b"", body, trailers=[], response_headers=[("content-type", ctype)])
    ex.request_headers = Headers([("content-type", ctype), ("a2a-extensions", EXT)])
    ex.request_body, ex.response_trailers = request, None
    ex.http_version = "HTTP/1.1" if "grpc-web" in ctype else "HTTP/2.0"  # gRPC-Web, as browsers send it
    return ex


SEND = pb.SendMessageRequest(
    message=pb.Message(message_id="u-1", role=pb.ROLE_USER, parts=[pb.Part(text="When are you open?")])
).SerializeToString()


@pytest.mark.parametrize("ctype", ["application/grpc-web", "application/grpc-web+proto"])
def test_grpc_web_calls_are_recorded_with_the_status_from_the_trailers_frame(ctype: str) -> None:
    """gRPC-Web (browsers, through Envoy) was not recognised at all: the call went unrecorded. Its response ends
    with a trailers frame (flag 0x80) that holds grpc-status and the echoed extensions."""
    reply = frame(pb.SendMessageResponse(message=_reply()).SerializeToString())
    body = reply + _web_trailers("grpc-status: 0", "grpc-message: ", f"a2a-extensions: {EXT}")
    out = extract(_webgrpc_exchange(ctype, frame(SEND), body), TextPolicy())
    assert out is not None
    row = out.exchange
    assert (row["binding"], row["method"], row["complete"], row["replies"]) == ("grpc", "SendMessage", True, 1)
    assert row["converse_echoed"] and row["anomalies"] == [] and row["error_code"] is None
    assert [(m["direction"], m["text"]) for m in out.messages] == [
        ("request", "When are you open?"),
        ("response", "Open 12-15."),
    ]
    body = _web_trailers("Grpc-Status: 5", "grpc-message: Task%20not%20found", "garbage line")
    out = extract(_webgrpc_exchange(ctype, frame(GET_TASK), body, "GetTask"), TextPolicy())
    assert out is not None
    row = out.exchange
    assert (row["error_code"], row["error_status"], row["error_message"], row["task_id"]) == (
        5,
        "NOT_FOUND",
        "Task not found",
        "t-1",
    )
    assert row["anomalies"] == ["grpc_web_trailers_malformed"]


def test_grpc_web_streams_and_odd_trailers() -> None:
    working = pb.StreamResponse(
        status_update=pb.TaskStatusUpdateEvent(task_id="t-1", status=pb.TaskStatus(state=pb.TASK_STATE_WORKING))
    ).SerializeToString()
    done = pb.StreamResponse(message=_reply()).SerializeToString()
    ctype = "application/grpc-web+proto"
    body = frame(working) + _web_trailers("grpc-status: 0") + frame(done) + _web_trailers("grpc-status: 13")
    out = extract(_webgrpc_exchange(ctype, frame(SEND), body, "SendStreamingMessage"), TextPolicy())
    assert out is not None
    row = out.exchange
    assert (row["sse_events"], row["replies"], row["error_code"]) == (2, 1, None)  # the first trailers count
    assert row["anomalies"] == ["grpc_web_message_after_trailers", "grpc_web_trailers_frames:2"]
    out = extract(_webgrpc_exchange(ctype, frame(SEND), frame(working), "SendStreamingMessage"), TextPolicy())
    assert out is not None and out.exchange["complete"] is False
    assert out.exchange["anomalies"] == ["grpc_status_missing"]
    # in plain gRPC, a frame flagged 0x80 is no trailers frame but a broken stream
    ex = grpc_exchange("SendMessage", SEND, frame(done) + _web_trailers("grpc-status: 0"))
    out = extract(ex, TextPolicy())
    assert out is not None and out.exchange["anomalies"] == [f"grpc_frame_malformed:flag=128@{len(done) + 5}"]


def test_grpc_web_text_is_base64_in_pieces() -> None:
    """application/grpc-web-text: the body is base64, and a server may encode each write apart (padded pieces
    one after another)."""
    reply = frame(pb.SendMessageResponse(message=_reply()).SerializeToString())
    trailers = _web_trailers("grpc-status: 0")
    pieces = base64.b64encode(reply[:7]) + base64.b64encode(reply[7:]) + b"\r\n" + base64.b64encode(trailers)
    assert pieces.count(b"=") >= 2  # the test is about padded pieces
    request = base64.b64encode(frame(SEND))
    out = extract(_webgrpc_exchange("application/grpc-web-text+proto", request, pieces), TextPolicy())
    assert out is not None
    row = out.exchange
    assert (row["complete"], row["replies"], row["anomalies"]) == (True, 1, [])
    assert [m["text"] for m in out.messages] == ["When are you open?", "Open 12-15."]
    out = extract(_webgrpc_exchange("application/grpc-web-text", b"!!not base64", b"%%%"), TextPolicy())
    assert out is not None
    assert out.exchange["anomalies"] == [
        "request_grpc_web_text_not_base64",
        "request_without_message",
        "grpc_web_text_not_base64",
        "grpc_status_missing",
    ]


def test_the_json_codec_is_read_as_protojson_not_as_protobuf() -> None:
    """application/grpc+json frames hold ProtoJSON: read into the same messages (and rows) as protobuf."""
    request = b'{"message": {"messageId": "u-1", "role": "ROLE_USER", "parts": [{"text": "Hi"}]}, "x": 1}'
    from google.protobuf import json_format

    reply = json_format.MessageToJson(pb.SendMessageResponse(message=_reply())).encode()
    ex = _webgrpc_exchange("application/grpc+json", frame(request), frame(reply))
    ex.response_trailers = Headers([("grpc-status", "0")])
    out = extract(ex, TextPolicy())
    assert out is not None
    row = out.exchange
    assert (row["complete"], row["replies"], row["anomalies"]) == (True, 1, [])
    assert [m["text"] for m in out.messages] == ["Hi", "Open 12-15."] and out.messages[1]["has_envelope"]
    for bad in (b"{not json", b'{"message": 5}', b"\xff\xfe", b"[" * 100_000):
        ex = _webgrpc_exchange("application/grpc+json", frame(request), frame(bad))
        ex.response_trailers = Headers([("grpc-status", "0")])
        out = extract(ex, TextPolicy())
        assert out is not None and out.exchange["anomalies"] == ["grpc_message_undecodable:ValueError"]


def test_a_codec_nobody_decodes_is_recorded_and_said() -> None:
    ctype = "application/grpc+thrift"
    ex = _webgrpc_exchange(ctype, frame(b"\x0b\x00\x01"), frame(b"\x00"), "GetTask")
    ex.response_trailers = Headers([("grpc-status", "0")])
    out = extract(ex, TextPolicy())
    assert out is not None
    assert (out.exchange["binding"], out.exchange["method"]) == ("grpc", "GetTask")
    assert out.exchange["anomalies"] == ["request_grpc_codec_unsupported:thrift", "grpc_codec_unsupported:thrift"]


def test_a_live_tap_says_which_gRPC_forms_it_relayed_unread() -> None:
    """The live tap splits application/grpc into messages; a gRPC-Web or +json response it relays is not read
    (the row says so instead of claiming a missing body)."""
    ex = _webgrpc_exchange("application/grpc-web", frame(SEND), b"")
    ex.response_body, ex.sse_events = None, []  # as the worker leaves a tapped stream
    out = extract(ex, TextPolicy())
    assert out is not None
    assert out.exchange["anomalies"] == ["grpc_response_not_decoded:application/grpc-web", "grpc_status_missing"]


@pytest.mark.parametrize(
    ("ctype", "grpc"),
    [
        ("application/grpc", True),
        ("Application/GRPC+proto; charset=binary", True),
        ("application/grpc+json", True),
        ("application/grpc-web-text+proto", True),
        ("application/grpcx", False),
        ("application/grpc-webby", False),
        ("application/grpc+", False),
        ("application/json", False),
        ("", False),
    ],
)
def test_which_content_types_are_grpc(ctype: str, grpc: bool) -> None:
    req = classify_grpc(f"{V1}/GetTask", Headers([("content-type", ctype)]), frame(GET_TASK))
    assert (req is not None) == grpc


@pytest.mark.parametrize(
    "path",
    [
        "/grpc.health.v1.Health/Check",
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
        "/lf.a2a.v1.A2AServiceX/SendMessage",
        "/lf.a2a.v1.A2AService/",
        "/lf.a2a.v1.A2AService/SendMessage/extra",
        "/A2AService/SendMessage",
    ],
)
def test_other_services_are_left_alone(path: str) -> None:
    assert classify_grpc(f"{BASE}{path}", Headers(GRPC_HEADERS), frame(b"")) is None


# --- huge repeated fields -------------------------------------------------------------------------------------


def _history_flood(n: int) -> bytes:
    number = pb.Task.DESCRIPTOR.fields_by_name["history"].number
    return pb.Task(id="t-1").SerializeToString() + (bytes([number << 3 | 2]) + b"\x00") * n


def test_a_message_of_millions_of_tiny_values_is_refused_like_a_json_body() -> None:
    """A 2.4 MB Task of 1.2 million empty history entries took the runtime and ProtoJSON about 400 MB and 5 s;
    the JSON bindings refuse a body of over 1,000,000 values, and so does the gRPC decoder now, before parsing."""
    flood = _history_flood(1_200_000)
    out = extract(grpc_exchange("GetTask", GET_TASK, frame(flood)), TextPolicy())
    assert out is not None and out.exchange["anomalies"] == ["grpc_message_too_many_values:1000000"]
    from converse_tap.a2a.grpc_wire import too_many_values

    flood = _history_flood(60_000)
    tracemalloc.start()
    try:
        assert too_many_values(flood, pb.Task.DESCRIPTOR, limit=50_000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10_000  # counted on the wire: nothing built
    doc, note = decode("v1.0", "GetTask", "response", _history_flood(999))  # few values: decoded
    assert note is None and len(doc["history"]) == 999
    flood = b'{"history": [' + b"{}," * 1_000_001 + b"{}]}"
    assert decode("v1.0", "GetTask", "response", flood, "json") == (None, "grpc_message_too_many_values:1000000")


def test_counting_values_follows_the_schema_and_skips_bytes() -> None:
    from converse_tap.a2a.grpc_wire import count_values, too_many_values

    task = pb.Task(id="t-1", context_id="c-1")
    for i in range(3):
        msg = task.history.add(message_id=f"m{i}")
        msg.parts.add(text="hi")
        msg.metadata.update({"k": [1, {"z": "q"}]})
    data = task.SerializeToString()
    assert count_values(data, pb.Task.DESCRIPTOR) == 53
    assert count_values(data, pb.Task.DESCRIPTOR, limit=10) == 11  # stops just past the limit
    big = pb.Task(id="t-1")
    big.history.add().parts.add(raw=b"x" * 3_000_000)  # 3 MB of bytes is one value, not three million
    assert not too_many_values(big.SerializeToString(), pb.Task.DESCRIPTOR)
    assert count_values(b"\x0a\xff\xff\xff\xff\x0f", pb.Task.DESCRIPTOR) == 1  # a length past the end: stops


def test_grpc_over_http1_is_said() -> None:
    """gRPC needs HTTP/2's trailers: a call over HTTP/1.1 (a client or proxy that downgraded it) ends without a
    status, and the row says why; gRPC-Web over HTTP/1.1 is how it is meant to be."""
    reply = frame(pb.Task(id="t-1").SerializeToString())
    ex = grpc_exchange("GetTask", GET_TASK, reply, trailers=[])
    ex.http_version, ex.response_trailers = "HTTP/1.1", None
    out = extract(ex, TextPolicy())
    assert out is not None and out.exchange["complete"] is False
    assert out.exchange["anomalies"] == ["grpc_over_http1:HTTP/1.1", "grpc_status_missing"]
    body = reply + _web_trailers("grpc-status: 0")
    out = extract(_webgrpc_exchange("application/grpc-web", frame(GET_TASK), body, "GetTask"), TextPolicy())
    assert out is not None and out.exchange["complete"] and out.exchange["anomalies"] == []


def test_fields_a_newer_implementation_adds_are_ignored() -> None:
    """Unknown fields (a later A2A version, a vendor's own) cost nothing: the message decodes as without them."""
    task = pb.Task(id="t-1", status=pb.TaskStatus(state=pb.TASK_STATE_COMPLETED))
    task.history.append(_reply())
    extra = b"\xf8\x07\x2a" + b"\x82\x08\x03abc" + b"\x8d\x08\x00\x00\x80\x3f"  # fields 127, 128, 129
    data = task.SerializeToString() + extra
    doc, note = decode("v1.0", "GetTask", "response", data)
    assert note is None and doc == decode("v1.0", "GetTask", "response", task.SerializeToString())[0]
    out = extract(grpc_exchange("GetTask", GET_TASK + extra, frame(data)), TextPolicy())
    assert out is not None and out.exchange["anomalies"] == [] and out.exchange["replies"] == 1
    assert out.exchange["task_id"] == "t-1"


@pytest.mark.parametrize(
    ("text", "data"),
    [
        (b"QUJD" + b"REU=" + b"Rg==", b"ABCDEF"),  # three writes, each padded
        (b"QUJDREU", b"ABCDE"),  # the last piece unpadded
        (b"QU JD\r\nREU=", b"ABCDE"),  # line breaks
        (b"", b""),
        (b"QU!J", None),
        (b"=AA", None),
        (b"A", None),
        (b"AA===AA", None),
        (b"QUJD-_", None),  # the URL-safe alphabet is not gRPC-Web's
    ],
)
def test_grpc_web_text_decoding(text: bytes, data: bytes | None) -> None:
    from converse_tap.a2a.grpc_codecs import unbase64

    assert unbase64(text) == data


def test_a_trailers_frame_of_a_million_lines_reads_the_first_few() -> None:
    from converse_tap.a2a.grpc_codecs import MAX_TRAILERS, trailer_block

    block = b"grpc-status: 0\r\n" + b"\n" * 1_000_000 + b"grpc-status: 13\r\n"
    tracemalloc.start()
    try:
        headers, clean = trailer_block(block)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert headers.get_all("grpc-status") == ["0"] and not clean
    assert peak < 2 * len(block)  # not a million line objects (about 33 MB)
    exact = b"".join(b"x-%d: v\r\n" % i for i in range(MAX_TRAILERS))
    headers, clean = trailer_block(exact)
    assert clean and len(headers.names()) == MAX_TRAILERS


# --- anything at all ------------------------------------------------------------------------------------------

_CTYPES = ["application/grpc", "application/grpc+json", "application/grpc-web", "application/grpc-web-text"]


def _valid_stream() -> bytes:
    working = pb.StreamResponse(
        status_update=pb.TaskStatusUpdateEvent(task_id="t-1", status=pb.TaskStatus(state=pb.TASK_STATE_WORKING))
    ).SerializeToString()
    done = pb.StreamResponse(message=_reply()).SerializeToString()
    return frame(working) + frame(zlib.compress(done), True) + _web_trailers("grpc-status: 0")


@settings(deadline=None, max_examples=300)
@given(
    st.lists(st.tuples(st.integers(0, 2000), st.binary(max_size=8), st.integers(0, 8)), max_size=6),
    st.sampled_from(_CTYPES),
    st.sampled_from(["", "gzip", "deflate", "identity", "snappy", "gzip, br"]),
    st.sampled_from(["0", "5", "x", "1_3", ""]),
)
def test_a_damaged_stream_always_gives_rows(
    edits: list[tuple[int, bytes, int]], ctype: str, encoding: str, status: str
) -> None:
    """Bytes replaced, inserted and removed anywhere in a valid stream, under any gRPC form and coding: the
    extraction returns its rows (and says what was odd), it never raises."""
    body, request = bytearray(_valid_stream()), bytearray(frame(SEND, True) if encoding else frame(SEND))
    for at, data, cut in edits:
        for damaged in (body, request):
            i = at % (len(damaged) + 1)
            damaged[i : i + cut] = data
    raw = bytes(body)
    if ctype.endswith("-text"):
        encoded = base64.b64encode(raw)
        raw = encoded[: len(encoded) - (edits[0][2] if edits else 0)]  # (cut: no longer whole base64)
    ex = _webgrpc_exchange(ctype, bytes(request), raw, "SendStreamingMessage")
    ex.request_headers = Headers([("content-type", ctype), ("grpc-encoding", encoding)])
    ex.response_headers = Headers([("content-type", ctype), ("grpc-encoding", encoding)])
    ex.response_trailers = Headers([("grpc-status", status)]) if status else None
    out = extract(ex, TextPolicy())
    assert out is not None and out.exchange["binding"] == "grpc"
    assert all(isinstance(a, str) for a in out.exchange["anomalies"])
    assert out.exchange["sse_events"] is not None and out.exchange["sse_events"] >= 0
