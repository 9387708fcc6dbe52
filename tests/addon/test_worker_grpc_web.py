"""gRPC-Web, gRPC-Web text and the `+json` codec recorded live: the worker's rows for a response fed in chunks,
split anywhere, are the rows `extract` gives for the same exchange read whole."""

from __future__ import annotations

import base64
import tracemalloc
import zlib
from pathlib import Path
from typing import Any

import pytest
from a2a.types import a2a_pb2 as pb
from google.protobuf import json_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from converse_tap.a2a.exchange import HttpExchange
from converse_tap.a2a.extract import Extraction, extract
from converse_tap.a2a.grpc import DEFAULT_MAX
from converse_tap.a2a.grpc_web import Base64Stream
from converse_tap.a2a.headers import Headers
from converse_tap.a2a.redact import TextPolicy
from converse_tap.addon.worker import Worker
from tests.addon.test_worker import _worker
from tests.factories import EXT, envelope

PATH = "/lf.a2a.v1.A2AService/"


def frame(data: bytes, flag: int = 0) -> bytes:
    return bytes([flag]) + len(data).to_bytes(4, "big") + data


def trailers(*lines: str) -> bytes:
    return frame("".join(f"{line}\r\n" for line in lines).encode(), 0x80)


def _reply(mid: str) -> pb.Message:
    msg = pb.Message(message_id=mid, context_id="c-1", role=pb.ROLE_AGENT, parts=[pb.Part(text="Open 12-15.")])
    msg.extensions.append(EXT)
    msg.metadata.update({EXT: envelope()})
    return msg


WORKING = pb.StreamResponse(
    status_update=pb.TaskStatusUpdateEvent(task_id="t-1", status=pb.TaskStatus(state=pb.TASK_STATE_WORKING))
)
DONE = pb.StreamResponse(message=_reply("a-1"))
SEND = pb.SendMessageRequest(
    message=pb.Message(message_id="u-1", role=pb.ROLE_USER, parts=[pb.Part(text="When are you open?")])
)


def _encode(message: Any, codec: str) -> bytes:
    return json_format.MessageToJson(message).encode() if codec == "json" else message.SerializeToString()


class Recorder:
    """A worker (real: its writer, its journal) whose finished extractions are also kept, by exchange id."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.got: dict[str, Extraction] = {}
        on_rows = Worker._on_rows

        def keep(worker: Worker, ext: Extraction) -> None:
            self.got[ext.exchange["exchange_id"]] = ext
            on_rows(worker, ext)

        monkeypatch.setattr(Worker, "_on_rows", keep)
        self.w = _worker(root)  # max_events 3
        self.w.max_body = DEFAULT_MAX  # the message limit of a body read whole

    def live(
        self,
        fid: str,
        ctype: str,
        request: bytes,
        chunks: list[bytes],
        http_trailers: list[tuple[str, str]] | None = None,
        method: str = "SendStreamingMessage",
        encoding: str = "",
    ) -> None:
        headers = [(b"content-type", ctype.encode())] + ([(b"grpc-encoding", encoding.encode())] if encoding else [])
        url = (b"https", "agent.test", 443, (PATH + method).encode())
        asked = [*headers, (b"a2a-extensions", EXT.encode())]
        req = (b"POST", url, _version(ctype).encode(), asked, request, len(request), 1.0, None, None, False)
        self.w.handle(("o", fid, req, (200, headers, 1.1)))
        for chunk in chunks:
            self.w.handle(("c", fid, 1.3, chunk))
        end = [(k.encode(), v.encode()) for k, v in http_trailers] if http_trailers else None
        self.w.handle(("e", fid, (1.3, end), None, False))

    def close(self) -> dict[str, Extraction]:
        self.w.close()
        return self.got


def whole(
    fid: str,
    ctype: str,
    request: bytes,
    body: bytes,
    http_trailers: list[tuple[str, str]] | None = None,
    method: str = "SendStreamingMessage",
    encoding: str = "",
) -> Extraction:
    fields = [("content-type", ctype)] + ([("grpc-encoding", encoding)] if encoding else [])
    headers = Headers(fields)
    ex = HttpExchange(
        id=fid,
        method="POST",
        url=f"https://agent.test{PATH}{method}",
        request_headers=Headers([*fields, ("a2a-extensions", EXT)]),
        request_body=request,
        http_version=_version(ctype),
        status=200,
        response_headers=headers,
        response_body=body,
        response_trailers=Headers(http_trailers) if http_trailers else None,
        ts_start=1.0,
        ts_first_byte=1.1,
        ts_end=1.3,
        bytes_in=len(request),
        bytes_out=len(body),
    )
    out = extract(ex, TextPolicy("keep", b""))
    assert out is not None
    return out


def _as_written(row: dict[str, Any], written: dict[str, Any]) -> dict[str, Any]:
    """`row` with its times in microseconds where the writer has made them so in `written`."""
    out = dict(row)
    for k, v in row.items():
        if isinstance(v, float) and isinstance(written.get(k), int):
            out[k] = round(v * 1_000_000)
    return out


def same_rows(live: Extraction, read_whole: Extraction) -> None:
    assert live.exchange == _as_written(read_whole.exchange, live.exchange)
    assert len(live.messages) == len(read_whole.messages)
    for got, expected in zip(live.messages, read_whole.messages, strict=True):
        assert got == _as_written(expected, got)


def _version(ctype: str) -> str:
    return "HTTP/1.1" if "grpc-web" in ctype else "HTTP/2.0"  # as browsers send gRPC-Web


def _stream(ctype: str) -> tuple[bytes, bytes, list[tuple[str, str]] | None, str]:
    """(request, response body, HTTP trailers, grpc-encoding) of a small stream in the form `ctype` names: a
    working update, a compressed final message, and (gRPC-Web) its trailers frame."""
    codec = "json" if ctype.endswith("+json") else "proto"
    body = frame(_encode(WORKING, codec)) + frame(zlib.compress(_encode(DONE, codec)), 1)
    request = frame(_encode(SEND, codec))
    http = None
    if "grpc-web" in ctype:
        body += trailers("grpc-status: 0", f"a2a-extensions: {EXT}")
    else:
        http = [("grpc-status", "0"), ("a2a-extensions", EXT)]
    if "-text" in ctype:  # each write encoded apart: padded pieces one after another
        body = base64.b64encode(body[:9]) + base64.b64encode(body[9:40]) + b"\r\n" + base64.b64encode(body[40:])
        request = base64.b64encode(request)
    return request, body, http, "deflate"


FORMS = [
    "application/grpc-web",
    "application/grpc-web+proto",
    "application/grpc-web-text",
    "application/grpc-web-text+proto",
    "application/grpc+json",
    "application/grpc-web+json",
    "application/grpc",
]


@pytest.mark.parametrize("ctype", FORMS)
def test_every_split_point_gives_the_rows_read_whole(tmp_path: Path, monkeypatch, ctype: str) -> None:
    """Live, a gRPC-Web or `+json` response was recorded with `grpc_response_not_decoded` and none of its messages:
    the reply and its envelope were lost, and so was the status its trailers frame carries."""
    request, body, http, encoding = _stream(ctype)
    rec = Recorder(tmp_path, monkeypatch)
    for i in range(len(body) + 1):
        rec.live(f"s{i}", ctype, request, [body[:i], body[i:]], http, encoding=encoding)
    rec.live("bytes", ctype, request, [body[i : i + 1] for i in range(len(body))], http, encoding=encoding)
    got = rec.close()
    expected = whole("s0", ctype, request, body, http, encoding=encoding)
    row = expected.exchange
    assert (row["complete"], row["replies"], row["sse_events"], row["anomalies"]) == (True, 1, 2, [])
    assert row["converse_echoed"] and row["error_code"] is None
    assert [m["message_id"] for m in expected.messages] == ["u-1", "a-1"] and expected.messages[1]["has_envelope"]
    assert len(got) == len(body) + 2
    for fid, ext in got.items():
        same_rows(ext, whole(fid, ctype, request, body, http, encoding=encoding))


WEB = "application/grpc-web"
STATUS_13 = trailers("grpc-status: 13", "grpc-message: boom")


def _hostile() -> list[tuple[str, str, bytes, list[str]]]:
    working, done = frame(WORKING.SerializeToString()), frame(DONE.SerializeToString())
    text = "application/grpc-web-text"
    good = base64.b64encode(working)
    return [
        # trailers in the middle: the first trailers frame counts, the message after it is said
        ("middle", WEB, working + STATUS_13 + done + trailers("grpc-status: 0"), ["grpc_web_message_after_trailers"]),
        # text that stops being base64 after the first message: that message is kept
        ("bad64", text, good + b"!!" + base64.b64encode(done), ["grpc_web_text_not_base64"]),
        ("cut64", text, good + base64.b64encode(done)[:-5], ["grpc_frame_truncated"]),
        ("pad64", text, good + b"===" + base64.b64encode(done), ["grpc_web_text_not_base64"]),
        ("thrift", "application/grpc-web+thrift", working + STATUS_13, ["grpc_codec_unsupported:thrift:0"]),
        ("flag", WEB, working + frame(b"x", 0x82) + done, ["grpc_frame_malformed:flag=130"]),
        ("oversize", WEB, working + b"\x80\xff\xff\xff\xff", ["grpc_web_trailers_undecodable:too_large"]),
        ("cut", WEB, working + done[:-3], ["grpc_frame_truncated:"]),
        ("compressed", WEB, working + frame(b"\x78\x9c\x01", 1), ["compressed_without_grpc_encoding:1"]),
        ("lines", WEB, working + frame(b"grpc-status 0\r\n\n\n", 0x80), ["grpc_web_trailers_malformed"]),
    ]


HOSTILE = _hostile()


@pytest.mark.parametrize(("name", "ctype", "body", "says"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_streams_give_the_rows_read_whole_at_every_split(
    tmp_path: Path, monkeypatch, name: str, ctype: str, body: bytes, says: list[str]
) -> None:
    request = frame(SEND.SerializeToString())
    if "-text" in ctype:
        request = base64.b64encode(request)
    rec = Recorder(tmp_path, monkeypatch)
    for i in range(len(body) + 1):
        rec.live(f"s{i}", ctype, request, [body[:i], body[i:]])
    got = rec.close()
    expected = whole("s0", ctype, request, body)
    for note in says:
        assert any(a.startswith(note) for a in expected.exchange["anomalies"]), (note, expected.exchange)
    assert [m["message_id"] for m in expected.messages][:1] == ([] if name == "thrift" else ["u-1"])
    assert expected.exchange["sse_events"] >= 1  # the first message (before the damage) was read
    for fid, ext in got.items():
        same_rows(ext, whole(fid, ctype, request, body))


def test_the_status_of_a_trailers_frame_in_the_middle_is_the_calls() -> None:
    out = whole("m", WEB, frame(SEND.SerializeToString()), frame(WORKING.SerializeToString()) + STATUS_13)
    assert (out.exchange["error_code"], out.exchange["error_message"]) == (13, "boom")


def test_a_flood_past_max_events_is_counted_in_place_and_its_trailers_still_read(tmp_path: Path, monkeypatch) -> None:
    """Past max_events, each gRPC message was still copied and decompressed (up to max_body each) only to be
    counted: a few KB of compressed frames cost gigabytes of inflation. They are now counted where they lie; the
    trailers frame at the end is still read, and the count is the one the whole body gives."""
    bomb = frame(zlib.compress(b"\0" * (1 << 20)), 1)  # 1 KB on the wire, 1 MiB inflated
    head = b"".join(frame(WORKING.SerializeToString()) for _ in range(4))
    body = head + bomb * 40 + STATUS_13
    request = frame(SEND.SerializeToString())
    rec = Recorder(tmp_path, monkeypatch)
    rec.live("warm", WEB, request, [head, bomb * 2, STATUS_13], encoding="deflate")
    tracemalloc.start()
    try:
        rec.live("flood", WEB, request, [head, bomb * 20, bomb * 20, STATUS_13], encoding="deflate")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    rec.live("cut", WEB, request, [head, bomb * 3, bomb[:7]], encoding="deflate")
    rec.live("two", WEB, request, [head, bomb, STATUS_13, bomb, trailers("grpc-status: 0")], encoding="deflate")
    got = rec.close()
    assert peak < 512 * 1024, peak  # one message inflated would be 1 MiB
    flood = got["flood"].exchange
    read_whole = whole("flood", WEB, request, body, encoding="deflate").exchange
    assert flood["sse_events"] == read_whole["sse_events"] == 44
    assert (flood["error_code"], flood["error_message"]) == (read_whole["error_code"], "boom")
    assert "grpc_messages_not_parsed_past:3" in flood["anomalies"]
    cut = got["cut"].exchange
    assert cut["sse_events"] == 7 and any(a.startswith("grpc_frame_truncated") for a in cut["anomalies"])
    assert (
        cut["sse_events"]
        == whole("c", WEB, request, head + bomb * 3 + bomb[:7], encoding="deflate").exchange["sse_events"]
    )
    two = got["two"].exchange
    assert (two["sse_events"], two["error_code"]) == (6, 13)
    assert "grpc_web_trailers_frames:2" in two["anomalies"]
    assert "grpc_web_message_after_trailers" in two["anomalies"]


@settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.sampled_from(["application/grpc-web-text", "application/grpc-web", "application/grpc+json"]),
    st.lists(st.tuples(st.integers(0, 400), st.binary(max_size=4), st.integers(0, 4)), max_size=3),
    st.lists(st.integers(0, 400), max_size=6),
)
def test_damaged_streams_split_anywhere_never_raise_and_match_whole(
    tmp_path_factory, monkeypatch, ctype: str, edits: list[tuple[int, bytes, int]], cuts: list[int]
) -> None:
    request, clean, http, encoding = _stream(ctype)
    body = bytearray(clean)
    for at, data, n in edits:
        i = at % (len(body) + 1)
        body[i : i + n] = data
    raw = bytes(body)
    points = sorted({c % (len(raw) + 1) for c in cuts})
    chunks = [raw[a:b] for a, b in zip([0, *points], [*points, len(raw)], strict=True)]
    with monkeypatch.context() as mp:
        rec = Recorder(tmp_path_factory.mktemp("w"), mp)
        rec.live("h", ctype, request, chunks, http, encoding=encoding)
        got = rec.close()
    same_rows(got["h"], whole("h", ctype, request, raw, http, encoding=encoding))


@pytest.mark.parametrize(
    "text",
    [b"QUJD" + b"REU=" + b"Rg==", b"QUJDREU", b"QU JD\r\nREU=", b"QUJD=", b"QUJD==REU=", b"Rg=REU=", b"QUJDR=", b"!!"],
)
def test_base64_decoded_in_chunks_is_the_whole_bodys(text: bytes) -> None:
    from converse_tap.a2a.grpc_codecs import unbase64

    for i in range(len(text) + 1):
        for j in range(i, len(text) + 1):
            stream = Base64Stream()
            out = stream.feed(text[:i]) + stream.feed(text[i:j]) + stream.feed(text[j:]) + stream.close()
            expected = unbase64(text)
            assert stream.bad == (expected is None), (text, i, j)
            if expected is not None:
                assert out == expected and stream.held == 0


def test_counts_past_max_events_are_the_whole_bodys_wherever_the_stream_splits_or_stops(
    tmp_path: Path, monkeypatch
) -> None:
    """Past max_events the parser only counts; a stream cut anywhere, in chunks split anywhere, counts the
    messages the whole body holds (a message cut short is not one), and its trailers frame is still read."""
    working = WORKING.SerializeToString()  # (a compressed message too: garbage would be noted when read whole)
    messages = [frame(working) for _ in range(5)] + [frame(zlib.compress(working), 1)]
    body = b"".join(messages) + trailers("grpc-status: 13", "grpc-message: boom") + messages[0]
    request = frame(SEND.SerializeToString())
    rec = Recorder(tmp_path, monkeypatch)
    cases = {}
    for k in range(len(body) + 1):
        for i in sorted({k // 3, 2 * k // 3}):
            cases[f"k{k}-{i}"] = k
            rec.live(f"k{k}-{i}", WEB, request, [body[:i], body[i:k]], encoding="deflate")
    got = rec.close()
    assert len(got) == len(cases)
    for fid, k in cases.items():
        live = got[fid].exchange
        expected = whole(fid, WEB, request, body[:k], encoding="deflate").exchange
        assert (live["sse_events"], live["error_code"]) == (expected["sse_events"], expected["error_code"]), fid
        past = "grpc_messages_not_parsed_past:3"
        assert (past in live["anomalies"]) == (expected["sse_events"] > 3), fid
        assert [a for a in live["anomalies"] if a != past] == expected["anomalies"], fid
    assert got[f"k{len(body)}-{2 * len(body) // 3}"].exchange["anomalies"] == [
        "grpc_messages_not_parsed_past:3",
        "grpc_web_message_after_trailers",
    ]


def test_later_trailers_frames_are_counted_never_inflated(tmp_path: Path, monkeypatch) -> None:
    """Only the first trailers frame of a gRPC-Web response is the call's: later ones, compressed, were each
    inflated (up to max_body) before being ignored, a few KB of them costing gigabytes of work."""
    bomb = frame(zlib.compress(b"\0" * (1 << 20)), 0x81)  # 1 KB on the wire, 1 MiB inflated
    body = frame(WORKING.SerializeToString()) + STATUS_13 + bomb * 30
    request = frame(SEND.SerializeToString())
    rec = Recorder(tmp_path, monkeypatch)
    tracemalloc.start()
    try:
        rec.live("t", WEB, request, [body], encoding="deflate")
        read_whole = whole("t", WEB, request, body, encoding="deflate")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    got = rec.close()
    assert peak < 512 * 1024, peak  # one inflated would be 1 MiB
    same_rows(got["t"], read_whole)
    assert (read_whole.exchange["error_code"], read_whole.exchange["sse_events"]) == (13, 1)
    assert "grpc_web_trailers_frames:31" in read_whole.exchange["anomalies"]
